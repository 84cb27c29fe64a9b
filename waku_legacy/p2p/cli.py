"""``waku-legacy store query``: ask a store node over libp2p (store v3), as a Waku v2 client
does: TCP or WebSocket, Noise, yamux (or ``--muxer mplex``).

Prints a table of the messages, or with ``--json`` one document per run: every page's
request id, status and cursor, and every message (hash, pubsub topic, and with data its
content topic, timestamp, version, payload and meta as 0x hex).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from waku_legacy.identity.cli import CommandLineValueError, parse_hex, parse_int64

__all__ = ["register"]


def _hex(data: bytes) -> str:
    return "0x" + data.hex()


def _message_json(entry: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"messageHash": _hex(entry.message_hash)}
    if entry.HasField("pubsub_topic"):
        out["pubsubTopic"] = entry.pubsub_topic
    if entry.HasField("message"):
        m = entry.message
        out["message"] = {
            "contentTopic": m.content_topic,
            "timestamp": m.timestamp,
            "version": m.version,
            "payload": _hex(m.payload),
            "meta": _hex(m.meta),
        }
    return out


def _page_json(response: Any) -> dict[str, Any]:
    return {
        "requestId": response.request_id,
        "statusCode": response.status_code,
        "statusDesc": response.status_desc,
        "messages": [_message_json(entry) for entry in response.messages],
        "paginationCursor": (
            _hex(response.pagination_cursor) if response.HasField("pagination_cursor") else None
        ),
    }


def _print_table(pages: list[dict[str, Any]]) -> None:
    out = sys.stdout
    for number, page in enumerate(pages, 1):
        out.write(
            f"page {number}: status {page['statusCode']} {page['statusDesc']}, "
            f"{len(page['messages'])} messages, cursor {page['paginationCursor'] or '-'}\n"
        )
        for message in page["messages"]:
            data = message.get("message")
            detail = ""
            if data is not None:
                size = (len(data["payload"]) - 2) // 2
                detail = f"  {data['timestamp']}  {data['contentTopic']}  {size} B"
            out.write(f"  {message['messageHash']}  {message.get('pubsubTopic', '-')}{detail}\n")


def _query_command(args: argparse.Namespace) -> int:
    import asyncio

    from waku_legacy.console import print_json
    from waku_legacy.p2p.store_client import StoreQueryArgs, query_pages
    from waku_legacy.p2p.transport.native_client import NativeClient

    if args.page_size is not None and args.page_size < 1:
        raise CommandLineValueError("--page-size", "must be at least 1")
    if args.pages < 1:
        raise CommandLineValueError("--pages", "must be at least 1")
    query = StoreQueryArgs(
        pubsub_topic=args.pubsub_topic,
        content_topics=tuple(args.content_topic),
        time_start=parse_int64("--start", args.start) if args.start is not None else None,
        time_end=parse_int64("--end", args.end) if args.end is not None else None,
        message_hashes=tuple(parse_hex("--hash", h) for h in args.hash),
        include_data=not args.hashes_only,
        forward=not args.backward,
        page_size=args.page_size,
        cursor=parse_hex("--cursor", args.cursor) if args.cursor is not None else None,
    )

    async def run() -> list[dict[str, Any]]:
        pages = []
        async with NativeClient.dial(args.peer, muxers=(args.muxer,), timeout=args.timeout) as c:
            async for response in query_pages(c, query, max_pages=args.pages):
                pages.append(_page_json(response))
        return pages

    pages = asyncio.run(run())
    if args.json:
        print_json({"peer": args.peer, "pages": pages})
    else:
        _print_table(pages)
    return 0 if all(page["statusCode"] == 200 for page in pages) else 1


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    store = subparsers.add_parser("store", help="ask a Waku v2 store node over libp2p (store v3)")
    commands = store.add_subparsers(dest="store_command", metavar="COMMAND")
    commands.required = True
    query = commands.add_parser(
        "query",
        help="one or more pages of a store v3 query",
        description=(
            "Dial PEER (a multiaddr ending in /p2p/<peer id>, TCP or /ws) with Noise and "
            "yamux (or mplex), send StoreQueryRequests on /vac/waku/store-query/3.0.0 and "
            "print the answers. Exit 0 when every page has status 200, 1 otherwise."
        ),
    )
    query.add_argument("--peer", required=True, metavar="MULTIADDR")
    query.add_argument("--pubsub-topic", metavar="T")
    query.add_argument("--content-topic", action="append", default=[], metavar="C")
    query.add_argument("--hash", action="append", default=[], metavar="HEX", help="repeatable")
    query.add_argument("--start", metavar="NS", help="time_start, Unix nanoseconds")
    query.add_argument("--end", metavar="NS", help="time_end, Unix nanoseconds")
    from waku_legacy.store.types import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE

    query.add_argument(
        "--page-size", type=int, metavar="N",
        help=f"pagination_limit (default: not sent; the node then pages by its own default, "
        f"{DEFAULT_PAGE_SIZE} on nwaku, which caps any size at {MAX_PAGE_SIZE})",
    )  # fmt: skip
    query.add_argument("--cursor", metavar="HEX", help="a message hash to start after")
    query.add_argument("--backward", action="store_true", help="newest first")
    query.add_argument("--hashes-only", action="store_true", help="include_data = false")
    query.add_argument("--pages", type=int, default=1, metavar="N", help="follow cursors")
    query.add_argument("--muxer", choices=("yamux", "mplex"), default="yamux")
    query.add_argument("--timeout", type=float, default=20.0, metavar="S")
    query.add_argument("--json", action="store_true", help="one JSON document")
    query.set_defaults(func=_query_command)
