from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ProtocolMessage(_message.Message):
    __slots__ = ("installation_id", "public_message")
    INSTALLATION_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    installation_id: str
    public_message: bytes
    def __init__(self, installation_id: _Optional[str] = ..., public_message: _Optional[bytes] = ...) -> None: ...
