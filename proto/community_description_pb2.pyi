from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
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

class CommunityMember(_message.Message):
    __slots__ = ("roles", "last_update_clock", "channel_role")
    class Roles(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        ROLE_NONE: _ClassVar[CommunityMember.Roles]
        ROLE_OWNER: _ClassVar[CommunityMember.Roles]
        ROLE_ADMIN: _ClassVar[CommunityMember.Roles]
        ROLE_TOKEN_MASTER: _ClassVar[CommunityMember.Roles]
    ROLE_NONE: CommunityMember.Roles
    ROLE_OWNER: CommunityMember.Roles
    ROLE_ADMIN: CommunityMember.Roles
    ROLE_TOKEN_MASTER: CommunityMember.Roles
    class ChannelRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        CHANNEL_ROLE_POSTER: _ClassVar[CommunityMember.ChannelRole]
        CHANNEL_ROLE_VIEWER: _ClassVar[CommunityMember.ChannelRole]
    CHANNEL_ROLE_POSTER: CommunityMember.ChannelRole
    CHANNEL_ROLE_VIEWER: CommunityMember.ChannelRole
    ROLES_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_CLOCK_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_ROLE_FIELD_NUMBER: _ClassVar[int]
    roles: _containers.RepeatedScalarFieldContainer[CommunityMember.Roles]
    last_update_clock: int
    channel_role: CommunityMember.ChannelRole
    def __init__(self, roles: _Optional[_Iterable[_Union[CommunityMember.Roles, str]]] = ..., last_update_clock: _Optional[int] = ..., channel_role: _Optional[_Union[CommunityMember.ChannelRole, str]] = ...) -> None: ...

class CommunityBanInfo(_message.Message):
    __slots__ = ("delete_all_messages",)
    DELETE_ALL_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    delete_all_messages: bool
    def __init__(self, delete_all_messages: _Optional[bool] = ...) -> None: ...

class CommunityChat(_message.Message):
    __slots__ = ("members", "identity", "category_id", "position")
    class MembersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: CommunityMember
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[CommunityMember, _Mapping]] = ...) -> None: ...
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_ID_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    members: _containers.MessageMap[str, CommunityMember]
    identity: ChatIdentity
    category_id: str
    position: int
    def __init__(self, members: _Optional[_Mapping[str, CommunityMember]] = ..., identity: _Optional[_Union[ChatIdentity, _Mapping]] = ..., category_id: _Optional[str] = ..., position: _Optional[int] = ...) -> None: ...

class CommunityAdminSettings(_message.Message):
    __slots__ = ("pin_message_all_members_enabled",)
    PIN_MESSAGE_ALL_MEMBERS_ENABLED_FIELD_NUMBER: _ClassVar[int]
    pin_message_all_members_enabled: bool
    def __init__(self, pin_message_all_members_enabled: _Optional[bool] = ...) -> None: ...

class CommunityDescription(_message.Message):
    __slots__ = ("clock", "members", "identity", "chats", "ban_list", "archive_magnetlink_clock", "admin_settings", "relay_shard_index", "banned_members")
    class MembersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: CommunityMember
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[CommunityMember, _Mapping]] = ...) -> None: ...
    class ChatsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: CommunityChat
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[CommunityChat, _Mapping]] = ...) -> None: ...
    class BannedMembersEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: CommunityBanInfo
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[CommunityBanInfo, _Mapping]] = ...) -> None: ...
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    CHATS_FIELD_NUMBER: _ClassVar[int]
    BAN_LIST_FIELD_NUMBER: _ClassVar[int]
    ARCHIVE_MAGNETLINK_CLOCK_FIELD_NUMBER: _ClassVar[int]
    ADMIN_SETTINGS_FIELD_NUMBER: _ClassVar[int]
    RELAY_SHARD_INDEX_FIELD_NUMBER: _ClassVar[int]
    BANNED_MEMBERS_FIELD_NUMBER: _ClassVar[int]
    clock: int
    members: _containers.MessageMap[str, CommunityMember]
    identity: ChatIdentity
    chats: _containers.MessageMap[str, CommunityChat]
    ban_list: _containers.RepeatedScalarFieldContainer[str]
    archive_magnetlink_clock: int
    admin_settings: CommunityAdminSettings
    relay_shard_index: int
    banned_members: _containers.MessageMap[str, CommunityBanInfo]
    def __init__(self, clock: _Optional[int] = ..., members: _Optional[_Mapping[str, CommunityMember]] = ..., identity: _Optional[_Union[ChatIdentity, _Mapping]] = ..., chats: _Optional[_Mapping[str, CommunityChat]] = ..., ban_list: _Optional[_Iterable[str]] = ..., archive_magnetlink_clock: _Optional[int] = ..., admin_settings: _Optional[_Union[CommunityAdminSettings, _Mapping]] = ..., relay_shard_index: _Optional[int] = ..., banned_members: _Optional[_Mapping[str, CommunityBanInfo]] = ...) -> None: ...
