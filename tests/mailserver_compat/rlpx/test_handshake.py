"""RLPx handshake against every EIP-8 vector (auth/ack in v4, EIP-8 and EIP-8-with-extras
formats, B's derived secrets and ingress MAC, the Hello packet), plus round trips."""

from __future__ import annotations

import pytest

from waku_legacy.crypto.secp256k1 import generate_private_key, private_key_from_bytes, public_key_of
from waku_legacy.mailserver_compat.rlpx import handshake as hs
from waku_legacy.mailserver_compat.rlpx.errors import HandshakeError, ProtocolViolation
from waku_legacy.mailserver_compat.rlpx.p2p import Capability, Hello
from waku_legacy.mailserver_compat.rlpx.reasons import DisconnectReason


@pytest.fixture(scope="module")
def v(vectors):
    data = vectors("rlpx-eip8.json")
    keys = {
        name: private_key_from_bytes(bytes.fromhex(data[name]))
        for name in ("static_key_a", "static_key_b", "ephemeral_key_a", "ephemeral_key_b")
    }
    return data, keys


def _pub64(key) -> bytes:
    return public_key_of(key)[1:]


def _vector_body(data, name: str, key, plain_size: int, eip8: bool) -> bytes:
    """The body of handshake packet ``name``, decrypted with ``key``: the whole vector is
    one packet, in the format (EIP-8 or not) the vector is."""
    packet = bytes.fromhex(data[name])
    taken = hs.read_handshake_packet(packet, key, plain_size)
    assert taken is not None
    raw, body, got_eip8 = taken
    assert raw == packet and got_eip8 is eip8
    return body


@pytest.mark.parametrize(
    ("name", "eip8", "version"),
    [
        ("auth1_v4_format", False, 4),
        ("auth2_eip8_v4", True, 4),
        ("auth3_eip8_v56_extra", True, 56),
    ],
)
def test_auth_vectors_decode(v, name: str, eip8: bool, version: int) -> None:
    data, keys = v
    body = _vector_body(data, name, keys["static_key_b"], hs.AUTH_PLAIN_SIZE, eip8)
    auth = hs.decode_auth_body(body, eip8=eip8)
    assert auth.version == version
    assert auth.initiator_public_key == _pub64(keys["static_key_a"])
    assert auth.nonce.hex() == data["nonce_a"]
    # The signature recovers A's ephemeral key: proves ECDH(static) and xor(token, nonce).
    recipient = hs.Recipient(keys["static_key_b"])
    assert recipient.remote_ephemeral_key(auth) == _pub64(keys["ephemeral_key_a"])


@pytest.mark.parametrize(
    ("name", "eip8", "version"),
    [
        ("ack1_v4_format", False, 4),
        ("ack2_eip8_v4", True, 4),
        ("ack3_eip8_v57_extra", True, 57),
    ],
)
def test_ack_vectors_decode(v, name: str, eip8: bool, version: int) -> None:
    data, keys = v
    body = _vector_body(data, name, keys["static_key_a"], hs.ACK_PLAIN_SIZE, eip8)
    ack = hs.decode_ack_body(body, eip8=eip8)
    assert ack.version == version
    assert ack.ephemeral_public_key == _pub64(keys["ephemeral_key_b"])
    assert ack.nonce.hex() == data["nonce_b"]


def test_secrets_and_ingress_mac_match_vector_on_both_sides(v) -> None:
    data, keys = v
    auth_packet = bytes.fromhex(data["auth2_eip8_v4"])
    ack_packet = bytes.fromhex(data["ack2_eip8_v4"])
    expected = data["expected_b_for_auth2_ack2"]

    b = hs.Recipient(
        keys["static_key_b"],
        ephemeral_key=keys["ephemeral_key_b"],
        nonce=bytes.fromhex(data["nonce_b"]),
    )
    taken = hs.read_handshake_packet(auth_packet, keys["static_key_b"], hs.AUTH_PLAIN_SIZE)
    assert taken is not None
    auth = hs.decode_auth_body(taken[1], eip8=True)
    b_secrets = b.secrets(auth, auth_packet, ack_packet, b.remote_ephemeral_key(auth))
    assert b_secrets.aes.hex() == expected["aes_secret"]
    assert b_secrets.mac.hex() == expected["mac_secret"]
    assert b_secrets.remote_public_key == _pub64(keys["static_key_a"])
    b_secrets.ingress_mac.update(b"foo")
    assert b_secrets.ingress_mac.digest().hex() == expected["ingress_mac_after_foo"]

    # A reads the ack vector; with the vector's auth as "its" packet it must agree with B.
    a = hs.Initiator(
        keys["static_key_a"],
        _pub64(keys["static_key_b"]),
        ephemeral_key=keys["ephemeral_key_a"],
        nonce=bytes.fromhex(data["nonce_a"]),
    )
    a.auth_packet = auth_packet
    result = a.read_ack(ack_packet)
    assert result is not None
    a_secrets, used = result
    assert used == len(ack_packet)
    assert a_secrets.aes.hex() == expected["aes_secret"]
    assert a_secrets.mac.hex() == expected["mac_secret"]
    a_secrets.egress_mac.update(b"foo")
    assert a_secrets.egress_mac.digest().hex() == expected["ingress_mac_after_foo"]


def test_hello_vector_decodes_ignoring_extra_elements(v) -> None:
    data, keys = v
    hello = Hello.decode(bytes.fromhex(data["devp2p_hello_v22_extra_elements"]))
    assert hello.version == 55
    assert hello.client_id == "kneth/v0.91/plan9"
    assert hello.capabilities == (Capability("eth", 61), Capability("mork", 22))
    assert hello.listen_port == 9999
    assert hello.node_id == _pub64(keys["static_key_a"])


@pytest.mark.parametrize("eip8", [True, False])
def test_fresh_handshake_round_trip_agrees_on_secrets(eip8: bool) -> None:
    key_a, key_b = generate_private_key(), generate_private_key()
    a = hs.Initiator(key_a, public_key_of(key_b), eip8=eip8)
    b = hs.Recipient(key_b)
    # Fed one byte at a time: the reader must wait, never guess.
    auth = a.auth_packet
    for cut in range(len(auth)):
        assert b.read_auth(auth[:cut]) is None
    result = b.read_auth(auth + b"next")
    assert result is not None
    ack, b_secrets, used = result
    assert used == len(auth)
    # A pre-EIP-8 auth is answered with a pre-EIP-8 ack, as go-ethereum does.
    assert (len(ack) == hs.ACK_PLAIN_SIZE) is not eip8
    a_result = a.read_ack(ack)
    assert a_result is not None
    a_secrets, _ = a_result
    assert a_secrets.aes == b_secrets.aes and a_secrets.mac == b_secrets.mac
    assert a_secrets.remote_public_key == _pub64(key_b)
    assert b_secrets.remote_public_key == _pub64(key_a)
    assert a_secrets.egress_mac.digest() == b_secrets.ingress_mac.digest()
    assert a_secrets.ingress_mac.digest() == b_secrets.egress_mac.digest()


def test_eip8_auth_has_padding_and_size_prefix() -> None:
    key_a, key_b = generate_private_key(), generate_private_key()
    packet = hs.Initiator(key_a, public_key_of(key_b), padding=150).auth_packet
    assert int.from_bytes(packet[:2], "big") == len(packet) - 2
    # rlp body (~170 bytes) + 150 padding + ECIES overhead
    assert len(packet) > 2 + 150 + 113 + 160


def test_auth_for_another_node_is_rejected() -> None:
    key_a, key_b, key_c = (generate_private_key() for _ in range(3))
    auth = hs.Initiator(key_a, public_key_of(key_b)).auth_packet
    with pytest.raises(HandshakeError, match="cannot decrypt"):
        hs.Recipient(key_c).read_auth(auth)


@pytest.mark.parametrize(
    "garbage",
    [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"\xff" * 40, b"\x00\x05hello"],
)
def test_garbage_is_rejected_without_waiting(garbage: bytes) -> None:
    with pytest.raises(HandshakeError):
        hs.Recipient(generate_private_key()).read_auth(garbage)


def test_garbage_with_plausible_size_is_rejected_once_complete() -> None:
    garbage = (300).to_bytes(2, "big") + bytes(range(256)) + bytes(44)
    recipient = hs.Recipient(generate_private_key())
    assert recipient.read_auth(garbage[:100]) is None
    with pytest.raises(HandshakeError, match="cannot decrypt"):
        recipient.read_auth(garbage)


def test_hello_with_short_node_id_is_an_identity_error() -> None:
    hello = Hello(5, "x", (Capability("waku", 1),), 0, b"\x01" * 63)
    with pytest.raises(ProtocolViolation) as info:
        Hello.decode(hello.encode())
    assert info.value.disconnect_reason is DisconnectReason.INVALID_IDENTITY
