"""66/WAKU2-METADATA (``/vac/waku/metadata/1.0.0``), sans-IO.

``WakuMetadataRequest`` and ``WakuMetadataResponse`` have the same fields. The spec's schema
(waku-org/waku-proto ``waku/metadata/v1/waku_metadata.proto``) is::

    optional uint32 cluster_id = 1;
    repeated uint32 shards = 2;

and the clients read the shards in different places:

- js-waku (@waku/sdk 0.0.36, protons) reads field 2 *unpacked* only: one varint per field-2
  tag whatever the wire type, so a packed ``[32, 128]`` reads as ``[3]`` (the packed length)
  and js-waku then refuses the peer for every shard (seen against this listener);
- go-waku (status-go; ``waku/v2/protocol/metadata/pb``, current ``84a4b1be``) declares
  ``shards = 3`` packed and ``shards_deprecated = 2``, and reads field 3, falling back to
  field 2 when it is empty; it disconnects a peer whose answer has no cluster id or another
  cluster;
- go-waku and nwaku write both fields (field 2 unpacked, field 3 packed).

So the encoder writes field 1, field 2 unpacked and field 3 packed, which every one of them
reads; the decoder takes field 3 when present, else field 2 (packed or not).

Exchange (nwaku ``waku/waku_metadata/protocol.nim``; js-waku
``packages/core/src/lib/metadata/metadata.ts``; go-waku ``waku_metadata.go``): the dialler
writes one length-prefixed request carrying its own cluster and shards (js-waku then closes
its write side; go-waku does not) and the listener answers one length-prefixed response with
its cluster and shards and closes the stream. nwaku reads at most 1024 bytes
(``RpcResponseMaxBytes``). The listener never hangs up because of the dialler's cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.proto.wire import encode_varint, read_varint

__all__ = ["METADATA_CODEC", "METADATA_MAX_BYTES", "Metadata", "decode_metadata", "encode_metadata"]

METADATA_CODEC = "/vac/waku/metadata/1.0.0"
#: nwaku's ``RpcResponseMaxBytes``: the largest request or response either side reads.
METADATA_MAX_BYTES = 1024
_MAX_SHARDS = 1024  # a cluster has at most 1024 shards (0..1023)


@dataclass(frozen=True)
class Metadata:
    cluster_id: int | None
    shards: tuple[int, ...]


def encode_metadata(meta: Metadata) -> bytes:
    """The protobuf body (request or response: same fields), shards in fields 2 and 3."""
    out = bytearray()
    if meta.cluster_id is not None:
        out += b"\x08" + encode_varint(meta.cluster_id)
    for shard in meta.shards:
        out += b"\x10" + encode_varint(shard)  # field 2 unpacked (js-waku)
    if meta.shards:
        packed = b"".join(encode_varint(shard) for shard in meta.shards)
        out += b"\x1a" + encode_varint(len(packed)) + packed  # field 3 packed (go-waku)
    return bytes(out)


def _uint32(value: int, offset: int) -> int:
    if value > 0xFFFFFFFF:
        raise DecodeError("waku metadata", f"{value} does not fit a uint32", offset=offset)
    return value


def decode_metadata(data: bytes) -> Metadata:
    """Decode a request or response; shards packed or not, unknown fields skipped."""
    if len(data) > METADATA_MAX_BYTES:
        raise LimitExceeded("waku metadata", f"{len(data)} bytes, over {METADATA_MAX_BYTES}")
    cluster: int | None = None
    shards: list[int] = []  # field 2
    shards3: list[int] = []  # field 3 (go-waku)
    pos = 0
    while pos < len(data):
        at = pos
        key, pos = read_varint(data, pos, "waku metadata")
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(data, pos, "waku metadata")
            if field == 1:
                cluster = _uint32(value, at)
            elif field in (2, 3):
                (shards if field == 2 else shards3).append(_uint32(value, at))
        elif wire == 2:
            length, pos = read_varint(data, pos, "waku metadata")
            end = pos + length
            if end > len(data):
                raise DecodeError("waku metadata", "field runs past the end", offset=at)
            if field in (2, 3):
                into = shards if field == 2 else shards3
                while pos < end:
                    value, pos = read_varint(data, pos, "waku metadata")
                    into.append(_uint32(value, at))
                if pos != end:
                    raise DecodeError("waku metadata", "packed shards overrun", offset=at)
            pos = end
        elif wire == 5:
            pos += 4
        elif wire == 1:
            pos += 8
        else:
            raise DecodeError("waku metadata", f"wire type {wire} of field {field}", offset=at)
        if pos > len(data):
            raise DecodeError("waku metadata", "field runs past the end", offset=at)
        if len(shards) > _MAX_SHARDS or len(shards3) > _MAX_SHARDS:
            raise LimitExceeded("waku metadata", f"over {_MAX_SHARDS} shards")
    return Metadata(cluster, tuple(shards3 or shards))
