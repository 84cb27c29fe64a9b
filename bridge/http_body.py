"""Reading an HTTP response body from a node the bridge talks to, with a size limit.

One place for it (the history pull's store pages, the relay's answers): the whole body,
however the server chunks it (``response.content.read(n)`` returns only what happens to be
buffered), refused with :class:`ResponseTooLarge` as soon as it is known to be over the
limit, so a hostile or broken node cannot make the bridge buffer without bound."""

from __future__ import annotations

import aiohttp

from waku_legacy.errors import WakuLegacyError

__all__ = ["ResponseTooLarge", "read_body", "read_text"]


class ResponseTooLarge(WakuLegacyError):
    """A response body over the size the bridge accepts from that node."""


async def read_body(response: aiohttp.ClientResponse, limit: int, what: str) -> bytes:
    """The whole body of ``response``, or :class:`ResponseTooLarge` over ``limit`` bytes."""
    declared = response.content_length
    if declared is not None and declared > limit:
        raise ResponseTooLarge(f"{what}: the body is {declared} bytes, over the {limit}-byte limit")
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise ResponseTooLarge(f"{what}: the body is over the {limit}-byte limit")
        chunks.append(chunk)
    return b"".join(chunks)


async def read_text(response: aiohttp.ClientResponse, limit: int, what: str) -> str:
    """The body as text for a log line or an error (undecodable bytes replaced, a body over
    ``limit`` cut to a note: never an exception for what the node sent)."""
    try:
        body = await read_body(response, limit, what)
    except ResponseTooLarge:
        return f"(a body over {limit} bytes)"
    return body.decode("utf-8", "replace")
