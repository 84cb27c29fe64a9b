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

from waku_legacy.limits import ThrottledRecords

__all__ = [
    "LIBRARY_LOGGERS",
    "JsonFormatter",
    "configure_logging",
    "fields",
    "keep_library_logs_routed",
    "route_library_logs",
]

#: third-party loggers whose records peers can cause (py-libp2p logs per frame and per
#: connection): written in our format, at most one line per kind every 10 s
LIBRARY_LOGGERS = ("libp2p",)

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
    route_library_logs(handler.formatter, stream or sys.stderr, level)
    access = logging.getLogger("aiohttp.access")
    access.handlers = [handler]
    access.setLevel(logging.WARNING)  # the bridge writes its own request lines
    access.propagate = False


def route_library_logs(
    formatter: logging.Formatter | None, stream: TextIO, level: str = "info"
) -> ThrottledRecords:
    """Send :data:`LIBRARY_LOGGERS`' records through ``formatter`` to ``stream``, rate-limited
    per kind (:class:`~waku_legacy.limits.ThrottledRecords`): warnings and worse, everything
    at ``level = "debug"``. Returns the filter (its ``suppressed`` counts).

    py-libp2p's import resets its logger (no handler, no propagation: its records then reach
    only Python's last-resort stderr handler, as plain text), and the bridge imports it only
    with ``[libp2p]`` on (1-2 s, tens of MB): whoever imports it later calls
    :func:`keep_library_logs_routed` after the import."""
    global _library_route
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    # on the handler too: py-libp2p sets some of its loggers' levels itself (INFO)
    handler.setLevel(logging.DEBUG if level == "debug" else logging.WARNING)
    throttle = ThrottledRecords()
    handler.addFilter(throttle)
    _library_route = handler
    keep_library_logs_routed()
    return throttle


_library_route: logging.Handler | None = None


def keep_library_logs_routed() -> None:
    """(Re-)attach the handler :func:`route_library_logs` made (a no-op before it ran)."""
    handler = _library_route
    if handler is None:
        return
    for name in LIBRARY_LOGGERS:
        library = logging.getLogger(name)
        library.handlers = [handler]
        library.setLevel(handler.level)
        library.propagate = False
