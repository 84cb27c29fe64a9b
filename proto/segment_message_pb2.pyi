from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class SegmentMessage(_message.Message):
    __slots__ = ("entire_message_hash", "index", "segments_count", "payload", "parity_segment_index", "parity_segments_count")
    ENTIRE_MESSAGE_HASH_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    SEGMENTS_COUNT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PARITY_SEGMENT_INDEX_FIELD_NUMBER: _ClassVar[int]
    PARITY_SEGMENTS_COUNT_FIELD_NUMBER: _ClassVar[int]
    entire_message_hash: bytes
    index: int
    segments_count: int
    payload: bytes
    parity_segment_index: int
    parity_segments_count: int
    def __init__(self, entire_message_hash: _Optional[bytes] = ..., index: _Optional[int] = ..., segments_count: _Optional[int] = ..., payload: _Optional[bytes] = ..., parity_segment_index: _Optional[int] = ..., parity_segments_count: _Optional[int] = ...) -> None: ...
