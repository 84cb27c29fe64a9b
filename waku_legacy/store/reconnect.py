"""When a lost store connection may be opened again: one schedule per store, shared by
every connection (thread) to it.

A backend whose connection is lost (PostgreSQL: the server went away, a connection-class
SQLSTATE; SQLite: the file is locked, unreadable or gone) drops it and raises
:class:`~waku_legacy.store.types.StoreUnavailable`; its next call opens a new one, but only
when :meth:`Reconnect.may_connect` says so. A connection that was working is re-opened at
once (a ``pg_terminate_backend`` costs one reconnect, not an outage); when opening fails,
the store is *down* and further attempts wait a bounded exponential backoff with jitter
(``initial`` doubling up to ``maximum``, each delay drawn in ``[1 - jitter, 1] x`` so that
several processes do not retry in step). Between attempts every call fails at once, without
touching the database: a client gets its 503 in microseconds and a dead server is not
hammered by every reader thread.

The hooks :meth:`on_down`, :meth:`on_still_down` and :meth:`on_up` are where a service logs
(one line when the store goes down, one every ``report_every`` seconds while it stays down,
one when it is back), not once per failed call.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

__all__ = ["Reconnect"]


class Reconnect:
    def __init__(
        self,
        *,
        initial: float = 0.25,
        maximum: float = 5.0,
        jitter: float = 0.2,
        report_every: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
        self.report_every = report_every
        self._clock = clock
        self._lock = threading.Lock()
        self.down_since: float | None = None  # clock time of the first failed attempt
        self.reason: str | None = None  # why the last attempt failed
        self.failed_attempts = 0  # since the store went down
        self._delay = initial
        self._next_attempt = 0.0
        self._reported = 0.0

    @property
    def down(self) -> bool:
        return self.down_since is not None

    def retry_in(self) -> float:
        """Seconds until the next attempt is allowed (0 when the store is up)."""
        with self._lock:
            if self.down_since is None:
                return 0.0
            return max(0.0, self._next_attempt - self._clock())

    def may_connect(self) -> bool:
        """Whether a connection may be opened now. While down, True for one caller once the
        backoff has passed (that caller's attempt is the one the others wait for)."""
        with self._lock:
            if self.down_since is None:
                return True
            now = self._clock()
            if now < self._next_attempt:
                return False
            self._next_attempt = now + self._delay  # claimed: the others keep waiting
            return True

    def connect_failed(self, reason: str) -> None:
        """Opening a connection failed: the store is down; the next attempt waits."""
        with self._lock:
            now = self._clock()
            first = self.down_since is None
            if first:
                self.down_since = now
                self._delay = self.initial
                self._reported = now
            self.reason = reason
            self.failed_attempts += 1
            spread = 1.0 - self.jitter * random.random()
            self._next_attempt = now + self._delay * spread
            self._delay = min(self._delay * 2, self.maximum)
            report = not first and now - self._reported >= self.report_every
            if report:
                self._reported = now
            down_for = now - self.down_since if self.down_since is not None else 0.0
            attempts = self.failed_attempts
        if first:
            self.on_down(reason)
        elif report:
            self.on_still_down(reason, down_for, attempts)

    def connected(self) -> None:
        """A connection was opened: the store is up again (if it was down)."""
        with self._lock:
            if self.down_since is None:
                return
            down_for = self._clock() - self.down_since
            attempts = self.failed_attempts
            self.down_since = None
            self.reason = None
            self.failed_attempts = 0
            self._delay = self.initial
        self.on_up(down_for, attempts)

    # -- hooks (a service logs here) ----------------------------------------------------------

    def on_down(self, reason: str) -> None:
        """The store just became unreachable."""

    def on_still_down(self, reason: str, down_for: float, attempts: int) -> None:
        """The store is still unreachable (called every ``report_every`` seconds)."""

    def on_up(self, down_for: float, attempts: int) -> None:
        """The store is reachable again after ``down_for`` seconds."""
