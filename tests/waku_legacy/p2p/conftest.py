"""Fixtures the libp2p listener's hostile-peer tests share."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

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
