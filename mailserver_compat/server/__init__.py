"""The Waku v1 mailserver: ``mailserver`` answers history requests and takes live envelopes
from an :mod:`envelope store <..storage.envelope_store>`; ``limits`` holds every per-peer and
per-address knob (rates, bursts, connections, the work of one request).
"""
