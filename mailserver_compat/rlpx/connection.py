"""One RLPx connection as a sans-IO state machine (the h11 / wsproto pattern).

Feed received bytes to :meth:`Connection.receive_data`, which returns events; write out
whatever :meth:`Connection.data_to_send` returns after each call (ack, Hello, Pong and
Disconnect frames the connection produces on its own). The ``send_*`` methods return the
bytes to write for one outgoing message.

Lifecycle: the recipient waits for an auth, answers with an ack and its Hello; the
initiator sends the auth (:meth:`initiate`), reads the ack and sends its Hello. Once the
peer's Hello arrives the connection is established and, if the peer speaks p2p >= 5, every
later payload is snappy-compressed in both directions. Any bad input (garbage, bad MAC,
oversized frame, snappy bomb, unexpected message) ends in one :class:`ConnectionFailed`
event, a queued Disconnect frame with the reason when keys exist, and the CLOSED state.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

import coincurve

from waku_legacy.crypto.secp256k1 import public_key_of
from waku_legacy.errors import WakuLegacyError
from waku_legacy.mailserver_compat.rlpx import compression, p2p
from waku_legacy.mailserver_compat.rlpx.errors import (
    ConnectionStateError,
    MessageTooLarge,
    ProtocolViolation,
    RlpxDecodeError,
)
from waku_legacy.mailserver_compat.rlpx.events import (
    ConnectionFailed,
    DisconnectReceived,
    Event,
    HandshakeComplete,
    HelloReceived,
    MessageReceived,
    PingReceived,
    PongReceived,
)
from waku_legacy.mailserver_compat.rlpx.frame import MAX_FRAME_SIZE, FrameCodec
from waku_legacy.mailserver_compat.rlpx.handshake import Initiator, Recipient, Secrets
from waku_legacy.mailserver_compat.rlpx.reasons import DisconnectReason

__all__ = ["DEFAULT_CLIENT_ID", "Connection", "State"]

DEFAULT_CLIENT_ID = "waku-legacy/v0.1.0"


class State(enum.Enum):
    """Where a :class:`Connection` is; only ``receive_data`` and the ``send_*`` calls move it."""

    # recipient, before the peer's auth packet: no keys, nothing can be sent but the ack
    AWAIT_AUTH = "await-auth"
    # initiator, our auth sent (initiate()), waiting for the ack: no keys yet
    AWAIT_ACK = "await-ack"
    # keys agreed and our Hello sent; the peer's Hello pending (Ping/Disconnect allowed)
    AWAIT_HELLO = "await-hello"
    # both Hellos exchanged, capabilities shared: capability messages flow both ways
    ESTABLISHED = "established"
    # Disconnect sent or received, or the peer failed: nothing more is read or sent
    CLOSED = "closed"


def encode_code(code: int) -> bytes:
    """RLP encoding of a message code (a small unsigned integer)."""
    if code == 0:
        return b"\x80"
    if code < 0x80:
        return bytes([code])
    raw = code.to_bytes((code.bit_length() + 7) // 8, "big")
    return bytes([0x80 + len(raw)]) + raw


def decode_code(frame: bytes) -> tuple[int, int]:
    """``(message code, bytes used)`` from the start of a frame body."""
    if not frame:
        raise RlpxDecodeError("RLPx message code", "empty frame body")
    first = frame[0]
    if first < 0x80:
        return first, 1
    length = first - 0x80
    if length > 8 or len(frame) < 1 + length:  # checked first: frame[1] must exist below
        raise RlpxDecodeError("RLPx message code", f"not a canonical RLP integer (0x{first:02x})")
    non_canonical = length and (frame[1:2] == b"\x00" or (length == 1 and frame[1] < 0x80))
    if non_canonical:
        raise RlpxDecodeError("RLPx message code", f"not a canonical RLP integer (0x{first:02x})")
    return int.from_bytes(frame[1 : 1 + length], "big"), 1 + length


class Connection:
    def __init__(
        self,
        private_key: coincurve.PrivateKey,
        protocols: Sequence[p2p.ProtocolSpec],
        *,
        remote_public_key: bytes | None = None,
        client_id: str = DEFAULT_CLIENT_ID,
        listen_port: int = 0,
        max_message_size: int = compression.MAX_DECOMPRESSED_SIZE,
        initiator: Initiator | None = None,
        recipient: Recipient | None = None,
    ) -> None:
        """``remote_public_key`` given: this side dials. ``initiator`` / ``recipient``
        inject prepared handshake objects (fixed keys and nonces in tests)."""
        self.private_key = private_key
        self.protocols = tuple(protocols)
        self.client_id = client_id
        self.listen_port = listen_port
        self.max_message_size = min(max_message_size, compression.MAX_DECOMPRESSED_SIZE)
        # Snappy may expand incompressible data by n/6 + 32 bytes; the frame adds the code.
        self.max_frame_size = min(
            MAX_FRAME_SIZE, self.max_message_size + self.max_message_size // 6 + 64
        )
        self.is_initiator = remote_public_key is not None or initiator is not None
        # one side of the handshake, by type: the auth is read or the ack, never neither
        self._handshake: Initiator | Recipient
        if self.is_initiator:
            self._handshake = initiator or Initiator(private_key, remote_public_key or b"")
            self.state = State.AWAIT_ACK
        else:
            self._handshake = recipient or Recipient(private_key)
            self.state = State.AWAIT_AUTH
        self._handshake_buffer = bytearray()
        self._frames: FrameCodec | None = None
        self._outbox = bytearray()
        self.secrets: Secrets | None = None
        self.remote_public_key: bytes | None = (
            self._handshake.remote_public_key if isinstance(self._handshake, Initiator) else None
        )
        self.remote_hello: p2p.Hello | None = None
        self.shared_capabilities: tuple[p2p.SharedCapability, ...] = ()
        self.snappy = False
        self.close_reason: DisconnectReason | None = None

    # -- outgoing --------------------------------------------------------------------------

    def initiate(self) -> bytes:
        """The auth packet (dialling side); send it first."""
        if not isinstance(self._handshake, Initiator):
            raise ConnectionStateError(
                "initiate", self.state.value, "only the dialling side sends an auth packet"
            )
        return self._handshake.auth_packet

    def data_to_send(self) -> bytes:
        out = bytes(self._outbox)
        self._outbox.clear()
        return out

    @property
    def closed(self) -> bool:
        return self.state is State.CLOSED

    def hello(self) -> p2p.Hello:
        return p2p.Hello(
            version=p2p.P2P_VERSION,
            client_id=self.client_id,
            capabilities=tuple(spec.capability for spec in self.protocols),
            listen_port=self.listen_port,
            node_id=public_key_of(self.private_key)[1:],
        )

    def _session(self, event: str) -> FrameCodec:
        """The frame codec of the agreed session; ``event`` names the call that needs it."""
        if self._frames is None:
            raise ConnectionStateError(
                event, self.state.value, "no session keys: the handshake has not completed"
            )
        return self._frames

    def _frame(self, code: int, payload: bytes, event: str) -> bytes:
        frames = self._session(event)
        if self.snappy:
            if len(payload) > compression.MAX_DECOMPRESSED_SIZE:
                raise MessageTooLarge("devp2p message", f"{len(payload)} bytes is over 16 MiB")
            payload = compression.compress(payload)
        return frames.encode(encode_code(code) + payload)

    def send_message(self, capability: str, code: int, payload: bytes) -> bytes:
        event = "send_message"
        if self.state is not State.ESTABLISHED:
            raise ConnectionStateError(
                event, self.state.value, f"a {capability} message needs an established session"
            )
        for shared in self.shared_capabilities:
            if shared.name == capability:
                if not 0 <= code < shared.length:
                    raise ConnectionStateError(
                        event, self.state.value, f"{capability} has no message code {code}"
                    )
                return self._frame(shared.offset + code, payload, event)
        raise ConnectionStateError(
            event, self.state.value, f"capability {capability!r} was not negotiated with the peer"
        )

    def send_ping(self) -> bytes:
        self._require_keys("send_ping")
        return self._frame(p2p.PING, p2p.PING_PAYLOAD, "send_ping")

    def send_disconnect(self, reason: DisconnectReason = DisconnectReason.REQUESTED) -> bytes:
        """The Disconnect frame (empty before the handshake); the connection closes."""
        out = b""
        if self._frames is not None and self.state is not State.CLOSED:
            out = self._frame(p2p.DISCONNECT, p2p.encode_disconnect(reason), "send_disconnect")
        self._close(reason)
        return out

    def _require_keys(self, event: str) -> None:
        if self.state is State.CLOSED:
            raise ConnectionStateError(event, self.state.value, "the connection is closed")
        self._session(event)

    def _close(self, reason: DisconnectReason) -> None:
        if self.state is not State.CLOSED:
            self.state = State.CLOSED
            self.close_reason = reason

    # -- incoming --------------------------------------------------------------------------

    def receive_data(self, data: bytes) -> list[Event]:
        events: list[Event] = []
        if self.state is State.CLOSED:
            return events
        handshaking = self.state in (State.AWAIT_AUTH, State.AWAIT_ACK)
        if not handshaking:
            self._session("receive_data")  # a state set by hand past the handshake
        try:
            if handshaking:
                self._handshake_buffer += data
                data = self._read_handshake(events)
                if self.state in (State.AWAIT_AUTH, State.AWAIT_ACK):
                    return events
            for frame in self._session("receive_data").feed(data):
                self._handle_frame(frame, events)
                if self.closed:  # the frame closed it (mypy: the state changed meanwhile)
                    break
        except RlpxDecodeError as exc:
            self._fail(exc.disconnect_reason, str(exc), events)
        except ConnectionStateError:
            raise  # the caller's mistake, not the peer's: no Disconnect for it
        except WakuLegacyError as exc:  # crypto errors on malformed keys and the like
            self._fail(DisconnectReason.PROTOCOL_ERROR, str(exc), events)
        return events

    def _fail(self, reason: DisconnectReason, error: str, events: list[Event]) -> None:
        if self._frames is not None:
            disconnect = p2p.encode_disconnect(reason)
            self._outbox += self._frame(p2p.DISCONNECT, disconnect, "receive_data")
        self._close(reason)
        events.append(ConnectionFailed(reason, error))

    def _read_handshake(self, events: list[Event]) -> bytes:
        """Consume the auth or ack; returns the bytes after it (the first frames)."""
        if isinstance(self._handshake, Recipient):
            result = self._handshake.read_auth(self._handshake_buffer)
            if result is None:
                return b""
            ack, secrets, used = result
            self._outbox += ack
        else:
            taken = self._handshake.read_ack(self._handshake_buffer)
            if taken is None:
                return b""
            secrets, used = taken
        rest = bytes(self._handshake_buffer[used:])
        self._handshake_buffer = bytearray()
        self.secrets = secrets
        self.remote_public_key = secrets.remote_public_key
        self._frames = FrameCodec(secrets, max_frame_size=self.max_frame_size)
        self.state = State.AWAIT_HELLO
        events.append(HandshakeComplete(secrets.remote_public_key))
        self._outbox += self._frame(p2p.HELLO, self.hello().encode(), "receive_data")
        return rest

    def _handle_frame(self, frame: bytes, events: list[Event]) -> None:
        code, used = decode_code(frame)
        payload = frame[used:]
        if self.snappy:
            try:
                payload = compression.decompress(payload, self.max_message_size)
            except RlpxDecodeError:
                # A peer that fails before it has read our Hello disconnects uncompressed;
                # still read its reason rather than report a snappy error.
                if code != p2p.DISCONNECT:
                    raise
        elif len(payload) > self.max_message_size:
            raise MessageTooLarge(
                "devp2p message", f"{len(payload)} bytes is over the {self.max_message_size} limit"
            )
        if code == p2p.DISCONNECT:
            reason, raw = p2p.decode_disconnect(payload)
            self._close(reason)
            events.append(DisconnectReceived(reason, raw))
            return
        if self.state is State.AWAIT_HELLO:
            if code != p2p.HELLO:
                raise ProtocolViolation("devp2p session", f"message 0x{code:02x} before Hello")
            self._handle_hello(p2p.Hello.decode(payload), events)
            return
        if code == p2p.HELLO:
            raise ProtocolViolation("devp2p session", "second Hello")
        if code == p2p.PING:
            self._outbox += self._frame(p2p.PONG, p2p.PING_PAYLOAD, "receive_data")
            events.append(PingReceived())
        elif code == p2p.PONG:
            events.append(PongReceived())
        elif code < p2p.BASE_PROTOCOL_LENGTH:
            pass  # unknown base-protocol message: ignored, as go-ethereum does
        else:
            for shared in self.shared_capabilities:
                if shared.offset <= code < shared.offset + shared.length:
                    events.append(
                        MessageReceived(shared.name, shared.version, code - shared.offset, payload)
                    )
                    return
            raise ProtocolViolation("devp2p session", f"message code 0x{code:x} out of range")

    def _handle_hello(self, hello: p2p.Hello, events: list[Event]) -> None:
        if hello.node_id != self.remote_public_key:
            raise ProtocolViolation(
                "devp2p Hello",
                "node id differs from the key used in the handshake",
                disconnect_reason=DisconnectReason.UNEXPECTED_IDENTITY,
            )
        shared = p2p.negotiate(self.protocols, hello.capabilities)
        if not shared:
            names = ", ".join(f"{c.name}/{c.version}" for c in hello.capabilities) or "none"
            raise ProtocolViolation(
                "devp2p Hello",
                f"no shared capability (peer offers {names})",
                disconnect_reason=DisconnectReason.USELESS_PEER,
            )
        self.remote_hello = hello
        self.shared_capabilities = tuple(shared)
        self.snappy = hello.version >= p2p.SNAPPY_MIN_VERSION
        self.state = State.ESTABLISHED
        events.append(HelloReceived(hello, self.shared_capabilities))
