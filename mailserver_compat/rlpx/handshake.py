"""The RLPx encryption handshake (auth / ack), sans-IO.

EIP-8 packets are ``size (u16 BE) || ECIES(remote static key, rlp(body) || padding)`` with
the 2-byte size as the ECIES shared MAC data; bodies are

- auth: ``[signature 65, initiator static pubkey 64, nonce 32, version, ...]``
- ack:  ``[recipient ephemeral pubkey 64, nonce 32, version, ...]``

(extra elements ignored). The pre-EIP-8 format (fixed 307-byte auth / 210-byte ack, ECIES
without MAC data) is accepted on receive, and a pre-EIP-8 auth is answered with a
pre-EIP-8 ack, as go-ethereum does. The signature is over
``ecdh(static keys) XOR initiator nonce`` by the initiator's ephemeral key, so the
recipient recovers the initiator's ephemeral public key from it.

Secrets (go-ethereum p2p/rlpx): ``shared = keccak(eph || keccak(nonce_resp ||
nonce_init))``, ``aes = keccak(eph || shared)``, ``mac = keccak(eph || aes)``; the
initiator's egress MAC starts as ``keccak(mac XOR nonce_resp || auth packet)`` and its
ingress MAC as ``keccak(mac XOR nonce_init || ack packet)`` (mirrored for the recipient).
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass

import coincurve
import rlp

from waku_legacy.crypto import ecies
from waku_legacy.crypto.keccak import KeccakState, keccak256
from waku_legacy.crypto.secp256k1 import (
    ecdh_raw_x,
    generate_private_key,
    public_key_of,
    recover_public_key,
    sign_recoverable,
    uncompressed_public_key,
)
from waku_legacy.errors import CryptoError
from waku_legacy.mailserver_compat.rlp_fields import (
    as_bytes,
    as_uint,
    decode_prefix,
    list_at_least,
)
from waku_legacy.mailserver_compat.rlpx.errors import HandshakeError, RlpxDecodeError

__all__ = [
    "ACK_PLAIN_SIZE",
    "AUTH_PLAIN_SIZE",
    "HANDSHAKE_VERSION",
    "MAX_HANDSHAKE_PACKET",
    "AckMessage",
    "AuthMessage",
    "Initiator",
    "Recipient",
    "Secrets",
    "decode_ack_body",
    "decode_auth_body",
    "derive_secrets",
    "read_handshake_packet",
    "xor",
]

HANDSHAKE_VERSION = 4
_SIG, _PUB, _NONCE = 65, 64, 32
# Pre-EIP-8 plaintexts: auth = sig || keccak(eph pub) || pub || nonce || 0x00, ack =
# eph pub || nonce || 0x00; ciphertexts add the ECIES overhead.
AUTH_PLAIN_SIZE = _SIG + 32 + _PUB + _NONCE + 1 + ecies.OVERHEAD  # 307
ACK_PLAIN_SIZE = _PUB + _NONCE + 1 + ecies.OVERHEAD  # 210
# A real EIP-8 auth is under 700 bytes; go-ethereum refuses handshake packets over 2 KiB
# (its baseProtocolMaxMsgSize). Garbage such as an HTTP request parses as a huge size.
MAX_HANDSHAKE_PACKET = 2048
_PAD_MIN, _PAD_MAX = 100, 300


def xor(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b, "big")).to_bytes(len(a), "big")


def _pub64(public_key: bytes) -> bytes:
    """64-byte ``X || Y`` form of a 33/64/65-byte public key (validated on the curve)."""
    try:
        return uncompressed_public_key(public_key)[1:]
    except CryptoError as exc:
        raise HandshakeError("RLPx handshake", f"invalid public key: {exc}") from exc


@dataclass(frozen=True, slots=True)
class AuthMessage:
    signature: bytes
    initiator_public_key: bytes  # 64 bytes
    nonce: bytes
    version: int
    eip8: bool


@dataclass(frozen=True, slots=True)
class AckMessage:
    ephemeral_public_key: bytes  # 64 bytes
    nonce: bytes
    version: int
    eip8: bool


@dataclass(slots=True)
class Secrets:
    """Session secrets: AES and MAC keys and the two running MAC states."""

    aes: bytes
    mac: bytes
    egress_mac: KeccakState
    ingress_mac: KeccakState
    remote_public_key: bytes  # 64 bytes, the peer's static node key


def decode_auth_body(body: bytes, *, eip8: bool) -> AuthMessage:
    """Decode a decrypted auth body (RLP for EIP-8, fixed layout for pre-EIP-8)."""
    if not eip8:
        if len(body) != AUTH_PLAIN_SIZE - ecies.OVERHEAD:
            raise HandshakeError("RLPx auth", f"pre-EIP-8 body is {len(body)} bytes, need 194")
        # The keccak(ephemeral pubkey) field is skipped, as go-ethereum does.
        return AuthMessage(
            signature=body[:_SIG],
            initiator_public_key=body[_SIG + 32 : _SIG + 32 + _PUB],
            nonce=body[_SIG + 32 + _PUB : _SIG + 32 + _PUB + _NONCE],
            version=HANDSHAKE_VERSION,
            eip8=False,
        )
    what = "RLPx auth body"
    fields = list_at_least(decode_prefix(body, what, RlpxDecodeError), what, 4, RlpxDecodeError)
    return AuthMessage(
        signature=as_bytes(fields[0], what, "signature", RlpxDecodeError, size=_SIG),
        initiator_public_key=as_bytes(fields[1], what, "public key", RlpxDecodeError, size=_PUB),
        nonce=as_bytes(fields[2], what, "nonce", RlpxDecodeError, size=_NONCE),
        version=as_uint(fields[3], what, "version", RlpxDecodeError, bits=64),
        eip8=True,
    )


def decode_ack_body(body: bytes, *, eip8: bool) -> AckMessage:
    if not eip8:
        if len(body) != ACK_PLAIN_SIZE - ecies.OVERHEAD:
            raise HandshakeError("RLPx ack", f"pre-EIP-8 body is {len(body)} bytes, need 97")
        return AckMessage(
            ephemeral_public_key=body[:_PUB],
            nonce=body[_PUB : _PUB + _NONCE],
            version=HANDSHAKE_VERSION,
            eip8=False,
        )
    what = "RLPx ack body"
    fields = list_at_least(decode_prefix(body, what, RlpxDecodeError), what, 3, RlpxDecodeError)
    return AckMessage(
        ephemeral_public_key=as_bytes(fields[0], what, "ephemeral key", RlpxDecodeError, size=_PUB),
        nonce=as_bytes(fields[1], what, "nonce", RlpxDecodeError, size=_NONCE),
        version=as_uint(fields[2], what, "version", RlpxDecodeError, bits=64),
        eip8=True,
    )


def read_handshake_packet(
    buffer: bytes | bytearray, private_key: coincurve.PrivateKey, plain_size: int
) -> tuple[bytes, bytes, bool] | None:
    """Take one auth or ack packet off the front of ``buffer``.

    Returns ``(packet bytes as received, decrypted body, eip8)`` or ``None`` when more bytes
    are needed. ``plain_size`` is the pre-EIP-8 packet size (307 for auth, 210 for ack).
    A packet starting with 0x04 may be pre-EIP-8 (an ECIES ephemeral key); it is tried that
    way first once ``plain_size`` bytes are in, then as EIP-8.
    """
    if not buffer:
        return None
    if buffer[0] == 0x04:
        if len(buffer) < plain_size:
            return None
        packet = bytes(buffer[:plain_size])
        try:
            return packet, ecies.decrypt(private_key, packet), False
        except CryptoError:
            pass  # not pre-EIP-8; read as EIP-8 below
    if len(buffer) < 2:
        return None
    size = int.from_bytes(buffer[:2], "big")
    if size > MAX_HANDSHAKE_PACKET:
        raise HandshakeError(
            "RLPx handshake packet",
            f"declared size {size} is over the {MAX_HANDSHAKE_PACKET}-byte limit "
            "(not an RLPx peer?)",
        )
    if size < ecies.OVERHEAD:
        raise HandshakeError("RLPx handshake packet", f"declared size {size} is too small")
    if len(buffer) < 2 + size:
        return None
    packet = bytes(buffer[: 2 + size])
    try:
        body = ecies.decrypt(private_key, packet[2:], shared_mac_data=packet[:2])
    except CryptoError as exc:
        raise HandshakeError(
            "RLPx handshake packet", f"cannot decrypt with this node's key ({exc})"
        ) from exc
    return packet, body, True


def _seal_eip8(body: bytes, remote_public_key: bytes, padding: int | None) -> bytes:
    pad = padding if padding is not None else random.randrange(_PAD_MIN, _PAD_MAX)
    plain = body + bytes(pad)
    prefix = (len(plain) + ecies.OVERHEAD).to_bytes(2, "big")
    return prefix + ecies.encrypt(b"\x04" + remote_public_key, plain, prefix)


def derive_secrets(
    *,
    initiator: bool,
    ephemeral_key: coincurve.PrivateKey,
    remote_ephemeral_public_key: bytes,
    initiator_nonce: bytes,
    recipient_nonce: bytes,
    auth_packet: bytes,
    ack_packet: bytes,
    remote_public_key: bytes,
) -> Secrets:
    try:
        ephemeral_shared = ecdh_raw_x(ephemeral_key, remote_ephemeral_public_key)
    except CryptoError as exc:
        raise HandshakeError("RLPx handshake", f"bad remote ephemeral key: {exc}") from exc
    shared = keccak256(ephemeral_shared + keccak256(recipient_nonce + initiator_nonce))
    aes = keccak256(ephemeral_shared + shared)
    mac = keccak256(ephemeral_shared + aes)
    mac_after_auth = KeccakState(xor(mac, recipient_nonce) + auth_packet)
    mac_after_ack = KeccakState(xor(mac, initiator_nonce) + ack_packet)
    egress, ingress = (
        (mac_after_auth, mac_after_ack) if initiator else (mac_after_ack, mac_after_auth)
    )
    return Secrets(aes, mac, egress, ingress, remote_public_key)


class Initiator:
    """The dialling side: builds the auth packet, then reads the ack."""

    def __init__(
        self,
        private_key: coincurve.PrivateKey,
        remote_public_key: bytes,
        *,
        ephemeral_key: coincurve.PrivateKey | None = None,
        nonce: bytes | None = None,
        eip8: bool = True,
        padding: int | None = None,
    ) -> None:
        self.private_key = private_key
        self.remote_public_key = _pub64(remote_public_key)
        self.ephemeral_key = ephemeral_key or generate_private_key()
        self.nonce = nonce if nonce is not None else os.urandom(_NONCE)
        token = ecdh_raw_x(private_key, self.remote_public_key)
        signature = sign_recoverable(xor(token, self.nonce), self.ephemeral_key)
        own_public = public_key_of(private_key)[1:]
        ephemeral_public = public_key_of(self.ephemeral_key)[1:]
        if eip8:
            body = rlp.encode([signature, own_public, self.nonce, HANDSHAKE_VERSION])
            self.auth_packet = _seal_eip8(body, self.remote_public_key, padding)
        else:
            body = signature + keccak256(ephemeral_public) + own_public + self.nonce + b"\x00"
            self.auth_packet = ecies.encrypt(b"\x04" + self.remote_public_key, body)

    def read_ack(self, buffer: bytes | bytearray) -> tuple[Secrets, int] | None:
        """Secrets and the number of bytes the ack used, or ``None`` if incomplete."""
        taken = read_handshake_packet(buffer, self.private_key, ACK_PLAIN_SIZE)
        if taken is None:
            return None
        packet, body, eip8 = taken
        ack = decode_ack_body(body, eip8=eip8)
        return self.secrets_from_ack(ack, packet), len(packet)

    def secrets_from_ack(self, ack: AckMessage, ack_packet: bytes) -> Secrets:
        return derive_secrets(
            initiator=True,
            ephemeral_key=self.ephemeral_key,
            remote_ephemeral_public_key=ack.ephemeral_public_key,
            initiator_nonce=self.nonce,
            recipient_nonce=ack.nonce,
            auth_packet=self.auth_packet,
            ack_packet=ack_packet,
            remote_public_key=self.remote_public_key,
        )


class Recipient:
    """The listening side: reads the auth packet, answers with an ack."""

    def __init__(
        self,
        private_key: coincurve.PrivateKey,
        *,
        ephemeral_key: coincurve.PrivateKey | None = None,
        nonce: bytes | None = None,
        padding: int | None = None,
    ) -> None:
        self.private_key = private_key
        self.ephemeral_key = ephemeral_key or generate_private_key()
        self.nonce = nonce if nonce is not None else os.urandom(_NONCE)
        self._padding = padding

    def read_auth(self, buffer: bytes | bytearray) -> tuple[bytes, Secrets, int] | None:
        """``(ack packet to send, secrets, bytes used)`` or ``None`` if incomplete."""
        taken = read_handshake_packet(buffer, self.private_key, AUTH_PLAIN_SIZE)
        if taken is None:
            return None
        packet, body, eip8 = taken
        auth = decode_auth_body(body, eip8=eip8)
        ack_packet, secrets = self.answer(auth, packet)
        return ack_packet, secrets, len(packet)

    def remote_ephemeral_key(self, auth: AuthMessage) -> bytes:
        """The initiator's ephemeral public key, recovered from the auth signature."""
        remote = _pub64(auth.initiator_public_key)
        token = ecdh_raw_x(self.private_key, remote)
        try:
            return recover_public_key(xor(token, auth.nonce), auth.signature)[1:]
        except CryptoError as exc:
            raise HandshakeError("RLPx auth", f"signature does not recover: {exc}") from exc

    def answer(self, auth: AuthMessage, auth_packet: bytes) -> tuple[bytes, Secrets]:
        remote = _pub64(auth.initiator_public_key)
        remote_ephemeral = self.remote_ephemeral_key(auth)
        ephemeral_public = public_key_of(self.ephemeral_key)[1:]
        if auth.eip8:
            body = rlp.encode([ephemeral_public, self.nonce, HANDSHAKE_VERSION])
            ack_packet = _seal_eip8(body, remote, self._padding)
        else:
            ack_packet = ecies.encrypt(b"\x04" + remote, ephemeral_public + self.nonce + b"\x00")
        return ack_packet, self.secrets(auth, auth_packet, ack_packet, remote_ephemeral)

    def secrets(
        self, auth: AuthMessage, auth_packet: bytes, ack_packet: bytes, remote_ephemeral: bytes
    ) -> Secrets:
        return derive_secrets(
            initiator=False,
            ephemeral_key=self.ephemeral_key,
            remote_ephemeral_public_key=remote_ephemeral,
            initiator_nonce=auth.nonce,
            recipient_nonce=self.nonce,
            auth_packet=auth_packet,
            ack_packet=ack_packet,
            remote_public_key=_pub64(auth.initiator_public_key),
        )
