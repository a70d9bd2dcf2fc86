#!/usr/bin/env bash
# Install everything (scripts/setup.sh), then run the tests and the tutorials (nbval).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
exec .venv/bin/python -m pytest "$@"
