"""``waku-legacy hash`` and ``waku-legacy topics``: identity look-ups for operators.

Both print one JSON document on stdout that echoes the (normalised) inputs beside the
result, so a pasted output says what it was computed from. Bad input is a
:class:`~waku_legacy.errors.WakuLegacyError`, which the entry point turns into a message on
stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from waku_legacy.errors import DecodeError
from waku_legacy.identity.message_hash import deterministic_hash
from waku_legacy.identity.shards import (
    STATUS_CLUSTER_ID,
    community_pubsub_topic,
    shard_category,
)
from waku_legacy.identity.topics import CommunityId, chat_topic, content_topic_of_chat

__all__ = ["CommandLineValueError", "parse_hex", "parse_int64", "register"]

_HEX = re.compile(r"(?:0[xX])?((?:[0-9a-fA-F]{2})*)")
_INT = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
MAX_META_SIZE = 64  # 14/WAKU2-MESSAGE


class CommandLineValueError(DecodeError):
    """A command-line value that does not parse (names the option)."""


def parse_hex(option: str, text: str) -> bytes:
    """Hex with an optional ``0x``; an even number of digits; empty is allowed."""
    match = _HEX.fullmatch(text.strip())
    if match is None:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise CommandLineValueError(
            option, f"{shown!r} is not hex (an even number of 0-9a-f digits, optional 0x)"
        )
    return bytes.fromhex(match.group(1))


def parse_int64(option: str, text: str) -> int:
    if _INT.fullmatch(text.strip()) is None:
        raise CommandLineValueError(option, f"{text[:40]!r} is not a decimal integer")
    value = int(text)
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise CommandLineValueError(option, f"{value} does not fit in a signed 64-bit integer")
    return value


def _hash_command(args: argparse.Namespace) -> int:
    from waku_legacy.console import print_json

    payload = parse_hex("--payload", args.payload)
    meta = parse_hex("--meta", args.meta) if args.meta is not None else b""
    if len(meta) > MAX_META_SIZE:
        raise CommandLineValueError(
            "--meta", f"{len(meta)} bytes is over the {MAX_META_SIZE}-byte meta limit"
        )
    timestamp = parse_int64("--timestamp", args.timestamp)
    for option, text in (
        ("--pubsub-topic", args.pubsub_topic),
        ("--content-topic", args.content_topic),
    ):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # undecodable argv bytes arrive as lone surrogates
            raise CommandLineValueError(option, "is not valid UTF-8") from None
    digest = deterministic_hash(args.pubsub_topic, payload, args.content_topic, meta, timestamp)
    print_json(
        {
            "hash": "0x" + digest.hex(),
            "pubsub_topic": args.pubsub_topic,
            "content_topic": args.content_topic,
            "payload": "0x" + payload.hex(),
            "meta": "0x" + meta.hex(),
            "timestamp": timestamp,
        }
    )
    return 0


def _chat_entry(chat_id: str) -> dict[str, str]:
    return {
        "chat_id": chat_id,
        "v1_topic": "0x" + chat_topic(chat_id).hex(),
        "content_topic": content_topic_of_chat(chat_id),
    }


def _parse_shard(text: str) -> int:
    if _INT.fullmatch(text.strip()) is None:
        raise CommandLineValueError("--shard", f"{text[:40]!r} is not a decimal shard index")
    return int(text)


def _topics_command(args: argparse.Namespace) -> int:
    from waku_legacy.console import print_json

    community = CommunityId.parse(args.community)
    channels = []
    for channel in args.channel:
        entry = {"uuid": channel.lower()}
        entry.update(_chat_entry(community.channel_chat_id(channel)))
        channels.append(entry)
    shard_json: dict[str, Any] | None = None
    pubsub_topic = None
    if args.shard is None:
        # no guess (it was status-go's non-protected shard 64, where no community lives)
        print(
            "topics: warning: no --shard: the community's pubsub topic is not shown; give "
            "--shard N (its relay shard on cluster 16)",
            file=sys.stderr,
        )
    else:
        shard = _parse_shard(args.shard)
        pubsub_topic = community_pubsub_topic(shard, allow_any=args.allow_any_shard)
        shard_json = {
            "cluster": STATUS_CLUSTER_ID,
            "index": shard,
            "category": shard_category(shard).name.lower(),
            "source": "--shard",
        }
    print_json(
        {
            "community_id": str(community),
            "community": _chat_entry(community.chat_id),
            "channels": channels,
            "magnetlinks": _chat_entry(community.magnetlinks_chat_id),
            # <id>-memberUpdate: current clients' archive links (and, since status-go PR #5864,
            # every community chat message)
            "universal": _chat_entry(community.universal_chat_id),
            "pubsub_topic": pubsub_topic,
            "shard": shard_json,
        }
    )
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    hash_parser = subparsers.add_parser(
        "hash",
        help="deterministic message hash (14/WAKU2-MESSAGE) of a v2 message",
        description=(
            "Print sha256(pubsub_topic || payload || content_topic || meta || timestamp "
            "big-endian int64) as 0x hex, the key nwaku and go-waku stores use."
        ),
    )
    hash_parser.add_argument("--pubsub-topic", required=True, metavar="T")
    hash_parser.add_argument("--content-topic", required=True, metavar="C")
    hash_parser.add_argument("--payload", required=True, metavar="HEX", help="0x optional")
    hash_parser.add_argument("--meta", metavar="HEX", help="at most 64 bytes; default empty")
    hash_parser.add_argument(
        "--timestamp", required=True, metavar="NS", help="Unix nanoseconds (0 when unset)"
    )
    hash_parser.set_defaults(func=_hash_command)

    topics_parser = subparsers.add_parser(
        "topics",
        help="content and pubsub topics of a Status community",
        description=(
            "Print the community's own chat id and content topic, each channel's, the "
            "magnet-link channel's, and the community's pubsub topic."
        ),
    )
    topics_parser.add_argument(
        "--community", required=True, metavar="0x<66 hex>", help="compressed public key"
    )
    topics_parser.add_argument(
        "--channel", action="append", default=[], metavar="UUID", help="repeatable"
    )
    topics_parser.add_argument(
        "--shard",
        metavar="N",
        help=(
            f"the community's relay shard on cluster {STATUS_CLUSTER_ID} (16-767); without "
            "it the pubsub topic is not shown"
        ),
    )
    topics_parser.add_argument(
        "--allow-any-shard",
        action="store_true",
        help="accept a --shard outside the community ranges of 57/STATUS-Simple-Scaling",
    )
    topics_parser.set_defaults(func=_topics_command)
