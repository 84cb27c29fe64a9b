"""A realistic legacy sample: Status communities as a v1 mailserver would have stored them.

Each community has a generated secp256k1 key (its id is the compressed public key), a few
channels (UUIDs), a shard and members (their own keys). Members post on the channels over
some months: every message is an ``ApplicationMetadataMessage`` (type CHAT_MESSAGE, holding a
``ChatMessage`` whose ``chat_id`` names its channel: :func:`chat_message`) signed
by its author, wrapped in a 26/WAKU-PAYLOAD signed by the author's key and encrypted with the
channel's symmetric key (status-go's public-chat derivation), in a v1 envelope sealed with
PoW on the channel's topic. A little public-chat traffic (no community) is mixed in.

Each community also publishes its signed ``CommunityDescription`` on its own chat (the
``<community id>`` chat, as status-go's ``publishOrg``): an ``ApplicationMetadataMessage``
of type COMMUNITY_DESCRIPTION signed by the community key, in a 26/WAKU-PAYLOAD signed by
the owner's node key and encrypted with that chat's key (:func:`generate_descriptions`): a
first one when the community is created, listing its first channel, and a newer one (higher
clock) listing every channel. Every mailserver holds them (they were republished often).

Every envelope is stored by one or more of several legacy LevelDB mailservers (overlapping
copies, as real mailservers had), with status-go's DB keys. Everything is seeded, so the same
arguments give the same envelopes.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coincurve import PrivateKey

    from waku_legacy.identity.topics import CommunityId

__all__ = ["SampleCommunity", "SampleSpec", "generate_descriptions", "generate_envelopes",
           "make_communities", "sample_members", "write_leveldb_mailservers"]  # fmt: skip

DAY = 86_400
DEFAULT_TTL = 10
DEFAULT_POW = 0.002
PUBLIC_CHATS = ("status", "crypto", "introductions")


@dataclass(frozen=True, slots=True)
class SampleCommunity:
    name: str
    secret: bytes  # 32-byte private key
    channels: tuple[str, ...]
    shard: int

    @property
    def id(self) -> CommunityId:
        from waku_legacy.crypto.secp256k1 import private_key_from_bytes
        from waku_legacy.identity.topics import CommunityId

        key = private_key_from_bytes(self.secret)
        return CommunityId(key.public_key.format(compressed=True))


@dataclass(frozen=True, slots=True)
class SampleSpec:
    communities: int = 3
    channels: int = 3
    members: int = 6
    days: int = 120
    messages_per_channel_day: float = 2.0
    public_per_day: float = 1.0
    start: int = 1_609_459_200  # 2021-01-01
    seed: int = 7
    ttl: int = DEFAULT_TTL
    pow_target: float = DEFAULT_POW
    extra: dict[str, int] = field(default_factory=dict)


def make_communities(spec: SampleSpec) -> list[SampleCommunity]:
    rnd = random.Random(spec.seed)
    names = ["Status Builders", "Nimbus Stakers", "Logos Readers", "Vac Research", "Keycard"]
    out = []
    for i in range(spec.communities):
        secret = _secret(rnd)
        channels = tuple(str(uuid.UUID(int=rnd.getrandbits(128), version=4))
                         for _ in range(spec.channels))  # fmt: skip
        out.append(SampleCommunity(names[i % len(names)], secret, channels, 128 + i))
    return out


def _secret(rnd: random.Random) -> bytes:
    from waku_legacy.crypto.secp256k1 import private_key_from_bytes
    from waku_legacy.errors import CryptoError

    while True:
        candidate = rnd.getrandbits(256).to_bytes(32, "big")
        try:
            private_key_from_bytes(candidate)
            return candidate
        except CryptoError:
            continue


# status-go protocol/protobuf/enums.proto MessageType, chat_message.proto ContentType
PUBLIC_GROUP = 2
COMMUNITY_CHAT = 5
TEXT_PLAIN = 1


def chat_message(chat_id: str, text: str, sent: int, message_type: int) -> bytes:
    """status-go's ``ChatMessage{clock = 1, timestamp = 2, text = 3, chat_id = 6,
    message_type = 7, content_type = 8}`` (clock and timestamp in ms); a community channel's
    ``chat_id`` is ``<community id><uuid>``, the chat a client files the message under."""
    from waku_legacy.proto.wire import len_field, varint_field

    return (
        varint_field(1, sent * 1000) + varint_field(2, sent * 1000)
        + len_field(3, text.encode()) + len_field(6, chat_id.encode())
        + varint_field(7, message_type) + varint_field(8, TEXT_PLAIN)
    )  # fmt: skip


def _chat_payload(author: PrivateKey, body: bytes) -> bytes:
    from waku_legacy.crypto.keccak import keccak256
    from waku_legacy.crypto.secp256k1 import sign_recoverable
    from waku_legacy.proto import application_metadata_pb2

    message = application_metadata_pb2.ApplicationMetadataMessage(
        signature=sign_recoverable(keccak256(body), author),
        payload=body,
        type=application_metadata_pb2.ApplicationMetadataMessage.CHAT_MESSAGE,
    )
    return message.SerializeToString()


_WORDS = (
    "waku gossip node relay store archive torrent magnet peer shard envelope bloom topic key "
    "sign seal history week channel community bridge mailserver cursor"
).split()


def _text(rnd: random.Random) -> str:
    return " ".join(rnd.choice(_WORDS) for _ in range(rnd.randint(3, 30)))


def _members(rnd: random.Random, spec: SampleSpec) -> list[PrivateKey]:
    """The members who post (the first draws of the envelopes' generator)."""
    from waku_legacy.crypto.secp256k1 import private_key_from_bytes

    return [private_key_from_bytes(_secret(rnd)) for _ in range(spec.members)]


def sample_members(spec: SampleSpec, seed: int | None = None) -> list[str]:
    """The ``"0x04…"`` keys of the members who post in :func:`generate_envelopes` (same
    ``seed``): the first is an admin and the last banned in a ``members`` description."""
    rnd = random.Random(spec.seed * 1000 + (seed or 0))
    return ["0x" + key.public_key.format(compressed=False).hex() for key in _members(rnd, spec)]


def generate_envelopes(
    spec: SampleSpec,
    communities: list[SampleCommunity],
    *,
    start: int | None = None,
    days: int | None = None,
    seed: int | None = None,
) -> Iterator[bytes]:
    """Envelope RLP bytes, in time order, for ``days`` days from ``start``."""
    from waku_legacy.crypto.payload import encode_payload
    from waku_legacy.identity.topics import chat_topic, symmetric_key_for_chat
    from waku_legacy.mailserver_compat.wire.pow import seal

    rnd = random.Random(spec.seed * 1000 + (seed or 0))
    start = spec.start if start is None else start
    days = spec.days if days is None else days
    members = _members(rnd, spec)
    chats: list[tuple[str, float]] = []
    for community in communities:
        for channel in community.channels:
            chats.append((community.id.channel_chat_id(channel), spec.messages_per_channel_day))
    for name in PUBLIC_CHATS:
        chats.append((name, spec.public_per_day / len(PUBLIC_CHATS)))
    keys = {chat: symmetric_key_for_chat(chat) for chat, _ in chats}
    kinds = {chat: PUBLIC_GROUP if chat in PUBLIC_CHATS else COMMUNITY_CHAT for chat, _ in chats}

    def random_bytes(n: int) -> bytes:
        return rnd.getrandbits(8 * n).to_bytes(n, "big") if n else b""

    for day in range(days):
        events: list[tuple[int, str]] = []
        for chat, rate in chats:
            count = _poisson(rnd, rate)
            for _ in range(count):
                events.append((start + day * DAY + rnd.randrange(DAY), chat))
        events.sort()
        for sent, chat in events:
            author = rnd.choice(members)
            data = encode_payload(
                _chat_payload(author, chat_message(chat, _text(rnd), sent, kinds[chat])),
                sign_with=author,
                symmetric_key=keys[chat],
                random_source=random_bytes,
            )
            envelope = seal(sent + spec.ttl, spec.ttl, chat_topic(chat), data, spec.pow_target)
            yield envelope.encode()


CHANNEL_NAMES = ("general", "dev", "random", "support", "announcements", "design", "events")
CHANNEL_ABOUT = (
    "Say hi, ask anything", "Code, reviews and releases", "Off-topic and memes",
    "Help with nodes and clients", "News from the team", "UI and brand work", "Meetups and calls",
)  # fmt: skip
COMMUNITY_ABOUT = {
    "Status Builders": "People building on the Status network: apps, bridges and archives.",
    "Nimbus Stakers": "Running Nimbus validators together: setups, upgrades, incidents.",
    "Logos Readers": "A reading group for the Logos network and its papers.",
    "Vac Research": "Peer-to-peer protocol research: Waku, RLN, gossip.",
    "Keycard": "The Keycard hardware wallet: users and developers.",
}


def description_message(
    community: SampleCommunity,
    channels: tuple[str, ...],
    clock: int,
    archive_clock: int = 0,
    shard: int | None = None,
    members: tuple[str, ...] = (),
    admins: tuple[str, ...] = (),
    banned: tuple[str, ...] = (),
    about: bool = False,
) -> bytes:
    """The signed ``ApplicationMetadataMessage`` (COMMUNITY_DESCRIPTION) of a description
    listing ``channels``, signed by the community key; ``archive_clock`` is field 9
    (``archive_link_clock``, the clock of the last archive link), unset when 0; ``shard``
    is ``relay_shard_index`` (field 15), unset when None, as deployed clients leave it.
    ``members`` (``"0x04…"`` keys; ``admins`` among them with ROLE_ADMIN) are the
    community's and every channel's members; ``banned`` are in ``ban_list`` and
    ``banned_members`` and in no members map, as status-go's ``BanUserFromCommunity``
    leaves them. ``about``: the community and its channels described in words."""
    from waku_legacy.crypto.keccak import keccak256
    from waku_legacy.crypto.secp256k1 import private_key_from_bytes, sign_recoverable
    from waku_legacy.proto import application_metadata_pb2, community_description_pb2

    description = community_description_pb2.CommunityDescription(clock=clock)
    if archive_clock:
        field9 = description.DESCRIPTOR.fields_by_number[9].name  # renamed in status-go
        setattr(description, field9, archive_clock)
    if shard is not None:
        description.relay_shard_index = shard
    description.identity.display_name = community.name
    if about:
        description.identity.description = COMMUNITY_ABOUT.get(community.name, "")
    admin_role = community_description_pb2.CommunityMember.ROLE_ADMIN
    for member_key in members:
        if member_key not in banned:
            member = description.members[member_key]
            if member_key in admins:
                member.roles.append(admin_role)
    for banned_key in banned:
        description.ban_list.append(banned_key)
        description.banned_members[banned_key].delete_all_messages = False
    for position, channel in enumerate(channels):
        chat = description.chats[channel]
        chat.identity.display_name = CHANNEL_NAMES[position % len(CHANNEL_NAMES)]
        if about:
            chat.identity.description = CHANNEL_ABOUT[position % len(CHANNEL_ABOUT)]
        chat.position = position
        for member_key in members:
            if member_key not in banned:
                chat.members[member_key].SetInParent()
    body = description.SerializeToString(deterministic=True)
    key = private_key_from_bytes(community.secret)
    return application_metadata_pb2.ApplicationMetadataMessage(
        signature=sign_recoverable(keccak256(body), key),
        payload=body,
        type=application_metadata_pb2.ApplicationMetadataMessage.COMMUNITY_DESCRIPTION,
    ).SerializeToString()


def generate_descriptions(
    spec: SampleSpec,
    communities: list[SampleCommunity],
    *,
    shards: bool = False,
    members: bool = False,
) -> Iterator[bytes]:
    """Envelope RLP bytes of each community's descriptions (see the module docstring):
    the first at creation (first channel only, clock = its time in ms), the newest a week
    later with every channel and, with ``shards``, the community's shard
    (``relay_shard_index``, as a community that was given one writes it). Seeded apart from
    :func:`generate_envelopes`, so adding them changes none of the message envelopes. With
    ``members``, the newest also lists the members who post (:func:`sample_members`; the
    first an admin) and bans the last of them."""
    from waku_legacy.crypto.payload import encode_payload
    from waku_legacy.crypto.secp256k1 import private_key_from_bytes
    from waku_legacy.identity.topics import chat_topic, symmetric_key_for_chat
    from waku_legacy.mailserver_compat.wire.pow import seal

    rnd = random.Random(spec.seed * 1000 + 999)
    listed = tuple(sample_members(spec)) if members else ()
    people: dict[str, Any] = {}
    if listed:
        people = {"members": listed, "admins": listed[:1], "banned": listed[-1:], "about": True}

    def random_bytes(n: int) -> bytes:
        return rnd.getrandbits(8 * n).to_bytes(n, "big") if n else b""

    for community in communities:
        owner_node = private_key_from_bytes(_secret(rnd))
        chat = community.id.chat_id
        key = symmetric_key_for_chat(chat)
        created = spec.start + rnd.randrange(3600)
        newest_shard = community.shard if shards else None
        versions = [(created, community.channels[:1], None, {}),
                    (created + 7 * DAY, community.channels, newest_shard, people)]  # fmt: skip
        for sent, channels, shard, who in versions:
            data = encode_payload(
                description_message(community, channels, sent * 1000, shard=shard, **who),
                sign_with=owner_node,
                symmetric_key=key,
                random_source=random_bytes,
            )
            yield seal(sent + spec.ttl, spec.ttl, chat_topic(chat), data, spec.pow_target).encode()


def _poisson(rnd: random.Random, rate: float) -> int:
    # Knuth's method; rates here are small.
    import math

    limit, k, p = math.exp(-rate), 0, 1.0
    while True:
        p *= rnd.random()
        if p <= limit:
            return k
        k += 1


def write_leveldb_mailservers(
    envelopes: Iterator[bytes],
    directories: list[Path],
    *,
    seed: int = 1,
    keep_probability: float = 0.7,
    on_envelope: Callable[[bytes], None] | None = None,
) -> dict[str, int]:
    """Store each envelope in a random non-empty subset of the mailservers (status-go's
    LevelDB layout); returns how many each holds."""
    from waku_legacy.mailserver_compat.storage.leveldb import (
        LevelDBEnvelopeStore,
        db_key_of_envelope,
    )

    rnd = random.Random(seed)
    stores = [LevelDBEnvelopeStore(d, create=True) for d in directories]
    counts = dict.fromkeys((str(d) for d in directories), 0)
    batches: list[list[tuple[bytes, bytes]]] = [[] for _ in stores]
    try:
        for envelope in envelopes:
            key = db_key_of_envelope(envelope)
            chosen = [i for i in range(len(stores)) if rnd.random() < keep_probability]
            if not chosen:
                chosen = [rnd.randrange(len(stores))]
            for i in chosen:
                batches[i].append((key, envelope))
                counts[str(directories[i])] += 1
                if len(batches[i]) >= 1000:
                    stores[i].put_many(batches[i])
                    batches[i] = []
            if on_envelope is not None:
                on_envelope(envelope)
        for store, batch in zip(stores, batches, strict=True):
            if batch:
                store.put_many(batch)
    finally:
        for store in stores:
            store.close()
    return counts
