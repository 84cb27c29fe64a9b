"""A local stand-in for a Logos Storage node: the REST subset the archive back end uses.

Facts from logos-storage-nim (``openapi.yaml``, ``storage/rest/api.nim``, ``storage/node.nim``,
``storage/multicodec_exts.nim``; read at the commits named in docs/compat/logos-storage.md):

- ``POST /api/storage/v1/data``: the body is stored; 200, the CID as text/plain. The real
  node answers with the CID of the dataset's manifest: CIDv1, codec ``storage-manifest``
  (0xCD01), multihash sha2-256, printed base58btc (``z…``). Here the digest is SHA-256 of the
  uploaded bytes (the real one hashes the manifest block, which holds the Merkle root of the
  64 KiB blocks): same shape, same content addressing (equal bytes, equal CID), different
  digest. An empty body stores no block; the node's Merkle tree over zero leaves fails and the
  upload answers 500 with the reason.
- ``GET /api/storage/v1/data/{cid}/network/stream``: 200 with the bytes; 400 when ``cid``
  does not parse as a CID; 404 when the content cannot be found.
- ``GET /api/storage/v1/data/{cid}/exists``: 200, ``{"<cid>": true|false}`` as JSON (the
  node answers whether the block named by the CID -- the manifest -- is in its local store,
  ``node.hasLocalBlock``); 400 when ``cid`` does not parse.
- Any other method on these paths: 405 (the router has no such route).

``uploads`` counts successful uploads; ``downloads`` counts served streams; ``requests``
counts every request. Faults a real node shows: :meth:`FakeLogosStorage.lose_everything`
(block TTL expiry, a wiped repo), ``fail_next`` answers that many requests with 500, and
``drop_next`` closes that many connections without an answer.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from aiohttp import web

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
STORAGE_MANIFEST = 0xCD01
SHA2_256 = 0x12


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _b58encode(data: bytes) -> str:
    number = int.from_bytes(data, "big")
    out = ""
    while number:
        number, rest = divmod(number, 58)
        out = _B58[rest] + out
    return "1" * (len(data) - len(data.lstrip(b"\0"))) + out


def _b58decode(text: str) -> bytes:
    number = 0
    for char in text:
        number = number * 58 + _B58.index(char)  # ValueError for a foreign character
    body = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return b"\0" * (len(text) - len(text.lstrip("1"))) + body


def cid_of(data: bytes) -> str:
    """CIDv1, codec storage-manifest, sha2-256 multihash, multibase base58btc."""
    digest = hashlib.sha256(data).digest()
    raw = _varint(1) + _varint(STORAGE_MANIFEST) + bytes([SHA2_256, len(digest)]) + digest
    return "z" + _b58encode(raw)


def parses_as_cid(text: str) -> bool:
    if not text.startswith("z"):
        return False
    try:
        raw = _b58decode(text[1:])
    except ValueError:
        return False
    head = _varint(1) + _varint(STORAGE_MANIFEST) + bytes([SHA2_256, 32])
    return raw.startswith(head) and len(raw) == len(head) + 32


class FakeLogosStorage:
    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.uploads = 0
        self.downloads = 0
        self.requests = 0
        self.exists_checks = 0
        self.fail_next = 0  # answer this many requests with 500
        self.drop_next = 0  # close this many connections without an answer
        self.url = ""

    def lose_everything(self) -> None:
        """What a node whose blocks expired (or whose repo was wiped) holds: nothing."""
        self.blobs.clear()

    @web.middleware
    async def _faults(self, request: web.Request, handler):  # type: ignore[no-untyped-def]
        self.requests += 1
        if self.drop_next:
            self.drop_next -= 1
            assert request.transport is not None
            request.transport.close()  # the connection drops: no status line at all
            return web.Response(status=500)  # never reaches the client
        if self.fail_next:
            self.fail_next -= 1
            await request.read()
            return web.Response(status=500, text="Internal Server Error (injected)")
        return await handler(request)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[self._faults])
        app.router.add_post("/api/storage/v1/data", self.upload)
        app.router.add_get("/api/storage/v1/data/{cid}/exists", self.exists)
        app.router.add_get("/api/storage/v1/data/{cid}/network/stream", self.stream)
        return app

    async def upload(self, request: web.Request) -> web.Response:
        data = await request.read()
        if not data:
            return web.Response(status=500, text="Unable to build the tree: no leaves")
        cid = cid_of(data)
        self.blobs[cid] = data
        self.uploads += 1
        return web.Response(text=cid, content_type="text/plain")

    async def exists(self, request: web.Request) -> web.Response:
        cid = request.match_info["cid"]
        if not parses_as_cid(cid):
            return web.Response(status=400, text=f"Invalid CID {cid[:80]}")
        self.exists_checks += 1
        return web.json_response({cid: cid in self.blobs})

    async def stream(self, request: web.Request) -> web.Response:
        cid = request.match_info["cid"]
        if not parses_as_cid(cid):
            return web.Response(status=400, text=f"Invalid CID {cid[:80]}")
        data = self.blobs.get(cid)
        if data is None:
            return web.Response(
                status=404, text="The requested CID could not be retrieved (not found)."
            )
        self.downloads += 1
        return web.Response(
            body=data, content_type="application/octet-stream",
            headers={"Content-Disposition": "attachment"},
        )  # fmt: skip


@contextmanager
def running_fake() -> Iterator[FakeLogosStorage]:
    """Serve a FakeLogosStorage on 127.0.0.1 (a free port) from a background thread."""
    fake = FakeLogosStorage()
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    state: dict[str, web.AppRunner] = {}

    async def start() -> None:
        runner = web.AppRunner(fake.app())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        fake.url = f"http://127.0.0.1:{port}"
        state["runner"] = runner

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    ready.wait(10)
    try:
        yield fake
    finally:
        asyncio.run_coroutine_threadsafe(state["runner"].cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
