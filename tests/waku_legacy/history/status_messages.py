"""Hand-built Status messages for the readable history's tests (as status-go sends them).

Each builder returns the decrypted 26/WAKU-PAYLOAD data a member's client would read: the
application message, in an ``ApplicationMetadataMessage`` signed by the author's key
(``crypto.Sign(keccak256(payload))``, r||s||v), by default inside the encryption layer's
``ProtocolMessage{installation_id, public_message}`` as ``SendPublic`` wraps it. The message
id expected for it is computed in the tests from these bytes by hand (keccak of key || bytes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import coincurve
from eth_hash.auto import keccak

from waku_legacy.history.events import WakuFacts
from waku_legacy.proto import (
    application_metadata_pb2,
    chat_message_pb2,
    community_description_pb2,
    emoji_reaction_pb2,
    encryption_protocol_pb2,
    pin_message_pb2,
)

COMMUNITY_CHAT = 5
T0 = 1_650_000_000  # 2022-04-15, seconds
# a fixed community key (compressed) and channel
COMMUNITY_SECRET = bytes.fromhex("11" * 32)
COMMUNITY_ID = "0x" + coincurve.PrivateKey(COMMUNITY_SECRET).public_key.format().hex()
CHANNEL = "8b5a8e0d-3a1b-4f3e-9c2d-1e7f6a5b4c3d"
CHAT_ID = COMMUNITY_ID + CHANNEL


@dataclass(frozen=True)
class Person:
    secret: bytes

    @property
    def key(self) -> coincurve.PrivateKey:
        return coincurve.PrivateKey(self.secret)

    @property
    def public(self) -> bytes:
        return self.key.public_key.format(compressed=False)

    @property
    def hex(self) -> str:
        return "0x" + self.public.hex()


ALICE = Person(bytes.fromhex("a1" * 32))
BOB = Person(bytes.fromhex("b0" * 32))
CAROL = Person(bytes.fromhex("c4" * 32))  # the admin in the tests' description
NODE = Person(bytes.fromhex("d0" * 32))  # a relaying node: signs the 26/WAKU-PAYLOAD only


def facts(seconds: int = T0, waku_hash: str = "0x" + "ab" * 32) -> WakuFacts:
    return WakuFacts(waku_hash, "/waku/1/0x12345678/rfc26", "", seconds, NODE.hex)


def application(author: Person, message_type: int, payload: bytes) -> bytes:
    """A signed ``ApplicationMetadataMessage``."""
    signature = author.key.sign_recoverable(keccak(payload), hasher=None)
    return application_metadata_pb2.ApplicationMetadataMessage(
        signature=signature, payload=payload, type=message_type
    ).SerializeToString()


def wrapped(app: bytes, *, bare: bool = False) -> bytes:
    """The data a client reads: ``ProtocolMessage{public_message}`` (or the bare message)."""
    if bare:
        return app
    return encryption_protocol_pb2.ProtocolMessage(
        installation_id="2", public_message=app
    ).SerializeToString()


def expected_id(author: Person, app: bytes) -> str:
    return "0x" + keccak(author.public + app).hex()


def chat(
    text: str = "hello",
    *,
    clock: int = T0 * 1000,
    timestamp: int = T0 * 1000,
    chat_id: str = CHAT_ID,
    content_type: int = 1,
    message_type: int = COMMUNITY_CHAT,
    **fields: Any,
) -> bytes:
    return chat_message_pb2.ChatMessage(
        clock=clock, timestamp=timestamp, text=text, chat_id=chat_id,
        message_type=message_type, content_type=content_type, **fields,
    ).SerializeToString()  # fmt: skip


def edit(target: str, text: str, *, clock: int = T0 * 1000 + 5000, **fields: Any) -> bytes:
    return chat_message_pb2.EditMessage(
        clock=clock, text=text, chat_id=CHAT_ID, message_id=target,
        message_type=COMMUNITY_CHAT, **fields,
    ).SerializeToString()  # fmt: skip


def delete(target: str, *, clock: int = T0 * 1000 + 6000) -> bytes:
    return chat_message_pb2.DeleteMessage(
        clock=clock, chat_id=CHAT_ID, message_id=target, message_type=COMMUNITY_CHAT
    ).SerializeToString()


def reaction(target: str, emoji_type: int, *, retracted: bool = False,
             clock: int = T0 * 1000 + 7000) -> bytes:  # fmt: skip
    return emoji_reaction_pb2.EmojiReaction(
        clock=clock, chat_id=CHAT_ID, message_id=target, message_type=COMMUNITY_CHAT,
        type=emoji_type, retracted=retracted,
    ).SerializeToString()  # fmt: skip


def pin(target: str, *, pinned: bool = True, clock: int = T0 * 1000 + 8000) -> bytes:
    return pin_message_pb2.PinMessage(
        clock=clock, message_id=target, chat_id=CHAT_ID, pinned=pinned,
        message_type=COMMUNITY_CHAT,
    ).SerializeToString()  # fmt: skip


def identity(display_name: str, *, ens_name: str = "", clock: int = T0 * 1000) -> bytes:
    return community_description_pb2.ChatIdentity(
        clock=clock, display_name=display_name, ens_name=ens_name
    ).SerializeToString()
