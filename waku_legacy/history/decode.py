"""One Waku message of a community -> what a member's client reads in it (pure, no I/O).

:func:`decode_application` takes the decrypted 26/WAKU-PAYLOAD data (what an archive's
``WakuMessage.payload`` holds, what a store row holds once decrypted with its channel key)
and the payload signer, and returns one :mod:`.events` event, or :class:`.Undecodable` with a
short kind and a detail a person can act on; no input makes it raise (a bad ``community_id``
argument, the caller's, is an :class:`~waku_legacy.errors.InvalidCommunityId`).

The steps are status-go's (``c72f491``, Oct 2024, unless said otherwise):

- Transport (``HandleTransportLayer``, ``protocol/v1/status_message.go``): a message without a
  payload signer is dropped ("failed to get signature"); archives carry it in ``sig``.
  ``facts.whisper_timestamp`` (seconds) is the envelope time the clock rules compare with: a
  source must set it (an archive's ``timestamp``, a v2 message's ``timestamp`` / 10**9).
- Segmentation (since 2023-11, ``handleSegmentationLayerV2``): a payload split over several
  Waku messages is ``Undecodable("segment", …)`` piece by piece; :mod:`.segments` joins the
  pieces and the whole decodes here.
- Encryption and application layers, author and message id: :mod:`waku_legacy.identity
  .application` (``HandleEncryptionLayer``, ``HandleApplicationLayer``, ``MessageID``:
  ``keccak256(65-byte author key || ApplicationMetadataMessage bytes)``, the key's history
  there). The author is the ApplicationMetadataMessage signer, not the payload signer.
- Types (``protocol/protobuf/application_metadata_message.proto``): ``CHAT_MESSAGE`` 1,
  ``EMOJI_REACTION`` 22, ``CHAT_IDENTITY`` 24, ``PIN_MESSAGE`` 28, ``EDIT_MESSAGE`` 29,
  ``DELETE_MESSAGE`` 31; any other type is ``Undecodable("not history", …)`` (descriptions,
  archive links, requests to join … are read elsewhere).
- Validation (``protocol/message_validator.go``): ``ValidateReceivedChatMessage`` (clock at
  most 120 s past the envelope time, non-empty text of at most 4096 runes except for Discord,
  bridge and caption-less image messages, a chat id, a known message and content type, a
  sticker hash, image and audio payloads with a known format, a bridge message's names and
  content, no private-group or mutual-state system content, and ``utils.ValidateDisplayName``
  on the display name: ``common/utils.go``), ``ValidateEditMessage``,
  ``ValidateDeleteMessage``, ``ValidateReceivedEmojiReaction``; a ChatIdentity's display name
  passes ``ValidateDisplayName`` too (``HandleChatIdentity``). What status-go refuses is
  ``Undecodable("refused", …)`` (``"clock_skew"`` for the clock rule).
- Routing (``matchChatEntity``, ``protocol/messenger.go``): a ``COMMUNITY_CHAT`` message goes
  to the chat its ``chat_id`` names (``<community id><channel uuid>``); ``channel_id`` is that
  uuid, "" when the message names no channel of this community.
- Content (``protocol/protobuf/chat_message.proto``, ``enums.proto``): stickers (hash),
  images (payload, ``ImageFormat``, album id; bytes served only when they sniff as JPEG, PNG,
  WebP or GIF within the cap, :mod:`.web.images`), audio (duration), Discord-imported
  messages (text = ``DiscordMessage.content``, as ``PrepareContent`` parses it; the Discord
  author's name and the original timestamp), bridged messages (text = ``BridgeMessage.content``).
  A Discord import (``protocol/messenger_communities_import_discord.go``) signs each message,
  and the pins of the pinned ones, with the COMMUNITY key: their author is the community, the
  person is ``discord_author``.
- Names: ``ChatMessage.display_name`` (field 14) and ``ChatIdentity.display_name`` are what
  status-go stores as the contact's display name (``handleChatMessage``, ``HandleChatIdentity``);
  at ``c72f491`` a standalone ChatIdentity goes only to public and one-to-one chats
  (``handleStandaloneChatIdentity``, ``protocol/messenger.go``) and the contact-code topic, so
  a community's archive mostly names its authors through field 14. ``ens_name`` is the
  sender's CLAIM: status-go shows it only after its ENS verifier confirms
  it on chain (``ensVerifier.Add`` in ``handleChatMessage``; ``contact.ENSVerified``), so it is
  passed on as a claim, never as a verified name, and dropped when longer than an ENS name can
  be (255). ``ChatIdentity.ens_name`` is not read: ``HandleChatIdentity`` takes no ENS name
  from it (status-go's contacts get one from ChatMessage and contact sync only).
- Reactions: status-go carries ``EmojiReaction.Type`` (1-6); the emoji the Status apps draw for
  each are status-desktop's emoji reactions model (heart, thumbs up, thumbs down, laughing,
  sad, angry: "❤️", "👍", "👎", "😂", "😢", "😡"), :func:`emoji_for`.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from waku_legacy.errors import DecodeError, WakuLegacyError
from waku_legacy.history import ids
from waku_legacy.history.events import (
    ChatMessageEvent,
    DeleteEvent,
    EditEvent,
    Event,
    IdentityEvent,
    PinEvent,
    ReactionEvent,
    Undecodable,
    WakuFacts,
)
from waku_legacy.identity import application
from waku_legacy.identity.topics import CommunityId
from waku_legacy.proto import (
    chat_message_pb2,
    community_description_pb2,
    emoji_reaction_pb2,
    pin_message_pb2,
)
from waku_legacy.proto.codec import ProtobufDecodeError, parse_message

__all__ = [
    "EMOJI",
    "MAX_APPLICATION_BYTES",
    "decode_application",
    "emoji_for",
    "valid_display_name",
]

MAX_APPLICATION_BYTES = 16 * 1024 * 1024  # one message's data; an archive holds <= 30 MB
MAX_ENS_NAME = 255  # a DNS name's limit; a longer claim is no ENS name
MAX_FOREIGN_NAME = 256  # Discord/bridge author names are cut here (with "…")

CHAT_MESSAGE, EMOJI_REACTION, CHAT_IDENTITY = 1, 22, 24  # ApplicationMetadataMessage.Type
PIN_MESSAGE, EDIT_MESSAGE, DELETE_MESSAGE = 28, 29, 31
COMMUNITY_CHAT = 5  # MessageType
_UNKNOWN_MESSAGE_TYPES = (0, 4)  # UNKNOWN_MESSAGE_TYPE, SYSTEM_MESSAGE_PRIVATE_GROUP
# ChatMessage.ContentType
_STICKER, _IMAGE, _AUDIO, _DISCORD, _BRIDGE = 2, 7, 8, 12, 18
_NOT_RECEIVED = {
    6: "private group system message content type not allowed",
    15: "mutual state event system message content type not allowed",
    16: "mutual state event system message content type not allowed",
    17: "mutual state event system message content type not allowed",
}

#: EmojiReaction.Type -> the emoji the Status apps draw for it
EMOJI = {1: "❤️", 2: "👍", 3: "👎", 4: "😂", 5: "😢", 6: "😡"}

# ValidateDisplayName: ^[\w-\s]{5,24}$ in Go's RE2 (\w and \s are ASCII there)
_DISPLAY_NAME = re.compile(r"[0-9A-Za-z_\-\t\n\f\r ]{5,24}")
_DISPLAY_NAME_EXT = ("_eth", ".eth", "-eth")  # DISPLAY_NAME_EXT
_TYPE_NAMES = {
    CHAT_MESSAGE: "ChatMessage", EMOJI_REACTION: "EmojiReaction",
    CHAT_IDENTITY: "ChatIdentity", PIN_MESSAGE: "PinMessage", EDIT_MESSAGE: "EditMessage",
    DELETE_MESSAGE: "DeleteMessage",
}  # fmt: skip


def emoji_for(reaction_type: int) -> str:
    """The emoji for an ``EmojiReaction.Type`` value, "" for one the apps do not draw."""
    return EMOJI.get(reaction_type, "")


def valid_display_name(name: str) -> str | None:
    """status-go's ``ValidateDisplayName``: the trimmed name ("" stays allowed), or None when
    status-go refuses it (and with it the message that carries it)."""
    trimmed = name.strip()
    if not trimmed:
        return ""
    if _DISPLAY_NAME.fullmatch(trimmed) is None or trimmed.endswith(_DISPLAY_NAME_EXT):
        return None
    from waku_legacy.history.alias import is_alias

    return None if is_alias(trimmed) else trimmed


class _Refused(Exception):
    """A validator's refusal inside :func:`decode_application` (never escapes it)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind
        self.detail = detail


@functools.lru_cache(maxsize=4096)
def _bad_signer(payload_signer: str) -> str:
    """Why ``payload_signer`` is no public key ("" when it is one; a few nodes sign most
    messages, so the answer is cached)."""
    from waku_legacy.history.alias import public_key_bytes

    try:
        public_key_bytes(payload_signer)
    except DecodeError as exc:
        return exc.reason
    return ""


@functools.lru_cache(maxsize=256)
def _community(community_id: str) -> CommunityId:
    return CommunityId.parse(community_id)


def decode_application(
    data: bytes,
    payload_signer: str,
    facts: WakuFacts,
    community_id: str,
    *,
    max_size: int = MAX_APPLICATION_BYTES,
) -> Event:
    """The event one message of community ``community_id`` (``"0x02…"``) holds.

    ``data``: the decrypted 26/WAKU-PAYLOAD data (a ``ProtocolMessage`` or a bare
    ``ApplicationMetadataMessage``); ``payload_signer``: the 26/WAKU-PAYLOAD signer as
    ``"0x04…"`` ("" when unsigned); ``facts``: where it came from (carried on the event);
    data over ``max_size`` bytes is refused unread.
    """
    community = _community(community_id)
    given: object = data  # typed bytes, but a caller's None must not raise either
    if not isinstance(given, bytes | bytearray | memoryview):
        return Undecodable("malformed", f"data is {type(given).__name__}, not bytes", facts)
    if len(data) > max_size:
        return Undecodable(
            "too large", f"{len(data)} bytes is over the {max_size}-byte limit", facts
        )
    if not payload_signer:
        return Undecodable(
            "no signature", "the payload is unsigned; status-go drops it (HandleTransportLayer)",
            facts,
        )  # fmt: skip
    bad_signer = _bad_signer(payload_signer)
    if bad_signer:
        return Undecodable("bad signer", bad_signer, facts)
    try:
        opened = application.open_application(bytes(data), "status message", max_size=max_size)
    except ProtobufDecodeError as exc:
        return _segment(data, facts, max_size) or Undecodable(
            "not a status message", exc.reason[:300], facts
        )
    except WakuLegacyError as exc:  # SignatureError: unsigned or not recoverable
        return _segment(data, facts, max_size) or Undecodable(
            "signature", f"ApplicationMetadataMessage: {exc}"[:300], facts
        )
    kind = _TYPE_NAMES.get(opened.type)
    if kind is None:
        return Undecodable(
            "not history", f"application message type {opened.type}, not a chat event", facts
        )
    author = "0x" + opened.author.hex()
    event_id = "0x" + opened.message_id.hex()
    try:
        if opened.type == CHAT_MESSAGE:
            return _chat_message(opened, author, event_id, facts, community, max_size)
        message = _parse(opened.type, opened.payload, max_size)
        return _other(opened.type, message, author, event_id, facts)
    except ProtobufDecodeError as exc:
        return Undecodable("protobuf", f"{kind}: {exc.reason}"[:300], facts)
    except _Refused as refusal:
        return Undecodable(refusal.kind, f"{kind}: {refusal.detail}"[:300], facts)
    except WakuLegacyError as exc:
        return Undecodable("malformed", f"{kind}: {exc}"[:300], facts)


def _segment(data: bytes, facts: WakuFacts, max_size: int) -> Undecodable | None:
    """``Undecodable("segment", …)`` when ``data`` is one piece of a larger payload
    (:mod:`.segments`: join the pieces, then decode the whole)."""
    from waku_legacy.history.segments import read_segment

    segment = read_segment(bytes(data), max_size=max_size)
    if segment is None:
        return None
    what = (
        f"parity segment {segment.parity_index + 1} of {segment.parity_count}"
        if segment.is_parity
        else f"segment {segment.index + 1} of {segment.count}"
    )
    return Undecodable(
        "segment",
        f"{what} of payload 0x{segment.entire_hash.hex()}: join the segments "
        "(history.segments.SegmentJoiner), then decode the whole",
        facts,
    )


_MESSAGE_CLASSES: dict[int, Any] = {
    CHAT_MESSAGE: chat_message_pb2.ChatMessage,
    EMOJI_REACTION: emoji_reaction_pb2.EmojiReaction,
    CHAT_IDENTITY: community_description_pb2.ChatIdentity,
    PIN_MESSAGE: pin_message_pb2.PinMessage,
    EDIT_MESSAGE: chat_message_pb2.EditMessage,
    DELETE_MESSAGE: chat_message_pb2.DeleteMessage,
}


def _parse(message_type: int, payload: bytes, max_size: int) -> Any:
    return parse_message(
        _MESSAGE_CLASSES[message_type], payload, _TYPE_NAMES[message_type], max_size=max_size
    )


def _whisper_ms(facts: WakuFacts) -> int:
    return facts.whisper_timestamp * 1000


def _check_clock(clock: int, facts: WakuFacts) -> None:
    """``validateClockValue``."""
    whisper_ms = _whisper_ms(facts)
    if clock == 0:
        raise _Refused("refused", "clock can't be 0")
    if clock > whisper_ms and clock - whisper_ms > application.MAX_WHISPER_FUTURE_DRIFT_MS:
        raise _Refused(
            "clock_skew", f"clock {clock} ms is over 120 s past the envelope's {whisper_ms}"
        )


def _check_text(text: str) -> None:
    """``ValidateText``."""
    if not text.strip():
        raise _Refused("refused", "text can't be empty")
    if len(text) > application.MAX_TEXT_LENGTH:
        raise _Refused("refused", f"text longer than {application.MAX_TEXT_LENGTH}")


def _check_message_type(message_type: int) -> None:
    if message_type in _UNKNOWN_MESSAGE_TYPES:
        raise _Refused("refused", "unknown message type")


def _foreign_name(name: str) -> str:
    return name if len(name) <= MAX_FOREIGN_NAME else name[: MAX_FOREIGN_NAME - 1] + "…"


def _chat_message(
    opened: Any, author: str, event_id: str, facts: WakuFacts, community: CommunityId,
    max_size: int,
) -> Event:  # fmt: skip
    chat = _parse(CHAT_MESSAGE, opened.payload, max_size)
    refusal = application.refuse_chat_message(chat, _whisper_ms(facts))
    if refusal is not None:
        kind, detail = refusal
        raise _Refused("clock_skew" if kind == "clock_skew" else "refused", detail)
    content = int(chat.content_type)
    payload = chat.WhichOneof("payload")
    text = chat.text
    fields: dict[str, Any] = {}
    if content == _STICKER:
        if payload != "sticker" or not chat.sticker.hash:
            raise _Refused("refused", "no sticker content or sticker hash not set")
        fields["sticker_hash"] = chat.sticker.hash
    elif content == _IMAGE:
        fields.update(_image(chat, payload))
    elif content == _BRIDGE:
        bridge = chat.bridge_message
        if payload != "bridge_message":
            raise _Refused("refused", "no bridge message content")
        if not bridge.userName or not bridge.bridgeName or not bridge.content:
            raise _Refused("refused", "no username, bridge name or content text")
        text = bridge.content
        fields["bridge_name"] = _foreign_name(bridge.bridgeName)
        fields["bridge_author"] = _foreign_name(bridge.userName)
    elif content == _DISCORD:
        discord = chat.discord_message
        text = discord.content
        fields["discord_author"] = _foreign_name(discord.author.name or discord.author.nickname)
        fields["discord_timestamp"] = discord.timestamp[:64]
    if content == _AUDIO:
        if payload != "audio" or not chat.audio.payload:
            raise _Refused("refused", "no audio content or audio payload empty")
        if int(chat.audio.type) == 0:
            raise _Refused("refused", "audio type unknown")
        fields["audio_duration_ms"] = int(chat.audio.duration_ms)
    if content in _NOT_RECEIVED:
        raise _Refused("refused", _NOT_RECEIVED[content])
    display_name = valid_display_name(chat.display_name)
    if display_name is None:
        raise _Refused("refused", "display name is not allowed (ValidateDisplayName)")
    channel = community.channel_of(chat.chat_id)
    if int(chat.message_type) != COMMUNITY_CHAT or chat.chat_id != f"{community}{channel}":
        channel = None  # status-go finds the chat by the exact id (allChats.Load)
    return ChatMessageEvent(
        id=event_id,
        author=author,
        chat_id=chat.chat_id,
        channel_id=channel or "",
        clock=int(chat.clock),
        timestamp_ms=int(chat.timestamp),
        content_type=content,
        text=text,
        response_to=ids.normalize_id(chat.response_to) if chat.response_to else "",
        ens_name=chat.ens_name if len(chat.ens_name) <= MAX_ENS_NAME else "",
        display_name=display_name,
        facts=facts,
        legacy_id="0x" + opened.legacy_message_id().hex(),
        **fields,
    )


def _image(chat: Any, payload: str | None) -> dict[str, Any]:
    from waku_legacy.history.web.images import sniff_image

    image = chat.image
    if payload != "image" or not image.payload:
        raise _Refused("refused", "no image content or image payload empty")
    if int(image.format) == 0:
        raise _Refused("refused", "image type unknown")
    data = bytes(image.payload)
    fields: dict[str, Any] = {"album_id": image.album_id, "image_size": len(data)}
    try:
        sniffed = sniff_image(data)
    except DecodeError:  # not JPEG/PNG/WebP/GIF, or over the cap: shown as refused
        return fields
    return fields | {"image_type": sniffed.image_type, "image": sniffed.data}


def _other(message_type: int, message: Any, author: str, event_id: str, facts: WakuFacts) -> Event:
    normalize_id = ids.normalize_id
    if message_type == EDIT_MESSAGE:  # ValidateEditMessage
        if message.clock == 0:
            raise _Refused("refused", "clock can't be 0")
        if not message.chat_id or not message.message_id:
            raise _Refused("refused", "chat-id or message-id is empty")
        _check_message_type(int(message.message_type))
        _check_text(message.text)
        return EditEvent(
            event_id, author, normalize_id(message.message_id), message.chat_id,
            int(message.clock), message.text, facts, int(message.content_type),
        )  # fmt: skip
    if message_type == DELETE_MESSAGE:  # ValidateDeleteMessage
        if not message.chat_id or not message.message_id:
            raise _Refused("refused", "chat-id or message-id is empty")
        _check_message_type(int(message.message_type))
        return DeleteEvent(
            event_id, author, normalize_id(message.message_id), message.chat_id,
            int(message.clock), facts,
        )  # fmt: skip
    if message_type == EMOJI_REACTION:  # ValidateReceivedEmojiReaction
        _check_clock(int(message.clock), facts)
        if not message.message_id or not message.chat_id:
            raise _Refused("refused", "message-id or chat-id is empty")
        emoji = emoji_for(int(message.type))
        if not emoji:
            raise _Refused("refused", f"unknown emoji reaction type {int(message.type)}")
        if int(message.message_type) == 0:
            raise _Refused("refused", "unknown message type")
        return ReactionEvent(
            event_id, author, normalize_id(message.message_id), message.chat_id,
            int(message.clock), emoji, bool(message.retracted), facts,
        )  # fmt: skip
    if message_type == PIN_MESSAGE:
        if not message.message_id or not message.chat_id:
            raise _Refused("refused", "message-id or chat-id is empty")
        return PinEvent(
            event_id, author, normalize_id(message.message_id), message.chat_id,
            int(message.clock), bool(message.pinned), facts,
        )  # fmt: skip
    # CHAT_IDENTITY: HandleChatIdentity validates the display name
    display_name = valid_display_name(message.display_name)
    if display_name is None:
        raise _Refused("refused", "display name is not allowed (ValidateDisplayName)")
    ens_name = message.ens_name if len(message.ens_name) <= MAX_ENS_NAME else ""
    return IdentityEvent(author, int(message.clock), display_name, facts, ens_name)
