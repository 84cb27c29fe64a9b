"""Parsing protobuf messages from untrusted bytes, with the package's error types.

protobuf is lenient: it accepts fields it does not know (keeping them as unknown fields),
wire types that do not match the schema (also kept as unknown), and an empty input as an
all-default message. :func:`parse_message` turns every parse failure (``DecodeError``,
warnings raised while parsing, recursion limits) into :class:`ProtobufDecodeError` naming
what was being read, enforces a size limit before parsing, and with ``strict=True`` also
refuses unknown fields anywhere in the message tree (reporting the field path), which
catches most bytes that are not the message at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from google.protobuf import unknown_fields
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError as _ProtobufDecodeError
from google.protobuf.message import Message

from waku_legacy.errors import DecodeError, LimitExceeded
from waku_legacy.proto.wire import iter_fields

__all__ = [
    "ProtobufDecodeError",
    "ProtobufTooLarge",
    "parse_message",
    "try_parse_message",
    "unknown_field_path",
]

M = TypeVar("M", bound=Message)


class ProtobufDecodeError(DecodeError):
    """Bytes that do not parse as the expected protobuf message."""


class ProtobufTooLarge(ProtobufDecodeError, LimitExceeded):
    """A serialized message over the caller's size limit."""


def _message_type(field: FieldDescriptor) -> Descriptor | None:
    """The message type of a message field (a map is one too), None for any other field."""
    return field.message_type if field.type == FieldDescriptor.TYPE_MESSAGE else None


def unknown_field_path(message: Message, prefix: str = "") -> str | None:
    """Dotted path of the first unknown field found in ``message`` or below, else None."""
    unknown = unknown_fields.UnknownFieldSet(message)
    if len(unknown):
        first = unknown[0]
        return f"{prefix}<field {first.field_number}, wire type {first.wire_type}>"
    for field, value in message.ListFields():
        message_type = _message_type(field)
        if message_type is None:
            continue
        name = f"{prefix}{field.name}"
        if message_type.GetOptions().map_entry:
            if _message_type(message_type.fields_by_name["value"]) is None:
                continue
            for key, entry in value.items():
                found = unknown_field_path(entry, f"{name}[{key!r}].")
                if found:
                    return found
        elif field.is_repeated:
            for index, entry in enumerate(value):
                found = unknown_field_path(entry, f"{name}[{index}].")
                if found:
                    return found
        else:
            found = unknown_field_path(value, f"{name}.")
            if found:
                return found
    return None


def wire_fault(data: bytes, string_fields: Mapping[int, str]) -> str | None:
    """Why the top level of ``data`` is not valid protobuf wire format, in words.

    The runtime's own parse errors say only "Error parsing message" (upb); this walk names
    the field and offset of a truncated or corrupt field and of a string that is not UTF-8
    (``string_fields``: the message's string fields, number to name).
    """
    try:
        for f in iter_fields(data, "message"):
            if f.number in string_fields and isinstance(f.value, bytes):
                try:
                    f.value.decode("utf-8")
                except UnicodeDecodeError:
                    name = string_fields[f.number]
                    return f"bad UTF-8 in string field {name} at byte {f.start}"
    except DecodeError as exc:
        where = f" at byte {exc.offset}" if exc.offset is not None else ""
        return f"corrupt: {exc.reason}{where}"
    return None


_PARSE_FAILURES = (_ProtobufDecodeError, Warning, RecursionError, ValueError, TypeError)


def _parse_into(message: M, data: bytes | bytearray | memoryview) -> M:
    """``message`` parsed from ``data``; raises what the runtime raises (one of
    ``_PARSE_FAILURES``: a warning only where the process turns warnings into errors).

    No ``warnings.catch_warnings()`` around it: that swaps the process-wide filters, so
    every thread's warnings became errors while any thread parsed (a test shows 9,184 of
    50,000 ordinary warnings raised beside a parsing thread), and it cost ~2.3 us a parse.
    Neither protobuf runtime (upb, python; 6.x) warns while parsing."""
    message.ParseFromString(bytes(data))
    return message


def try_parse_message(
    cls: type[M], data: bytes | bytearray | memoryview, *, max_size: int
) -> M | None:
    """:func:`parse_message` (not strict) for a caller that only asks whether ``data`` is a
    ``cls``: the message, or None wherever ``parse_message`` would raise. It skips building
    the error's words (``wire_fault`` walks the whole input: ~9 us on a 300-byte message,
    ten times the parse attempt), which such a caller would throw away."""
    if not isinstance(data, bytes | bytearray | memoryview) or len(data) > max_size:
        return None
    try:
        return _parse_into(cls(), data)
    except _PARSE_FAILURES:
        return None


def parse_message(
    cls: type[M],
    data: bytes | bytearray | memoryview,
    what: str,
    *,
    max_size: int,
    strict: bool = False,
) -> M:
    """Parse ``data`` as ``cls``; ``ProtobufDecodeError`` (naming ``what``) if it cannot."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise ProtobufDecodeError(what, f"expected bytes, got {type(data).__name__}")
    if len(data) > max_size:
        raise ProtobufTooLarge(what, f"{len(data)} bytes is over the {max_size}-byte limit")
    try:
        message = _parse_into(cls(), data)
    except _ProtobufDecodeError as exc:
        strings = {
            f.number: f.name for f in cls.DESCRIPTOR.fields if f.type == FieldDescriptor.TYPE_STRING
        }
        reason = wire_fault(bytes(data), strings) or str(exc)
        raise ProtobufDecodeError(
            what, f"not a valid {cls.DESCRIPTOR.full_name} protobuf: {reason}"
        ) from None
    except (Warning, RecursionError, ValueError, TypeError) as exc:
        raise ProtobufDecodeError(
            what, f"not a valid {cls.DESCRIPTOR.full_name} protobuf: {type(exc).__name__}: {exc}"
        ) from None
    if strict:
        path = unknown_field_path(message)
        if path is not None:
            raise ProtobufDecodeError(
                what,
                f"unknown field {path} for {cls.DESCRIPTOR.full_name} "
                "(not this message type, or a wire type that does not match the schema)",
            )
    return message
