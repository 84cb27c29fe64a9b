"""The shard mapping: which pubsub topic a v1-era message lands on in Waku v2.

A configured community's channel topics (``keccak256(<community id><channel uuid>)[:4]`` as
``/waku/1/0x…/rfc26``) go to the community's shard, ``/waku/2/rs/16/<shard>``; every other
topic goes to the configured default. The mapping is small (channels of the configured
communities), picklable, and shipped to every Spark task.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from waku_legacy.identity.topics import v1_topic_to_content_topic

__all__ = ["ChannelRoute", "TopicMapping"]


@dataclass(frozen=True, slots=True)
class ChannelRoute:
    community: str  # community id string, 0x + 66 hex
    channel: str  # channel uuid
    pubsub_topic: str


@dataclass(frozen=True, slots=True)
class TopicMapping:
    default_pubsub_topic: str
    routes: dict[str, ChannelRoute] = field(default_factory=dict)  # by v2 content topic

    @classmethod
    def build(cls, default_pubsub_topic: str, communities: Sequence[object]) -> TopicMapping:
        """From :class:`~waku_legacy.community_config.CommunityConfig` objects."""
        routes: dict[str, ChannelRoute] = {}
        for community in communities:
            pubsub = community.pubsub_topic  # type: ignore[attr-defined]
            for topic, channel in community.channel_topics().items():  # type: ignore[attr-defined]
                routes[v1_topic_to_content_topic(topic)] = ChannelRoute(
                    str(community.id),  # type: ignore[attr-defined]
                    channel,
                    pubsub,
                )
        return cls(default_pubsub_topic, routes)

    def route(self, content_topic: str) -> ChannelRoute | None:
        return self.routes.get(content_topic)

    def pubsub_for(self, content_topic: str) -> str:
        route = self.routes.get(content_topic)
        return route.pubsub_topic if route is not None else self.default_pubsub_topic

    def describe(self) -> list[dict[str, str]]:
        """The mapping as report rows (every channel, then the default)."""
        rows = [
            {
                "content_topic": ct,
                "pubsub_topic": r.pubsub_topic,
                "community": r.community,
                "channel": r.channel,
            }
            for ct, r in sorted(self.routes.items(), key=lambda kv: (kv[1].community, kv[0]))
        ]
        rows.append(
            {
                "content_topic": "*",
                "pubsub_topic": self.default_pubsub_topic,
                "community": "",
                "channel": "",
            }
        )
        return rows
