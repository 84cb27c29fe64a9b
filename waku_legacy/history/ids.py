"""status-go's message ids as the readable history writes them: ``"0x"`` + 64 lowercase hex.

The rule (``keccak256(65-byte author key || ApplicationMetadataMessage bytes)``, status-go
``protocol/v1/message.go`` ``MessageID``) and its history are
:mod:`waku_legacy.identity.application`'s. Replies (``ChatMessage.response_to``), edits,
deletes, reactions and pins name their target by this id, as the sender's client computed it.
Community messages only ever used the 65-byte form (communities arrived in 2021; the 33-byte
form was status-protocol-go's for two weeks of July 2019), so references resolve by
:func:`message_id`; :func:`message_id_aliases` gives both forms for a reader that wants to
accept a reference in either.
"""

from __future__ import annotations

from waku_legacy.identity import application

__all__ = ["legacy_message_id", "message_id", "message_id_aliases", "normalize_id"]


def message_id(author_key: bytes, application_bytes: bytes) -> str:
    """``"0x…"`` status-go's id of the message ``application_bytes`` signed by ``author_key``
    (33, 64 or 65 bytes)."""
    return "0x" + application.message_id(author_key, application_bytes).hex()


def legacy_message_id(author_key: bytes, application_bytes: bytes) -> str:
    """``"0x…"`` the id status-protocol-go computed before July 31 2019 (compressed key)."""
    return "0x" + application.legacy_message_id(author_key, application_bytes).hex()


def message_id_aliases(author_key: bytes, application_bytes: bytes) -> tuple[str, str]:
    """(id, legacy id): both names a reference to this message may carry."""
    return (
        message_id(author_key, application_bytes),
        legacy_message_id(author_key, application_bytes),
    )


def normalize_id(reference: str) -> str:
    """A reference as messages carry it (``response_to``, ``message_id``) in the form ids are
    written here: lowercase, ``0x``-prefixed. status-go compares these strings as sent
    (``types.EncodeHex`` writes ``0x`` + lowercase); a reference in another case or without
    the prefix names the same bytes. Anything that is not 64 hex digits is returned as given
    (stripped), so it matches nothing."""
    text = reference.strip()
    body = text[2:] if text[:2].lower() == "0x" else text
    if len(body) == 64:
        try:
            bytes.fromhex(body)
        except ValueError:
            return text
        return "0x" + body.lower()
    return text
