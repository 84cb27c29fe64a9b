"""RLPx framing: AES-256-CTR encryption and the keccak-based header/body MACs, sans-IO.

Frame on the wire::

    header-ct (16) || header-mac (16) || body-ct (size padded to 16) || body-mac (16)

The header plaintext is ``size (3 bytes BE) || rlp([0, 0]) || zero padding``; the body
plaintext is ``rlp(message code) || payload``. Both directions run one AES-CTR stream each
with a zero IV (the key is per session). A MAC is computed by updating the direction's
keccak state with ``AES-ECB(mac key, state digest[:16]) XOR seed`` and taking the first 16
bytes of the new digest; the seed is the header ciphertext for the header MAC and, after
absorbing the body ciphertext, the state's own digest for the body MAC.
"""

from __future__ import annotations

import hmac

from Crypto.Cipher import AES

from waku_legacy.crypto.keccak import KeccakState
from waku_legacy.mailserver_compat.rlpx.errors import (
    FrameAuthenticationError,
    MessageTooLarge,
    RlpxDecodeError,
)
from waku_legacy.mailserver_compat.rlpx.handshake import Secrets

__all__ = ["HEADER_DATA", "MAX_FRAME_SIZE", "FrameCodec"]

MAX_FRAME_SIZE = (1 << 24) - 1
# rlp([capability-id 0, context-id 0]): what every deployed client sends and ignores.
HEADER_DATA = b"\xc2\x80\x80"
_ZERO16 = bytes(16)


def _xor16(a: bytes, b: bytes) -> bytes:
    return (int.from_bytes(a, "big") ^ int.from_bytes(b[:16], "big")).to_bytes(16, "big")


class _Mac:
    __slots__ = ("_cipher", "_state")

    def __init__(self, mac_key: bytes, state: KeccakState) -> None:
        self._cipher = AES.new(mac_key, AES.MODE_ECB)
        self._state = state

    def _update(self, seed: bytes) -> bytes:
        encrypted = self._cipher.encrypt(self._state.digest()[:16])
        self._state.update(_xor16(encrypted, seed))
        return self._state.digest()[:16]

    def header(self, header_ciphertext: bytes) -> bytes:
        return self._update(header_ciphertext)

    def body(self, body_ciphertext: bytes) -> bytes:
        self._state.update(body_ciphertext)
        return self._update(self._state.digest())

    def digest(self) -> bytes:
        """The running state's digest (for tests against the EIP-8 ingress-MAC vector)."""
        return self._state.digest()


class FrameCodec:
    """Encrypts outgoing frames and authenticates/decrypts incoming ones.

    ``feed(data)`` buffers bytes and returns the complete frame bodies found (each
    ``rlp(code) || payload``, padding removed). Any MAC failure or oversize header raises;
    the codec must then be discarded (the ingress stream is out of sync for good).
    """

    def __init__(self, secrets: Secrets, *, max_frame_size: int = MAX_FRAME_SIZE) -> None:
        self._encrypt = AES.new(secrets.aes, AES.MODE_CTR, nonce=b"", initial_value=_ZERO16)
        self._decrypt = AES.new(secrets.aes, AES.MODE_CTR, nonce=b"", initial_value=_ZERO16)
        self.egress_mac = _Mac(secrets.mac, secrets.egress_mac)
        self.ingress_mac = _Mac(secrets.mac, secrets.ingress_mac)
        self.max_frame_size = min(max_frame_size, MAX_FRAME_SIZE)
        self._buffer = bytearray()
        self._pending_size: int | None = None  # body size of a header already verified

    def encode(self, frame_data: bytes) -> bytes:
        size = len(frame_data)
        if size > MAX_FRAME_SIZE:
            raise MessageTooLarge("RLPx frame", f"{size} bytes does not fit the 24-bit size")
        header = size.to_bytes(3, "big") + HEADER_DATA + bytes(10)
        header_ct = self._encrypt.encrypt(header)
        header_mac = self.egress_mac.header(header_ct)
        padding = -size % 16
        body_ct = self._encrypt.encrypt(frame_data + bytes(padding) if padding else frame_data)
        body_mac = self.egress_mac.body(body_ct)
        return b"".join((header_ct, header_mac, body_ct, body_mac))

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        self._buffer += data
        frames: list[bytes] = []
        while True:
            frame = self._next_frame()
            if frame is None:
                return frames
            frames.append(frame)

    def _next_frame(self) -> bytes | None:
        buf = self._buffer
        if self._pending_size is None:
            if len(buf) < 32:
                return None
            header_ct = bytes(buf[:16])
            if not hmac.compare_digest(self.ingress_mac.header(header_ct), bytes(buf[16:32])):
                raise FrameAuthenticationError("RLPx frame header", "MAC mismatch")
            header = self._decrypt.decrypt(header_ct)
            size = int.from_bytes(header[:3], "big")
            if size > self.max_frame_size:
                raise MessageTooLarge(
                    "RLPx frame", f"declared size {size} is over the {self.max_frame_size} limit"
                )
            if size == 0:
                raise RlpxDecodeError("RLPx frame", "empty frame (no message code)")
            del buf[:32]
            self._pending_size = size
        size = self._pending_size
        padded = size + (-size % 16)
        if len(buf) < padded + 16:
            return None
        body_ct = bytes(buf[:padded])
        if not hmac.compare_digest(
            self.ingress_mac.body(body_ct), bytes(buf[padded : padded + 16])
        ):
            raise FrameAuthenticationError("RLPx frame body", "MAC mismatch")
        del buf[: padded + 16]
        self._pending_size = None
        return self._decrypt.decrypt(body_ct)[:size]
