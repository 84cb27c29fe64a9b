"""The Waku v1 mailserver client: ``mailserver_client`` dials a legacy mailserver over RLPx
and pulls history for a time range into an envelope dump (resumable).
"""
