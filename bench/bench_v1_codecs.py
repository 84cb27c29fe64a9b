"""Throughput of the protocol-core codecs beside the raw library calls they wrap.

Run: ``.venv/bin/python bench/bench_v1_codecs.py [--seconds 1.0] [--data-size 400]``

For each operation the wrapper and the raw call are timed in the same run, interleaved
(best of several rounds), and the table shows operations per second and the wrapper/raw
cost ratio; the project's budget is a ratio of at most 1.5.

- envelope decode: ``Envelope.decode`` vs ``rlp.decode`` of the same bytes;
- message hash: ``message_hash`` (14/WAKU2-MESSAGE) vs one ``hashlib.sha256`` over the parts;
- payload decrypt+recover: ``decode_payload`` vs AES-GCM decrypt + coincurve key recovery;
- archive-message encode: ``archive_message(...).SerializeToString()`` vs building and
  serialising the protobuf directly.
"""

from __future__ import annotations

import argparse
import hashlib
import struct
import sys
import time
from collections.abc import Callable

import coincurve
import rlp
from Crypto.Cipher import AES

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.identity.message_hash import message_hash
from waku_legacy.mailserver_compat.convert import archive_message
from waku_legacy.mailserver_compat.envelope import Envelope
from waku_legacy.mailserver_compat.payload import decode_payload, encode_payload
from waku_legacy.proto import status_archive_pb2, waku_message_pb2

BUDGET = 1.5


def _rate(function: Callable[[], object], seconds: float) -> float:
    """Calls per second: best of 5 rounds of ``seconds / 5`` each."""
    best = 0.0
    for _ in range(5):
        calls, start = 0, time.perf_counter()
        deadline = start + seconds / 5
        while True:
            for _ in range(50):
                function()
            calls += 50
            now = time.perf_counter()
            if now >= deadline:
                break
        best = max(best, calls / (now - start))
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="time per measurement")
    parser.add_argument("--data-size", type=int, default=400, help="payload bytes per message")
    args = parser.parse_args(argv)

    payload = bytes(range(256)) * (args.data_size // 256 + 1)
    payload = payload[: args.data_size]
    key = b"k" * 32
    signer = coincurve.PrivateKey(b"\x11" * 32)

    envelope_bytes = Envelope(
        expiry=1_700_000_050, ttl=50, topic=b"\x01\x02\x03\x04", data=payload, nonce=123_456
    ).encode()

    pubsub, content = "/waku/2/rs/16/64", "/waku/1/0x01020304/rfc26"
    message = waku_message_pb2.WakuMessage(
        payload=payload, content_topic=content, timestamp=1_700_000_000_000_000_000
    )
    pack_ts = struct.Struct(">q").pack

    def raw_hash() -> bytes:
        return hashlib.sha256(
            pubsub.encode() + message.payload + message.content_topic.encode()
            + message.meta + pack_ts(message.timestamp)
        ).digest()  # fmt: skip

    data = encode_payload(payload, sign_with=signer, symmetric_key=key)

    def raw_open() -> bytes:
        plaintext = AES.new(key, AES.MODE_GCM, nonce=data[-12:]).decrypt_and_verify(
            data[:-28], data[-28:-12]
        )
        return coincurve.PublicKey.from_signature_and_message(
            plaintext[-65:], keccak256(plaintext[:-65]), hasher=None
        ).format(compressed=False)

    decoded = decode_payload(data, symmetric_key=key)
    digest = b"h" * 32

    def wrapped_archive() -> bytes:
        return archive_message(
            message_hash=digest, topic=b"\x01\x02\x03\x04", timestamp=1_700_000_000, decoded=decoded
        ).SerializeToString()

    def raw_archive() -> bytes:
        return status_archive_pb2.WakuMessage(
            sig=decoded.signer,
            timestamp=1_700_000_000,
            topic=b"\x01\x02\x03\x04",
            payload=decoded.payload,
            padding=decoded.padding,
            hash=digest,
        ).SerializeToString()

    assert wrapped_archive() == raw_archive()
    assert message_hash(pubsub, message) == raw_hash()
    assert decoded.signer == raw_open()

    cases: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        (
            "envelope decode",
            lambda: Envelope.decode(envelope_bytes),
            lambda: rlp.decode(envelope_bytes),
        ),
        ("message hash", lambda: message_hash(pubsub, message), raw_hash),
        ("payload decrypt+recover", lambda: decode_payload(data, symmetric_key=key), raw_open),
        ("archive-message encode", wrapped_archive, raw_archive),
    ]

    print(f"data size {args.data_size} bytes, {args.seconds:.1f} s per measurement")
    print(f"{'operation':<26}{'wrapper ops/s':>15}{'raw ops/s':>13}{'ratio':>8}  budget")
    worst = 0.0
    for name, wrapped, raw in cases:
        raw_rate = _rate(raw, args.seconds)
        wrapped_rate = _rate(wrapped, args.seconds)
        ratio = raw_rate / wrapped_rate
        worst = max(worst, ratio)
        verdict = "ok" if ratio <= BUDGET else "OVER"
        print(f"{name:<26}{wrapped_rate:>15,.0f}{raw_rate:>13,.0f}{ratio:>8.2f}  {verdict}")
    return 0 if worst <= BUDGET else 1


if __name__ == "__main__":
    sys.exit(main())
