"""Issue 36: the libp2p codecs are sans-IO, and the policy is apart from any transport.
Imported alone, in a fresh interpreter, none of them brings in trio, py-libp2p or asyncio
(the transports' business), directly or through what they import.

The codecs are every module of :mod:`waku_legacy.p2p.codec`, listed from the package, so a
new codec is checked without editing this test."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pytest

import waku_legacy.p2p.codec

CODECS = tuple(
    f"waku_legacy.p2p.codec.{module.name}"
    for module in pkgutil.iter_modules(waku_legacy.p2p.codec.__path__)
)
#: the policy the transport holds, and the top-level modules the codecs and it build on
POLICY = tuple(f"waku_legacy.p2p.{name}" for name in ("policy", "limits", "errors"))
#: identity, addresses and the store protocol over any client: no transport either
REST = tuple(f"waku_legacy.p2p.{name}" for name in ("keys", "multiaddrs", "enr", "store_client"))
IO = ("trio", "libp2p", "asyncio")


def test_the_codecs_are_listed_from_their_package() -> None:
    names = {module.rsplit(".", 1)[1] for module in CODECS}
    assert {"multistream", "noise", "yamux", "mplex", "connection", "dialler", "gate"} <= names
    assert "native" not in names and "native_client" not in names


@pytest.mark.parametrize("module", ("waku_legacy.p2p.codec", *CODECS, *POLICY, *REST))
def test_a_codec_or_the_policy_imports_no_io_framework(module: str) -> None:
    probe = (
        "import json, sys\n"
        f"import {module}\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {IO!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(done.stdout) == [], f"{module} imports {done.stdout}"


def test_the_probe_sees_an_io_import() -> None:
    """The probe is not blind: the asyncio transport's module is reported."""
    probe = (
        "import json, sys\n"
        "import waku_legacy.p2p.transport.native\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {IO!r})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert "asyncio" in json.loads(done.stdout)
