from waku_legacy.proto import chat_message_pb2 as _chat_message_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PinMessage(_message.Message):
    __slots__ = ("clock", "message_id", "chat_id", "pinned", "message_type")
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    PINNED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    clock: int
    message_id: str
    chat_id: str
    pinned: bool
    message_type: _chat_message_pb2.MessageType
    def __init__(self, clock: _Optional[int] = ..., message_id: _Optional[str] = ..., chat_id: _Optional[str] = ..., pinned: _Optional[bool] = ..., message_type: _Optional[_Union[_chat_message_pb2.MessageType, str]] = ...) -> None: ...
