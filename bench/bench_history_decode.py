"""Benchmark: decoding the Status application layer of N community messages (default 20,000).

The readable history decodes every archived or stored message (``history.decode``); its
floor is what status-go itself must do per message: open the layers and recover the
author's key from the signature (``identity.application.open_application``). Prints both,
measured in the same run over the same messages (microseconds per message on one core, the
best of 5 rounds in which the two alternate), and their ratio.

    .venv/bin/python bench/bench_history_decode.py
    .venv/bin/python bench/bench_history_decode.py --messages 100000
    .venv/bin/python bench/bench_history_decode.py --bare   # the 1M migration bench's layering
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

import coincurve

from waku_legacy.crypto.keccak import keccak256
from waku_legacy.history.decode import decode_application
from waku_legacy.history.events import WakuFacts
from waku_legacy.identity.application import open_application
from waku_legacy.proto import application_metadata_pb2, chat_message_pb2
from waku_legacy.proto.status_layers import wrap_protocol_message

COMMUNITY = "0x" + coincurve.PrivateKey(b"\x11" * 32).public_key.format().hex()
CHANNEL = "8b5a8e0d-3a1b-4f3e-9c2d-1e7f6a5b4c3d"
T0 = 1_650_000_000


def messages(count: int, authors: int = 200, *, bare: bool = False) -> list[bytes]:
    """``count`` signed ChatMessages in a community channel, each in a ProtocolMessage as
    status-go sends them, or (``bare``) the ApplicationMetadataMessage alone, as the 1M
    migration bench's sample (``migrate.sample``) and older senders have them."""
    keys = [coincurve.PrivateKey(os.urandom(32)) for _ in range(authors)]
    out = []
    for i in range(count):
        chat = chat_message_pb2.ChatMessage(
            clock=T0 * 1000 + i, timestamp=T0 * 1000 + i, chat_id=COMMUNITY + CHANNEL,
            text=f"message {i}: " + "lorem ipsum dolor sit amet " * (1 + i % 6),
            message_type=5, content_type=1,
        ).SerializeToString()  # fmt: skip
        key = keys[i % authors]
        app = application_metadata_pb2.ApplicationMetadataMessage(
            signature=key.sign_recoverable(keccak256(chat), hasher=None), payload=chat, type=1
        ).SerializeToString()
        out.append(app if bare else wrap_protocol_message(app, "2"))
    return out


def best_us(
    runs: dict[str, Callable[[bytes], object]], data: list[bytes], rounds: int = 5
) -> dict[str, float]:
    """Best time per message of each run, the runs alternating round by round (a shared,
    busy machine slows both alike)."""
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            for item in data:
                run(item)
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: seconds / len(data) * 1e6 for name, seconds in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument(
        "--bare", action="store_true",
        help="bare ApplicationMetadataMessages (as the 1M migration bench's sample) instead "
        "of ProtocolMessage-wrapped ones",
    )  # fmt: skip
    args = parser.parse_args()
    data = messages(args.messages, bare=args.bare)
    facts = WakuFacts("0x" + "00" * 32, "/waku/1/0x00000000/rfc26", "", T0 + 10**6, "")
    signer = "0x" + coincurve.PrivateKey(b"\x22" * 32).public_key.format(compressed=False).hex()
    times = best_us(
        {
            "floor": lambda d: open_application(d, "bench", max_size=1 << 24),
            "decode": lambda d: decode_application(d, signer, facts, COMMUNITY),
        },
        data,
    )
    floor, decode = times["floor"], times["decode"]
    layering = "bare" if args.bare else "ProtocolMessage-wrapped"
    print(f"{args.messages:,} {layering} chat messages, one core, best of 5 alternating rounds")
    print(f"  baseline open_application (layers + signer recovery): {floor:7.1f} us/message")
    print(f"  decode_application (events, validation, ids):         {decode:7.1f} us/message"
          f"  ({decode / floor:.2f}x the baseline; {1e6 / decode:,.0f} messages/s)")  # fmt: skip


if __name__ == "__main__":
    main()
