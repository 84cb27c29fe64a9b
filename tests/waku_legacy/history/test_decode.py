"""decode_application against hand-built Status messages; expected values derived by hand
from status-go's rules (see waku_legacy/history/decode.py for where each is read)."""

from __future__ import annotations

import random

import pytest
from Crypto.Hash import keccak

from tests.waku_legacy.history import status_messages as sm
from tests.waku_legacy.history.status_messages import (
    ALICE,
    BOB,
    CHANNEL,
    CHAT_ID,
    COMMUNITY_ID,
    NODE,
    T0,
    application,
    facts,
    wrapped,
)
from waku_legacy.history.decode import decode_application, emoji_for, valid_display_name
from waku_legacy.history.events import (
    ChatMessageEvent,
    DeleteEvent,
    EditEvent,
    IdentityEvent,
    PinEvent,
    ReactionEvent,
    Undecodable,
)
from waku_legacy.proto import application_metadata_pb2, chat_message_pb2

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + b"\x00" * 17
GIF = b"GIF89a" + b"\x01\x00\x01\x00" + b"\x00" * 10
SVG = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>'


def _id(author: sm.Person, app: bytes) -> str:
    return "0x" + keccak.new(data=author.public + app, digest_bits=256).hexdigest()


def _decode(app: bytes, **kwargs: object) -> object:
    return decode_application(wrapped(app), NODE.hex, facts(), COMMUNITY_ID, **kwargs)  # type: ignore[arg-type]


def _chat(author: sm.Person = ALICE, **kwargs: object) -> tuple[bytes, ChatMessageEvent]:
    app = application(author, 1, sm.chat(**kwargs))  # type: ignore[arg-type]
    event = _decode(app)
    assert isinstance(event, ChatMessageEvent), event
    return app, event


def test_a_text_message() -> None:
    app, event = _chat(text="hello **world**")
    assert event.id == _id(ALICE, app)  # keccak(65-byte author key || AMM bytes)
    compressed = ALICE.key.public_key.format(compressed=True)
    assert event.legacy_id == "0x" + keccak.new(data=compressed + app, digest_bits=256).hexdigest()
    assert event.author == ALICE.hex  # the AMM signer, not the payload signer (NODE)
    assert (event.chat_id, event.channel_id) == (CHAT_ID, CHANNEL)
    assert (event.clock, event.timestamp_ms, event.content_type) == (T0 * 1000, T0 * 1000, 1)
    assert event.text == "hello **world**"
    assert (event.response_to, event.ens_name, event.display_name) == ("", "", "")
    assert event.facts == facts()


def test_the_bare_application_message_gives_the_same_event() -> None:
    app = application(ALICE, 1, sm.chat(text="bare"))
    bare = decode_application(wrapped(app, bare=True), NODE.hex, facts(), COMMUNITY_ID)
    assert bare == _decode(app)


def test_the_id_is_over_the_application_bytes_not_the_encryption_layer() -> None:
    app = application(ALICE, 1, sm.chat(text="x"))
    event = _decode(app)
    assert isinstance(event, ChatMessageEvent)
    assert (
        event.id != "0x" + keccak.new(data=ALICE.public + wrapped(app), digest_bits=256).hexdigest()
    )


def test_a_reply_an_ens_claim_and_a_display_name() -> None:
    target = "AB" * 32  # as some clients wrote it: no prefix, upper case
    _, event = _chat(
        text="yes", response_to=target, ens_name="vitalik.eth", display_name=" Alice_1 "
    )
    assert event.response_to == "0x" + "ab" * 32
    assert event.ens_name == "vitalik.eth"  # a claim, passed on as such
    assert event.display_name == "Alice_1"  # trimmed, as ValidateDisplayName leaves it


def test_an_ens_claim_longer_than_a_dns_name_is_dropped() -> None:
    _, event = _chat(ens_name="a" * 252 + ".eth")
    assert event.ens_name == ""


@pytest.mark.parametrize(
    "name",
    ["abcd", "a" * 25, "Alice<script>", "alice.eth", "alice_eth", "Darkorange Blue Bubblefish"],
)
def test_a_display_name_status_go_refuses_refuses_the_message(name: str) -> None:
    event = _decode(application(ALICE, 1, sm.chat(display_name=name)))
    assert isinstance(event, Undecodable) and event.reason == "refused"
    assert valid_display_name(name) is None


def test_a_sticker() -> None:
    _, event = _chat(
        text="Update to latest version to see a nice sticker here!", content_type=2,
        sticker=chat_message_pb2.StickerMessage(hash="e30101701220abcd", pack=1),
    )  # fmt: skip
    assert (event.content_type, event.sticker_hash) == (2, "e30101701220abcd")


@pytest.mark.parametrize(("data", "kind"), [(PNG, "png"), (GIF, "gif")])
def test_an_image_whose_bytes_sniff(data: bytes, kind: str) -> None:
    image = chat_message_pb2.ImageMessage(payload=data, format=1, album_id="album-1")
    _, event = _chat(text="", content_type=7, image=image)
    assert (event.image_type, event.image, event.image_size) == (kind, data, len(data))
    assert event.album_id == "album-1"


def test_an_image_that_is_svg_keeps_no_bytes() -> None:
    image = chat_message_pb2.ImageMessage(payload=SVG, format=1)  # says PNG, is SVG
    _, event = _chat(text="caption", content_type=7, image=image)
    assert (event.image_type, event.image, event.image_size) == ("", b"", len(SVG))
    assert event.text == "caption"


def test_an_image_over_the_cap_keeps_no_bytes() -> None:
    from waku_legacy.history.web.images import MAX_IMAGE_BYTES

    big = PNG + b"\x00" * MAX_IMAGE_BYTES
    _, event = _chat(
        text="", content_type=7, image=chat_message_pb2.ImageMessage(payload=big, format=1)
    )
    assert (event.image_type, event.image, event.image_size) == ("", b"", len(big))


@pytest.mark.parametrize(
    "image",
    [None, chat_message_pb2.ImageMessage(payload=b"", format=1),
     chat_message_pb2.ImageMessage(payload=PNG, format=0)],
)  # fmt: skip
def test_an_image_message_without_an_image_is_refused(image: object) -> None:
    fields = {} if image is None else {"image": image}
    event = _decode(application(ALICE, 1, sm.chat(text="", content_type=7, **fields)))
    assert isinstance(event, Undecodable) and event.reason == "refused"


def test_audio() -> None:
    audio = chat_message_pb2.AudioMessage(payload=b"\x00\x01", type=1, duration_ms=4200)
    _, event = _chat(text="audio", content_type=8, audio=audio)
    assert event.audio_duration_ms == 4200
    bad = chat_message_pb2.AudioMessage(payload=b"\x00\x01", type=0, duration_ms=1)
    refused = _decode(application(ALICE, 1, sm.chat(text="audio", content_type=8, audio=bad)))
    assert isinstance(refused, Undecodable) and refused.reason == "refused"


def test_a_discord_message() -> None:
    discord = chat_message_pb2.DiscordMessage(
        id="1", timestamp="2021-08-01T10:00:00+00:00", content="imported <b>hi</b>",
        author=chat_message_pb2.DiscordMessageAuthor(name="dave#1", nickname="Dave"),
    )  # fmt: skip
    _, event = _chat(text="", content_type=12, discord_message=discord)
    assert event.text == "imported <b>hi</b>"  # DiscordMessage.content, untouched
    assert (event.discord_author, event.discord_timestamp) == (
        "dave#1",
        "2021-08-01T10:00:00+00:00",
    )


def test_a_bridged_message() -> None:
    bridge = chat_message_pb2.BridgeMessage(bridgeName="discord", userName="eve", content="hey")
    _, event = _chat(text="", content_type=18, bridge_message=bridge)
    assert (event.text, event.bridge_name, event.bridge_author) == ("hey", "discord", "eve")
    nameless = chat_message_pb2.BridgeMessage(bridgeName="discord", content="hey")
    refused = _decode(
        application(ALICE, 1, sm.chat(text="", content_type=18, bridge_message=nameless))
    )
    assert isinstance(refused, Undecodable) and refused.reason == "refused"


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"clock": 0}, "refused"),
        ({"clock": (T0 + 121) * 1000}, "clock_skew"),  # over 120 s past the envelope
        ({"timestamp": 0}, "refused"),
        ({"text": "   "}, "refused"),
        ({"text": "x" * 4097}, "refused"),
        ({"chat_id": ""}, "refused"),
        ({"message_type": 0}, "refused"),
        ({"message_type": 4}, "refused"),
        ({"content_type": 0}, "refused"),
        ({"content_type": 5}, "refused"),  # transaction commands
        ({"content_type": 6}, "refused"),
        ({"content_type": 16}, "refused"),
    ],
)
def test_what_status_go_refuses(kwargs: dict[str, object], reason: str) -> None:
    event = _decode(application(ALICE, 1, sm.chat(**kwargs)))  # type: ignore[arg-type]
    assert isinstance(event, Undecodable) and event.reason == reason, event
    assert event.facts == facts()


def test_what_status_go_accepts_at_the_edges() -> None:
    _chat(clock=(T0 + 120) * 1000)  # exactly 120 s ahead
    _chat(text="é" * 4096)  # 4096 runes (more bytes)


def test_a_message_for_another_chat_has_no_channel() -> None:
    _, other = _chat(chat_id="0x02" + "11" * 32 + CHANNEL)
    assert other.channel_id == ""
    _, public = _chat(message_type=2)  # PUBLIC_GROUP: not routed to a community channel
    assert public.channel_id == ""
    _, upper = _chat(chat_id=COMMUNITY_ID + CHANNEL.upper())
    assert upper.channel_id == ""  # status-go matches chat ids exactly; a canonical uuid only


@pytest.mark.parametrize(
    ("reaction_type", "emoji"),
    [(1, "❤️"), (2, "👍"), (3, "👎"), (4, "😂"), (5, "😢"), (6, "😡")],
)
def test_reactions(reaction_type: int, emoji: str) -> None:
    target = "0x" + "cd" * 32
    app = application(BOB, 22, sm.reaction(target, reaction_type))
    event = _decode(app)
    assert event == ReactionEvent(
        _id(BOB, app), BOB.hex, target, CHAT_ID, T0 * 1000 + 7000, emoji, False, facts()
    )
    assert emoji_for(reaction_type) == emoji
    retracted = _decode(application(BOB, 22, sm.reaction(target, reaction_type, retracted=True)))
    assert isinstance(retracted, ReactionEvent) and retracted.retracted


@pytest.mark.parametrize("reaction_type", [0, 7])
def test_a_reaction_the_apps_cannot_draw_is_refused(reaction_type: int) -> None:
    event = _decode(application(BOB, 22, sm.reaction("0x" + "cd" * 32, reaction_type)))
    assert isinstance(event, Undecodable) and event.reason == "refused"
    assert emoji_for(reaction_type) == ""


def test_a_reaction_from_the_future_is_refused() -> None:
    event = _decode(application(BOB, 22, sm.reaction("0x" + "cd" * 32, 1, clock=(T0 + 200) * 1000)))
    assert isinstance(event, Undecodable) and event.reason == "clock_skew"


def test_edit_delete_pin_identity() -> None:
    target = "0x" + "cd" * 32
    app = application(
        ALICE, 29, sm.edit(target.upper().replace("0X", "0x"), "fixed", content_type=1)
    )
    assert _decode(app) == EditEvent(
        _id(ALICE, app), ALICE.hex, target, CHAT_ID, T0 * 1000 + 5000, "fixed", facts(), 1
    )
    app = application(BOB, 31, sm.delete(target))
    assert _decode(app) == DeleteEvent(
        _id(BOB, app), BOB.hex, target, CHAT_ID, T0 * 1000 + 6000, facts()
    )
    app = application(BOB, 28, sm.pin(target, pinned=False))
    assert _decode(app) == PinEvent(
        _id(BOB, app), BOB.hex, target, CHAT_ID, T0 * 1000 + 8000, False, facts()
    )
    app = application(ALICE, 24, sm.identity("Alice W", ens_name="alice.eth", clock=77))
    assert _decode(app) == IdentityEvent(ALICE.hex, 77, "Alice W", facts(), "alice.eth")


def _edit(**fields: object) -> bytes:
    message = {"clock": 1, "chat_id": CHAT_ID, "message_id": "0x01", "message_type": 5}
    return chat_message_pb2.EditMessage(**(message | {"text": "x"} | fields)).SerializeToString()


def _delete(**fields: object) -> bytes:
    message = {"clock": 1, "chat_id": CHAT_ID, "message_id": "0x01", "message_type": 5}
    return chat_message_pb2.DeleteMessage(**(message | fields)).SerializeToString()


@pytest.mark.parametrize(
    ("message_type", "data"),
    [
        (29, _edit(text=" ")),
        (29, _edit(clock=0)),
        (29, _edit(message_id="")),
        (29, _edit(message_type=4)),
        (31, _delete(chat_id="")),
        (31, _delete(message_type=0)),
        (24, sm.identity("Hard Tame Brownbutterfly")),  # an alias is no display name
        (24, sm.identity("x.eth")),
    ],
)
def test_invalid_edits_deletes_and_identities_are_refused(message_type: int, data: bytes) -> None:
    event = _decode(application(ALICE, message_type, data))
    assert isinstance(event, Undecodable) and event.reason == "refused", event


def test_other_application_types_are_not_history() -> None:
    event = _decode(application(ALICE, 25, b"\x08\x01"))
    assert isinstance(event, Undecodable) and event.reason == "not history"
    assert "25" in event.detail


def test_malformed_input_is_undecodable_with_a_reason() -> None:
    good = wrapped(application(ALICE, 1, sm.chat()))

    def decode(data: bytes, signer: str = NODE.hex, **kwargs: int) -> Undecodable:
        event = decode_application(data, signer, facts(), COMMUNITY_ID, **kwargs)
        assert isinstance(event, Undecodable), event
        assert event.detail and event.facts == facts()
        return event

    assert decode(good, "").reason == "no signature"
    assert decode(good, "0x04" + "00" * 64).reason == "bad signer"
    assert decode(good, "not hex").reason == "bad signer"
    assert decode(b"\xff\xff\xff").reason == "not a status message"
    assert decode(good, max_size=100).reason == "too large"
    unsigned = application_metadata_pb2.ApplicationMetadataMessage(
        payload=sm.chat(), type=1
    ).SerializeToString()
    assert decode(wrapped(unsigned)).reason == "signature"
    truncated = application(ALICE, 1, sm.chat()[:-3])
    assert decode(wrapped(truncated)).reason == "protobuf"
    assert decode(None).reason == "malformed"  # type: ignore[arg-type]


def test_the_default_size_bound() -> None:
    from waku_legacy.history.decode import MAX_APPLICATION_BYTES

    event = decode_application(
        b"\x00" * (MAX_APPLICATION_BYTES + 1), NODE.hex, facts(), COMMUNITY_ID
    )
    assert isinstance(event, Undecodable) and event.reason == "too large"


def test_no_mutation_raises() -> None:
    """Bit flips, truncations and splices of valid messages of every type: always an event."""
    target = "0x" + "cd" * 32
    samples = [
        wrapped(application(ALICE, 1, sm.chat(response_to=target, ens_name="a.eth"))),
        wrapped(application(ALICE, 1, sm.chat(
            content_type=7, image=chat_message_pb2.ImageMessage(payload=PNG, format=1)))),
        wrapped(application(BOB, 22, sm.reaction(target, 2))),
        wrapped(application(BOB, 29, sm.edit(target, "x"))),
        wrapped(application(BOB, 31, sm.delete(target))),
        wrapped(application(BOB, 28, sm.pin(target))),
        wrapped(application(BOB, 24, sm.identity("Bobby"))),
    ]  # fmt: skip
    rng = random.Random(35)
    for _ in range(600):
        data = bytearray(rng.choice(samples))
        action = rng.randrange(3)
        if action == 0:
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif action == 1:
            del data[rng.randrange(len(data)) :]
        else:
            cut = rng.randrange(len(data))
            data[cut:cut] = rng.randbytes(rng.randrange(1, 8))
        event = decode_application(bytes(data), NODE.hex, facts(), COMMUNITY_ID)
        assert event is not None
        if isinstance(event, Undecodable):
            assert event.reason and event.detail


@pytest.mark.parametrize("author", [sm.ALICE, sm.BOB, sm.CAROL, sm.NODE])
def test_the_legacy_id_uses_the_compressed_key_of_either_parity(author: sm.Person) -> None:
    app = application(author, 1, sm.chat())
    event = _decode(app)
    assert isinstance(event, ChatMessageEvent)
    compressed = author.key.public_key.format(compressed=True)  # coincurve's own compression
    assert event.legacy_id == "0x" + keccak.new(data=compressed + app, digest_bits=256).hexdigest()
