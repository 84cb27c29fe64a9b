#!/usr/bin/env bash
# Type-check the package with mypy (strict; see [tool.mypy] in pyproject.toml).
# The repository keeps its packages in top-level folders that install under one namespace
# (setup.cfg package_dir); mypy cannot follow the editable install's import hook, so it
# checks a tree of links in .typecheck/ that has the installed shape.
set -euo pipefail
cd "$(dirname "$0")/.."
tree=.typecheck/waku_legacy
rm -rf .typecheck
mkdir -p "$tree"
for entry in waku_legacy/*; do
    ln -s "$PWD/$entry" "$tree/"
done
for folder in proto mailserver_compat migrate bridge; do
    ln -s "$PWD/$folder" "$tree/$folder"
done
cd .typecheck
exec ../.venv/bin/mypy --config-file ../pyproject.toml "$@" -p waku_legacy
