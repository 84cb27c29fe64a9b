"""libp2p's Noise channel (``/noise``): the XX handshake and the transport cipher, sans-IO.

``Noise_XX_25519_ChaChaPoly_SHA256`` (Noise spec rev. 34) with an empty prologue; the
crypto is ``cryptography``'s (X25519, ChaCha20-Poly1305, SHA-256/HMAC). libp2p's noise spec
(``noise/README.md``) adds, on the wire, a 2-byte big-endian length before every Noise
message (handshake and transport), and in the handshake payloads of messages 2 (responder)
and 3 (initiator) a ``NoiseHandshakePayload { bytes identity_key = 1; bytes identity_sig
= 2; NoiseExtensions extensions = 4; }``: the sender's libp2p public key and its signature
of ``"noise-libp2p-static-key:" + its X25519 static key``. Messages 1 carries nothing else.
A transport message holds at most 65,535 bytes, 16 of them the tag.

:class:`NoiseHandshake` is one side's handshake: :meth:`~NoiseHandshake.feed` takes
received bytes and returns bytes to send; once :attr:`~NoiseHandshake.done`, it holds the
remote's :class:`~waku_legacy.p2p.codec.peer_key.PeerKey` and the two
:class:`NoiseCipher` s."""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Callable
from dataclasses import dataclass

import coincurve
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from waku_legacy.errors import DecodeError
from waku_legacy.p2p.codec.peer_key import PeerKey, decode_public_key, encode_public_key
from waku_legacy.proto.wire import iter_fields, len_field

__all__ = [
    "MAX_PLAINTEXT",
    "NOISE_PROTOCOL_ID",
    "NoiseCipher",
    "NoiseError",
    "NoiseHandshake",
    "NoiseIdentity",
    "XXHandshake",
    "secp256k1_identity",
    "signed_payload",
]

NOISE_PROTOCOL_ID = "/noise"
_PROTOCOL_NAME = b"Noise_XX_25519_ChaChaPoly_SHA256"  # exactly 32 bytes: h is the name
SIGNATURE_PREFIX = b"noise-libp2p-static-key:"
MAX_MESSAGE = 65535
TAG = 16
MAX_PLAINTEXT = MAX_MESSAGE - TAG
_LENGTH = struct.Struct(">H")


class NoiseError(DecodeError):
    def __init__(self, reason: str) -> None:
        super().__init__("noise handshake", reason)


@dataclass(frozen=True)
class NoiseIdentity:
    """Who this side is: its libp2p public key (protobuf) and how it signs."""

    public_key: bytes
    sign: Callable[[bytes], bytes]


def secp256k1_identity(key: coincurve.PrivateKey) -> NoiseIdentity:
    """A secp256k1 identity (nwaku's, the bridge's node key; the client's, fresh)."""
    return NoiseIdentity(encode_public_key(2, key.public_key.format(compressed=True)), key.sign)


def signed_payload(identity: NoiseIdentity, static_public: bytes) -> bytes:
    signature = identity.sign(SIGNATURE_PREFIX + static_public)
    return len_field(1, identity.public_key) + len_field(2, signature)


def _raw(key: X25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


def _nonce(n: int) -> bytes:
    return b"\0\0\0\0" + n.to_bytes(8, "little")


def _hkdf(chaining_key: bytes, material: bytes) -> tuple[bytes, bytes]:
    temp = hmac.digest(chaining_key, material, "sha256")
    first = hmac.digest(temp, b"\x01", "sha256")
    return first, hmac.digest(temp, first + b"\x02", "sha256")


class NoiseCipher:
    """One direction of the transport: ChaCha20-Poly1305 with a counting nonce."""

    __slots__ = ("_aead", "_n")

    def __init__(self, key: bytes) -> None:
        self._aead = ChaCha20Poly1305(key)
        self._n = 0

    def encrypt(self, plaintext: bytes) -> bytes:
        """Length-prefixed Noise messages holding ``plaintext`` (split at MAX_PLAINTEXT)."""
        out = []
        for at in range(0, max(1, len(plaintext)), MAX_PLAINTEXT):
            sealed = self._aead.encrypt(_nonce(self._n), plaintext[at : at + MAX_PLAINTEXT], None)
            self._n += 1
            out.append(_LENGTH.pack(len(sealed)))
            out.append(sealed)
        return b"".join(out)

    def decrypt(self, ciphertext: bytes) -> bytes:
        try:
            plaintext = self._aead.decrypt(_nonce(self._n), ciphertext, None)
        except InvalidTag:
            raise NoiseError("a transport message that does not authenticate") from None
        self._n += 1
        return plaintext


class NoiseReader:
    """Received bytes cut into whole length-prefixed Noise messages, decrypted."""

    __slots__ = ("_buffer", "cipher")

    def __init__(self, cipher: NoiseCipher, rest: bytes = b"") -> None:
        self.cipher = cipher
        self._buffer = rest

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> bytes:
        buffer = self._buffer + data if self._buffer else data
        out = []
        pos = 0
        size = len(buffer)
        while size - pos >= 2:
            length = (buffer[pos] << 8) | buffer[pos + 1]
            end = pos + 2 + length
            if end > size:
                break
            out.append(self.cipher.decrypt(buffer[pos + 2 : end]))
            pos = end
        self._buffer = buffer[pos:] if pos else buffer
        return out[0] if len(out) == 1 else b"".join(out)


class _SymmetricState:
    def __init__(self, prologue: bytes) -> None:
        self.h = _PROTOCOL_NAME
        self.ck = _PROTOCOL_NAME
        self.key: bytes | None = None
        self.n = 0
        self.mix_hash(prologue)

    def mix_hash(self, data: bytes) -> None:
        self.h = hashlib.sha256(self.h + data).digest()

    def mix_key(self, material: bytes) -> None:
        self.ck, self.key = _hkdf(self.ck, material)
        self.n = 0

    def encrypt_and_hash(self, plaintext: bytes) -> bytes:
        if self.key is None:
            out = plaintext
        else:
            out = ChaCha20Poly1305(self.key).encrypt(_nonce(self.n), plaintext, self.h)
            self.n += 1
        self.mix_hash(out)
        return out

    def decrypt_and_hash(self, ciphertext: bytes) -> bytes:
        if self.key is None:
            out = ciphertext
        else:
            try:
                out = ChaCha20Poly1305(self.key).decrypt(_nonce(self.n), ciphertext, self.h)
            except InvalidTag:
                raise NoiseError("a handshake message that does not authenticate") from None
            self.n += 1
        self.mix_hash(ciphertext)
        return out

    def split(self) -> tuple[NoiseCipher, NoiseCipher]:
        first, second = _hkdf(self.ck, b"")
        return NoiseCipher(first), NoiseCipher(second)


class XXHandshake:
    """The Noise XX pattern itself (``-> e``, ``<- e, ee, s, es``, ``-> s, se``), with
    the keys and prologue given (the spec's test vectors give them; libp2p makes them
    fresh and uses an empty prologue). :meth:`write` and :meth:`read` take turns as the
    pattern says; after the third message :meth:`split` gives (initiator's sending cipher,
    responder's sending cipher)."""

    def __init__(
        self,
        *,
        initiator: bool,
        static: X25519PrivateKey,
        ephemeral: X25519PrivateKey,
        prologue: bytes = b"",
    ) -> None:
        self.initiator = initiator
        self._static = static
        self.static_public = _raw(static.public_key())
        self._ephemeral = ephemeral
        self._state = _SymmetricState(prologue)
        self.remote_ephemeral: X25519PublicKey | None = None
        self.remote_static: X25519PublicKey | None = None
        self.step = 0  # messages done

    @property
    def handshake_hash(self) -> bytes:
        return self._state.h

    def split(self) -> tuple[NoiseCipher, NoiseCipher]:
        return self._state.split()

    def _dh(self, private: X25519PrivateKey, public: X25519PublicKey | None) -> bytes:
        assert public is not None
        try:
            return private.exchange(public)
        except ValueError:  # a low-order point: all-zero shared secret
            raise NoiseError("a degenerate X25519 key") from None

    def write(self, payload: bytes) -> bytes:
        state = self._state
        if self.step == 0 and self.initiator:  # -> e
            public = _raw(self._ephemeral.public_key())
            state.mix_hash(public)
            out = public
        elif self.step == 1 and not self.initiator:  # <- e, ee, s, es
            public = _raw(self._ephemeral.public_key())
            state.mix_hash(public)
            state.mix_key(self._dh(self._ephemeral, self.remote_ephemeral))
            out = public + state.encrypt_and_hash(self.static_public)
            state.mix_key(self._dh(self._static, self.remote_ephemeral))
        elif self.step == 2 and self.initiator:  # -> s, se
            out = state.encrypt_and_hash(self.static_public)
            state.mix_key(self._dh(self._static, self.remote_ephemeral))
        else:
            raise NoiseError(f"not this side's turn to write (message {self.step + 1})")
        self.step += 1
        return out + state.encrypt_and_hash(payload)

    def read(self, message: bytes) -> bytes:
        state = self._state
        if self.step == 0 and not self.initiator:  # -> e
            rest = self._read_ephemeral(message)
        elif self.step == 1 and self.initiator:  # <- e, ee, s, es
            rest = self._read_ephemeral(message)
            state.mix_key(self._dh(self._ephemeral, self.remote_ephemeral))
            rest = self._read_static(rest)
            state.mix_key(self._dh(self._ephemeral, self.remote_static))
        elif self.step == 2 and not self.initiator:  # -> s, se
            rest = self._read_static(message)
            state.mix_key(self._dh(self._ephemeral, self.remote_static))
        else:
            raise NoiseError(f"an unexpected handshake message (message {self.step + 1})")
        self.step += 1
        return state.decrypt_and_hash(rest)

    def _read_ephemeral(self, message: bytes) -> bytes:
        if len(message) < 32:
            raise NoiseError("a handshake message without its ephemeral key")
        self.remote_ephemeral = X25519PublicKey.from_public_bytes(message[:32])
        self._state.mix_hash(message[:32])
        return message[32:]

    def _read_static(self, message: bytes) -> bytes:
        if len(message) < 48:
            raise NoiseError("a handshake message without its static key")
        public = self._state.decrypt_and_hash(message[:48])
        self.remote_static = X25519PublicKey.from_public_bytes(public)
        return message[48:]


class NoiseHandshake:
    """libp2p's handshake on :class:`XXHandshake`: fresh keys, empty prologue, 2-byte
    length before each message, the signed identity payload in messages 2 and 3 (checked
    on receipt). ``initiator=False``: the listener's side.

    The messages are cut from the received bytes by their length; a message longer than
    the handshake needs (``max_message``) is refused as soon as its length is read."""

    def __init__(
        self, identity: NoiseIdentity, *, initiator: bool, max_message: int = 4096
    ) -> None:
        self.initiator = initiator
        self._identity = identity
        self._xx = XXHandshake(
            initiator=initiator,
            static=X25519PrivateKey.generate(),
            ephemeral=X25519PrivateKey.generate(),
        )
        self._max_message = max_message
        self._buffer = b""
        self.remote: PeerKey | None = None
        self.send_cipher: NoiseCipher | None = None
        self.receive_cipher: NoiseCipher | None = None
        #: bytes received after the last handshake message (the first transport messages)
        self.rest = b""

    @property
    def done(self) -> bool:
        return self._xx.step == 3

    def start(self) -> bytes:
        """The initiator's first message."""
        return self._frame(self._xx.write(b""))

    def feed(self, data: bytes) -> bytes:
        self._buffer += data
        out = b""
        while not self.done:
            if len(self._buffer) < 2:
                break
            (length,) = _LENGTH.unpack_from(self._buffer)
            if length > self._max_message:
                raise NoiseError(f"a handshake message of {length} bytes")
            if len(self._buffer) < 2 + length:
                break
            body, self._buffer = self._buffer[2 : 2 + length], self._buffer[2 + length :]
            out += self._receive(body)
        if self.done:
            self.rest, self._buffer = self._buffer, b""
        return out

    def _frame(self, body: bytes) -> bytes:
        return _LENGTH.pack(len(body)) + body

    def _receive(self, body: bytes) -> bytes:
        xx = self._xx
        payload = xx.read(body)
        if xx.step == 1:  # the responder read message 1: message 2 carries our identity
            return self._frame(xx.write(signed_payload(self._identity, xx.static_public)))
        assert xx.remote_static is not None
        self._check_payload(payload, xx.remote_static)
        if xx.step == 2:  # the initiator read message 2: message 3 carries our identity
            out = self._frame(xx.write(signed_payload(self._identity, xx.static_public)))
            self.send_cipher, self.receive_cipher = xx.split()
            return out
        self.receive_cipher, self.send_cipher = xx.split()
        return b""

    def _check_payload(self, payload: bytes, remote_static: X25519PublicKey) -> None:
        key = signature = b""
        for field in iter_fields(payload, "noise handshake payload"):
            if field.number == 1 and isinstance(field.value, bytes):
                key = field.value
            elif field.number == 2 and isinstance(field.value, bytes):
                signature = field.value
        remote = decode_public_key(key)
        if not remote.verify(signature, SIGNATURE_PREFIX + _raw(remote_static)):
            raise NoiseError("the identity signature of the static key does not verify")
        self.remote = remote
