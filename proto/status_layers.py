"""The layers status-go puts around an ApplicationMetadataMessage in a public message's data.

status-go's ``SendPublic`` wraps the signed ``ApplicationMetadataMessage`` in the encryption
layer's ``ProtocolMessage{installation_id = 2, public_message = 102}`` before the 26/WAKU-
PAYLOAD; a receiver first parses the data as a ``ProtocolMessage`` and uses
``public_message``, and falls back to the bare ``ApplicationMetadataMessage`` when that fails
(``protocol/encryption`` ``HandleMessage``). The archive-link message and the community
description are both public messages, so both readers open them here.
"""

from __future__ import annotations

from waku_legacy.proto import encryption_protocol_pb2
from waku_legacy.proto.codec import try_parse_message

__all__ = ["BARE", "PROTOCOL_MESSAGE", "open_layers", "wrap_protocol_message"]

PROTOCOL_MESSAGE = "protocol-message"  # ProtocolMessage{public_message = AMM}, as status-go
BARE = "bare"  # the ApplicationMetadataMessage directly (older senders, this project before)


def wrap_protocol_message(application: bytes, installation_id: str) -> bytes:
    """The encryption layer of a public message: ``ProtocolMessage{installation_id,
    public_message}`` (no X3DH bundle: this sender has no encryption installation)."""
    return encryption_protocol_pb2.ProtocolMessage(
        installation_id=installation_id, public_message=application
    ).SerializeToString()


def open_layers(plaintext: bytes, what: str, *, max_size: int) -> tuple[str, str | None, bytes]:
    """(layering, installation id, ApplicationMetadataMessage bytes) of a payload's data;
    data over ``max_size`` bytes is read as bare (and refused by the caller's own parse)."""
    # Only whether it parses matters (a bare message usually does not): no error is built.
    wrapper = try_parse_message(
        encryption_protocol_pb2.ProtocolMessage, plaintext, max_size=max_size
    )
    if wrapper is not None and wrapper.public_message:
        return PROTOCOL_MESSAGE, wrapper.installation_id, bytes(wrapper.public_message)
    return BARE, None, plaintext
