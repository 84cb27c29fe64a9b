"""The Waku v1 wire: envelopes, payload crypto, mailserver requests and cursors, legacy
mailserver storage formats and the RLPx transport."""
