from waku_legacy.proto import chat_message_pb2 as _chat_message_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EmojiReaction(_message.Message):
    __slots__ = ("clock", "chat_id", "message_id", "message_type", "type", "retracted")
    class Type(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN_EMOJI_REACTION_TYPE: _ClassVar[EmojiReaction.Type]
        LOVE: _ClassVar[EmojiReaction.Type]
        THUMBS_UP: _ClassVar[EmojiReaction.Type]
        THUMBS_DOWN: _ClassVar[EmojiReaction.Type]
        LAUGH: _ClassVar[EmojiReaction.Type]
        SAD: _ClassVar[EmojiReaction.Type]
        ANGRY: _ClassVar[EmojiReaction.Type]
    UNKNOWN_EMOJI_REACTION_TYPE: EmojiReaction.Type
    LOVE: EmojiReaction.Type
    THUMBS_UP: EmojiReaction.Type
    THUMBS_DOWN: EmojiReaction.Type
    LAUGH: EmojiReaction.Type
    SAD: EmojiReaction.Type
    ANGRY: EmojiReaction.Type
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    RETRACTED_FIELD_NUMBER: _ClassVar[int]
    clock: int
    chat_id: str
    message_id: str
    message_type: _chat_message_pb2.MessageType
    type: EmojiReaction.Type
    retracted: bool
    def __init__(self, clock: _Optional[int] = ..., chat_id: _Optional[str] = ..., message_id: _Optional[str] = ..., message_type: _Optional[_Union[_chat_message_pb2.MessageType, str]] = ..., type: _Optional[_Union[EmojiReaction.Type, str]] = ..., retracted: _Optional[bool] = ...) -> None: ...
