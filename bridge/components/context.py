"""What every component shares and nothing starts or closes (:class:`BridgeContext`), where
an instance keeps its local state, and :func:`require` for a running object."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import coincurve

from waku_legacy.bridge.clock import Clock
from waku_legacy.bridge.config import BridgeConfig
from waku_legacy.bridge.metrics import BridgeMetrics
from waku_legacy.identity.topic_mapping import TopicMapping
from waku_legacy.store import is_postgres_url, sqlite_path

__all__ = ["BridgeContext", "local_state_dir", "require"]

T = TypeVar("T")


def require(value: T | None, what: str) -> T:
    """``value`` once its component has opened; a RuntimeError naming it before that."""
    if value is None:
        raise RuntimeError(f"{what} is not started")
    return value


def local_state_dir(config: BridgeConfig) -> Path:
    """Where this instance keeps local state: beside a SQLite store, else the config's
    folder."""
    url = config.store.url
    if is_postgres_url(url):
        return Path(config.base_dir)
    return Path(sqlite_path(url)).parent


@dataclass(frozen=True, slots=True)
class BridgeContext:
    """What every part shares and nothing starts or closes."""

    config: BridgeConfig
    metrics: BridgeMetrics
    clock: Clock
    router: TopicMapping
    keys: dict[str, coincurve.PrivateKey]  # community id -> its key (signs archive links)

    @property
    def shutdown_timeout(self) -> float:
        return self.config.server.shutdown_timeout
