"""Protobuf schemas (generated modules beside their ``.proto`` sources).

Regenerate with ``python -m waku_legacy.proto.generate``.
"""
