from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
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

class ImageFormat(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UNKNOWN_IMAGE_FORMAT: _ClassVar[ImageFormat]
    PNG: _ClassVar[ImageFormat]
    JPEG: _ClassVar[ImageFormat]
    WEBP: _ClassVar[ImageFormat]
    GIF: _ClassVar[ImageFormat]
UNKNOWN_MESSAGE_TYPE: MessageType
ONE_TO_ONE: MessageType
PUBLIC_GROUP: MessageType
PRIVATE_GROUP: MessageType
SYSTEM_MESSAGE_PRIVATE_GROUP: MessageType
COMMUNITY_CHAT: MessageType
SYSTEM_MESSAGE_GAP: MessageType
UNKNOWN_IMAGE_FORMAT: ImageFormat
PNG: ImageFormat
JPEG: ImageFormat
WEBP: ImageFormat
GIF: ImageFormat

class ChatMessage(_message.Message):
    __slots__ = ("clock", "timestamp", "text", "response_to", "ens_name", "chat_id", "message_type", "content_type", "sticker", "image", "audio", "community", "discord_message", "bridge_message", "display_name")
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_TO_FIELD_NUMBER: _ClassVar[int]
    ENS_NAME_FIELD_NUMBER: _ClassVar[int]
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    STICKER_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    AUDIO_FIELD_NUMBER: _ClassVar[int]
    COMMUNITY_FIELD_NUMBER: _ClassVar[int]
    DISCORD_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    BRIDGE_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    clock: int
    timestamp: int
    text: str
    response_to: str
    ens_name: str
    chat_id: str
    message_type: MessageType
    content_type: int
    sticker: StickerMessage
    image: ImageMessage
    audio: AudioMessage
    community: bytes
    discord_message: DiscordMessage
    bridge_message: BridgeMessage
    display_name: str
    def __init__(self, clock: _Optional[int] = ..., timestamp: _Optional[int] = ..., text: _Optional[str] = ..., response_to: _Optional[str] = ..., ens_name: _Optional[str] = ..., chat_id: _Optional[str] = ..., message_type: _Optional[_Union[MessageType, str]] = ..., content_type: _Optional[int] = ..., sticker: _Optional[_Union[StickerMessage, _Mapping]] = ..., image: _Optional[_Union[ImageMessage, _Mapping]] = ..., audio: _Optional[_Union[AudioMessage, _Mapping]] = ..., community: _Optional[bytes] = ..., discord_message: _Optional[_Union[DiscordMessage, _Mapping]] = ..., bridge_message: _Optional[_Union[BridgeMessage, _Mapping]] = ..., display_name: _Optional[str] = ...) -> None: ...

class StickerMessage(_message.Message):
    __slots__ = ("hash", "pack")
    HASH_FIELD_NUMBER: _ClassVar[int]
    PACK_FIELD_NUMBER: _ClassVar[int]
    hash: str
    pack: int
    def __init__(self, hash: _Optional[str] = ..., pack: _Optional[int] = ...) -> None: ...

class ImageMessage(_message.Message):
    __slots__ = ("payload", "format", "album_id", "width", "height", "album_images_count")
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    ALBUM_ID_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    ALBUM_IMAGES_COUNT_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    format: ImageFormat
    album_id: str
    width: int
    height: int
    album_images_count: int
    def __init__(self, payload: _Optional[bytes] = ..., format: _Optional[_Union[ImageFormat, str]] = ..., album_id: _Optional[str] = ..., width: _Optional[int] = ..., height: _Optional[int] = ..., album_images_count: _Optional[int] = ...) -> None: ...

class AudioMessage(_message.Message):
    __slots__ = ("payload", "type", "duration_ms")
    class AudioType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN_AUDIO_TYPE: _ClassVar[AudioMessage.AudioType]
        AAC: _ClassVar[AudioMessage.AudioType]
        AMR: _ClassVar[AudioMessage.AudioType]
    UNKNOWN_AUDIO_TYPE: AudioMessage.AudioType
    AAC: AudioMessage.AudioType
    AMR: AudioMessage.AudioType
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    payload: bytes
    type: AudioMessage.AudioType
    duration_ms: int
    def __init__(self, payload: _Optional[bytes] = ..., type: _Optional[_Union[AudioMessage.AudioType, str]] = ..., duration_ms: _Optional[int] = ...) -> None: ...

class DiscordMessage(_message.Message):
    __slots__ = ("id", "type", "timestamp", "timestampEdited", "content", "author", "reference", "attachments")
    ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMPEDITED_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    id: str
    type: str
    timestamp: str
    timestampEdited: str
    content: str
    author: DiscordMessageAuthor
    reference: DiscordMessageReference
    attachments: _containers.RepeatedCompositeFieldContainer[DiscordMessageAttachment]
    def __init__(self, id: _Optional[str] = ..., type: _Optional[str] = ..., timestamp: _Optional[str] = ..., timestampEdited: _Optional[str] = ..., content: _Optional[str] = ..., author: _Optional[_Union[DiscordMessageAuthor, _Mapping]] = ..., reference: _Optional[_Union[DiscordMessageReference, _Mapping]] = ..., attachments: _Optional[_Iterable[_Union[DiscordMessageAttachment, _Mapping]]] = ...) -> None: ...

class DiscordMessageAuthor(_message.Message):
    __slots__ = ("id", "name", "discriminator", "nickname", "avatarUrl", "avatarImagePayload", "localUrl")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DISCRIMINATOR_FIELD_NUMBER: _ClassVar[int]
    NICKNAME_FIELD_NUMBER: _ClassVar[int]
    AVATARURL_FIELD_NUMBER: _ClassVar[int]
    AVATARIMAGEPAYLOAD_FIELD_NUMBER: _ClassVar[int]
    LOCALURL_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    discriminator: str
    nickname: str
    avatarUrl: str
    avatarImagePayload: bytes
    localUrl: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., discriminator: _Optional[str] = ..., nickname: _Optional[str] = ..., avatarUrl: _Optional[str] = ..., avatarImagePayload: _Optional[bytes] = ..., localUrl: _Optional[str] = ...) -> None: ...

class DiscordMessageReference(_message.Message):
    __slots__ = ("messageId", "channelId", "guildId")
    MESSAGEID_FIELD_NUMBER: _ClassVar[int]
    CHANNELID_FIELD_NUMBER: _ClassVar[int]
    GUILDID_FIELD_NUMBER: _ClassVar[int]
    messageId: str
    channelId: str
    guildId: str
    def __init__(self, messageId: _Optional[str] = ..., channelId: _Optional[str] = ..., guildId: _Optional[str] = ...) -> None: ...

class DiscordMessageAttachment(_message.Message):
    __slots__ = ("id", "messageId", "url", "fileName", "fileSizeBytes", "contentType", "payload", "localUrl")
    ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGEID_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    FILENAME_FIELD_NUMBER: _ClassVar[int]
    FILESIZEBYTES_FIELD_NUMBER: _ClassVar[int]
    CONTENTTYPE_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    LOCALURL_FIELD_NUMBER: _ClassVar[int]
    id: str
    messageId: str
    url: str
    fileName: str
    fileSizeBytes: int
    contentType: str
    payload: bytes
    localUrl: str
    def __init__(self, id: _Optional[str] = ..., messageId: _Optional[str] = ..., url: _Optional[str] = ..., fileName: _Optional[str] = ..., fileSizeBytes: _Optional[int] = ..., contentType: _Optional[str] = ..., payload: _Optional[bytes] = ..., localUrl: _Optional[str] = ...) -> None: ...

class BridgeMessage(_message.Message):
    __slots__ = ("bridgeName", "userName", "userAvatar", "userID", "content", "messageID", "parentMessageID")
    BRIDGENAME_FIELD_NUMBER: _ClassVar[int]
    USERNAME_FIELD_NUMBER: _ClassVar[int]
    USERAVATAR_FIELD_NUMBER: _ClassVar[int]
    USERID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    MESSAGEID_FIELD_NUMBER: _ClassVar[int]
    PARENTMESSAGEID_FIELD_NUMBER: _ClassVar[int]
    bridgeName: str
    userName: str
    userAvatar: str
    userID: str
    content: str
    messageID: str
    parentMessageID: str
    def __init__(self, bridgeName: _Optional[str] = ..., userName: _Optional[str] = ..., userAvatar: _Optional[str] = ..., userID: _Optional[str] = ..., content: _Optional[str] = ..., messageID: _Optional[str] = ..., parentMessageID: _Optional[str] = ...) -> None: ...

class EditMessage(_message.Message):
    __slots__ = ("clock", "text", "chat_id", "message_id", "message_type", "content_type")
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_TYPE_FIELD_NUMBER: _ClassVar[int]
    clock: int
    text: str
    chat_id: str
    message_id: str
    message_type: MessageType
    content_type: int
    def __init__(self, clock: _Optional[int] = ..., text: _Optional[str] = ..., chat_id: _Optional[str] = ..., message_id: _Optional[str] = ..., message_type: _Optional[_Union[MessageType, str]] = ..., content_type: _Optional[int] = ...) -> None: ...

class DeleteMessage(_message.Message):
    __slots__ = ("clock", "chat_id", "message_id", "message_type", "deleted_by")
    CLOCK_FIELD_NUMBER: _ClassVar[int]
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_TYPE_FIELD_NUMBER: _ClassVar[int]
    DELETED_BY_FIELD_NUMBER: _ClassVar[int]
    clock: int
    chat_id: str
    message_id: str
    message_type: MessageType
    deleted_by: str
    def __init__(self, clock: _Optional[int] = ..., chat_id: _Optional[str] = ..., message_id: _Optional[str] = ..., message_type: _Optional[_Union[MessageType, str]] = ..., deleted_by: _Optional[str] = ...) -> None: ...
