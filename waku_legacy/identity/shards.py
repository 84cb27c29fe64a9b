"""Relay shards: static pubsub topics, the Status allocation, autosharding, DoS protection.

- Static sharding (51/WAKU2-RELAY-SHARDING): pubsub topic ``/waku/2/rs/<cluster>/<shard>``,
  cluster 0..65535, shard 0..1023. Status runs on cluster 16. status-go's defaults: shard 64
  (non-protected, community control messages) and shard 32 (global / default shard); before
  sharding everything was on ``/waku/2/default-waku/proto``.
- 57/STATUS-Simple-Scaling allocation of cluster 16 (:class:`ShardCategory`); a community's
  shard is ``CommunityDescription.relay_shard_index`` (field 15, seed/57 flavour).
- 1:1 partitioned topic: deployed status-go (``protocol/transport/topic.go``) uses
  ``"contact-discovery-" + str(X mod 5000)`` as a chat id, whose v1 topic is the first four
  keccak256 bytes, carried on v2 as ``/waku/1/0x<topic>/rfc26``. 57 proposes 8192 partitions
  and the 1:1 shard ``768 + (X mod 128)``; kept as the :attr:`PartitionScheme.SPEC_57` option.
- Autosharding (nwaku ``waku_core/topics/sharding.nim``): ``uint64_be(sha256(app ||
  version)[24:32]) mod shard_count``; content topics ``/{app}/{version}/{name}/{encoding}``
  with an optional ``/{generation}`` prefix, of which only generation 0 is defined.
- DoS-protected shards (57, go-waku ``relay.MsgHash``): ``meta`` is the 64-byte RFC 6979
  ``r || s`` signature of ``sha256(pubsub_topic || payload || content_topic ||
  timestamp int64 little-endian || ephemeral byte)``.
"""

from __future__ import annotations

import enum
import hashlib
import re
import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

import coincurve

from waku_legacy.crypto.secp256k1 import (
    private_key_from_bytes,
    sign_rfc6979,
    uncompressed_public_key,
    verify_rfc6979,
)
from waku_legacy.errors import CryptoError, DecodeError, InvalidTopic
from waku_legacy.identity.topics import content_topic_of_chat

if TYPE_CHECKING:
    from waku_legacy.proto.community_description_pb2 import CommunityDescription
    from waku_legacy.proto.waku_message_pb2 import WakuMessage

__all__ = [
    "DEFAULT_NON_PROTECTED_PUBSUB_TOPIC",
    "DEFAULT_NON_PROTECTED_SHARD",
    "DEFAULT_WAKU_PUBSUB_TOPIC",
    "GLOBAL_PUBSUB_TOPIC",
    "GLOBAL_SHARD",
    "MAX_CLUSTER_ID",
    "MAX_COMMUNITY_DESCRIPTION_SIZE",
    "SHARDS_PER_CLUSTER",
    "STATUS_CLUSTER_ID",
    "CommunityDescriptionError",
    "InvalidMessageField",
    "NamespacedContentTopic",
    "PartitionScheme",
    "ShardCategory",
    "StaticShard",
    "autoshard",
    "autoshard_pubsub_topic",
    "community_pubsub_topic",
    "community_shard_from_description",
    "contact_partition",
    "one_to_one_pubsub_topic",
    "one_to_one_shard",
    "parse_pubsub_topic",
    "partitioned_chat_id",
    "partitioned_content_topic",
    "protected_message_hash",
    "shard_category",
    "sign_protected_message",
    "sign_waku_message",
    "static_pubsub_topic",
    "verify_protected_message",
    "verify_waku_message",
    "waku_message_protected_hash",
]

STATUS_CLUSTER_ID = 16
MAX_CLUSTER_ID = 0xFFFF
SHARDS_PER_CLUSTER = 1024
DEFAULT_WAKU_PUBSUB_TOPIC = "/waku/2/default-waku/proto"
DEFAULT_NON_PROTECTED_SHARD = 64
GLOBAL_SHARD = 32
DEFAULT_NON_PROTECTED_PUBSUB_TOPIC = f"/waku/2/rs/{STATUS_CLUSTER_ID}/{DEFAULT_NON_PROTECTED_SHARD}"
GLOBAL_PUBSUB_TOPIC = f"/waku/2/rs/{STATUS_CLUSTER_ID}/{GLOBAL_SHARD}"

# A description travels inside one Waku message (nwaku's default cap is 150 KiB); anything
# far larger is not a description.
MAX_COMMUNITY_DESCRIPTION_SIZE = 4 * 1024 * 1024
_MAX_TOPIC_TEXT = 1024  # longest topic text worth parsing; longer is refused up front

# Canonical decimal only: no sign, no leading zeros, ASCII digits (re's \d would take any
# Unicode digit).
_STATIC_TOPIC = re.compile(r"/waku/2/rs/(0|[1-9][0-9]{0,4})/(0|[1-9][0-9]{0,3})")
_GENERATION = re.compile(r"0|[1-9][0-9]{0,8}")

_RELAY_SHARD_INDEX_FIELD = 15
_WIRE_TYPE_LEN = 2
_I64_LE = struct.Struct("<q")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class InvalidMessageField(DecodeError):
    """A message field handed to the shard rules that is out of its wire range."""


class CommunityDescriptionError(DecodeError):
    """A ``CommunityDescription`` whose shard field is not a shard (or not a description)."""


def _shown(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")


def _utf8(what: str, text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates: no wire form exists
        raise InvalidTopic(what, f"{_shown(text)} is not encodable as UTF-8") from exc


def _check_int(what: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTopic(what, f"expected an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidTopic(what, f"{value} is outside {low}..{high}")
    return value


# --- static sharding -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StaticShard:
    """One shard of one cluster: the pubsub topic ``/waku/2/rs/<cluster>/<shard>``."""

    cluster: int
    shard: int

    def __post_init__(self) -> None:
        _check_int("shard cluster id", self.cluster, 0, MAX_CLUSTER_ID)
        _check_int("shard index", self.shard, 0, SHARDS_PER_CLUSTER - 1)

    @property
    def pubsub_topic(self) -> str:
        return f"/waku/2/rs/{self.cluster}/{self.shard}"

    def __str__(self) -> str:
        return self.pubsub_topic


def static_pubsub_topic(cluster: int, shard: int) -> str:
    """``/waku/2/rs/<cluster>/<shard>``; cluster 0..65535, shard 0..1023."""
    return StaticShard(cluster, shard).pubsub_topic


def parse_pubsub_topic(text: str) -> StaticShard:
    """Parse a static-sharding pubsub topic in its canonical decimal form only.

    ``/waku/2/rs/16/064`` or ``/waku/2/rs/16/+64`` would hash differently from the topic
    every node uses, so they are refused rather than normalised.
    """
    if not isinstance(text, str):
        raise InvalidTopic("pubsub topic", f"expected a string, got {type(text).__name__}")
    if len(text) > _MAX_TOPIC_TEXT:
        raise InvalidTopic("pubsub topic", f"{len(text)} characters is too long")
    match = _STATIC_TOPIC.fullmatch(text)
    if match is None:
        hint = (
            " (the named pre-sharding topic, not a static shard)"
            if text == DEFAULT_WAKU_PUBSUB_TOPIC
            else ""
        )
        raise InvalidTopic(
            "pubsub topic",
            f"{_shown(text)} is not /waku/2/rs/<cluster>/<shard> in canonical decimal{hint}",
        )
    try:
        return StaticShard(int(match.group(1)), int(match.group(2)))
    except InvalidTopic as exc:
        raise InvalidTopic("pubsub topic", f"{_shown(text)}: {exc.what} {exc.reason}") from exc


# --- 57/STATUS-Simple-Scaling allocation -----------------------------------------------


class ShardCategory(enum.Enum):
    """What a shard of the Status cluster (16) is allocated to, by 57/STATUS-Simple-Scaling."""

    RESERVED = (0, 15)
    LARGE_COMMUNITY = (16, 127)  # statically mapped communities
    COMMUNITY = (128, 767)  # owner-mapped communities
    ONE_TO_ONE = (768, 895)
    MEDIA_AND_CONTROL = (896, 1023)

    @property
    def first(self) -> int:
        return self.value[0]

    @property
    def last(self) -> int:
        return self.value[1]

    def __contains__(self, shard: object) -> bool:
        return isinstance(shard, int) and self.first <= shard <= self.last


_COMMUNITY_CATEGORIES = (ShardCategory.LARGE_COMMUNITY, ShardCategory.COMMUNITY)


def shard_category(shard: int) -> ShardCategory:
    _check_int("shard index", shard, 0, SHARDS_PER_CLUSTER - 1)
    for category in ShardCategory:
        if shard in category:
            return category
    raise AssertionError("the categories cover 0..1023")  # pragma: no cover


def community_pubsub_topic(shard: int, *, allow_any: bool = False) -> str:
    """Pubsub topic of a community on ``shard`` of the Status cluster.

    A shard outside the community ranges (16..767) is refused unless ``allow_any``: it is
    far more likely a mix-up (a control/media shard, a 1:1 shard) than a real community.
    """
    category = shard_category(shard)
    if category not in _COMMUNITY_CATEGORIES and not allow_any:
        raise InvalidTopic(
            "community shard",
            f"shard {shard} is allocated to {category.name.lower()} ({category.first}-"
            f"{category.last}), not to communities (16-767); pass allow_any=True to use it",
        )
    return static_pubsub_topic(STATUS_CLUSTER_ID, shard)


def community_shard_from_description(
    description: bytes | bytearray | memoryview | CommunityDescription,
) -> int | None:
    """The community's shard from ``relay_shard_index`` (field 15), or None when unset.

    Bytes that do not parse raise ``ProtobufDecodeError`` (``ProtobufTooLarge`` over
    :data:`MAX_COMMUNITY_DESCRIPTION_SIZE`), a shard index over 1023
    :class:`CommunityDescriptionError`.

    proto3 gives the field no presence, so 0 (a reserved shard) means "not set". Deployed
    status-go puts ``token_permissions`` (a map, wire type 2) in field 15; the protobuf
    runtime files that under unknown fields, and such a description carries no shard.
    """
    from waku_legacy.proto.codec import parse_message
    from waku_legacy.proto.community_description_pb2 import CommunityDescription

    if isinstance(description, bytes | bytearray | memoryview):
        # Not strict: a real description carries many fields this partial schema omits.
        message = parse_message(
            CommunityDescription,
            description,
            "community description",
            max_size=MAX_COMMUNITY_DESCRIPTION_SIZE,
        )
    elif isinstance(description, CommunityDescription):
        message = description
    else:
        raise CommunityDescriptionError(
            "community description",
            f"expected bytes or a CommunityDescription, got {type(description).__name__}",
        )
    index = message.relay_shard_index
    if index == 0:
        return None
    if index >= SHARDS_PER_CLUSTER:
        raise CommunityDescriptionError(
            "community description",
            f"relay_shard_index {index} is not a shard (0..{SHARDS_PER_CLUSTER - 1})",
        )
    return index


# --- 1:1 partitioned topics ------------------------------------------------------------


class PartitionScheme(enum.Enum):
    """How many partitioned (contact-discovery) topics 1:1 chats are spread over."""

    STATUS_GO = 5000  # deployed: status-go protocol/transport/topic.go nPartitions
    SPEC_57 = 8192  # 57/STATUS-Simple-Scaling proposal, never deployed

    @property
    def partitions(self) -> int:
        return self.value


def _public_key_x(public_key: bytes | str) -> int:
    if isinstance(public_key, str):
        text = public_key.removeprefix("0x").removeprefix("0X")
        try:
            key_bytes = bytes.fromhex(text)
        except ValueError as exc:
            raise CryptoError(f"public key {_shown(public_key)} is not hex") from exc
        public_key = key_bytes
    if not isinstance(public_key, bytes | bytearray | memoryview):
        raise CryptoError(f"a public key is bytes or hex, got {type(public_key).__name__}")
    point = uncompressed_public_key(bytes(public_key))
    return int.from_bytes(point[1:33], "big")


def contact_partition(
    public_key: bytes | str, scheme: PartitionScheme = PartitionScheme.STATUS_GO
) -> int:
    """``X mod partitions`` of the key's uncompressed point (33/64/65 bytes or their hex)."""
    return _public_key_x(public_key) % scheme.partitions


def partitioned_chat_id(
    public_key: bytes | str, scheme: PartitionScheme = PartitionScheme.STATUS_GO
) -> str:
    """status-go's ``PartitionedTopic``: ``"contact-discovery-<partition>"`` (decimal)."""
    return f"contact-discovery-{contact_partition(public_key, scheme)}"


def partitioned_content_topic(
    public_key: bytes | str, scheme: PartitionScheme = PartitionScheme.STATUS_GO
) -> str:
    """Content topic of a key's partitioned topic: the chat id's 4-byte keccak topic as
    ``/waku/1/0x<topic>/rfc26``, the way status-go turns every filter topic into a v2
    content topic (57 writes ``keccak256(...)`` without saying how it is truncated)."""
    return content_topic_of_chat(partitioned_chat_id(public_key, scheme))


def one_to_one_shard(public_key: bytes | str) -> int:
    """57's 1:1 shard, ``768 + (X mod 128)`` (spec; status-go keeps 1:1 on shard 32/64)."""
    return ShardCategory.ONE_TO_ONE.first + _public_key_x(public_key) % 128


def one_to_one_pubsub_topic(public_key: bytes | str) -> str:
    return static_pubsub_topic(STATUS_CLUSTER_ID, one_to_one_shard(public_key))


# --- autosharding ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NamespacedContentTopic:
    """``[/{generation}]/{application}/{version}/{name}/{encoding}`` (23/WAKU2-TOPICS)."""

    application: str
    version: str
    name: str
    encoding: str
    generation: int | None = None

    @classmethod
    def parse(cls, text: str) -> NamespacedContentTopic:
        if not isinstance(text, str):
            raise InvalidTopic("content topic", f"expected a string, got {type(text).__name__}")
        if len(text) > _MAX_TOPIC_TEXT:
            raise InvalidTopic("content topic", f"{len(text)} characters is too long")
        if not text.startswith("/"):
            raise InvalidTopic("content topic", f"{_shown(text)} must start with '/'")
        _utf8("content topic", text)
        parts = text[1:].split("/")
        if len(parts) not in (4, 5):
            raise InvalidTopic(
                "content topic",
                f"{_shown(text)} is not /<application>/<version>/<name>/<encoding> "
                "or /<generation>/<application>/<version>/<name>/<encoding>",
            )
        generation: int | None = None
        if len(parts) == 5:
            gen_text = parts.pop(0)
            if _GENERATION.fullmatch(gen_text) is None:
                raise InvalidTopic(
                    "content topic",
                    f"generation {_shown(gen_text)} of {_shown(text)} is not a decimal number",
                )
            generation = int(gen_text)
        for label, part in zip(("application", "version", "name", "encoding"), parts, strict=True):
            if not part:
                raise InvalidTopic("content topic", f"{_shown(text)} has an empty {label}")
        return cls(parts[0], parts[1], parts[2], parts[3], generation)

    def __str__(self) -> str:
        prefix = "" if self.generation is None else f"/{self.generation}"
        return f"{prefix}/{self.application}/{self.version}/{self.name}/{self.encoding}"


def autoshard(content_topic: str | NamespacedContentTopic, shard_count: int) -> int:
    """The autosharding shard index of a content topic among ``shard_count`` shards."""
    _check_int("autosharding shard count", shard_count, 1, SHARDS_PER_CLUSTER)
    topic = (
        content_topic
        if isinstance(content_topic, NamespacedContentTopic)
        else NamespacedContentTopic.parse(content_topic)
    )
    if topic.generation not in (None, 0):
        # nwaku: "Generation > 0 are not supported yet"; guessing a rule would misroute.
        raise InvalidTopic(
            "content topic",
            f"generation {topic.generation} is not defined for autosharding (only 0 is)",
        )
    digest = hashlib.sha256(topic.application.encode() + topic.version.encode()).digest()
    return int.from_bytes(digest[24:32], "big") % shard_count


def autoshard_pubsub_topic(
    content_topic: str | NamespacedContentTopic, cluster: int, shard_count: int
) -> str:
    return static_pubsub_topic(cluster, autoshard(content_topic, shard_count))


# --- 57 DoS protection -----------------------------------------------------------------


def protected_message_hash(
    pubsub_topic: str,
    payload: bytes,
    content_topic: str,
    timestamp: int = 0,
    ephemeral: bool = False,
) -> bytes:
    """The digest a protected shard's ``meta`` signs (go-waku ``relay.MsgHash``)."""
    if isinstance(timestamp, bool) or not isinstance(timestamp, int):
        raise InvalidMessageField("timestamp", f"expected an integer, got {type(timestamp)}")
    if not _INT64_MIN <= timestamp <= _INT64_MAX:
        raise InvalidMessageField("timestamp", f"{timestamp} does not fit in an int64")
    h = hashlib.sha256(_utf8("pubsub topic", pubsub_topic))
    h.update(payload)
    h.update(_utf8("content topic", content_topic))
    h.update(_I64_LE.pack(timestamp))
    h.update(b"\x01" if ephemeral else b"\x00")
    return h.digest()


def _private_key(key: coincurve.PrivateKey | bytes) -> coincurve.PrivateKey:
    if isinstance(key, coincurve.PrivateKey):
        return key
    if isinstance(key, bytes | bytearray | memoryview):
        return private_key_from_bytes(bytes(key))
    raise CryptoError(f"a private key is 32 bytes or a PrivateKey, got {type(key).__name__}")


def sign_protected_message(
    private_key: coincurve.PrivateKey | bytes,
    pubsub_topic: str,
    payload: bytes,
    content_topic: str,
    timestamp: int = 0,
    ephemeral: bool = False,
) -> bytes:
    """64-byte ``r || s`` (RFC 6979, low s) to put in the message's ``meta``."""
    digest = protected_message_hash(pubsub_topic, payload, content_topic, timestamp, ephemeral)
    return sign_rfc6979(digest, _private_key(private_key))


def verify_protected_message(
    public_key: bytes,
    meta: bytes,
    pubsub_topic: str,
    payload: bytes,
    content_topic: str,
    timestamp: int = 0,
    ephemeral: bool = False,
) -> bool:
    """True when ``meta`` is the shard key's signature of this message (high s refused,
    as go-ethereum's ``VerifySignature`` does)."""
    digest = protected_message_hash(pubsub_topic, payload, content_topic, timestamp, ephemeral)
    return verify_rfc6979(digest, bytes(meta), public_key)


def waku_message_protected_hash(pubsub_topic: str, message: WakuMessage) -> bytes:
    return protected_message_hash(
        pubsub_topic, message.payload, message.content_topic, message.timestamp, message.ephemeral
    )


def sign_waku_message(
    private_key: coincurve.PrivateKey | bytes, pubsub_topic: str, message: WakuMessage
) -> bytes:
    """Sign ``message`` for a protected shard, set its ``meta`` and return the signature."""
    signature = sign_rfc6979(
        waku_message_protected_hash(pubsub_topic, message), _private_key(private_key)
    )
    message.meta = signature
    return signature


def verify_waku_message(public_key: bytes, pubsub_topic: str, message: WakuMessage) -> bool:
    return verify_rfc6979(
        waku_message_protected_hash(pubsub_topic, message), message.meta, public_key
    )
