"""66/WAKU2-METADATA (``/vac/waku/metadata/1.0.0``), sans-IO.

``WakuMetadataRequest`` and ``WakuMetadataResponse`` have the same fields::

    optional uint32 cluster_id = 1;
    repeated uint32 shards = 2;

Encoded with ``shards`` *unpacked* (one field-2 varint per shard), as js-waku writes it: its
protons decoder reads one varint per field-2 tag whatever the wire type, so nwaku's packed
encoding of ``[32, 128]`` reads there as ``[3]`` (the packed length) and js-waku then refuses
the peer for every shard (seen with @waku/sdk 0.0.36 against this listener). protobuf-go
(go-waku, status-go) reads both forms. nim-libp2p's ``getPackedRepeatedField`` (nwaku) reads
only the packed form, so an nwaku node dialling the bridge sees no shards; nwaku is not a
client of the bridge's store. The decoder here reads both forms.

Exchange (nwaku ``waku/waku_metadata/protocol.nim``; js-waku
``packages/core/src/lib/metadata/metadata.ts``): the dialler writes one length-prefixed
request carrying its own cluster and shards and closes its write side; the listener answers
one length-prefixed response with its cluster and shards and closes the stream. nwaku reads
at most 1024 bytes (``RpcResponseMaxBytes``); the listener never hangs up because of the
dialler's cluster (nwaku's peer manager drops a peer on another cluster when *it* dials;
js-waku keeps the answer in its peer store and picks a store peer only when the cluster is its
own and ``shards`` holds the queried pubsub topic's shard, so the answer must list every
shard the store serves).
"""

from __future__ import annotations

from dataclasses import dataclass

from waku_legacy.errors import DecodeError, LimitExceeded

__all__ = ["METADATA_CODEC", "METADATA_MAX_BYTES", "Metadata", "decode_metadata", "encode_metadata"]

METADATA_CODEC = "/vac/waku/metadata/1.0.0"
#: nwaku's ``RpcResponseMaxBytes``: the largest request or response either side reads.
METADATA_MAX_BYTES = 1024
_MAX_SHARDS = 1024  # a cluster has at most 1024 shards (0..1023)


@dataclass(frozen=True)
class Metadata:
    cluster_id: int | None
    shards: tuple[int, ...]


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    start = pos
    while True:
        if pos >= len(data):
            raise DecodeError("waku metadata", "truncated varint", offset=start)
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise DecodeError("waku metadata", "varint longer than 10 bytes", offset=start)


def encode_metadata(meta: Metadata) -> bytes:
    """The protobuf body (request or response: same fields), shards unpacked."""
    out = bytearray()
    if meta.cluster_id is not None:
        out += b"\x08" + _varint(meta.cluster_id)
    for shard in meta.shards:
        out += b"\x10" + _varint(shard)  # unpacked: see the module docstring
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
    shards: list[int] = []
    pos = 0
    while pos < len(data):
        at = pos
        key, pos = _read_varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
            if field == 1:
                cluster = _uint32(value, at)
            elif field == 2:
                shards.append(_uint32(value, at))
        elif wire == 2:
            length, pos = _read_varint(data, pos)
            end = pos + length
            if end > len(data):
                raise DecodeError("waku metadata", "field runs past the end", offset=at)
            if field == 2:
                while pos < end:
                    value, pos = _read_varint(data, pos)
                    shards.append(_uint32(value, at))
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
        if len(shards) > _MAX_SHARDS:
            raise LimitExceeded("waku metadata", f"over {_MAX_SHARDS} shards")
    return Metadata(cluster, tuple(shards))
