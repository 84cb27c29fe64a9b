"""Fixtures the libp2p listener's hostile-peer tests share."""

from __future__ import annotations

import io
import logging
import subprocess
from collections.abc import Iterator

import pytest

from tests.conftest import REPO_ROOT
from waku_legacy.bridge.logs import LIBRARY_LOGGERS, configure_logging


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    """The bridge's logging set up as ``[logging] format = "json"`` writes it; restored."""
    names = ("waku_legacy", *LIBRARY_LOGGERS, "aiohttp.access")
    saved = {
        name: (lg.handlers[:], lg.level, lg.propagate)
        for name in names
        for lg in [logging.getLogger(name)]
    }
    out = io.StringIO()
    configure_logging("info", "json", stream=out)
    yield out
    for name, (handlers, level, propagate) in saved.items():
        lg = logging.getLogger(name)
        lg.handlers, lg.level, lg.propagate = handlers, level, propagate


@pytest.fixture(scope="module")
def node_bin() -> str:
    """Node 22 with the js interop packages (tests/interop/js: @waku/sdk and the js-libp2p
    it ships; installed from the registry on first use)."""
    setup = REPO_ROOT / "scripts" / "setup-js-interop.sh"
    done = subprocess.run(
        ["bash", str(setup)], capture_output=True, text=True, timeout=600, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"{setup.name} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout.strip().splitlines()[-1]
