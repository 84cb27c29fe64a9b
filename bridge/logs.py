"""Structured logs: one JSON object per line (or plain text), with event fields.

    log = logging.getLogger("waku_legacy.bridge")
    log.info("archive built", extra=fields(community=name, archives=3))

Every line carries ``ts`` (RFC 3339, UTC), ``level``, ``logger``, ``msg`` and the fields;
an exception adds ``error`` (its message) and ``exc_type`` but never a traceback in JSON
mode unless the level is debug (tracebacks go to operators, not to clients, and never to
HTTP responses).
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any, TextIO

__all__ = ["JsonFormatter", "configure_logging", "fields"]

_FIELDS = "bridge_fields"


def fields(**values: Any) -> dict[str, Any]:
    """``extra=`` for a log call: structured fields of the event."""
    return {_FIELDS: values}


class JsonFormatter(logging.Formatter):
    def __init__(self, *, tracebacks: bool = False) -> None:
        super().__init__()
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        created = time.gmtime(record.created)
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", created) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        extra = getattr(record, _FIELDS, None)
        if isinstance(extra, dict):
            for key, value in extra.items():
                out.setdefault(key, value)
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            out["error"] = str(exc)
            out["exc_type"] = type(exc).__name__
            if self.tracebacks:
                out["traceback"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        extra = getattr(record, _FIELDS, None)
        if isinstance(extra, dict) and extra:
            text += " " + " ".join(f"{k}={v}" for k, v in extra.items())
        return text


def configure_logging(level: str = "info", fmt: str = "json", stream: TextIO | None = None) -> None:
    """Route the package's loggers (``waku_legacy.*``) to ``stream`` (stderr)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(
        JsonFormatter(tracebacks=level == "debug") if fmt == "json" else TextFormatter()
    )
    root = logging.getLogger("waku_legacy")
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    root.propagate = False
    access = logging.getLogger("aiohttp.access")
    access.handlers = [handler]
    access.setLevel(logging.WARNING)  # the bridge writes its own request lines
    access.propagate = False
