from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MessageType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN_MESSAGE_TYPE: _ClassVar[MessageType]
    ONE_TO_ONE: _ClassVar[MessageType]
    PUBLIC_GROUP: _ClassVar[MessageType]
    PRIVATE_GROUP: _ClassVar[MessageType]
    SYSTEM_MESSAGE_PRIVATE_GROUP: _ClassVar[MessageType]
    COMMUNITY_CHAT: _ClassVar[MessageType]
    SYSTEM_MESSAGE_GAP: _ClassVar[MessageType]
UNKNOWN_MESSAGE_TYPE: MessageType
ONE_TO_ONE: MessageType
PUBLIC_GROUP: MessageType
PRIVATE_GROUP: MessageType
SYSTEM_MESSAGE_PRIVATE_GROUP: MessageType
COMMUNITY_CHAT: MessageType
SYSTEM_MESSAGE_GAP: MessageType

class ChatMessage(_message.Message):
    __slots__ = ("clock", "timestamp", "text", "response_to", "ens_name", "chat_id", "message_type", "content_type")
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_TO_FIELD_NUMBER: _ClassVar[int]
    ENS_NAME_FIELD_NUMBER: _ClassVar[int]
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    clock: int
    timestamp: int
    text: str
    response_to: str
    ens_name: str
    chat_id: str
    message_type: MessageType
    content_type: int
    def __init__(self, clock: _Optional[int] = ..., timestamp: _Optional[int] = ..., text: _Optional[str] = ..., response_to: _Optional[str] = ..., ens_name: _Optional[str] = ..., chat_id: _Optional[str] = ..., message_type: _Optional[_Union[MessageType, str]] = ..., content_type: _Optional[int] = ...) -> None: ...
