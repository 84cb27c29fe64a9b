"""The archive-flavour message (status-go ``protobuf.WakuMessage`` of communities.proto).

Not the 14/WAKU2-MESSAGE: ``timestamp`` is in SECONDS, ``sig`` is the 65-byte uncompressed
public key of the 26/WAKU-PAYLOAD signer (empty when unsigned), ``payload``/``padding`` are the
decrypted 26/WAKU-PAYLOAD parts, ``topic`` is the 4-byte v1 topic, ``hash`` the message hash
(envelope keccak256 for v1-era messages, the deterministic hash for v2 ones).

JSONL input format (``waku-legacy archive build``), one object per line::

    {"timestamp": 1650000000,            # seconds (int)
     "hash": "0x<hex>",                  # message hash
     "topic": "0x<8 hex>",               # 4-byte v1 topic
     "payload": "<base64>",              # decrypted payload
     "sig": "0x<130 hex>",               # optional: signer's uncompressed key ("" or absent)
     "padding": "<base64>",              # optional
     "thirdPartyId": "..."}              # optional

Byte fields given as ``0x`` hex are read as hex, otherwise as standard base64.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from waku_legacy.archive.errors import ArchiveDecodeError
from waku_legacy.proto import seed_archive_pb2, status_archive_pb2

__all__ = [
    "MAX_UINT64",
    "AnyArchiveMessage",
    "ArchiveMessage",
    "as_archive_message",
    "decode_bytes_field",
]

MAX_UINT64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class ArchiveMessage:
    timestamp: int
    hash: bytes
    topic: bytes
    payload: bytes
    sig: bytes = b""
    padding: bytes = b""
    third_party_id: str = ""

    def __post_init__(self) -> None:
        if not 0 <= self.timestamp <= MAX_UINT64:
            raise ArchiveDecodeError(
                "archive message", f"timestamp {self.timestamp} is not a uint64 (seconds)"
            )

    @property
    def size(self) -> int:
        """What status-go counts against the 30,000,000-byte archive limit."""
        return len(self.payload) + len(self.sig)

    @classmethod
    def from_proto(
        cls, message: status_archive_pb2.WakuMessage | seed_archive_pb2.WakuMessage
    ) -> ArchiveMessage:
        """From either flavour's generated class (seed-spec has no ``thirdPartyId``)."""
        third = message.thirdPartyId if isinstance(message, status_archive_pb2.WakuMessage) else ""
        return cls(
            timestamp=message.timestamp,
            hash=message.hash,
            topic=message.topic,
            payload=message.payload,
            sig=message.sig,
            padding=message.padding,
            third_party_id=third,
        )

    def to_proto(self) -> status_archive_pb2.WakuMessage:
        return status_archive_pb2.WakuMessage(
            sig=self.sig,
            timestamp=self.timestamp,
            topic=self.topic,
            payload=self.payload,
            padding=self.padding,
            hash=self.hash,
            thirdPartyId=self.third_party_id,
        )

    def to_json(self) -> dict[str, Any]:
        """JSON object in the documented input format (hex for ids, base64 for contents)."""
        out: dict[str, Any] = {
            "timestamp": self.timestamp,
            "hash": "0x" + self.hash.hex(),
            "topic": "0x" + self.topic.hex(),
            "payload": _content_text(self.payload),
        }
        if self.sig:
            out["sig"] = "0x" + self.sig.hex()
        if self.padding:
            out["padding"] = _content_text(self.padding)
        if self.third_party_id:
            out["thirdPartyId"] = self.third_party_id
        return out

    @classmethod
    def from_json(cls, obj: Any, *, line: int | None = None) -> ArchiveMessage:
        where = f"archive message (line {line})" if line is not None else "archive message"
        if not isinstance(obj, dict):
            raise ArchiveDecodeError(where, f"expected a JSON object, got {type(obj).__name__}")
        ts = obj.get("timestamp")
        if not isinstance(ts, int) or isinstance(ts, bool):
            raise ArchiveDecodeError(where, "'timestamp' must be an integer (seconds)")
        for required in ("hash", "topic", "payload"):
            if required not in obj:
                raise ArchiveDecodeError(where, f"missing '{required}'")
        third = obj.get("thirdPartyId", "")
        if not isinstance(third, str):
            raise ArchiveDecodeError(where, "'thirdPartyId' must be a string")
        try:
            third.encode("utf-8")  # JSON allows lone surrogates ("\ud800"); protobuf does not
        except UnicodeEncodeError:
            raise ArchiveDecodeError(where, "'thirdPartyId' is not valid Unicode") from None
        return cls(
            timestamp=ts,
            hash=decode_bytes_field(obj["hash"], "hash", where),
            topic=decode_bytes_field(obj["topic"], "topic", where),
            payload=decode_bytes_field(obj["payload"], "payload", where),
            sig=decode_bytes_field(obj.get("sig", ""), "sig", where),
            padding=decode_bytes_field(obj.get("padding", ""), "padding", where),
            third_party_id=third,
        )

    @classmethod
    def from_json_line(cls, text: str, *, line: int | None = None) -> ArchiveMessage:
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            where = f"archive message (line {line})" if line is not None else "archive message"
            raise ArchiveDecodeError(where, f"not JSON: {exc}") from exc
        return cls.from_json(obj, line=line)


AnyArchiveMessage = ArchiveMessage | status_archive_pb2.WakuMessage | seed_archive_pb2.WakuMessage


def as_archive_message(message: AnyArchiveMessage) -> ArchiveMessage:
    """``message`` itself, or an ArchiveMessage of a generated-class message."""
    if isinstance(message, ArchiveMessage):
        return message
    if isinstance(message, status_archive_pb2.WakuMessage | seed_archive_pb2.WakuMessage):
        return ArchiveMessage.from_proto(message)
    raise TypeError(f"not an archive message: {type(message).__name__}")


def _content_text(data: bytes) -> str:
    """Base64 of a content field, unless that text starts with ``0x``, which
    :func:`decode_bytes_field` reads as hex: then ``0x`` hex, so JSON reads back the same."""
    text = base64.b64encode(data).decode()
    return "0x" + data.hex() if text.startswith(("0x", "0X")) else text


def decode_bytes_field(value: Any, name: str, where: str) -> bytes:
    """``0x`` hex or standard base64 text to bytes."""
    if not isinstance(value, str):
        raise ArchiveDecodeError(where, f"'{name}' must be a string (0x hex or base64)")
    try:
        if value.startswith(("0x", "0X")):
            return bytes.fromhex(value[2:])
        return base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error) as exc:
        raise ArchiveDecodeError(where, f"'{name}' is neither 0x hex nor base64") from exc
