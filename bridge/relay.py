"""Publishing to a Waku v2 network through an nwaku node's REST relay API.

``POST /relay/v1/messages/{URL-encoded pubsub topic}`` with the JSON body of
:func:`waku_legacy.archive.relay_publish_body` (``payload`` base64, ``contentTopic``,
``version``, ``timestamp``, ``meta``?); nwaku answers 200 ``OK``. A 4xx is the node refusing
the message (not subscribed, bad message): logged and counted, not retried. Connection
errors, timeouts and 5xx are retried with exponential backoff.

Protected shards (57/STATUS-Simple-Scaling, ``[[relay.protected_shard]]``): a message for a
protected pubsub topic is published with ``meta`` = the shard key's 64-byte RFC 6979
signature of ``sha256(pubsub_topic || payload || content_topic || timestamp int64 LE ||
ephemeral byte)`` (:func:`waku_legacy.identity.shards.sign_waku_message`; the project's
shared vector pins the rule), as nwaku/go-waku relay validators on such a topic require. A
protected topic without a configured key is refused here (:class:`ProtectedTopicError`,
counted ``refused``) rather than sent for the network to drop. The signed message is a copy:
the caller's message (and its 14/WAKU2-MESSAGE hash) is not changed.

:class:`RelayPublisher` owns a bounded queue so that a slow or absent nwaku never blocks a
v1 peer: when the queue is full the OLDEST message is dropped and counted; :meth:`close`
gives what is queued a bounded time to go out.
"""

from __future__ import annotations

import asyncio
import collections
import logging

import aiohttp
import coincurve

from waku_legacy.archive import relay_publish_body, relay_publish_path
from waku_legacy.bridge.config import RelayConfig
from waku_legacy.bridge.http_body import read_text
from waku_legacy.bridge.logs import fields
from waku_legacy.bridge.metrics import BridgeMetrics
from waku_legacy.bridge.tasks import finish_or_cancel
from waku_legacy.errors import ConfigError, WakuLegacyError
from waku_legacy.identity.shards import sign_waku_message
from waku_legacy.proto import waku_message_pb2

__all__ = ["ProtectedTopicError", "RelayError", "RelayPublisher"]

log = logging.getLogger("waku_legacy.bridge.relay")

ANSWER_BYTES = 64 * 1024  # of nwaku's answer to a publish, only the start is kept


class RelayError(WakuLegacyError):
    """nwaku did not take a message (``status`` 0 when it could not be reached)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"relay publish failed ({status or 'unreachable'}): {reason}")
        self.status = status


class ProtectedTopicError(RelayError):
    """A message for a protected pubsub topic whose shard key is not configured."""

    def __init__(self, pubsub_topic: str) -> None:
        WakuLegacyError.__init__(
            self,
            f"relay publish refused: {pubsub_topic} is a protected shard and no key_file is "
            "configured for it ([[relay.protected_shard]]); the network drops unsigned messages",
        )
        self.status = 0
        self.pubsub_topic = pubsub_topic


class RelayPublisher:
    def __init__(
        self,
        config: RelayConfig,
        metrics: BridgeMetrics,
        session: aiohttp.ClientSession,
        *,
        backoff: float = 0.5,
    ) -> None:
        self.config = config
        self.metrics = metrics
        self.session = session
        self.backoff = backoff
        # protected topic -> its shard key (None: protected, not ours to sign)
        self.shard_keys: dict[str, coincurve.PrivateKey | None] = {}
        for shard in config.protected_shards:
            key = None
            if shard.key_file is not None:
                from waku_legacy.crypto.key_file import load_node_key

                try:
                    key = load_node_key(shard.key_file)
                except WakuLegacyError as exc:
                    raise ConfigError(
                        f"[[relay.protected_shard]] {shard.pubsub_topic}: key_file: {exc}"
                    ) from None
            self.shard_keys[shard.pubsub_topic] = key
        self._refused_topics: set[str] = set()  # logged once each (every refusal counted)
        self._queue: collections.deque[tuple[str, waku_message_pb2.WakuMessage]] = (
            collections.deque()
        )
        self._wakeup = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def prepare(
        self, pubsub_topic: str, message: waku_message_pb2.WakuMessage
    ) -> waku_message_pb2.WakuMessage:
        """The message as it goes out on ``pubsub_topic``: on a protected shard a signed copy
        (``meta``); raises :class:`ProtectedTopicError` when the shard key is missing."""
        if pubsub_topic not in self.shard_keys:
            return message
        key = self.shard_keys[pubsub_topic]
        if key is None:
            raise ProtectedTopicError(pubsub_topic)
        signed = waku_message_pb2.WakuMessage()
        signed.CopyFrom(message)
        sign_waku_message(key, pubsub_topic, signed)
        return signed

    async def publish(self, pubsub_topic: str, message: waku_message_pb2.WakuMessage) -> None:
        """Publish now (with retries); raises :class:`RelayError` (a
        :class:`ProtectedTopicError` without sending when the shard key is missing)."""
        try:
            message = self.prepare(pubsub_topic, message)
        except ProtectedTopicError:
            self.metrics.relay_publish.inc(1, "refused")
            raise
        url = self.config.url + relay_publish_path(pubsub_topic)
        body = relay_publish_body(message)
        timeout = aiohttp.ClientTimeout(total=self.config.timeout)
        last: RelayError | None = None
        for attempt in range(self.config.retries + 1):
            if attempt:
                await asyncio.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                async with self.session.post(url, json=body, timeout=timeout) as response:
                    text = (await read_text(response, ANSWER_BYTES, "relay answer"))[:300]
                    if response.status == 200:
                        self.metrics.relay_publish.inc(1, "ok")
                        return
                    last = RelayError(response.status, text.strip() or response.reason or "")
                    if 400 <= response.status < 500:
                        break  # the node refuses this message; retrying will not help
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                last = RelayError(0, str(exc) or type(exc).__name__)
        assert last is not None
        self.metrics.relay_publish.inc(1, "error")
        raise last

    # -- the queue ---------------------------------------------------------------------------

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="relay-publisher")

    def submit(self, pubsub_topic: str, message: waku_message_pb2.WakuMessage) -> None:
        """Queue a message for publishing (never blocks; drops the oldest when full)."""
        if self._closing:
            self.metrics.relay_publish.inc(1, "dropped")
            return
        if len(self._queue) >= self.config.queue:
            self._queue.popleft()
            self.metrics.relay_publish.inc(1, "dropped")
        self._queue.append((pubsub_topic, message))
        self._idle.clear()
        self._wakeup.set()

    @property
    def queued(self) -> int:
        return len(self._queue)

    async def drained(self) -> None:
        await self._idle.wait()

    async def _run(self) -> None:
        while True:
            if not self._queue:
                self._idle.set()
                if self._closing:
                    return
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            pubsub_topic, message = self._queue.popleft()
            try:
                await self.publish(pubsub_topic, message)
            except ProtectedTopicError as exc:
                if pubsub_topic not in self._refused_topics:
                    self._refused_topics.add(pubsub_topic)
                    log.warning("relay publish refused", extra=fields(error=str(exc)))
            except RelayError as exc:
                log.warning(
                    "relay publish failed",
                    extra=fields(
                        pubsub_topic=pubsub_topic,
                        content_topic=message.content_topic,
                        status=exc.status,
                        error=str(exc),
                    ),
                )

    async def close(self, timeout: float = 10.0) -> None:
        """Stop taking messages; give the queued ones ``timeout`` seconds to go out."""
        self._closing = True
        self._wakeup.set()
        if self._task is None:
            return
        if not await finish_or_cancel(self._task, timeout):
            left = len(self._queue)
            self.metrics.relay_publish.inc(left, "dropped")
            log.warning("relay queue not drained at shutdown", extra=fields(dropped=left))
        self._task = None
