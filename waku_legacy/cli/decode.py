"""``waku-legacy decode KIND FILE``: show what a blob of wire bytes holds, as JSON.

Kinds: ``envelope`` (a Waku v1 envelope's RLP, or an RLP list of them as packets 1 and 127
carry), ``store-response`` (a store v3 ``StoreQueryResponse``), ``archive-index`` and
``archive`` (status-go's ``WakuMessageArchiveIndex`` / ``WakuMessageArchive``) and
``magnet-message`` (a v2 ``WakuMessage`` carrying a community's archive link, on its
``-memberUpdate`` or ``-magnetlinks`` chat; with ``--community`` it is decrypted and its layers
-- ``ProtocolMessage``-wrapped as status-go sends it, or bare -- and signers shown).

FILE is a path or ``-`` for stdin, raw bytes unless ``--hex``. Bytes are printed as ``0x``
hex. Malformed input is an error naming the layer and what is wrong (exit code 2). Protobuf
inputs are parsed strictly (unknown fields refused) unless ``--lenient``.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING, Any, TypeVar

from waku_legacy.errors import ConfigError, CryptoError, DecodeError, LimitExceeded

if TYPE_CHECKING:  # the decoders import these when run, keeping the CLI's start quick
    from google.protobuf.message import Message

    from waku_legacy.crypto.payload import DecodedPayload
    from waku_legacy.identity.topics import CommunityId
    from waku_legacy.mailserver_compat.wire.envelope import Envelope
    from waku_legacy.proto.application_metadata_pb2 import ApplicationMetadataMessage
    from waku_legacy.proto.status_archive_pb2 import WakuMessageArchiveMetadata
    from waku_legacy.proto.waku_message_pb2 import WakuMessage

M = TypeVar("M", bound="Message")

__all__ = ["DEFAULT_MAX_INPUT", "read_input", "register"]

DEFAULT_MAX_INPUT = 128 * 1024 * 1024  # an archive holds up to ~30 MB of messages


def _hex(value: bytes | None) -> str | None:
    return None if value is None else "0x" + bytes(value).hex()


def read_input(path: str, *, hex_input: bool, max_size: int) -> bytes:
    """The input bytes (stdin for ``-``), refusing more than ``max_size`` bytes."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(max_size * (2 if hex_input else 1) + 8)
        else:
            with open(path, "rb") as handle:
                data = handle.read(max_size * (2 if hex_input else 1) + 8)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}") from None
    if hex_input:
        from waku_legacy.identity.cli import parse_hex

        text = b"".join(data.split()).decode("ascii", errors="replace")
        data = parse_hex("hex input", text)
    if len(data) > max_size:
        raise LimitExceeded("input", f"more than {max_size} bytes (raise --max-size)")
    return data


# -- envelope -------------------------------------------------------------------------


def _payload_keys(args: argparse.Namespace) -> dict[str, Any]:
    from waku_legacy.crypto.secp256k1 import private_key_from_bytes
    from waku_legacy.crypto.symmetric import key_from_password
    from waku_legacy.identity.cli import parse_hex

    keys: dict[str, Any] = {}
    if args.symmetric_key is not None:
        keys["symmetric_key"] = parse_hex("--symmetric-key", args.symmetric_key)
    elif args.password is not None:
        keys["symmetric_key"] = key_from_password(args.password)
    if args.private_key is not None:
        keys["private_key"] = private_key_from_bytes(parse_hex("--private-key", args.private_key))
    return keys


def _decoded_payload_json(decoded: DecodedPayload) -> dict[str, Any]:
    from waku_legacy.crypto.secp256k1 import compress_public_key

    return {
        "payload": _hex(decoded.payload),
        "payload_length": len(decoded.payload),
        "padding_length": len(decoded.padding),
        "signature": _hex(decoded.signature),
        "signer": _hex(decoded.signer),
        "signer_compressed": _hex(compress_public_key(decoded.signer)) if decoded.signer else None,
    }


def _envelope_json(envelope: Envelope, keys: dict[str, Any]) -> dict[str, Any]:
    from waku_legacy.crypto.payload import decode_payload
    from waku_legacy.identity.topics import v1_topic_to_content_topic
    from waku_legacy.mailserver_compat.wire.pow import pow_of

    pow_value = pow_of(envelope)
    result: dict[str, Any] = {
        "expiry": envelope.expiry,
        "ttl": envelope.ttl,
        "sent_time": envelope.sent_time,
        "topic": _hex(envelope.topic),
        "content_topic": v1_topic_to_content_topic(envelope.topic),
        "nonce": envelope.nonce,
        "pow": pow_value if math.isfinite(pow_value) else str(pow_value),
        "hash": _hex(envelope.hash()),
        "data_length": len(envelope.data),
        "data": _hex(envelope.data),
    }
    if keys:
        try:
            result["decoded"] = _decoded_payload_json(decode_payload(envelope.data, **keys))
        except (CryptoError, DecodeError) as exc:
            result["decoded"] = None
            result["decode_error"] = str(exc)
    return result


def _decode_envelope(args: argparse.Namespace, data: bytes) -> dict[str, Any]:
    from waku_legacy.mailserver_compat.rlp_fields import decode_rlp
    from waku_legacy.mailserver_compat.storage.dump import HEADER
    from waku_legacy.mailserver_compat.wire.envelope import (
        Envelope,
        EnvelopeError,
        EnvelopeTooLarge,
    )

    if data.startswith(HEADER):
        raise DecodeError(
            "envelope",
            "this is an envelope dump (what `v1 pull --out` writes), not one envelope: "
            f"read it with `waku-legacy decode dump {args.file}`",
        )
    keys = _payload_keys(args)
    item = decode_rlp(
        data, "envelope", EnvelopeError, max_size=len(data), too_large=EnvelopeTooLarge
    )
    if isinstance(item, list) and item and isinstance(item[0], list):
        envelopes = [
            Envelope.from_rlp_item(entry, what=f"envelope #{index}")
            for index, entry in enumerate(item)
        ]
        return {
            "kind": "envelope list",
            "count": len(envelopes),
            "envelopes": [_envelope_json(envelope, keys) for envelope in envelopes],
        }
    return {"kind": "envelope", **_envelope_json(Envelope.from_rlp_item(item), keys)}


# -- protobuf kinds ---------------------------------------------------------------------


def _waku_message_json(message: WakuMessage) -> dict[str, Any]:
    result: dict[str, Any] = {
        "payload": _hex(message.payload),
        "payload_length": len(message.payload),
        "content_topic": message.content_topic,
    }
    for name in ("version", "timestamp", "ephemeral"):
        if message.HasField(name):
            result[name] = getattr(message, name)
    for name in ("meta", "rate_limit_proof"):
        if message.HasField(name):
            result[name] = _hex(getattr(message, name))
    return result


def _parse(cls: type[M], data: bytes, what: str, args: argparse.Namespace) -> M:
    from waku_legacy.proto.codec import parse_message

    return parse_message(cls, data, what, max_size=len(data), strict=not args.lenient)


def _decode_store_response(args: argparse.Namespace, data: bytes) -> dict[str, Any]:
    from waku_legacy.identity.message_hash import message_hash
    from waku_legacy.proto import store_v3_pb2

    response = _parse(store_v3_pb2.StoreQueryResponse, data, "store response", args)
    messages = []
    for entry in response.messages:
        item: dict[str, Any] = {"message_hash": _hex(entry.message_hash)}
        if entry.HasField("pubsub_topic"):
            item["pubsub_topic"] = entry.pubsub_topic
        if entry.HasField("message"):
            item["message"] = _waku_message_json(entry.message)
            if entry.HasField("pubsub_topic"):
                computed = message_hash(entry.pubsub_topic, entry.message)
                item["computed_hash"] = _hex(computed)
                item["hash_matches"] = computed == entry.message_hash
        messages.append(item)
    result: dict[str, Any] = {"kind": "store-response", "request_id": response.request_id}
    if response.HasField("status_code"):
        result["status_code"] = response.status_code
    if response.HasField("status_desc"):
        result["status_desc"] = response.status_desc
    result["pagination_cursor"] = (
        _hex(response.pagination_cursor) if response.HasField("pagination_cursor") else None
    )
    result["count"] = len(messages)
    result["messages"] = messages
    return result


def _metadata_json(metadata: WakuMessageArchiveMetadata) -> dict[str, Any]:
    return {
        "version": metadata.version,
        "from": getattr(metadata, "from"),  # a Python keyword
        "to": metadata.to,
        "content_topics": [_hex(topic) for topic in metadata.contentTopic],
    }


def _decode_archive_index(args: argparse.Namespace, data: bytes) -> dict[str, Any]:
    from waku_legacy.proto import status_archive_pb2

    index = _parse(status_archive_pb2.WakuMessageArchiveIndex, data, "archive index", args)
    entries = sorted(index.archives.items(), key=lambda pair: (pair[1].offset, pair[0]))
    return {
        "kind": "archive-index",
        "count": len(entries),
        "archives": {
            key: {
                "version": entry.version,
                "metadata": _metadata_json(entry.metadata),
                "offset": entry.offset,
                "size": entry.size,
                "padding": entry.padding,
            }
            for key, entry in entries
        },
    }


def _decode_archive(args: argparse.Namespace, data: bytes) -> dict[str, Any]:
    from waku_legacy.crypto.secp256k1 import compress_public_key
    from waku_legacy.proto import status_archive_pb2
    from waku_legacy.proto.codec import ProtobufDecodeError

    try:
        archive = _parse(status_archive_pb2.WakuMessageArchive, data, "archive", args)
    except ProtobufDecodeError as exc:
        zeros = len(data) - len(data.rstrip(b"\x00"))
        if zeros:
            raise ProtobufDecodeError(
                exc.what,
                f"{exc.reason}; the input ends with {zeros} zero bytes: in the data file an "
                "archive is followed by zero padding, read only size - padding bytes at offset",
            ) from None
        raise

    def signer(sig: bytes) -> str | None:
        try:
            return _hex(compress_public_key(sig)) if sig else None
        except CryptoError:
            return None

    messages = [
        {
            "sig": _hex(message.sig),
            "signer_compressed": signer(message.sig),
            "timestamp": message.timestamp,
            "topic": _hex(message.topic),
            "payload": _hex(message.payload),
            "padding": _hex(message.padding),
            "hash": _hex(message.hash),
            "third_party_id": message.thirdPartyId,
        }
        for message in archive.messages
    ]
    return {
        "kind": "archive",
        "version": archive.version,
        "metadata": _metadata_json(archive.metadata),
        "count": len(messages),
        "messages": messages,
    }


def _decode_magnet_message(args: argparse.Namespace, data: bytes) -> dict[str, Any]:
    """An archive-link message on ``<id>-memberUpdate`` or ``<id>-magnetlinks``, in either
    layering: the 26/WAKU-PAYLOAD holds a ``ProtocolMessage{public_message}`` (status-go's
    ``SendPublic``) or the ApplicationMetadataMessage directly (``"layering": "bare"``)."""
    from waku_legacy.identity.cli import parse_hex
    from waku_legacy.identity.topics import CommunityId

    pubsub_topic, message = _magnet_message_input(data, args)
    result: dict[str, Any] = {"kind": "magnet-message", "message": _waku_message_json(message)}
    if pubsub_topic is not None:
        result["pubsub_topic"] = pubsub_topic
    community = CommunityId.parse(args.community) if args.community else None
    if community is not None:
        chats_json, keys = _archive_link_chats(community, message.content_topic)
        result.update(chats_json)
    elif args.symmetric_key is not None:
        keys = [parse_hex("--symmetric-key", args.symmetric_key)]
    else:
        result["note"] = "give --community (or --symmetric-key) to decrypt the payload"
        return result
    decoded = _open_waku_payload(message.payload, keys)
    result["waku_payload"] = _decoded_payload_json(decoded)
    result["waku_payload_signed"] = decoded.signer is not None  # status-go drops unsigned ones
    layers_json, application = _open_application_message(decoded.payload)
    result.update(layers_json)
    result["application_message"] = _application_message_json(application, community)
    result.update(_archive_link_json(application, args))
    if community is not None:
        shown = result.get("archive_link", {}).get("archive_link", "")
        result.update(_members_verdict(message, community, shown))
    return result


def _magnet_message_input(data: bytes, args: argparse.Namespace) -> tuple[str | None, WakuMessage]:
    """The WakuMessage in ``data``: its protobuf bytes (``X.magnet-message.pb``) or the JSON
    file beside it that `archive build`/`migrate` write (``X.magnet-message.json``: the
    relay publish body and its pubsub topic)."""
    import json

    from waku_legacy.archive.magnet import magnet_message_from_json
    from waku_legacy.proto import waku_message_pb2

    if data.lstrip()[:1] != b"{":
        message = _parse(waku_message_pb2.WakuMessage, data, "magnet-link message", args)
        return None, message
    document = json.loads(data)
    if not isinstance(document, dict) or not isinstance(document.get("body"), dict):
        raise DecodeError(
            "magnet-link message", "a JSON input must be a .magnet-message.json file (with 'body')"
        )
    topic = document.get("pubsubTopic")
    return (topic if isinstance(topic, str) else None), magnet_message_from_json(document["body"])


# -- envelope dump ----------------------------------------------------------------------


def _decode_dump(args: argparse.Namespace) -> dict[str, Any]:
    """Every envelope of an envelope dump (``v1 pull --out``), and any damaged range."""
    import os

    from waku_legacy.mailserver_compat.storage.dump import iter_dump_records
    from waku_legacy.mailserver_compat.wire.envelope import Envelope

    if args.file == "-":
        raise ConfigError("decode dump reads a file (it seeks), not stdin")
    size = os.stat(args.file).st_size
    if size > args.max_size:
        raise LimitExceeded("input", f"more than {args.max_size} bytes (raise --max-size)")
    keys = _payload_keys(args)
    envelopes: list[dict[str, Any]] = []
    damaged: list[dict[str, Any]] = []
    for record in iter_dump_records(args.file):
        if record.error is not None:
            damaged.append({"offset": record.offset, "error": record.error})
            continue
        try:
            envelope = Envelope.decode(record.data, max_size=max(len(record.data), 1))
        except DecodeError as exc:
            damaged.append({"offset": record.offset, "error": f"not an envelope: {exc}"})
            continue
        envelopes.append(_envelope_json(envelope, keys))
    return {"kind": "envelope dump", "count": len(envelopes), "envelopes": envelopes,
            "damaged": damaged}  # fmt: skip


def _dump_handler(args: argparse.Namespace) -> int:
    from waku_legacy.console import print_json

    print_json(_decode_dump(args))
    return 0


def _archive_link_chats(
    community: CommunityId, content_topic: str
) -> tuple[dict[str, Any], list[bytes]]:
    """The community's two archive-link chats as JSON, and their keys in the order to try:
    the chat whose topic the message is on, else both."""
    from waku_legacy.archive.magnet import MAGNETLINKS, UNIVERSAL, archive_link_chat_id
    from waku_legacy.identity.topics import content_topic_of_chat, symmetric_key_for_chat

    chats = {c: archive_link_chat_id(community, c) for c in (UNIVERSAL, MAGNETLINKS)}
    topics = {c: content_topic_of_chat(chat_id) for c, chat_id in chats.items()}
    chat = next((c for c, t in topics.items() if t == content_topic), None)
    chats_json = {
        "community": str(community),
        "universal_chat_id": chats[UNIVERSAL],
        "magnetlinks_chat_id": chats[MAGNETLINKS],
        "expected_content_topics": topics,
        "chat": chat,  # None: on neither chat's topic (both keys are tried)
        "content_topic_matches": chat is not None,
    }
    order = [chat] if chat is not None else [UNIVERSAL, MAGNETLINKS]
    return chats_json, [symmetric_key_for_chat(chats[c]) for c in order]


def _open_waku_payload(payload: bytes, keys: list[bytes]) -> DecodedPayload:
    """The 26/WAKU-PAYLOAD opened with the first key that fits; else the last key's error."""
    from waku_legacy.crypto.payload import decode_payload

    failure: CryptoError | None = None
    for key in keys:
        try:
            return decode_payload(payload, symmetric_key=key)
        except CryptoError as exc:
            failure = exc
    raise CryptoError(f"magnet-link message, 26/WAKU-PAYLOAD layer: {failure}") from None


def _open_application_message(
    plaintext: bytes,
) -> tuple[dict[str, Any], ApplicationMetadataMessage]:
    """The layering seen (as JSON) and the ApplicationMetadataMessage inside the payload."""
    from waku_legacy.archive.magnet import MAX_MAGNET_MESSAGE_BYTES
    from waku_legacy.proto import application_metadata_pb2
    from waku_legacy.proto.status_layers import open_layers

    layering, installation_id, application_bytes = open_layers(
        bytes(plaintext), "encryption layer (inside the 26/WAKU-PAYLOAD)",
        max_size=MAX_MAGNET_MESSAGE_BYTES,
    )  # fmt: skip
    layers_json: dict[str, Any] = {"layering": layering}
    if installation_id is not None:
        layers_json["protocol_message"] = {
            "installation_id": installation_id,
            "public_message_length": len(application_bytes),
        }
    application = _parse(
        application_metadata_pb2.ApplicationMetadataMessage,
        application_bytes,
        "application metadata message (inside the 26/WAKU-PAYLOAD)",
        argparse.Namespace(lenient=True),  # newer status-go may add fields
    )
    return layers_json, application


def _application_message_json(
    application: ApplicationMetadataMessage, community: CommunityId | None
) -> dict[str, Any]:
    """Type, signature and signer of the application message (and whether the community
    signed it, when known)."""
    from waku_legacy.crypto.keccak import keccak256
    from waku_legacy.crypto.secp256k1 import compress_public_key, recover_public_key
    from waku_legacy.proto import application_metadata_pb2

    app_types = application_metadata_pb2.ApplicationMetadataMessage.Type
    type_name = app_types.Name(application.type) if application.type in app_types.values() else None
    app_json: dict[str, Any] = {
        "type": application.type,
        "type_name": type_name,
        "signature": _hex(application.signature),
        "payload_length": len(application.payload),
    }
    try:
        app_signer = recover_public_key(keccak256(application.payload), application.signature)
    except CryptoError as exc:
        app_json["signer"] = None
        app_json["signature_error"] = str(exc)
    else:
        app_json["signer"] = _hex(app_signer)
        app_json["signer_compressed"] = _hex(compress_public_key(app_signer))
        if community is not None:
            app_json["signed_by_community"] = (
                compress_public_key(app_signer) == community.public_key
            )
    return app_json


def _archive_link_json(
    application: ApplicationMetadataMessage, args: argparse.Namespace
) -> dict[str, Any]:
    """The archive link an application message of that type carries; {} for other types."""
    from waku_legacy.proto import status_archive_pb2

    if application.type != application.COMMUNITY_MESSAGE_ARCHIVE_LINK:
        return {}
    link = _parse(
        status_archive_pb2.CommunityMessageArchiveLink,
        application.payload,
        "archive link (inside the application message)",
        args,
    )
    return {
        "archive_link": {"clock": link.clock, "archive_link": link.archive_link},
        "magnetlink": {"clock": link.clock, "magnet_uri": link.archive_link},  # 2024 name
    }


def _members_verdict(
    message: WakuMessage, community: CommunityId, archive_link: str
) -> dict[str, Any]:
    """Whether the community's members accept the message, checked as they do."""
    from waku_legacy.archive.magnet import verify_magnet_message
    from waku_legacy.errors import WakuLegacyError

    # the link's kind decides the reader (issue 12): a magnet link (torrent back end) or
    # a Logos Storage index CID; members read it with their own back end
    backend = (
        "torrent" if archive_link.startswith("magnet:") or not archive_link else "logos-storage"
    )
    verdict: dict[str, Any] = {"backend": backend}
    try:
        verified = verify_magnet_message(message, community, backend=backend)
    except WakuLegacyError as exc:
        verdict["accepted_by_members"] = False
        verdict["rejection"] = str(exc)
    else:
        verdict["accepted_by_members"] = True
        verdict["info_hash"] = verified.info_hash
    return verdict


_DECODERS = {
    "envelope": _decode_envelope,
    "store-response": _decode_store_response,
    "archive-index": _decode_archive_index,
    "archive": _decode_archive,
    "magnet-message": _decode_magnet_message,
}


def _handler(args: argparse.Namespace) -> int:
    from waku_legacy.console import print_json

    data = read_input(args.file, hex_input=args.hex, max_size=args.max_size)
    print_json(_DECODERS[args.kind](args, data))
    return 0


def _add_common(parser: argparse.ArgumentParser, *, protobuf: bool) -> None:
    parser.add_argument("file", metavar="FILE", help="input file, or - for stdin")
    parser.add_argument("--hex", action="store_true", help="the input is hex text (0x optional)")
    parser.add_argument(
        "--max-size",
        type=int,
        default=DEFAULT_MAX_INPUT,
        metavar="BYTES",
        help=f"refuse inputs larger than this (default {DEFAULT_MAX_INPUT})",
    )
    if protobuf:
        parser.add_argument("--lenient", action="store_true", help="accept unknown protobuf fields")
    parser.set_defaults(func=_handler)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    decode = subparsers.add_parser(
        "decode",
        help="show what wire bytes hold (envelope, store response, archive, magnet link)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kinds = decode.add_subparsers(dest="kind", metavar="KIND")
    kinds.required = True

    envelope = kinds.add_parser("envelope", help="a Waku v1 envelope (RLP) or a list of them")
    _add_common(envelope, protobuf=False)
    keys = envelope.add_mutually_exclusive_group()
    keys.add_argument("--symmetric-key", metavar="HEX", help="32-byte key to open the payload")
    keys.add_argument(
        "--password", metavar="TEXT", help="derive the symmetric key (e.g. a public chat id)"
    )
    envelope.add_argument("--private-key", metavar="HEX", help="key for ECIES payloads")

    dump = kinds.add_parser("dump", help="an envelope dump file (what `v1 pull --out` writes)")
    _add_common(dump, protobuf=False)
    dump.set_defaults(func=_dump_handler)
    dump_keys = dump.add_mutually_exclusive_group()
    dump_keys.add_argument("--symmetric-key", metavar="HEX", help="32-byte key to open payloads")
    dump_keys.add_argument(
        "--password", metavar="TEXT", help="derive the symmetric key (e.g. a public chat id)"
    )
    dump.add_argument("--private-key", metavar="HEX", help="key for ECIES payloads")

    _add_common(
        kinds.add_parser("store-response", help="a store v3 StoreQueryResponse"), protobuf=True
    )
    _add_common(
        kinds.add_parser("archive-index", help="status-go WakuMessageArchiveIndex"), protobuf=True
    )
    _add_common(kinds.add_parser("archive", help="status-go WakuMessageArchive"), protobuf=True)

    magnet = kinds.add_parser(
        "magnet-message", help="a v2 WakuMessage carrying a community archive magnet link"
    )
    _add_common(magnet, protobuf=True)
    magnet_keys = magnet.add_mutually_exclusive_group()
    magnet_keys.add_argument(
        "--community", metavar="0x<66 hex>", help="community id: derive the key, check signer"
    )
    magnet_keys.add_argument("--symmetric-key", metavar="HEX", help="32-byte payload key")
