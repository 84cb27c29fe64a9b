#!/usr/bin/env bash
# Set up .venv and run the main job on the embedded default: generate a sample legacy
# mailserver, migrate it on local Spark into a SQLite v2 store, build archives and print
# the magnet links and the report; then write demo-output/bridge.toml and print the command
# that serves it, with a query for each side. Output goes to ./demo-output (or $1).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup-env.sh
exec .venv/bin/waku-legacy demo --out "${1:-demo-output}"
