#!/usr/bin/env bash
# Install everything (scripts/setup.sh), then run the main job: execute every tutorial on the
# best backend here, write HTML pages to out/tutorials/, print the table.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh "notebook,nvrtc"
exec .venv/bin/python -m tilenb main "$@"
