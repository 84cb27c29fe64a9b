#!/usr/bin/env bash
# Set up (or update) the project's virtualenv, lint (ruff), type-check (mypy strict) and run
# the whole test suite.
# Usage: scripts/test.sh [pytest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup-env.sh
ensure_chromium
scripts/setup-js-interop.sh >/dev/null  # js-waku + Node 22 for the libp2p interop test
.venv/bin/ruff check .
scripts/typecheck.sh
.venv/bin/python -m pytest "$@"
