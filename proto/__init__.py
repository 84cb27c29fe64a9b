"""Protobuf schemas (generated modules beside their ``.proto`` sources).

Regenerate with ``python -m waku_legacy.proto.generate``.

- ``codec``: parsing protobuf messages from untrusted bytes with the package's errors;
  ``wire``: the minimal wire-format writer and reader; ``status_layers``: the layers
  status-go puts around an ApplicationMetadataMessage.
- Generated, each from the ``.proto`` of its name: ``waku_message_pb2``, ``store_v3_pb2``,
  ``store_v2beta4_pb2``, ``application_metadata_pb2``, ``encryption_protocol_pb2``,
  ``chat_message_pb2``, ``emoji_reaction_pb2``, ``pin_message_pb2``,
  ``community_description_pb2``, ``status_archive_pb2``, ``seed_archive_pb2``,
  ``segment_message_pb2``; ``generate`` regenerates them.
"""
