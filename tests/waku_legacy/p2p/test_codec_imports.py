"""Issue 36: the libp2p codecs are sans-IO. Imported alone, in a fresh interpreter, none
of them brings in trio, py-libp2p or asyncio (the transports' business), directly or
through what they import."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CODECS = (
    "multistream", "noise", "peer_key", "yamux", "mplex", "muxer_events", "websocket",
    "identify", "metadata", "connection", "dialler", "gate", "limits", "errors", "policy",
    "keys", "multiaddrs",
)  # fmt: skip
IO = ("trio", "libp2p", "asyncio")


@pytest.mark.parametrize("codec", CODECS)
def test_a_codec_imports_no_io_framework(codec: str) -> None:
    probe = (
        "import json, sys\n"
        f"import waku_legacy.p2p.{codec}\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {IO!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == [], f"waku_legacy.p2p.{codec} imports {done.stdout}"
