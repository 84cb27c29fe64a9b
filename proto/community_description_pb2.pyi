from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ChatIdentity(_message.Message):
    __slots__ = ("clock", "ens_name", "display_name", "description", "color", "emoji")
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    ENS_NAME_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    COLOR_FIELD_NUMBER: _ClassVar[int]
    EMOJI_FIELD_NUMBER: _ClassVar[int]
    clock: int
    ens_name: str
    display_name: str
    description: str
    color: str
    emoji: str
    def __init__(self, clock: _Optional[int] = ..., ens_name: _Optional[str] = ..., display_name: _Optional[str] = ..., description: _Optional[str] = ..., color: _Optional[str] = ..., emoji: _Optional[str] = ...) -> None: ...

class CommunityChat(_message.Message):
    __slots__ = ("identity", "category_id", "position")
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    identity: ChatIdentity
    category_id: str
    position: int
    def __init__(self, identity: _Optional[_Union[ChatIdentity, _Mapping]] = ..., category_id: _Optional[str] = ..., position: _Optional[int] = ...) -> None: ...

class CommunityDescription(_message.Message):
    __slots__ = ("clock", "identity", "chats", "archive_magnetlink_clock", "relay_shard_index")
    class ChatsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: CommunityChat
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[CommunityChat, _Mapping]] = ...) -> None: ...
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    CHATS_FIELD_NUMBER: _ClassVar[int]
    ARCHIVE_MAGNETLINK_CLOCK_FIELD_NUMBER: _ClassVar[int]
    RELAY_SHARD_INDEX_FIELD_NUMBER: _ClassVar[int]
    clock: int
    identity: ChatIdentity
    chats: _containers.MessageMap[str, CommunityChat]
    archive_magnetlink_clock: int
    relay_shard_index: int
    def __init__(self, clock: _Optional[int] = ..., identity: _Optional[_Union[ChatIdentity, _Mapping]] = ..., chats: _Optional[_Mapping[str, CommunityChat]] = ..., archive_magnetlink_clock: _Optional[int] = ..., relay_shard_index: _Optional[int] = ...) -> None: ...
