"""Find a community's channels from the signed ``CommunityDescription`` messages in the
sources (``export --community 0x…`` without ``--channel``). Plain functions, no Spark.

Every source is read once on the driver with the migration's own readers
(:func:`~waku_legacy.migrate.sources.plan_source`, :func:`~waku_legacy.migrate.sources.read_task`)
and decoded with the migration's decoder
(:func:`~waku_legacy.migrate.decode.decode_record`); only messages on the community's own
chat topic (v1 topic, or its ``/waku/1/…/rfc26`` content topic on v2) are decrypted, with
that chat's public-chat key. Each one that is a ``COMMUNITY_DESCRIPTION`` signed by the
community key counts (:func:`~waku_legacy.identity.descriptions.open_description_payload`);
the newest clock wins. Messages on that topic that are not such a description (another
message type, a signature by another key, unreadable bytes) are counted by reason and
left out. A ``store-rest`` URL is asked for the community topic only.
"""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.identity.descriptions import (
    SignedDescription,
    newest_description,
    open_description_payload,
)
from waku_legacy.identity.topics import (
    CommunityId,
    chat_topic,
    content_topic_of_chat,
)
from waku_legacy.migrate.records import FORMAT_V1

if TYPE_CHECKING:
    from waku_legacy.migrate.config import SourceConfig

__all__ = ["ChannelDiscovery", "discover_channels", "discover_communities", "find_descriptions"]


@dataclass(slots=True)
class ChannelDiscovery:
    """What the sources say about a community's channels."""

    community: str
    descriptions: int = 0  # signed by the community key
    newest: SignedDescription | None = None
    newest_location: str = ""  # source and location of the newest one
    # the pubsub topic a v2 source stored the newest one on (None: a v1 envelope)
    newest_pubsub_topic: str | None = None
    rejected: dict[str, int] = field(default_factory=dict)  # reason -> count

    @property
    def channels(self) -> tuple[str, ...]:
        return self.newest.channel_uuids if self.newest is not None else ()

    def to_json(self) -> dict[str, Any]:
        newest = self.newest
        return {
            "community": self.community,
            "descriptions": self.descriptions,
            "clock": newest.clock if newest else None,
            "name": newest.name if newest else None,
            "location": self.newest_location,
            "channels": [
                {"uuid": c.uuid, "name": c.name, "position": c.position}
                for c in (newest.channels if newest else ())
            ],
            "ignored_chat_keys": list(newest.ignored) if newest else [],
            "rejected": dict(sorted(self.rejected.items())),
        }

    def summary(self) -> str:
        if self.newest is None:
            return f"{self.community}: no signed CommunityDescription in the sources"
        names = ", ".join(f"{c.uuid} ({c.name or 'unnamed'})" for c in self.newest.channels)
        rejected = sum(self.rejected.values())
        return (
            f"{self.community}: {len(self.newest.channels)} channel(s) from the description "
            f"with clock {self.newest.clock} ({self.descriptions} signed description(s) read"
            + (f", {rejected} other message(s) on its topic left out" if rejected else "")
            + f"): {names}"
        )


def _reason(exc: Exception) -> str:
    text = getattr(exc, "reason", None) or str(exc)
    if "not by the community key" in text:
        return "signed by another key"
    if "message type" in text:
        return "not a COMMUNITY_DESCRIPTION"
    return text.split(":")[0][:80]


def find_descriptions(
    rows: Iterable[dict[str, Any]], community: CommunityId
) -> Iterator[tuple[dict[str, Any], SignedDescription | Exception]]:
    """For each RAW record on the community's own topic: the record and its description,
    or the exception saying why it is not one. Records on other topics are skipped."""
    for raw, _, _, outcome in _find_many(rows, [community]):
        yield raw, outcome


def _find_many(
    rows: Iterable[dict[str, Any]], communities: Sequence[CommunityId]
) -> Iterator[tuple[dict[str, Any], CommunityId, str | None, SignedDescription | Exception]]:
    """:func:`find_descriptions` for several communities in one pass over ``rows``: the
    record, its community, the pubsub topic a v2 record was stored on (None for a v1
    envelope, whose pubsub topic is only the migration's mapping) and the outcome."""
    from waku_legacy.identity.topic_mapping import TopicMapping
    from waku_legacy.migrate.decode import decode_record

    by_content_topic = {content_topic_of_chat(c.chat_id): c for c in communities}
    topics_hex = {chat_topic(c.chat_id).hex() for c in communities}
    # decoding needs a mapping; its pubsub topic is never read here nor written anywhere
    mapping = TopicMapping.build("/waku/2/rs/16/64", [])
    for raw in rows:
        if raw.get("data") is None:
            continue
        location = raw.get("location") or ""
        if raw.get("format") == FORMAT_V1 and location.startswith(("key=0x", "id=0x")):
            # A mailserver DB key ends with the envelope's topic: skip without decoding.
            key_hex = location.split("0x", 1)[1]
            if len(key_hex) == 80 and key_hex[-8:] not in topics_hex:
                continue
        row = decode_record(raw, mapping)
        community = by_content_topic.get(row["content_topic"])
        if row["quarantined"] or community is None:
            continue
        stored_on = None if raw.get("format") == FORMAT_V1 else row["pubsub_topic"]
        if row["version"] != 1:
            error = ConfigError(f"payload version {row['version']}, not 1")
            yield raw, community, stored_on, error
            continue
        try:
            yield raw, community, stored_on, open_description_payload(row["payload"], community)
        except WakuLegacyError as exc:
            yield raw, community, stored_on, exc


def _source_rows(
    source: SourceConfig, communities: Sequence[CommunityId], work_dir: str
) -> Iterator[dict[str, Any]]:
    from waku_legacy.migrate.config import SourceKind
    from waku_legacy.migrate.sources import plan_source, read_task

    if source.kind is SourceKind.STORE_REST and source.url:
        source = dataclasses.replace(
            source,
            content_topics=tuple(content_topic_of_chat(c.chat_id) for c in communities),
            partitions=None,
            state_file=None,
        )
    for task in plan_source(source, 1, work_dir):
        for batch in read_task(task):
            yield from batch.to_pylist()


def discover_channels(
    sources: Sequence[SourceConfig],
    community: CommunityId,
    *,
    work_dir: str,
    on_source: Callable[[str, int], None] | None = None,
) -> ChannelDiscovery:
    """Read every source (``SourceConfig``) for the community's descriptions.

    ``work_dir`` holds the pages a ``store-rest`` URL source saves (under ``discover/``, apart
    from the migration's own). ``on_source(name, descriptions)`` is called after each
    source, for progress.
    """
    return discover_communities(sources, [community], work_dir=work_dir, on_source=on_source)[0]


def discover_communities(
    sources: Sequence[SourceConfig],
    communities: Sequence[CommunityId],
    *,
    work_dir: str,
    on_source: Callable[[str, int], None] | None = None,
) -> list[ChannelDiscovery]:
    """:func:`discover_channels` for several communities, reading every source once; one
    result per community, in order."""
    found: dict[str, list[tuple[SignedDescription, str, str | None]]] = {
        str(c): [] for c in communities
    }
    rejected: dict[str, Counter[str]] = {str(c): Counter() for c in communities}
    scratch = os.path.join(work_dir, "discover")
    for source in sources:
        count = 0
        rows = _source_rows(source, communities, scratch)
        for raw, community, stored_on, outcome in _find_many(rows, communities):
            if isinstance(outcome, Exception):
                rejected[str(community)][_reason(outcome)] += 1
            else:
                found[str(community)].append(
                    (outcome, f"{raw['source']} {raw['location']}", stored_on)
                )
                count += 1
        if on_source is not None:
            on_source(source.name, count)
    results = []
    for community in communities:
        name = str(community)
        result = ChannelDiscovery(name)
        result.descriptions = len(found[name])
        result.rejected = dict(rejected[name])
        result.newest = newest_description(d for d, _, _ in found[name])
        if result.newest is not None:
            result.newest_location, result.newest_pubsub_topic = next(
                (loc, topic) for d, loc, topic in found[name] if d is result.newest
            )
        results.append(result)
    return results
