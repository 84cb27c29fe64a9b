"""A community's signed ``CommunityDescription``: which channels it has (pure parsing).

How status-go publishes it (``publishOrg`` in ``protocol/messenger_communities.go`` and
``SendPublic`` in ``protocol/common/message_sender.go``, v1 era through 2024):

- on the community's own chat, chat id = the community id string ``0x<66 hex>``, so the
  v1 topic is ``keccak256(id string)[:4]`` and the v2 content topic its rfc26 form
  (56/STATUS-COMMUNITIES "Advertising a Community");
- the 26/WAKU-PAYLOAD is encrypted with that chat's public-chat symmetric key;
- inside it (bare, or in the encryption layer's ``ProtocolMessage`` as ``SendPublic`` wraps
  public messages; both are read) an ``ApplicationMetadataMessage`` of type
  ``COMMUNITY_DESCRIPTION`` (25) whose signature is the *community key's* recoverable
  signature over ``keccak256(payload)``;
- its payload is the ``CommunityDescription`` proto: ``clock`` (field 1) orders
  descriptions, newest wins; ``chats`` (field 6) maps each channel uuid to its
  ``CommunityChat`` (display name in ``identity.display_name``, its members in field 1);
  ``members`` (field 2), ``ban_list`` (7, deprecated) and ``banned_members`` (19) are keyed
  by ``"0x04…"`` public keys (``common.PubkeyToHex``), what ``CanView``/``CanPost``
  (``protocol/communities/community.go``) check an author against.

:func:`read_signed_description` checks one decrypted ``ApplicationMetadataMessage`` and
returns what it says; :func:`open_description_payload` first opens the 26/WAKU-PAYLOAD
with the community chat's key; :func:`newest_description` picks the one a member would keep.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError as ProtobufDecodeError

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.crypto.payload import decode_payload
from waku_legacy.crypto.secp256k1 import recover_public_key
from waku_legacy.errors import SignatureError
from waku_legacy.identity.shards import CommunityDescriptionError
from waku_legacy.identity.topics import CommunityId, symmetric_key_for_chat

__all__ = [
    "DescribedChannel",
    "DescribedMember",
    "SignedDescription",
    "newest_description",
    "open_description_payload",
    "read_signed_description",
]

COMMUNITY_DESCRIPTION_TYPE = 25  # ApplicationMetadataMessage.Type.COMMUNITY_DESCRIPTION


@dataclass(frozen=True, slots=True)
class DescribedMember:
    """A ``CommunityMember``: its roles and, in a channel's member list, its channel role."""

    roles: tuple[int, ...] = ()  # CommunityMember.Roles values
    channel_role: int = 0  # 0 = CHANNEL_ROLE_POSTER (the default), 1 = CHANNEL_ROLE_VIEWER


@dataclass(frozen=True, slots=True)
class DescribedChannel:
    uuid: str  # canonical lowercase 8-4-4-4-12
    name: str  # identity.display_name ("" when unset)
    position: int
    # "0x04…" key -> member; compare=False: the channel list (and ties) stay as before
    members: dict[str, DescribedMember] = field(default_factory=dict, compare=False)
    description: str = field(default="", compare=False)  # identity.description (untrusted)


def _members(entries: Any) -> dict[str, DescribedMember]:
    """A ``map<string, CommunityMember>`` with lowercase keys (``PubkeyToHex`` is lowercase)."""
    return {
        key.lower(): DescribedMember(tuple(int(r) for r in member.roles), int(member.channel_role))
        for key, member in entries.items()
    }


@dataclass(frozen=True, slots=True)
class SignedDescription:
    """A description whose signature recovers to the community key."""

    clock: int
    name: str  # the community's display name
    channels: tuple[DescribedChannel, ...]  # ordered by (position, uuid)
    archive_clock: int  # field 9 (archive_magnetlink_clock / archive_link_clock)
    ignored: tuple[str, ...] = field(default=())  # chat keys that are not channel uuids
    shard: int | None = None  # relay_shard_index (field 15) when set; deployed clients leave it
    # "0x04…" key -> member (field 2), and the banned keys (fields 7 and 19)
    members: dict[str, DescribedMember] = field(default_factory=dict, compare=False)
    banned: frozenset[str] = field(default=frozenset(), compare=False)
    description: str = field(default="", compare=False)  # identity.description (untrusted)
    # admin_settings.pin_message_all_members_enabled (field 10.1): any member's pins count
    pin_all_members: bool = field(default=False, compare=False)

    @property
    def channel_uuids(self) -> tuple[str, ...]:
        return tuple(c.uuid for c in self.channels)


def _canonical_uuid(key: str) -> str | None:
    try:
        value = str(uuid.UUID(key))
    except (ValueError, AttributeError, TypeError):
        return None
    return value if value == key.lower() else None


MAX_DESCRIPTION_BYTES = 4 * 1024 * 1024  # a large community's description, with room


def read_signed_description(message: bytes, community: CommunityId) -> SignedDescription:
    """The description in a decrypted public message's data: an ``ApplicationMetadataMessage``,
    bare or inside status-go's ``ProtocolMessage`` layer (``SendPublic``; both are read,
    :mod:`waku_legacy.proto.status_layers`).

    :class:`~waku_legacy.identity.shards.CommunityDescriptionError` when the bytes are not
    a ``COMMUNITY_DESCRIPTION`` message, when its signature is missing or is not the
    community key's, or when the payload is not a ``CommunityDescription``.
    """
    from waku_legacy.proto import application_metadata_pb2, community_description_pb2
    from waku_legacy.proto.status_layers import open_layers

    what = f"description of {community}"
    _, _, application = open_layers(bytes(message), what, max_size=MAX_DESCRIPTION_BYTES)
    wrapper = application_metadata_pb2.ApplicationMetadataMessage()
    try:
        wrapper.ParseFromString(application)
    except ProtobufDecodeError as exc:
        raise CommunityDescriptionError(what, f"not an ApplicationMetadataMessage: {exc}") from exc
    if wrapper.type != COMMUNITY_DESCRIPTION_TYPE:
        raise CommunityDescriptionError(
            what, f"message type {wrapper.type}, not COMMUNITY_DESCRIPTION (25)"
        )
    payload = bytes(wrapper.payload)
    try:
        signer = recover_public_key(keccak256(payload), bytes(wrapper.signature))
    except SignatureError as exc:
        raise CommunityDescriptionError(what, f"unsigned or bad signature: {exc}") from exc
    if signer != community.uncompressed:
        raise CommunityDescriptionError(
            what, f"signed by 0x{signer.hex()[:20]}…, not by the community key"
        )
    description = community_description_pb2.CommunityDescription()
    try:
        description.ParseFromString(payload)
    except ProtobufDecodeError as exc:
        raise CommunityDescriptionError(
            what, f"payload is not a CommunityDescription: {exc}"
        ) from exc
    channels, ignored = [], []
    for key, chat in description.chats.items():
        canonical = _canonical_uuid(key)
        if canonical is None:
            ignored.append(key)
            continue
        channels.append(DescribedChannel(
            canonical, chat.identity.display_name, chat.position, _members(chat.members),
            description=chat.identity.description,
        ))  # fmt: skip
    channels.sort(key=lambda c: (c.position, c.uuid))
    return SignedDescription(
        clock=description.clock,
        name=description.identity.display_name,
        channels=tuple(channels),
        # field 9 by number: status-go renamed it (archive_magnetlink_clock -> archive_link_clock)
        archive_clock=getattr(description, description.DESCRIPTOR.fields_by_number[9].name),
        ignored=tuple(sorted(ignored)),
        shard=description.relay_shard_index or None,
        members=_members(description.members),
        banned=frozenset(
            [key.lower() for key in description.ban_list]
            + [key.lower() for key in description.banned_members]
        ),
        description=description.identity.description,
        pin_all_members=description.admin_settings.pin_message_all_members_enabled,
    )


def open_description_payload(payload: bytes, community: CommunityId) -> SignedDescription:
    """The description in a 26/WAKU-PAYLOAD (version 1) on the community's own chat:
    decrypted with that chat's public-chat key, then :func:`read_signed_description`.
    Decryption failures are the payload codec's typed errors."""
    key = symmetric_key_for_chat(community.chat_id)
    decoded = decode_payload(bytes(payload), symmetric_key=key)
    return read_signed_description(bytes(decoded.payload), community)


def newest_description(descriptions: Iterable[SignedDescription]) -> SignedDescription | None:
    """The description a member keeps: the highest clock. (Equal clocks should not differ;
    if they do, the tie is broken on the channel list and name, so the answer does not
    depend on the order the sources were read in.)"""
    return max(descriptions, key=lambda d: (d.clock, d.channel_uuids, d.name), default=None)
