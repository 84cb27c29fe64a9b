#!/usr/bin/env bash
# Set up .venv and run the operator's guide on generated data: generate sample legacy
# LevelDB mailservers and community keys, run `waku-legacy plan` over them (migrate.toml and
# bridge.toml), migrate on local Spark into a SQLite v2 store with archives, and print the
# summaries, the magnet links and the command that serves bridge.toml, with a query for
# each side. Output goes to ./demo-output (or $1); extra arguments (--verbose) go to demo.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup-env.sh
exec .venv/bin/waku-legacy demo --out "${1:-demo-output}" "${@:2}"
