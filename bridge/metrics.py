"""A small Prometheus registry: counters, gauges and histograms, text exposition 0.0.4.

Hand-rolled (no dependency) and single-threaded by design: every update happens on the
event loop, except :class:`Counter` increments from worker threads, which take a lock.
Gauges may be backed by a callback that is read at scrape time (torrent peers, store size).

Several processes, one service (``[server] workers``): :meth:`Registry.snapshot` gives a
process's values as JSON-able data, and :meth:`Registry.render` adds other processes'
snapshots to its own: counters and histograms are summed, gauges too (only the HTTP side's
gauges are set in more than one process, and those add up: open connections).
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

__all__ = ["CONTENT_TYPE", "Counter", "Gauge", "Histogram", "Registry", "Snapshot"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LabelValues = tuple[str, ...]
# One process's values: metric name -> [[label values, value or histogram series], ...]
Snapshot = dict[str, list[list[Any]]]


def _escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def _format_value(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _labels(names: Sequence[str], values: LabelValues, extra: str = "") -> str:
    parts = [f'{n}="{_escape_label(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


class _Metric:
    kind = ""

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str] = ()) -> None:
        self.name = name
        self.help = help_text
        self.labelnames = tuple(labelnames)

    def _key(self, labels: Sequence[str]) -> LabelValues:
        if len(labels) != len(self.labelnames):
            raise ValueError(f"{self.name} takes labels {self.labelnames}, got {tuple(labels)}")
        return tuple(str(v) for v in labels)

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {_escape_help(self.help)}", f"# TYPE {self.name} {self.kind}"]

    def samples(self, others: Sequence[list[list[Any]]] = ()) -> list[str]:
        raise NotImplementedError


class Counter(_Metric):
    kind = "counter"

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str] = ()) -> None:
        super().__init__(name, help_text, labelnames)
        self._values: dict[LabelValues, float] = {}
        self._lock = threading.Lock()

    def inc(self, amount: float = 1.0, *labels: str) -> None:
        if amount < 0:
            raise ValueError("a counter only goes up")
        key = self._key(labels)
        with self._lock:
            self._values[key] = self._values.get(key, 0.0) + amount

    def value(self, *labels: str) -> float:
        return self._values.get(self._key(labels), 0.0)

    def snapshot(self) -> list[list[Any]]:
        with self._lock:
            return [[list(k), v] for k, v in self._values.items()]

    def samples(self, others: Sequence[list[list[Any]]] = ()) -> list[str]:
        with self._lock:
            values = dict(self._values)
        _add_scalars(values, others)
        items = sorted(values.items())
        if not items and not self.labelnames:
            items = [((), 0.0)]
        return [f"{self.name}{_labels(self.labelnames, k)} {_format_value(v)}" for k, v in items]


class Gauge(_Metric):
    kind = "gauge"

    def __init__(
        self,
        name: str,
        help_text: str,
        labelnames: Sequence[str] = (),
        *,
        callback: Callable[[], Iterable[tuple[LabelValues, float]]] | None = None,
    ) -> None:
        super().__init__(name, help_text, labelnames)
        self._values: dict[LabelValues, float] = {}
        self._callback = callback

    def set(self, value: float, *labels: str) -> None:
        self._values[self._key(labels)] = float(value)

    def value(self, *labels: str) -> float:
        return self._values.get(self._key(labels), 0.0)

    def snapshot(self) -> list[list[Any]]:
        return [[list(k), v] for k, v in self._values.items()]  # callbacks: primary only

    def samples(self, others: Sequence[list[list[Any]]] = ()) -> list[str]:
        values = dict(self._values)
        if self._callback is not None:
            try:
                values.update({tuple(map(str, k)): float(v) for k, v in self._callback()})
            except Exception:  # a failing probe must not break the whole scrape
                pass
        _add_scalars(values, others)
        items = sorted(values.items())
        if not items and not self.labelnames:
            items = [((), 0.0)]
        return [f"{self.name}{_labels(self.labelnames, k)} {_format_value(v)}" for k, v in items]


class Histogram(_Metric):
    kind = "histogram"
    DEFAULT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

    def __init__(
        self,
        name: str,
        help_text: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float] = DEFAULT_BUCKETS,
    ) -> None:
        super().__init__(name, help_text, labelnames)
        self.buckets = tuple(sorted(buckets))
        self._series: dict[LabelValues, list[float]] = {}  # bucket counts + [sum, count]
        self._lock = threading.Lock()

    def observe(self, value: float, *labels: str) -> None:
        key = self._key(labels)
        with self._lock:
            series = self._series.get(key)
            if series is None:
                series = self._series[key] = [0.0] * (len(self.buckets) + 2)
            index = bisect.bisect_left(self.buckets, value)
            if index < len(self.buckets):
                series[index] += 1
            series[-2] += value
            series[-1] += 1

    def count(self, *labels: str) -> int:
        series = self._series.get(self._key(labels))
        return 0 if series is None else int(series[-1])

    def snapshot(self) -> list[list[Any]]:
        with self._lock:
            return [[list(k), list(v)] for k, v in self._series.items()]

    def samples(self, others: Sequence[list[list[Any]]] = ()) -> list[str]:
        out = []
        with self._lock:
            merged = {k: list(v) for k, v in self._series.items()}
        width = len(self.buckets) + 2
        for entries in others:
            for labels, series in entries:
                if len(series) != width:
                    continue  # another build's buckets: not comparable
                mine = merged.setdefault(tuple(map(str, labels)), [0.0] * width)
                for i, n in enumerate(series):
                    mine[i] += float(n)
        items = sorted(merged.items())
        for key, series in items:
            cumulative = 0.0
            for bound, n in zip(self.buckets, series, strict=False):
                cumulative += n
                le = f'le="{_format_value(bound)}"'
                out.append(
                    f"{self.name}_bucket{_labels(self.labelnames, key, le)} "
                    f"{_format_value(cumulative)}"
                )
            inf = 'le="+Inf"'
            out.append(
                f"{self.name}_bucket{_labels(self.labelnames, key, inf)} "
                f"{_format_value(series[-1])}"
            )
            out.append(
                f"{self.name}_sum{_labels(self.labelnames, key)} {_format_value(series[-2])}"
            )
            out.append(
                f"{self.name}_count{_labels(self.labelnames, key)} {_format_value(series[-1])}"
            )
        return out


def _add_scalars(values: dict[LabelValues, float], others: Sequence[list[list[Any]]]) -> None:
    for entries in others:
        for labels, value in entries:
            key = tuple(map(str, labels))
            values[key] = values.get(key, 0.0) + float(value)


_M = TypeVar("_M", bound=_Metric)
# an archive run reads a week of messages and builds a torrent: seconds to minutes
ARCHIVE_RUN_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)


class Registry:
    def __init__(self) -> None:
        self._metrics: dict[str, _Metric] = {}

    def _add(self, metric: _M) -> _M:
        if metric.name in self._metrics:
            raise ValueError(f"metric {metric.name} registered twice")
        self._metrics[metric.name] = metric
        return metric

    def counter(self, name: str, help_text: str, labelnames: Sequence[str] = ()) -> Counter:
        return self._add(Counter(name, help_text, labelnames))

    def gauge(
        self,
        name: str,
        help_text: str,
        labelnames: Sequence[str] = (),
        *,
        callback: Callable[[], Iterable[tuple[LabelValues, float]]] | None = None,
    ) -> Gauge:
        return self._add(Gauge(name, help_text, labelnames, callback=callback))

    def histogram(
        self,
        name: str,
        help_text: str,
        labelnames: Sequence[str] = (),
        *,
        buckets: Sequence[float] = Histogram.DEFAULT_BUCKETS,
    ) -> Histogram:
        return self._add(Histogram(name, help_text, labelnames, buckets=buckets))

    def snapshot(self) -> Snapshot:
        """This process's values (gauge callbacks left out), for another process to add."""
        return {
            name: entries
            for name, metric in self._metrics.items()
            if isinstance(metric, Counter | Gauge | Histogram) and (entries := metric.snapshot())
        }

    def render(self, others: Sequence[Snapshot] = ()) -> str:
        """The text exposition of this registry plus ``others`` (other processes' snapshots;
        names this registry lacks are ignored)."""
        lines: list[str] = []
        for name, metric in self._metrics.items():
            lines += metric.header()
            lines += metric.samples([o[name] for o in others if name in o])
        return "\n".join(lines) + "\n"


class BridgeMetrics:
    """Every metric the bridge exports (one registry per service)."""

    def __init__(self) -> None:
        r = self.registry = Registry()
        p = "waku_legacy_"
        self.http_requests = r.counter(
            p + "http_requests_total", "REST requests answered", ("route", "method", "status")
        )
        self.http_latency = r.histogram(
            p + "http_request_duration_seconds", "REST request latency", ("route",)
        )
        self.store_query_latency = r.histogram(
            p + "store_query_duration_seconds", "Store page query and encoding time", ("api",)
        )
        self.envelopes_bridged = r.counter(
            p + "envelopes_bridged_total",
            "Messages carried between Waku v1 and v2",
            ("direction",),
        )
        self.envelopes_dropped = r.counter(
            p + "envelopes_dropped_total", "Messages not bridged, by reason", ("reason",)
        )
        self.relay_publish = r.counter(
            p + "relay_publish_total", "nwaku relay publish calls, by result", ("result",)
        )
        self.history_messages = r.counter(
            p + "history_messages_total", "Messages pulled from v2 store nodes", ("node", "kind")
        )
        self.history_pulls = r.counter(
            p + "history_pulls_total", "History pull runs, by result", ("node", "result")
        )
        self.archive_runs = r.counter(
            p + "archive_runs_total", "Archive runs, by result", ("community", "result")
        )
        self.archives_built = r.counter(
            p + "archives_built_total", "Archives added to the index", ("community",)
        )
        self.archive_messages = r.counter(
            p + "archive_messages_total", "Messages written into archives", ("community",)
        )
        self.magnet_published = r.counter(
            p + "magnet_published_total", "Magnet-link messages published", ("community", "result")
        )
        self.torrent_peers = r.gauge(
            p + "torrent_peers", "Peers connected to a seeded torrent", ("community",)
        )
        self.torrent_uploaded = r.gauge(
            p + "torrent_uploaded_bytes",
            "Payload bytes uploaded for a seeded torrent since it was added",
            ("community",),
        )
        self.v1_peers = r.gauge(p + "v1_peers", "Connected Waku v1 peers")
        self.v1_requests = r.gauge(
            p + "v1_mailserver_events", "Waku v1 mailserver counters", ("event",)
        )
        self.libp2p_events = r.gauge(
            p + "libp2p_events",
            "libp2p store listener counters: connections, requests answered, refusals and "
            "failures by kind",
            ("event",),
        )
        self.pending_writes = r.gauge(p + "store_pending_writes", "Store writes in flight")
        self.http_refused = r.counter(
            p + "http_refused_total",
            "HTTP connections closed or requests refused by a limit, by reason",
            ("reason",),
        )
        self.http_connections = r.gauge(p + "http_connections", "Open HTTP connections")
        self.store_write_failures = r.counter(
            p + "store_write_failures_total",
            "Failed store writes of bridged messages (retried; nothing accepted is dropped)",
        )
        self.store_reachable = r.gauge(
            p + "store_reachable",
            "1 while the store can be reached, 0 during an outage (store queries answer 503, "
            "live rows go to the spool)",
        )
        self.live_spooled = r.counter(
            p + "live_spooled_rows_total",
            "Live rows appended to the on-disk spool while the store did not take them",
        )
        self.archive_duration = r.histogram(
            p + "archive_run_duration_seconds",
            "Archive run time (collect, build, seed, publish), failed runs included",
            ("community",),
            buckets=ARCHIVE_RUN_BUCKETS,
        )
        self.archive_last_success = r.gauge(
            p + "archive_last_success_timestamp_seconds",
            "When the last archive run succeeded (bridge clock, Unix seconds)",
            ("community",),
        )
        self.history_pages = r.counter(
            p + "history_pages_total", "Store pages fetched from v2 store nodes", ("node",)
        )
        self.history_last_success = r.gauge(
            p + "history_last_success_timestamp_seconds",
            "When a history pull from the node last completed (bridge clock, Unix seconds)",
            ("node",),
        )
        self.v1_refused = r.counter(
            p + "v1_refused_total",
            "Waku v1 connections, requests and live envelopes refused, by kind and reason",
            ("kind", "reason"),
        )

        self.processes = r.gauge(
            p + "http_processes", "Processes serving the REST API (the primary and its workers)"
        )
        self.worker_restarts = r.counter(
            p + "worker_restarts_total", "REST worker processes restarted after they exited"
        )
        self.leader = r.gauge(
            p + "leader",
            "1 while this instance holds the singleton role (archiving, seeding, publishing, "
            "history pull; PostgreSQL advisory lock), else 0",
        )

    def count_v1_refusal(self, kind: str, reason: str) -> None:
        """The mailserver's refusal hook (kind: connection/request/live)."""
        self.v1_refused.inc(1, kind, reason)
