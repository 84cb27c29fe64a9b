"""Mutation fuzzing of every decoder that reads bytes or text from outside (issue 10).

    .venv/bin/python bench/fuzz_decoders.py                       # 1,000,000 inputs each
    .venv/bin/python bench/fuzz_decoders.py --n 20000 --only envelope --only bencode
    nice -n 10 .venv/bin/python bench/fuzz_decoders.py --workers 2 --seed 1 --json

Each decoder gets ``--n`` inputs generated from valid ones (its seeds: what the project
itself encodes) by 1-5 stacked mutations: bit flips, interesting bytes, byte insertions and
deletions, duplicated chunks, splices of two seeds, length-field tweaks (RLP prefixes,
protobuf varints, bencode and decimal numbers made huge, negative or off by one),
truncation, extension, and, for text formats, grammar tokens; 2% are random bytes. The
inputs depend only on ``--seed``, the decoder and the input's number, so a run is
reproducible whatever ``--workers`` is.

For every input the decoder either returns, or raises the project's typed error
(:class:`~waku_legacy.errors.WakuLegacyError`): anything else is a **crash** (the first
few examples of each decoder, input and traceback, are written to ``--crash-dir``). Every
input is timed; the slowest of each chunk are timed again (best of 3, so that a scheduler
pause is not blamed on the decoder) and the slowest input per decoder is reported. An input
running over 10 s is stopped and counted as a crash (a hang). Target: 0 crashes, no input
slower than 100 ms.

Decoders (``--only NAME``, repeatable):

=================  ===============================================================
envelope           v1 envelope RLP (``Envelope.decode``, ``decode_many``) and, for a
                   decoded one, its hash, bloom, PoW and payload (decrypt + parse);
                   the payload plaintext parser itself
v1-request         0x7e payloads, plain and envelope form (``decode_p2p_request``),
                   and a deprecated request's decrypted RLP (``decode_request_payload``)
rlpx-frame         RLPx frames through ``FrameCodec.feed`` (MACs, sizes), and frame
                   bodies that pass the MAC: message code, snappy, Hello, Disconnect
rlpx-handshake     auth and ack packets (EIP-8 and pre-EIP-8) through ``Recipient`` /
                   ``Initiator``, and their decrypted bodies
waku-packet        waku/1 packets (status, status update, messages, p2p messages,
                   request complete, batch ack, message response) through
                   ``WakuPeerState.receive``, and every envelope they carry
rest-query         store REST query strings (``parse_v3_query``, ``parse_legacy_query``)
                   and cursors / hash lists (``parse_hash``, ``parse_hashes``)
rest-json          store v3 JSON pages (``migrate.store_rest.parse_page``, then every
                   entry's message and hash check)
archive-index      ``index`` files (``decode_index``, both flavours, ``check_contiguous``)
archive            ``WakuMessageArchive`` protobufs (``decode_archive``, both flavours)
archive-jsonl      ``archive build --input`` lines (``ArchiveMessage.from_json_line``)
magnet             magnet URIs, magnet-link messages (protobuf, verified against the
                   community key) and their JSON form
bencode            ``bdecode`` and ``.torrent`` loading (``load_torrent``)
toml-migrate       migration config files (``migrate.config.load_config``)
toml-bridge        bridge config files (``bridge.config.load_config``)
=================  ===============================================================

Output: per decoder inputs, typed errors, accepted, crashes, slowest input (ms) and
inputs/s, then a total line. ``--json`` prints one JSON document instead.
"""

from __future__ import annotations

import argparse
import atexit
import json
import multiprocessing
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from waku_legacy.errors import WakuLegacyError

CHUNK = 2000  # inputs per task (the unit of work sent to a worker)
HANG_SECONDS = 10.0
SLOW_MS = 100.0
RETIME = 3  # slowest inputs per chunk timed again (best of 3)

Seed = tuple[str, bytes]  # (mode, bytes): the mode says which function reads it


# -- deterministic keys and seeds -------------------------------------------------------------


def _key(byte: int) -> Any:
    from waku_legacy.crypto.secp256k1 import private_key_from_bytes

    return private_key_from_bytes(bytes([byte]) * 32)


def _stream(label: str) -> Callable[[int], bytes]:
    rng = random.Random(label)
    return lambda n: rng.randbytes(n)


class Target:
    """One decoder: its seeds (valid inputs) and the function that reads one input."""

    name = ""
    text = False  # inputs are text (mutated with grammar tokens too)
    tokens: tuple[bytes, ...] = ()

    def seeds(self) -> list[Seed]:
        raise NotImplementedError

    def run(self, mode: str, data: bytes) -> None:
        raise NotImplementedError


class EnvelopeTarget(Target):
    name = "envelope"

    def __init__(self) -> None:
        from waku_legacy.identity.topics import symmetric_key_for_chat

        self.sym = symmetric_key_for_chat("fuzz-public-chat")

    def seeds(self) -> list[Seed]:
        from waku_legacy.crypto.payload import build_plaintext, encode_payload
        from waku_legacy.mailserver_compat.wire.envelope import Envelope, encode_many

        out: list[Seed] = []
        envelopes = []
        for i, size in enumerate((0, 1, 40, 300, 1200)):
            data = (
                encode_payload(
                    bytes(range(256)) * (size // 256) + bytes(size % 256),
                    sign_with=_key(3 + i) if i % 2 else None,
                    symmetric_key=self.sym,
                    random_source=_stream(f"envelope-{i}"),
                )
                if size
                else b""
            )
            env = Envelope(1_700_000_000 + i, 50 + i, bytes([i, 2, 3, 4]), data, 12345 * i)
            envelopes.append(env)
            out.append(("one", env.encode()))
        out.append(("many", encode_many(envelopes)))
        out.append(("many", encode_many(envelopes[:2])))
        for i, size in enumerate((0, 5, 200)):
            plain = build_plaintext(
                bytes(size), sign_with=_key(9) if i else None, padding=None,
                random_source=_stream(f"plain-{i}"),
            )  # fmt: skip
            out.append(("plaintext", plain))
        return out

    def run(self, mode: str, data: bytes) -> None:
        from waku_legacy.crypto.payload import decode_payload, parse_plaintext
        from waku_legacy.mailserver_compat.wire.envelope import Envelope, decode_many
        from waku_legacy.mailserver_compat.wire.pow import pow_of

        if mode == "plaintext":
            parse_plaintext(data)
            return
        envelopes = [Envelope.decode(data)] if mode == "one" else decode_many(data, max_count=1000)
        for env in envelopes:
            env.hash()
            env.bloom()
            _ = env.sent_time, env.size
            pow_of(env)
            if env.data:
                try:
                    decode_payload(env.data, symmetric_key=self.sym)
                except WakuLegacyError:
                    pass


class RequestTarget(Target):
    name = "v1-request"

    def seeds(self) -> list[Seed]:
        from waku_legacy.mailserver_compat.wire.request import (
            FieldOrder,
            MessagesRequest,
            encode_envelope_request,
            encode_plain_request,
            encode_request_payload,
        )

        out: list[Seed] = []
        requests = [
            MessagesRequest(bytes(32), 1_600_000_000, 1_700_000_000, 100, b"", bytes(64),
                            (b"\x01\x02\x03\x04", b"\xaa\xbb\xcc\xdd")),
            MessagesRequest(b"\x07" * 32, 0, 4_294_967_295, 0, b"\x05" * 36, b"", ()),
            MessagesRequest(b"\x09" * 32, 5, 6, 1000, b"", b"\xff" * 64, (b"\x00" * 4,) * 20),
        ]  # fmt: skip
        for i, request in enumerate(requests):
            out.append(("p2p", encode_plain_request(request)))
            for order in (FieldOrder.STATUS_GO, FieldOrder.SPEC):
                out.append(("payload", encode_request_payload(request, order)))
            env = encode_envelope_request(
                request, sign_with=_key(5 + i), now=1_700_000_000, padding=b"",
                random_source=_stream(f"request-{i}"),
            )  # fmt: skip
            out.append(("p2p", env.encode()))
        return out

    def run(self, mode: str, data: bytes) -> None:
        from waku_legacy.mailserver_compat.wire.request import (
            decode_p2p_request,
            decode_request_payload,
            normalize_request,
        )

        if mode == "payload":
            request = decode_request_payload(data, request_id=bytes(32))
        else:
            request = decode_p2p_request(data)
        normalize_request(request, now=1_700_000_000)


class FrameTarget(Target):
    name = "rlpx-frame"

    def _secrets(self) -> tuple[Any, Any]:
        from waku_legacy.crypto.keccak import KeccakState
        from waku_legacy.mailserver_compat.rlpx.handshake import Secrets

        aes, mac = b"\x11" * 32, b"\x22" * 32
        a = Secrets(aes, mac, KeccakState(b"egress"), KeccakState(b"ingress"), b"\x01" * 64)
        b = Secrets(aes, mac, KeccakState(b"ingress"), KeccakState(b"egress"), b"\x02" * 64)
        return a, b

    def seeds(self) -> list[Seed]:
        from waku_legacy.mailserver_compat.rlpx import compression, p2p
        from waku_legacy.mailserver_compat.rlpx.connection import encode_code
        from waku_legacy.mailserver_compat.rlpx.frame import FrameCodec

        hello = p2p.Hello(5, "fuzz/v1", (p2p.Capability("waku", 1),), 30303, b"\x03" * 64)
        bodies = [
            encode_code(p2p.HELLO) + hello.encode(),
            encode_code(p2p.DISCONNECT) + p2p.encode_disconnect(p2p.DisconnectReason(4)),
            encode_code(p2p.DISCONNECT) + compression.compress(b"\xc1\x04"),
            encode_code(p2p.PING) + compression.compress(b"\xc0"),
            encode_code(0x10) + compression.compress(b"\xc5\x01\x02\x03\x04\x05" * 20),
            encode_code(0x1234) + compression.compress(bytes(3000)),
            encode_code(0x81) + compression.compress(b"\x80"),
            encode_code(0x100) + compression.compress(b""),
        ]
        out: list[Seed] = [("plain", body) for body in bodies]
        sender, _ = self._secrets()
        codec = FrameCodec(sender)
        for body in bodies:
            out.append(("wire", FrameCodec(sender).encode(body)))
        out.append(("wire", b"".join(codec.encode(body) for body in bodies[:3])))
        return out

    def run(self, mode: str, data: bytes) -> None:
        from waku_legacy.mailserver_compat.rlpx import compression, p2p
        from waku_legacy.mailserver_compat.rlpx.connection import decode_code
        from waku_legacy.mailserver_compat.rlpx.frame import MAX_FRAME_SIZE, FrameCodec

        sender, receiver = self._secrets()
        if mode == "wire":
            FrameCodec(receiver).feed(data)
            return
        if not data or len(data) > MAX_FRAME_SIZE:
            return  # FrameCodec.encode refuses what no frame can carry
        (frame,) = FrameCodec(receiver).feed(FrameCodec(sender).encode(data))
        code, used = decode_code(frame)
        payload = frame[used:]
        if code == p2p.HELLO:
            p2p.Hello.decode(payload)
        elif code == p2p.DISCONNECT:
            try:
                payload = compression.decompress(payload)
            except WakuLegacyError:
                pass
            p2p.decode_disconnect(payload)
        else:
            compression.decompress(payload)


class HandshakeTarget(Target):
    name = "rlpx-handshake"

    def __init__(self) -> None:
        from waku_legacy.mailserver_compat.rlpx.handshake import Initiator, Recipient

        self.node, self.peer = _key(0x31), _key(0x32)
        node_pub = self.node.public_key.format(compressed=False)[1:]
        self.initiators = {
            eip8: Initiator(self.peer, node_pub, ephemeral_key=_key(0x33), nonce=b"\x44" * 32,
                            eip8=eip8, padding=0 if not eip8 else 120)
            for eip8 in (True, False)
        }  # fmt: skip
        self.recipient = Recipient(self.node, ephemeral_key=_key(0x35), nonce=b"\x66" * 32,
                                   padding=100)  # fmt: skip

    def seeds(self) -> list[Seed]:
        from waku_legacy.crypto import ecies

        def opened(key: Any, packet: bytes, eip8: bool) -> bytes:
            if eip8:
                return ecies.decrypt(key, packet[2:], shared_mac_data=packet[:2])
            return ecies.decrypt(key, packet)

        def sealed(key: Any, body: bytes, eip8: bool, label: int) -> bytes:
            # ECIES with a fixed ephemeral key and IV: the same packet bytes every run.
            public = b"\x04" + key.public_key.format(compressed=False)[1:]
            fixed = {"ephemeral_key": _key(label), "iv": bytes([label]) * 16}
            if not eip8:
                return ecies.encrypt(public, body, **fixed)
            prefix = (len(body) + ecies.OVERHEAD).to_bytes(2, "big")
            return prefix + ecies.encrypt(public, body, prefix, **fixed)

        out: list[Seed] = []
        for eip8, initiator in self.initiators.items():
            tag = "8" if eip8 else "0"
            auth_body = opened(self.node, initiator.auth_packet, eip8)  # deterministic
            out.append(("auth", sealed(self.node, auth_body, eip8, 0x41)))
            out.append(("auth-body" + tag, auth_body))
            answer = self.recipient.read_auth(initiator.auth_packet)
            assert answer is not None
            ack_body = opened(self.peer, answer[0], eip8)
            out.append(("ack" + tag, sealed(self.peer, ack_body, eip8, 0x42)))
            out.append(("ack-body" + tag, ack_body))
        return out

    def run(self, mode: str, data: bytes) -> None:
        from waku_legacy.mailserver_compat.rlpx.handshake import decode_ack_body, decode_auth_body

        if mode == "auth":
            self.recipient.read_auth(data)
        elif mode.startswith("ack-body"):
            eip8 = mode.endswith("8")
            ack = decode_ack_body(data, eip8=eip8)
            self.initiators[eip8].secrets_from_ack(ack, b"packet")
        elif mode.startswith("ack"):
            self.initiators[mode.endswith("8")].read_ack(data)
        else:  # auth-body
            auth = decode_auth_body(data, eip8=mode.endswith("8"))
            self.recipient.remote_ephemeral_key(auth)


class WakuPacketTarget(Target):
    name = "waku-packet"

    def seeds(self) -> list[Seed]:
        from waku_legacy.mailserver_compat.wire.complete import RequestComplete
        from waku_legacy.mailserver_compat.wire.envelope import Envelope
        from waku_legacy.mailserver_compat.wire.waku_protocol import (
            EnvelopeRejection,
            MessagesResponse,
            RateLimits,
            StatusOptions,
            encode_batch_ack,
            encode_envelope_list,
        )

        envelopes = [Envelope(1_700_000_000 + i, 50, bytes([i, 2, 3, 4]), bytes(i * 7), i)
                     for i in range(3)]  # fmt: skip
        status = StatusOptions(
            pow_requirement=0.002, bloom=b"\xff" * 64, light_node=False, confirmations=True,
            packet_rate_limits=RateLimits(10, 20, 30), topic_interest=(b"\x01\x02\x03\x04",),
            bytes_rate_limits=RateLimits(1000, 2000, 3000),
        )  # fmt: skip
        response = MessagesResponse(b"\x06" * 32, (EnvelopeRejection(b"\x07" * 32, 1, "pow"),))
        return [
            ("0", status.encode()),
            ("0", StatusOptions(pow_requirement=0.5).encode()),
            ("22", StatusOptions(bloom=bytes(64)).encode()),
            ("1", encode_envelope_list([e.encode() for e in envelopes])),
            ("127", encode_envelope_list([envelopes[0].encode()])),
            ("125", RequestComplete(b"\x01" * 32, b"\x02" * 32, b"\x03" * 36).encode_packet()),
            ("125", RequestComplete.failure(b"\x04" * 32, "too many").encode_packet()),
            ("11", encode_batch_ack(b"\x05" * 32)),
            ("12", response.encode()),
        ]

    def run(self, mode: str, data: bytes) -> None:
        from waku_legacy.mailserver_compat.wire.envelope import Envelope
        from waku_legacy.mailserver_compat.wire.waku_protocol import (
            EnvelopesReceived,
            P2PMessagesReceived,
            WakuPeerState,
        )

        peer = WakuPeerState()
        peer.status_received = mode != "0"  # a status packet comes first
        for event in peer.receive(int(mode), data):
            if isinstance(event, EnvelopesReceived | P2PMessagesReceived):
                for raw in event.envelopes:
                    try:
                        Envelope.decode(raw)
                    except WakuLegacyError:
                        pass


class RestQueryTarget(Target):
    name = "rest-query"
    text = True
    tokens = (
        b"&", b"=", b"%", b"%00", b"%ff", b"+", b"-", b"0x", b",", b"/waku/2/", b"-1",
        b"9223372036854775808", b"99999999999999999999999999", b"0", b"%2C", b"pageSize=",
        b"cursor=", b"hashes=", b"ascending=", b"\x00", b"\xc3\xa9",
    )  # fmt: skip

    def seeds(self) -> list[Seed]:
        h = "0x" + "ab" * 32
        b64 = "q" * 43 + "="
        return [
            ("v3", f"pubsubTopic=%2Fwaku%2F2%2Frs%2F16%2F32&contentTopics=%2Fwaku%2F1%2F0x01020304"
                   f"%2Frfc26,%2Fapp%2F1%2Fchat%2Fproto&startTime=1&endTime=1700000000000000000"
                   f"&cursor={h}&pageSize=20&ascending=false&includeData=true".encode()),
            ("v3", f"hashes={h},{h}&peerAddr=&pageSize=0".encode()),
            ("v3", b"contentTopics=%2Fa%2F1%2Fb%2Fproto"
                   b"&pubsubTopic=%2Fwaku%2F2%2Fdefault-waku%2Fproto"),
            ("legacy", f"pubsubTopic=%2Fwaku%2F2%2Frs%2F16%2F128&senderTime=1700000000000000000"
                       f"&storeTime=1700000000000000001&digest={b64}&pageSize=100"
                       f"&ascending=true&contentTopics=%2Fa%2F1%2Fb%2Fproto".encode()),
            ("cursor", h.encode()),
            ("cursor", ("q" * 43 + "=").encode()),
            ("hashes", f"{h},{h[2:]},{'q' * 43}=".encode()),
        ]  # fmt: skip

    def run(self, mode: str, data: bytes) -> None:
        import urllib.parse

        import yarl
        from multidict import MultiDict

        from waku_legacy.bridge.store_rest_server import parse_legacy_query, parse_v3_query
        from waku_legacy.store.rest_json import parse_hash, parse_hashes

        # aiohttp decodes the request target as UTF-8 with surrogateescape: bytes that are
        # not UTF-8 reach the handler as lone surrogates.
        text = data.decode("utf-8", "surrogateescape")
        if mode == "cursor":
            parse_hash(text, "cursor")
        elif mode == "hashes":
            parse_hashes(text)
        else:
            # What aiohttp hands the handler: the query parsed by yarl (request.query), and,
            # for good measure, the standard library's reading of the same string.
            query = yarl.URL.build(path="/store/v3/messages", query_string=text, encoded=True)
            parse = parse_v3_query if mode == "v3" else parse_legacy_query
            parse(query.query)
            parse(MultiDict(urllib.parse.parse_qsl(text, keep_blank_values=True)))


class RestJsonTarget(Target):
    name = "rest-json"
    text = True
    tokens = (
        b"{", b"}", b"[", b"]", b'"', b":", b",", b"null", b"true", b"-1", b"1e400",
        b"18446744073709551616", b'"messages":', b'"payload":"', b"\\u0000", b"NaN",
        b"\\ud800", b"\\udc80", b'"contentTopic":"', b'"timestamp":',
    )  # fmt: skip

    def seeds(self) -> list[Seed]:
        from waku_legacy.identity.message_hash import message_hash
        from waku_legacy.proto import waku_message_pb2
        from waku_legacy.store.rest_json import response_json
        from waku_legacy.store.types import StoredMessage

        messages = []
        for i in range(3):
            proto = waku_message_pb2.WakuMessage(
                payload=bytes([i]) * (10 + i * 50), content_topic=f"/app/1/chat-{i}/proto",
                version=1, timestamp=1_700_000_000_000_000_000 + i, meta=b"m" if i == 2 else b"",
            )  # fmt: skip
            pubsub = "/waku/2/rs/16/32"
            digest = message_hash(pubsub, proto)
            messages.append(StoredMessage(
                digest, pubsub, proto.content_topic, proto.payload, proto.version,
                proto.timestamp, proto.meta or None,
            ))  # fmt: skip
        out: list[Seed] = []
        for n, cursor in ((3, messages[-1].message_hash), (1, None), (0, None)):
            doc = response_json("fuzz", messages[:n], include_data=True, cursor=cursor)
            out.append(("page", json.dumps(doc).encode()))
        return out

    def run(self, mode: str, data: bytes) -> None:
        from waku_legacy.store.rest_client import parse_page
        from waku_legacy.store.rest_json import parse_key_value

        page = parse_page(data, 1)
        # Then every entry, as the bridge's history pull reads it (a malformed entry or a
        # wrong hash is counted and skipped there: a typed error here).
        for raw in page.messages:
            try:
                parse_key_value(raw).stored()
            except WakuLegacyError:
                pass


class ArchiveIndexTarget(Target):
    name = "archive-index"

    def seeds(self) -> list[Seed]:
        from waku_legacy.archive.encode import EncodedArchive, encode_index, index_entry_for
        from waku_legacy.archive.message import ArchiveMessage

        out: list[Seed] = []
        for flavour in ("status-go", "seed-spec"):
            offset = 0
            entries = []
            for w in range(3):
                msgs = [ArchiveMessage(timestamp=1_700_000_000 + w * 10 + i, hash=bytes([i]) * 32,
                                       topic=b"\x01\x02\x03\x04", payload=bytes([i]) * 30)
                        for i in range(2)]  # fmt: skip
                encoded = EncodedArchive.build(
                    1_700_000_000 + w * 604_800, 1_700_604_800 + w * 604_800,
                    [b"\x01\x02\x03\x04"], msgs, flavour=flavour,
                )  # fmt: skip
                entry = index_entry_for(encoded, offset)
                offset += entry.size
                entries.append(entry)
            out.append((flavour, encode_index(entries)))
            out.append((flavour, encode_index(entries[:1])))
        return out

    def run(self, mode: str, data: bytes) -> None:
        from waku_legacy.archive.encode import check_contiguous, decode_index

        entries = decode_index(data, flavour=mode)
        check_contiguous(entries)


class ArchiveTarget(Target):
    name = "archive"

    def seeds(self) -> list[Seed]:
        from waku_legacy.archive.encode import encode_archive
        from waku_legacy.archive.message import ArchiveMessage

        out: list[Seed] = []
        for flavour in ("status-go", "seed-spec"):
            for count in (0, 1, 4):
                msgs = [ArchiveMessage(timestamp=1_700_000_000 + i, hash=bytes([i, 7]) * 16,
                                       topic=bytes([i, 1, 2, 3]), payload=bytes([i]) * (5 + 40 * i),
                                       sig=b"\x05" * 65 if i % 2 else b"",
                                       padding=b"\x00" * i, third_party_id="x" if i == 3 else "")
                        for i in range(count)]  # fmt: skip
                data = encode_archive(1_700_000_000, 1_700_604_800,
                                      [b"\x01\x02\x03\x04", b"\x00\x01\x02\x03"], msgs,
                                      flavour=flavour, piece_length=16 * 1024)  # fmt: skip
                out.append((flavour, data[:4096] if flavour == "seed-spec" else data))
        return out

    def run(self, mode: str, data: bytes) -> None:
        from waku_legacy.archive.encode import decode_archive

        archive = decode_archive(data, flavour=mode)
        for message in archive.messages:  # fetch writes them out as JSON lines
            json.dumps(message.to_json())


class ArchiveJsonTarget(Target):
    name = "archive-jsonl"
    text = True
    tokens = (b"{", b"}", b"[", b"]", b'"', b":", b",", b"null", b"true", b"-1", b"1e400",
              b"18446744073709551616", b'"0x', b"==", b"\\u0000", b"\\ud800")  # fmt: skip

    def seeds(self) -> list[Seed]:
        from waku_legacy.archive.message import ArchiveMessage

        messages = [
            ArchiveMessage(1_700_000_000, b"\x01" * 32, b"\x01\x02\x03\x04", b"hello"),
            ArchiveMessage(1_700_000_001, b"\x02" * 32, b"\xaa\xbb\xcc\xdd", bytes(300),
                           sig=b"\x05" * 65, padding=b"\x00" * 7, third_party_id="t-1"),
            ArchiveMessage(1_700_000_002, b"\x03" * 32, b"\x01\x02\x03\x05", b"x",
                           third_party_id="third-party-0123456789-" * 8),
        ]  # fmt: skip
        return [("line", json.dumps(m.to_json()).encode()) for m in messages]

    def run(self, mode: str, data: bytes) -> None:
        from waku_legacy.archive.encode import encode_archive
        from waku_legacy.archive.message import ArchiveMessage

        # What `archive build --input` does with each line of its JSON-lines file: read it,
        # then encode it into an archive.
        message = ArchiveMessage.from_json_line(data.decode("utf-8", "replace"), line=1)
        encode_archive(message.timestamp, message.timestamp, [message.topic], [message])


class MagnetTarget(Target):
    name = "magnet"
    tokens = (b"magnet:?", b"xt=urn:btih:", b"&", b"=", b"%", b"%00", b"dn=", b"tr=",
              b"x.pe=", b"{", b"}", b'"', b":", b"null", b"\\ud800", b"1e400")  # fmt: skip

    def __init__(self) -> None:
        from waku_legacy.identity.topics import CommunityId

        self.key = _key(0x51)
        self.community = CommunityId(self.key.public_key.format(compressed=True))

    def seeds(self) -> list[Seed]:
        from waku_legacy.archive.magnet import build_magnet_message, relay_publish_body
        from waku_legacy.archive.torrent import magnet_uri

        uris = [
            magnet_uri("ab" * 20, f"{self.community}", ("udp://tracker.example:1337/announce",)),
            "magnet:?xt=urn:btih:" + "C" * 32 + "&dn=x",
            "magnet:?xt=urn:btih:" + "0123456789" * 4 + "&tr=a&tr=b&x.pe=1.2.3.4:5",
        ]
        out: list[Seed] = [("uri", u.encode()) for u in uris]
        for i, uri in enumerate(uris[:2]):
            message = build_magnet_message(
                self.key, uri, 1_700_000_000_000 + i, pubsub_topic="/waku/2/rs/16/128"
            )
            out.append(("message", message.SerializeToString()))
            out.append(("json", json.dumps(relay_publish_body(message)).encode()))
        return out

    def run(self, mode: str, data: bytes) -> None:
        from waku_legacy.archive.magnet import magnet_message_from_json, verify_magnet_message
        from waku_legacy.archive.torrent import parse_magnet_uri

        if mode == "uri":
            parse_magnet_uri(data.decode("utf-8", "replace"))
            return
        if mode == "json":
            try:
                body = json.loads(data)
            except (ValueError, RecursionError):
                return  # the JSON text itself: json's business (the CLI reports it)
            message: Any = magnet_message_from_json(body)
        else:
            message = data
        verify_magnet_message(message, self.community, last_clock=1)


class BencodeTarget(Target):
    name = "bencode"
    tokens = (b"d", b"l", b"e", b"i", b"i-1e", b"i-0e", b"i99999999999999999999999e", b"0:",
              b"4:", b"999999999:", b"-1:", b"4:info", b"6:pieces", b"12:piece length",
              b"6:length", b"4:path", b"5:files", b"4:name")  # fmt: skip

    def __init__(self) -> None:
        from waku_legacy.identity.topics import CommunityId

        self.community = CommunityId(_key(0x61).public_key.format(compressed=True))

    def seeds(self) -> list[Seed]:
        from waku_legacy.archive.bencode import bencode

        info_multi = {
            b"name": str(self.community).encode(),
            b"piece length": 16384,
            b"pieces": b"\x01" * 40,
            b"files": [{b"length": 20000, b"path": [b"data"]},
                       {b"length": 500, b"path": [b"index"]}],
        }  # fmt: skip
        info_single = {b"name": b"one", b"piece length": 32768, b"pieces": b"\x02" * 20,
                       b"length": 100}  # fmt: skip
        out: list[Seed] = []
        for info in (info_multi, info_single):
            meta = {b"announce": b"udp://t:1/announce", b"announce-list": [[b"udp://t:1"]],
                    b"creation date": 1700000000, b"info": info}  # fmt: skip
            out.append(("torrent", bencode(meta)))
            out.append(("bdecode", bencode(info)))
        out.append(("bdecode", bencode([1, -5, b"", [b"x", {b"k": 0}]])))
        return out

    def run(self, mode: str, data: bytes) -> None:
        from waku_legacy.archive.bencode import bdecode
        from waku_legacy.archive.torrent import (
            check_archive_torrent_layout,
            load_torrent,
            torrent_from_info_bytes,
        )

        if mode == "torrent":
            # What fetch does with a .torrent: load it, check it is this community's
            # archive torrent, derive its magnet link and the info dictionary's own form.
            torrent = load_torrent(data)
            _ = torrent.magnet_uri, torrent.piece_count
            torrent_from_info_bytes(torrent.info_bytes)
            check_archive_torrent_layout(torrent, self.community)
        else:
            bdecode(data)


class _TomlTarget(Target):
    text = True
    tokens = (b"[", b"]", b"[[", b"]]", b"{", b"}", b"=", b'"', b"'", b"\n", b",", b".",
              b"-1", b"1e400", b"inf", b"nan", b"true", b"0x", b"99999999999999999999",
              b"1979-05-27T07:32:00Z", b'"""', b"\\u0000", b"../../", b"#", b"~",
              b"~nosuchuser/", b"\\ud800", b"\\U0010ffff")  # fmt: skip

    def __init__(self) -> None:
        self.dir = tempfile.mkdtemp(prefix="fuzz-toml-", dir="/dev/shm" if os.path.isdir(
            "/dev/shm") else None)  # fmt: skip
        atexit.register(shutil.rmtree, self.dir, True)  # the parent's exit (workers share it)

    def run(self, mode: str, data: bytes) -> None:
        # One file per process: the workers are forked after the target is built.
        path = Path(self.dir) / f"config-{os.getpid()}.toml"
        path.write_bytes(data)
        self.load(path)

    def load(self, path: Path) -> None:
        raise NotImplementedError


COMMUNITY_ID = "0x02" + "79be667ef9dcbbac55a06295ce870b07029bfcdb2dce28d959f2815b16f81798"
CHANNEL = "a1b2c3d4-0000-4000-8000-000000000001"


class MigrateTomlTarget(_TomlTarget):
    name = "toml-migrate"

    def seeds(self) -> list[Seed]:
        from tests.config_examples import full_migrate_config

        text = full_migrate_config(COMMUNITY_ID, CHANNEL)
        small = '[[source]]\nkind = "envelope-dump"\npath = "d/*.dump"\n[output]\nstore = ""\n' \
                'archive_dir = "a"\ntorrent_dir = "t"\n'  # fmt: skip
        return [("toml", text.encode()), ("toml", small.encode())]

    def load(self, path: Path) -> None:
        from waku_legacy.migrate.config import load_config

        load_config(path)


class BridgeTomlTarget(_TomlTarget):
    name = "toml-bridge"

    def __init__(self) -> None:
        super().__init__()
        # The example config reads its admin token from this file next to it.
        (Path(self.dir) / "admin.token").write_text("a-long-enough-admin-token\n")

    def seeds(self) -> list[Seed]:
        from tests.config_examples import full_bridge_config

        text = full_bridge_config(COMMUNITY_ID, CHANNEL)
        return [("toml", text.encode()), ("toml", b'[store]\nurl = "sqlite:///x.db"\n')]

    def load(self, path: Path) -> None:
        from waku_legacy.bridge.config import load_config

        load_config(path)


TARGETS: dict[str, type[Target]] = {
    t.name: t
    for t in (
        EnvelopeTarget, RequestTarget, FrameTarget, HandshakeTarget, WakuPacketTarget,
        RestQueryTarget,
        RestJsonTarget, ArchiveIndexTarget, ArchiveTarget, ArchiveJsonTarget, MagnetTarget,
        BencodeTarget,
        MigrateTomlTarget, BridgeTomlTarget,
    )
}  # fmt: skip


# -- mutations ----------------------------------------------------------------------------------

INTERESTING = bytes([0x00, 0x01, 0x7F, 0x80, 0x81, 0xB7, 0xB8, 0xBF, 0xC0, 0xC1, 0xF7, 0xF8,
                     0xFF, 0x0A, 0x12, 0x22, 0x30, 0x39, 0x3A, 0x65])  # fmt: skip
BIG_LENGTHS = (
    b"\xb9\xff\xff", b"\xbb\xff\xff\xff\xff", b"\xbf\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\xf9\xff\xff", b"\xfb\xff\xff\xff\xff", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", b"\x80\x80\x80\x80",
    b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", b"\x00",
)  # fmt: skip
NUMBERS = (b"0", b"-1", b"-0", b"1", b"255", b"256", b"65535", b"4294967296",
           b"18446744073709551616", b"9" * 30, b"-" + b"9" * 30, b"1e400", b"01")  # fmt: skip


def _tweak_length(buf: bytearray, rng: random.Random) -> None:
    """Make a length or count field lie: an RLP prefix or protobuf varint byte off by a
    little, a number in text made extreme, or a huge length spliced in."""
    if not buf:
        buf.extend(rng.choice(BIG_LENGTHS))
        return
    pos = rng.randrange(len(buf))
    choice = rng.random()
    if choice < 0.4:
        buf[pos] = (buf[pos] + rng.choice((-2, -1, 1, 2, 16, -16, 0x38, 0x80))) & 0xFF
    elif choice < 0.7:
        buf[pos : pos + rng.randint(1, 3)] = rng.choice(BIG_LENGTHS)
    else:  # decimal numbers in text (bencode lengths, TOML, JSON, query strings)
        start = pos
        while start < len(buf) and not 0x30 <= buf[start] <= 0x39:
            start += 1
        end = start
        while end < len(buf) and 0x30 <= buf[end] <= 0x39:
            end += 1
        buf[start:end] = rng.choice(NUMBERS)


def mutate(data: bytes, others: list[Seed], rng: random.Random, tokens: tuple[bytes, ...]
           ) -> bytes:  # fmt: skip
    if rng.random() < 0.02:
        return rng.randbytes(rng.choice((0, 1, 2, 8, 33, 100, 1000, rng.randrange(4096))))
    buf = bytearray(data)
    for _ in range(min(5, 1 + int(rng.expovariate(1.2)))):
        op = rng.randrange(11 if tokens else 10)
        n = len(buf)
        if op == 0 and n:  # bit flips
            for _ in range(rng.randint(1, 4)):
                p = rng.randrange(n)
                buf[p] ^= 1 << rng.randrange(8)
        elif op == 1 and n:  # interesting byte
            buf[rng.randrange(n)] = rng.choice(INTERESTING)
        elif op == 2:  # insert bytes
            p = rng.randint(0, n)
            buf[p:p] = rng.randbytes(rng.choice((1, 1, 2, 4, 8, 32)))
        elif op == 3 and n:  # delete a range
            p = rng.randrange(n)
            del buf[p : p + rng.choice((1, 1, 2, 4, 16, 64))]
        elif op == 4 and n:  # duplicate a chunk elsewhere
            p = rng.randrange(n)
            chunk = buf[p : p + rng.randint(1, 64)]
            q = rng.randint(0, n)
            buf[q:q] = chunk * rng.choice((1, 1, 2, 8))
        elif op == 5:  # splice with another seed
            other = rng.choice(others)[1]
            cut = rng.randint(0, n)
            buf = buf[:cut] + other[rng.randint(0, len(other)) :]
        elif op in (6, 7):  # length fields
            _tweak_length(buf, rng)
        elif op == 8 and n:  # truncate
            del buf[rng.randrange(n) :]
        elif op == 9:  # extend
            buf += rng.randbytes(rng.choice((1, 3, 16, 100)))
        elif op == 10:  # grammar token
            p = rng.randint(0, n)
            token = rng.choice(tokens)
            if rng.random() < 0.1:
                token *= rng.choice((10, 100, 2000))  # nesting, repetition
            buf[p:p] = token
    return bytes(buf)


# -- the run -------------------------------------------------------------------------------------


@dataclass
class Stats:
    name: str
    inputs: int = 0
    typed: int = 0
    accepted: int = 0
    crashes: int = 0
    slowest_ms: float = 0.0
    slowest_mode: str = ""
    slowest_input: str = ""  # hex, first 256 bytes
    over_100ms: int = 0
    seconds: float = 0.0
    crash_kinds: dict[str, int] = field(default_factory=dict)
    examples: list[dict[str, Any]] = field(default_factory=list)

    def merge(self, other: Stats, max_examples: int) -> None:
        self.inputs += other.inputs
        self.typed += other.typed
        self.accepted += other.accepted
        self.crashes += other.crashes
        self.over_100ms += other.over_100ms
        self.seconds += other.seconds
        if other.slowest_ms > self.slowest_ms:
            self.slowest_ms = other.slowest_ms
            self.slowest_mode = other.slowest_mode
            self.slowest_input = other.slowest_input
        for kind, count in other.crash_kinds.items():
            self.crash_kinds[kind] = self.crash_kinds.get(kind, 0) + count
        seen = {e["kind"] for e in self.examples}
        for example in other.examples:
            if len(self.examples) < max_examples and (
                example["kind"] not in seen or len(seen) >= max_examples
            ):
                self.examples.append(example)
                seen.add(example["kind"])


class Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise Hang(f"no answer after {HANG_SECONDS} s")


_TARGETS: dict[str, tuple[Target, list[Seed]]] = {}


def _target(name: str) -> tuple[Target, list[Seed]]:
    if name not in _TARGETS:
        target = TARGETS[name]()
        _TARGETS[name] = (target, target.seeds())
    return _TARGETS[name]


def _crash_kind(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "/bench/" not in f.filename] or frames
    where = f"{Path(ours[-1].filename).name}:{ours[-1].lineno}" if ours else "?"
    return f"{type(exc).__name__} at {where}"


def _call(target: Target, mode: str, data: bytes) -> tuple[str, float, BaseException | None]:
    start = time.perf_counter()
    try:
        target.run(mode, data)
    except WakuLegacyError:
        return "typed", time.perf_counter() - start, None
    except (Exception, RecursionError) as exc:  # everything else is a crash
        return "crash", time.perf_counter() - start, exc
    return "accepted", time.perf_counter() - start, None


def run_chunk(task: tuple[str, int, int, int, int]) -> Stats:
    name, seed, chunk, count, max_examples = task
    target, seeds = _target(name)
    rng = random.Random(f"{seed}:{name}:{chunk}")
    stats = Stats(name)
    slow: list[tuple[float, str, bytes]] = []
    started = time.perf_counter()
    signal.signal(signal.SIGALRM, _alarm)
    for _ in range(count):
        mode, base = seeds[rng.randrange(len(seeds))]
        data = mutate(base, seeds, rng, target.tokens)
        signal.setitimer(signal.ITIMER_REAL, HANG_SECONDS)
        try:
            outcome, elapsed, exc = _call(target, mode, data)
        except Hang as hang:
            outcome, elapsed, exc = "crash", HANG_SECONDS, hang
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        stats.inputs += 1
        if outcome == "typed":
            stats.typed += 1
        elif outcome == "accepted":
            stats.accepted += 1
        else:
            assert exc is not None
            stats.crashes += 1
            kind = _crash_kind(exc)
            stats.crash_kinds[kind] = stats.crash_kinds.get(kind, 0) + 1
            if len(stats.examples) < max_examples and kind not in {
                e["kind"] for e in stats.examples
            }:
                stats.examples.append({
                    "kind": kind, "mode": mode, "input_hex": data.hex(),
                    "traceback": "".join(traceback.format_exception(exc)),
                })  # fmt: skip
        if len(slow) < RETIME or elapsed > slow[0][0]:
            slow.append((elapsed, mode, data))
            slow.sort(key=lambda s: s[0])
            del slow[:-RETIME]
    # The slowest inputs again, best of 3: what the decoder costs, not a scheduler pause.
    for _, mode, data in slow:
        best = min(_call(target, mode, data)[1] for _ in range(3))
        ms = best * 1000
        if ms > SLOW_MS:
            stats.over_100ms += 1
        if ms > stats.slowest_ms:
            stats.slowest_ms, stats.slowest_mode = ms, mode
            stats.slowest_input = data[:256].hex()
    stats.seconds = time.perf_counter() - started
    return stats


def run(names: list[str], n: int, seed: int, workers: int, max_examples: int,
        progress: bool) -> dict[str, Stats]:  # fmt: skip
    tasks = []
    for name in names:
        for chunk in range((n + CHUNK - 1) // CHUNK):
            tasks.append((name, seed, chunk, min(CHUNK, n - chunk * CHUNK), max_examples))
    results = {name: Stats(name) for name in names}
    done = 0
    started = time.monotonic()
    if workers <= 1:
        iterator: Any = map(run_chunk, tasks)
        pool = None
    else:
        pool = multiprocessing.get_context("fork").Pool(workers)
        iterator = pool.imap_unordered(run_chunk, tasks)
    try:
        for stats in iterator:
            results[stats.name].merge(stats, max_examples)
            done += 1
            if progress and (done % 20 == 0 or done == len(tasks)):
                elapsed = time.monotonic() - started
                print(f"  {done}/{len(tasks)} chunks, {elapsed:.0f} s", file=sys.stderr,
                      flush=True)  # fmt: skip
    finally:
        if pool is not None:
            pool.close()
            pool.join()
    return results


def save_examples(results: dict[str, Stats], directory: Path) -> None:
    for stats in results.values():
        for i, example in enumerate(stats.examples):
            base = directory / stats.name
            base.mkdir(parents=True, exist_ok=True)
            (base / f"crash-{i}.bin").write_bytes(bytes.fromhex(example["input_hex"]))
            (base / f"crash-{i}.txt").write_text(
                f"decoder: {stats.name}\nmode: {example['mode']}\nkind: {example['kind']}\n\n"
                + example["traceback"]
            )


def table(results: dict[str, Stats], wall: float) -> str:
    head = (f"{'decoder':<16} {'inputs':>10} {'typed errors':>12} {'accepted':>9} "
            f"{'crashes':>7} {'slowest ms':>10} {'>100ms':>6} {'inputs/s':>9}")  # fmt: skip
    lines = [head, "-" * len(head)]
    for s in results.values():
        rate = s.inputs / s.seconds if s.seconds else 0.0
        lines.append(
            f"{s.name:<16} {s.inputs:>10,} {s.typed:>12,} {s.accepted:>9,} {s.crashes:>7,} "
            f"{s.slowest_ms:>10.2f} {s.over_100ms:>6} {rate:>9,.0f}"
        )
    total = sum(s.inputs for s in results.values())
    crashes = sum(s.crashes for s in results.values())
    slowest = max((s.slowest_ms for s in results.values()), default=0.0)
    lines.append("-" * len(head))
    lines.append(f"{'total':<16} {total:>10,} {sum(s.typed for s in results.values()):>12,} "
                 f"{sum(s.accepted for s in results.values()):>9,} {crashes:>7,} "
                 f"{slowest:>10.2f} {sum(s.over_100ms for s in results.values()):>6}"
                 f"   wall {wall:.0f} s")  # fmt: skip
    for s in results.values():
        for kind, count in sorted(s.crash_kinds.items()):
            lines.append(f"  crash in {s.name}: {kind} x{count}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="inputs per decoder")
    parser.add_argument("--seed", type=int, default=1, help="the run's seed (deterministic)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--only", action="append", choices=sorted(TARGETS), metavar="NAME",
                        help=f"one decoder (repeatable): {', '.join(TARGETS)}")  # fmt: skip
    parser.add_argument("--crash-dir", default="fuzz-crashes", help="where crash examples go")
    parser.add_argument("--examples", type=int, default=5, help="crash examples per decoder")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    names = args.only or list(TARGETS)
    for name in names:  # build every seed set once here: a broken seed fails fast
        _target(name)
    started = time.monotonic()
    results = run(names, args.n, args.seed, max(1, args.workers), args.examples,
                  not args.quiet)  # fmt: skip
    wall = time.monotonic() - started
    if any(s.examples for s in results.values()):
        save_examples(results, Path(args.crash_dir))
    if args.json:
        doc = {
            "seed": args.seed, "n": args.n, "workers": args.workers, "wall_seconds": wall,
            "decoders": {
                s.name: {
                    "inputs": s.inputs, "typed_errors": s.typed, "accepted": s.accepted,
                    "crashes": s.crashes, "crash_kinds": s.crash_kinds,
                    "slowest_ms": round(s.slowest_ms, 3), "slowest_mode": s.slowest_mode,
                    "slowest_input_hex": s.slowest_input, "over_100ms": s.over_100ms,
                    "cpu_seconds": round(s.seconds, 1),
                }
                for s in results.values()
            },
        }  # fmt: skip
        print(json.dumps(doc, indent=2))
    else:
        print(table(results, wall))
        if any(s.examples for s in results.values()):
            print(f"crash examples: {Path(args.crash_dir).resolve()}")
    bad = any(s.crashes or s.over_100ms for s in results.values())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
