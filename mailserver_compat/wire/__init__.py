"""The Waku v1 wire, sans-IO: codecs and the waku/1 capability's state machine.

Modules: ``envelope`` (6/WAKU1 envelope, RLP, hash), ``pow`` (proof of work), ``bloom`` (topic bloom
filter), ``request`` (8/WAKU-MAIL history requests, both forms), ``cursor`` (mailserver DB
key and page cursor), ``complete`` (the 0x7d request-complete payload), ``waku_protocol``
(packet codes, status, the per-peer state machine), ``convert`` (v1 envelope <-> v2 message
and archive message).
"""
