"""The native libp2p server side's codecs, sans-IO, against bytes written out by hand from
the specs (multistream-select, yamux ``spec.md``, mplex ``README.md``, libp2p peer ids) and
the Noise spec's own test vector (cacophony). Over real sockets, against py-libp2p and
js-waku clients, they are tested in test_p2p_listener, test_p2p_hostile, test_p2p_store
and test_p2p_jswaku_interop (``listener_class`` / ``[libp2p] server = "native"``)."""

from __future__ import annotations

import coincurve
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from waku_legacy.errors import LimitExceeded
from waku_legacy.p2p.codec.connection import (
    Libp2pConnectionFailed,
    Libp2pConnectionLimits,
    ListenerConnection,
    Muxed,
    Request,
    Secured,
    StreamFailed,
)
from waku_legacy.p2p.codec.dialler import DiallerConnection
from waku_legacy.p2p.codec.mplex import MplexSession
from waku_legacy.p2p.codec.multistream import (
    MultistreamDialler,
    MultistreamError,
    MultistreamListener,
)
from waku_legacy.p2p.codec.muxer_events import (
    MuxError,
    StreamData,
    StreamEnded,
    StreamOpened,
    StreamReset,
)
from waku_legacy.p2p.codec.noise import NoiseHandshake, XXHandshake, secp256k1_identity
from waku_legacy.p2p.codec.peer_key import decode_public_key, encode_public_key, peer_id
from waku_legacy.p2p.codec.yamux import YamuxSession
from waku_legacy.p2p.errors import (
    CodecRefused,
    GoAwayCode,
    MplexProtocolError,
    MplexUnreadOverflow,
    P2PError,
    PeerWentAway,
    SendBudgetClosed,
    UnsupportedPeerKey,
    YamuxProtocolError,
    YamuxUnreadOverflow,
)

# -- multistream-select ------------------------------------------------------------------------

HEADER = b"\x13/multistream/1.0.0\n"  # 19 bytes: "/multistream/1.0.0" and the newline


def test_multistream_agrees_answers_na_and_hands_on_the_rest() -> None:
    listener = MultistreamListener(lambda p: p == "/echo")
    out, agreed = listener.feed(HEADER[:5])
    assert (out, agreed) == (b"", None)
    out, agreed = listener.feed(HEADER[5:] + b"\x06/nope\n")
    assert out == HEADER + b"\x03na\n" and agreed is None
    out, agreed = listener.feed(b"\x06/echo\n\x02hi")  # lazy: the request follows at once
    assert out == b"\x06/echo\n"
    assert agreed is not None and (agreed.protocol, agreed.rest) == ("/echo", b"\x02hi")


@pytest.mark.parametrize(
    "prefix", [b"\x81\x08", b"\x80\x80\x80\x80\x08"], ids=["1025 bytes", "2^31 bytes"]
)
def test_multistream_refuses_a_long_message_at_its_length(prefix: bytes) -> None:
    listener = MultistreamListener(lambda p: True)
    listener.feed(HEADER)
    with pytest.raises(MultistreamError, match="over 1024"):
        listener.feed(prefix)  # no byte of the body needed


def test_multistream_needs_the_header_and_a_newline() -> None:
    with pytest.raises(MultistreamError, match="expected"):
        MultistreamListener(lambda p: True).feed(b"\x06/echo\n")
    listener = MultistreamListener(lambda p: True)
    listener.feed(HEADER)
    with pytest.raises(MultistreamError, match="newline"):
        listener.feed(b"\x05/echo")


def test_multistream_dialler_reads_the_echo_or_na() -> None:
    dialler = MultistreamDialler("/echo")
    assert dialler.proposal() == HEADER + b"\x06/echo\n"
    agreed = dialler.feed(HEADER + b"\x06/echo\n" + b"\x03hey")
    assert agreed is not None and agreed.rest == b"\x03hey"
    with pytest.raises(MultistreamError, match="refused"):
        MultistreamDialler("/echo").feed(HEADER + b"\x03na\n")


# -- yamux (hashicorp/yamux spec.md: version, type, flags, stream id, length) ----------------


def frame(typ: int, flags: int, stream: int, length: int) -> bytes:
    return (
        bytes([0, typ])
        + flags.to_bytes(2, "big")
        + stream.to_bytes(4, "big")
        + (length.to_bytes(4, "big"))
    )


def test_yamux_frame_layout_syn_ack_fin() -> None:
    session = YamuxSession()
    events = session.feed(bytes.fromhex("00000001 00000001 00000003".replace(" ", "")) + b"abc")
    assert events == [StreamOpened(1), StreamData(1, b"abc")]
    session.write(1, b"xy")  # our first frame on the peer's stream carries ACK (flag 2)
    session.close_stream(1)  # FIN (flag 4) on a WINDOW_UPDATE
    assert session.data_to_send() == (
        bytes.fromhex("00000002 00000001 00000002".replace(" ", "")) + b"xy"
        + bytes.fromhex("00010004 00000001 00000000".replace(" ", ""))
    )  # fmt: skip
    assert session.feed(frame(1, 4, 1, 0)) == [StreamEnded(1)]
    assert session.stream_count == 0  # both sides closed: forgotten


def test_yamux_acks_a_stream_it_has_nothing_to_say_on_yet_and_answers_pings() -> None:
    session = YamuxSession()
    session.feed(frame(1, 1, 3, 0) + frame(2, 1, 0, 42))  # SYN by window update; PING
    assert session.data_to_send() == frame(2, 2, 0, 42) + frame(1, 2, 3, 0)


def test_yamux_data_past_the_window_resets_and_goes_away_before_the_body() -> None:
    session = YamuxSession()
    session.feed(frame(0, 1, 1, 200 * 1024) + b"x" * 200 * 1024)
    session.data_to_send()
    with pytest.raises(MuxError, match="past the receive window") as caught:
        session.feed(frame(0, 0, 1, 100 * 1024))  # 56 KiB left: refused at the header
    assert caught.value.kind == "yamux_protocol_error"
    # RST on the stream (WINDOW_UPDATE, flag 8), then GO_AWAY with code 1 (protocol error)
    assert session.data_to_send() == frame(1, 8, 1, 0) + frame(3, 0, 0, 1)


def test_yamux_data_to_a_stream_it_reset_is_held_to_that_streams_window() -> None:
    session = YamuxSession()
    session.feed(frame(0, 1, 1, 1000) + b"x" * 1000)
    session.reset_stream(1)  # say, a malformed request: the peer's DATA may still be in flight
    session.data_to_send()
    assert session.feed(frame(0, 0, 1, 200 * 1024) + b"x" * 200 * 1024) == []  # dropped
    with pytest.raises(MuxError, match="past the receive window"):
        session.feed(frame(0, 0, 1, 60 * 1024))  # 255 KiB - 1000 B received: over
    assert session.data_to_send() == frame(1, 8, 1, 0) + frame(3, 0, 0, 1)
    # DATA to a stream the peer itself closed: a window's worth in all, then the same
    session = YamuxSession()
    session.feed(frame(1, 1 | 4, 3, 0))  # SYN and FIN at once
    session.close_stream(3)  # both sides closed: forgotten
    assert session.feed(frame(0, 0, 3, 256 * 1024) + b"y" * 256 * 1024) == []
    with pytest.raises(MuxError):
        session.feed(frame(0, 0, 3, 1))


def test_yamux_credits_consumed_bytes_and_waits_for_the_peers_window() -> None:
    session = YamuxSession()
    session.feed(frame(0, 1, 1, 100 * 1024) + b"x" * 100 * 1024)
    session.consumed(1, 100 * 1024)
    assert session.data_to_send() == frame(1, 2, 1, 0)  # under half a window: no credit
    session.consumed(1, 30 * 1024)
    assert session.data_to_send() == frame(1, 0, 1, 130 * 1024)
    session.write(1, b"y" * (300 * 1024))  # the peer's window: 256 KiB
    sent = session.data_to_send()
    assert len(sent) == 256 * 1024 + 4 * 12  # four 64 KiB DATA frames
    session.close_stream(1)
    assert session.data_to_send() == b""  # the FIN waits behind the data
    session.feed(frame(1, 0, 1, 44 * 1024))
    assert session.data_to_send() == frame(0, 0, 1, 44 * 1024) + b"y" * (44 * 1024) + (
        frame(1, 4, 1, 0)
    )


def test_yamux_counts_what_waits_for_the_peers_window_and_what_left() -> None:
    session = YamuxSession()
    session.feed(frame(1, 1, 1, 0) + frame(1, 1, 3, 0))
    assert session.send_room(1) == 256 * 1024
    session.write(1, b"a" * (300 * 1024))  # 44 KiB past the window wait
    session.write(3, b"b" * 1024)  # within its own window: sent at once
    session.data_to_send()
    assert (session.queued, session.stream_queued(1), session.send_room(1)) == (
        44 * 1024,
        44 * 1024,
        0,
    )
    assert session.waiting() == [(1, 256 * 1024)]
    assert session.sent == 257 * 1024
    session.feed(frame(1, 0, 1, 4 * 1024))  # the peer makes room for 4 KiB
    assert (session.queued, session.waiting()) == (40 * 1024, [(1, 260 * 1024)])
    session.reset_stream(1)  # what waited is dropped with it
    assert (session.queued, session.waiting()) == (0, [])
    session.write(3, b"c" * (300 * 1024))
    session.feed(frame(1, 8, 3, 0))  # the peer's RST drops what waited too
    assert session.queued == 0


def test_yamux_resets_a_stream_over_its_limit_and_ends_on_go_away() -> None:
    session = YamuxSession(max_streams=1)
    assert session.feed(frame(1, 1, 1, 0) + frame(1, 1, 3, 0)) == [StreamOpened(1)]
    assert session.data_to_send() == frame(1, 8, 3, 0) + frame(1, 2, 1, 0)
    assert session.feed(frame(1, 8, 1, 0)) == [StreamReset(1)]
    with pytest.raises(MuxError) as caught:
        session.feed(frame(3, 0, 0, 0))
    assert caught.value.kind == "peer_went_away"


# -- mplex (libp2p specs mplex/README.md: header = id << 3 | flag) ----------------------------


def test_mplex_flags_of_the_peers_stream() -> None:
    session = MplexSession()
    # NewStream (flag 0) of stream 3 named "3", MessageInitiator (2), CloseInitiator (4)
    events = session.feed(b"\x18\x013" + b"\x1a\x02hi" + b"\x1c\x00")
    assert events == [StreamOpened(6), StreamData(6, b"hi"), StreamEnded(6)]
    session.write(6, b"ok")  # MessageReceiver (1), then CloseReceiver (3)
    session.close_stream(6)
    assert session.data_to_send() == b"\x19\x02ok" + b"\x1b\x00"
    assert session.stream_count == 0


def test_mplex_reset_and_the_message_cap() -> None:
    session = MplexSession()
    assert session.feed(b"\x08\x00" + b"\x0e\x00") == [StreamOpened(2), StreamReset(2)]
    with pytest.raises(MuxError, match="bytes"):
        session.feed(b"\x0a\x81\x80\x40")  # a 1 MiB + 1 message: refused at its length


def test_mplex_our_streams_use_the_initiator_flags() -> None:
    session = MplexSession()
    key = session.open_stream()
    session.write(key, b"q")
    session.close_stream(key)
    assert session.data_to_send() == b"\x00\x010" + b"\x02\x01q" + b"\x04\x00"
    assert session.feed(b"\x01\x01a" + b"\x03\x00") == [StreamData(key, b"a"), StreamEnded(key)]


# -- keys and peer ids -------------------------------------------------------------------------


def test_secp256k1_public_key_and_peer_id() -> None:
    key = coincurve.PrivateKey(bytes(31) + b"\x01")
    compressed = key.public_key.format(compressed=True)
    encoded = encode_public_key(2, compressed)
    assert encoded == b"\x08\x02\x12\x21" + compressed  # Type = 2, Data = 33 bytes
    assert decode_public_key(encoded).data == compressed
    # 37 bytes: the identity multihash (0x00, length 37) in base58btc, nwaku's 16Uiu2...
    assert peer_id(encoded).startswith("16Uiu2")
    signature = key.sign(b"message")
    assert decode_public_key(encoded).verify(signature, b"message")
    assert not decode_public_key(encoded).verify(signature, b"other")


# -- Noise -------------------------------------------------------------------------------------

# The Noise spec's test vector for Noise_XX_25519_ChaChaPoly_SHA256 (cacophony.txt, as
# shipped in the noiseprotocol Python package's tests/vectors, commit 73375448): keys,
# prologue "John Galt", the payloads and what each message is on the wire.
VECTOR = {
    "prologue": "4a6f686e2047616c74",
    "init_static": "e61ef9919cde45dd5f82166404bd08e38bceb5dfdfded0a34c8df7ed542214d1",
    "init_ephemeral": "893e28b9dc6ca8d611ab664754b8ceb7bac5117349a4439a6b0569da977c464a",
    "resp_static": "4a3acbfdb163dec651dfa3194dece676d437029c62a408b4c5ea9114246e4893",
    "resp_ephemeral": "bbdb4cdbd309f1a1f2e1456967fe288cadd6f712d65dc7b7793d5e63da6b375b",
    "handshake_hash": "c8e5f64e846193be2a834104c2a009868d6c9f3bd3c186299888b488b2f1f58e",
    "messages": [
        ("4c756477696720766f6e204d69736573",
         "ca35def5ae56cec33dc2036731ab14896bc4c75dbb07a61f879f8e3afa4c7944"
         "4c756477696720766f6e204d69736573"),
        ("4d757272617920526f746862617264",
         "95ebc60d2b1fa672c1f46a8aa265ef51bfe38e7ccb39ec5be34069f14480884381cbad1f276e"
         "038c48378ffce2b65285e08d6b68aaa3629a5a8639392490e5b9bd5269c2f1e4f488ed883116"
         "1f19b7815528f8982ffe09be9b5c412f8a0db50f8814c7194e83f23dbd8d162c9326ad"),
        ("462e20412e20486179656b",
         "c7195ffacac1307ff99046f219750fc47693e23c3cb08b89c2af808b444850a80ae475b9df0f"
         "169ae80a89be0865b57f58c9fea0d4ec82a286427402f113e4b6ae769a1d95941d49b25030"),
        ("4361726c204d656e676572", "96763ed773f8e47bb3712f0e29b3060ffc956ffc146cee53d5e1df"),
        ("4a65616e2d426170746973746520536179",
         "3e40f15f6f3a46ae446b253bf8b1d9ffb6ed9b174d272328ff91a7e2e5c79c07f5"),
        ("457567656e2042f6686d20766f6e2042617765726b",
         "eb3f3515110702e047a6c9da4478b6ead94873c11c0f2d710ddb3f09fce024b3a58502ae3f"),
    ],
}  # fmt: skip


def _side(initiator: bool) -> XXHandshake:
    who = "init" if initiator else "resp"
    return XXHandshake(
        initiator=initiator,
        static=X25519PrivateKey.from_private_bytes(bytes.fromhex(str(VECTOR[f"{who}_static"]))),
        ephemeral=X25519PrivateKey.from_private_bytes(
            bytes.fromhex(str(VECTOR[f"{who}_ephemeral"]))
        ),
        prologue=bytes.fromhex(str(VECTOR["prologue"])),
    )


def test_noise_xx_matches_the_spec_vector() -> None:
    initiator, responder = _side(True), _side(False)
    messages = [(bytes.fromhex(p), bytes.fromhex(c)) for p, c in VECTOR["messages"]]
    for index, (payload, ciphertext) in enumerate(messages[:3]):
        writer, reader = (initiator, responder) if index % 2 == 0 else (responder, initiator)
        assert writer.write(payload) == ciphertext
        assert reader.read(ciphertext) == payload
    handshake_hash = bytes.fromhex(str(VECTOR["handshake_hash"]))
    assert initiator.handshake_hash == responder.handshake_hash == handshake_hash
    initiator_sends, responder_sends = initiator.split()
    for index, (payload, ciphertext) in enumerate(messages[3:]):  # the turns go on
        cipher = responder_sends if index % 2 == 0 else initiator_sends
        assert cipher.encrypt(payload) == len(ciphertext).to_bytes(2, "big") + ciphertext


def test_libp2p_noise_refuses_a_signature_of_another_static_key() -> None:
    me = secp256k1_identity(coincurve.PrivateKey())
    other = secp256k1_identity(coincurve.PrivateKey())
    liar = secp256k1_identity(coincurve.PrivateKey())
    liar = type(liar)(other.public_key, liar.sign)  # claims other's key, signs with its own
    for initiator_identity, ok in ((me, True), (liar, False)):
        initiator = NoiseHandshake(initiator_identity, initiator=True)
        responder = NoiseHandshake(other, initiator=False)
        third = initiator.feed(responder.feed(initiator.start()))
        if ok:
            responder.feed(third)
            assert responder.remote is not None and responder.remote.encoded == me.public_key
        else:
            with pytest.raises(Exception, match="signature"):
                responder.feed(third)


# -- a whole connection, dialler against listener, in memory ----------------------------------


@pytest.mark.parametrize("muxer", ["yamux", "mplex"])
def test_dialler_and_listener_connections_in_memory(muxer: str) -> None:
    limits = Libp2pConnectionLimits(requests={"/echo": 100}, max_streams=2)
    listener = ListenerConnection(
        secp256k1_identity(coincurve.PrivateKey()), limits, lambda: b"identify"
    )
    dialler = DiallerConnection(secp256k1_identity(coincurve.PrivateKey()), muxer)
    first = dialler.request("/echo", b"hello")  # written before the handshake ends
    second = dialler.request("/echo", b"x" * 101)  # over the request cap
    events: list = []
    answers: list = []
    for _ in range(6):
        events += listener.receive(dialler.data_to_send(), now=0.0)
        for event in events:
            if isinstance(event, Request) and event.body == b"hello":
                listener.respond(event.stream, b"echo:hello", now=0.0)
        answers += dialler.receive(listener.data_to_send())
    kinds = [type(e) for e in events]
    assert kinds[:2] == [Secured, Muxed] and Request in kinds
    assert [e.kind for e in events if isinstance(e, StreamFailed)] == ["request_too_large"]
    assert isinstance(next(e for e in events if isinstance(e, StreamFailed)).error, LimitExceeded)
    by_stream = {a.stream: a for a in answers}
    assert by_stream[first].body == b"echo:hello"
    assert by_stream[second].body is None and by_stream[second].error is not None


def test_listener_connection_refuses_a_plaintext_peer() -> None:
    listener = ListenerConnection(
        secp256k1_identity(coincurve.PrivateKey()), Libp2pConnectionLimits(), lambda: b""
    )
    with pytest.raises(Libp2pConnectionFailed):
        listener.receive(HEADER + b"\x0b/plaintext\n" * 5, now=0.0)  # five refusals: over 4


def _der(tag: int, body: bytes) -> bytes:
    """A DER TLV (X.690), lengths up to 65,535 bytes."""
    if len(body) < 0x80:
        return bytes((tag, len(body))) + body
    size = len(body).to_bytes(2 if len(body) > 0xFF else 1, "big")
    return bytes((tag, 0x80 | len(size))) + size + body


def _der_int(value: int) -> bytes:
    return _der(0x02, value.to_bytes(value.bit_length() // 8 + 1, "big"))


def _rsa_spki(modulus: int, exponent: int) -> bytes:
    """SubjectPublicKeyInfo { rsaEncryption (1.2.840.113549.1.1.1), NULL } with
    RSAPublicKey { n, e } (RFC 8017 A.1.1, RFC 5280 4.1), written by hand."""
    algorithm = _der(0x30, _der(0x06, bytes.fromhex("2a864886f70d010101")) + b"\x05\x00")
    key = _der(0x30, _der_int(modulus) + _der_int(exponent))
    return _der(0x30, algorithm + _der(0x03, b"\x00" + key))


@pytest.mark.parametrize(
    ("bits", "exponent", "accepted"),
    [
        (2048, 65537, True),  # what go-libp2p and js-libp2p generate
        (2048, 3, True),
        (2048, 2**31 - 1, True),
        (8192, 65537, True),  # go-libp2p's and js-libp2p's largest
        (2048, 2**31 + 1, False),  # over Go's 2^31-1
        (3072, 2**3070 + 1, False),  # the 3071-bit exponent
        (2048, 65536, False),  # even
        (2048, 1, False),
        (2047, 65537, False),  # under go-libp2p's MinRsaKeyBits
        (8193, 65537, False),  # over maxRsaKeyBits
    ],
)
def test_rsa_identity_keys_within_libp2ps_bounds(bits: int, exponent: int, accepted: bool) -> None:
    from waku_legacy.errors import DecodeError

    modulus = (1 << (bits - 1)) | 0xF1  # odd, exactly `bits` bits
    encoded = encode_public_key(0, _rsa_spki(modulus, exponent))
    if accepted:
        assert decode_public_key(encoded).key_type == 0
    else:
        with pytest.raises(DecodeError):
            decode_public_key(encoded)


def test_mplex_paced_sends_what_the_socket_takes_the_streams_in_turn() -> None:
    """A paced session (the listener's) sends no more than the room it is given; the rest
    waits per stream and leaves in turns of 64 KiB; Close follows a stream's last byte."""
    session = MplexSession(paced=True)
    session.feed(b"\x08\x011" + b"\x10\x012")  # NewStream 1 and 2 (keys 2 and 4)
    session.write(2, b"a" * 100_000)
    session.write(4, b"b" * 100_000)
    session.close_stream(2)
    assert session.data_to_send() == b""  # no room given yet
    assert session.queued == 200_000 and session.waiting() == [(2, 0), (4, 0)]
    session.allow(70_000)  # 64 KiB of stream 1, then the 4,464 bytes left for stream 2
    out = session.data_to_send()
    # MessageReceiver (flag 1) of stream 1: header 0x09, varint 65536 = 80 80 04
    assert out.startswith(b"\x09\x80\x80\x04" + b"a" * 65536)
    assert out.endswith(b"\x11\xf0\x22" + b"b" * 4464)  # stream 2: 0x11, varint 4464
    assert session.waiting() == [(2, 65536), (4, 4464)]
    session.allow(1 << 20)
    out = session.data_to_send()
    # stream 1's last 34,464 bytes and CloseReceiver (0x0b), stream 2's 95,536 in two turns
    assert out.endswith(
        b"\x0b\x00" + b"\x11\x80\x80\x04" + b"b" * 65536 + b"\x11\xb0\xea\x01" + b"b" * 30000
    )
    assert session.queued == 0 and session.waiting() == []


@pytest.mark.parametrize("muxer", ["yamux", "mplex"])
def test_a_stream_whose_bytes_make_no_progress_for_write_timeout_is_reset(muxer: str) -> None:
    """yamux: the window stays shut; paced mplex: the socket takes nothing. Either way the
    answer's bytes wait; a stream that sent nothing more for write_timeout is reset (and
    what it held dropped). Before, mplex had no such deadline (nothing waited per stream)."""
    limits = Libp2pConnectionLimits(requests={"/big": 100}, max_unsent=8 << 20, write_timeout=5.0)
    listener = ListenerConnection(
        secp256k1_identity(coincurve.PrivateKey()), limits, lambda: b"", paced=True
    )
    dialler = DiallerConnection(secp256k1_identity(coincurve.PrivateKey()), muxer)
    streams = [dialler.request("/big", b"page") for _ in range(2)]
    requests: list[Request] = []
    for _ in range(6):
        requests += [e for e in listener.receive(dialler.data_to_send(), 0.0)
                     if isinstance(e, Request)]  # fmt: skip
        listener.socket_room(1 << 20, 0.0)
        dialler.receive(listener.data_to_send())
    assert len(requests) == len(streams)
    for request in requests:  # 600 KB each: past yamux's 256 KiB window
        assert listener.respond(request.stream, b"x" * 600_000, now=0.0)
    listener.socket_room(300_000, 0.0)  # mplex: the socket takes some, then nothing
    listener.data_to_send()  # (the dialler reads none of it: no WINDOW_UPDATE either)
    assert listener.queued > 0
    assert listener.stalled_sends(1.0) == []
    assert listener.stalled_sends(5.5) == []  # 4.5 s without progress: not yet
    assert sorted(listener.stalled_sends(6.5)) == sorted(r.stream for r in requests)
    assert listener.queued == 0


# -- typed connection errors (issue 36): each carries its counter and GO_AWAY code -----------


def test_an_mplex_overflow_is_a_mux_error_not_a_yamux_one() -> None:
    session = MplexSession()
    with pytest.raises(MuxError) as caught:
        session.feed(b"\x0a\x81\x80\x40")  # a 1 MiB + 1 message
    failure = caught.value.failure(caught.value)
    assert isinstance(failure, MplexProtocolError) and isinstance(failure, Libp2pConnectionFailed)
    assert not isinstance(failure, YamuxProtocolError)
    assert (failure.counter, failure.kind, failure.go_away) == ("mux_error", "mux_error", None)
    assert session.data_to_send() == b""  # mplex has no GO_AWAY: nothing said


def test_a_yamux_error_sends_the_go_away_code_it_carries() -> None:
    session = YamuxSession()
    with pytest.raises(MuxError) as caught:
        session.feed(frame(0, 1, 1, 300 * 1024))  # past the 256 KiB window at the header
    assert caught.value.failure is YamuxProtocolError
    assert YamuxProtocolError.go_away == GoAwayCode.PROTOCOL_ERROR == 1
    assert session.data_to_send().endswith(frame(3, 0, 0, YamuxProtocolError.go_away))
    session = YamuxSession()
    with pytest.raises(MuxError) as caught:
        session.feed(frame(3, 0, 0, 2))  # the peer's GO_AWAY: we say nothing back
    assert caught.value.failure is PeerWentAway and PeerWentAway.go_away is None
    assert caught.value.kind == "peer_went_away"


def test_every_connection_error_keeps_its_counter_name() -> None:
    expected = {
        CodecRefused: ("connection_error", None),
        UnsupportedPeerKey: ("unsupported_key", None),
        YamuxProtocolError: ("yamux_protocol_error", GoAwayCode.PROTOCOL_ERROR),
        YamuxUnreadOverflow: ("yamux_protocol_error", GoAwayCode.INTERNAL_ERROR),
        MplexProtocolError: ("mux_error", None),
        MplexUnreadOverflow: ("mux_error", None),
        PeerWentAway: ("peer_went_away", None),
        SendBudgetClosed: ("send_budget_closed", GoAwayCode.INTERNAL_ERROR),
    }
    for cls, (counter, code) in expected.items():
        assert (cls.counter, cls.go_away) == (counter, code), cls
        error = cls(ValueError("why"))
        assert isinstance(error, P2PError) and str(error) == "why" and error.kind == counter


def test_a_plaintext_peer_is_a_codec_refusal() -> None:
    listener = ListenerConnection(
        secp256k1_identity(coincurve.PrivateKey()), Libp2pConnectionLimits(), lambda: b""
    )
    with pytest.raises(CodecRefused) as caught:
        listener.receive(HEADER + b"\x0b/plaintext\n" * 5, now=0.0)
    assert caught.value.counter == "connection_error"
    assert isinstance(caught.value.error, MultistreamError)
