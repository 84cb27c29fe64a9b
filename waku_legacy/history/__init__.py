"""The readable history: a community's old channels as pages, a search and a human export.

From the archived or stored WakuMessages of a community, decode the Status application layer as
a member's client does and keep one readable model of it. Modules, each owning one concept:

- :mod:`.model`: the readable model (authors, messages, reactions, provenance, summaries, the
  view policy) and the ``HistoryReader`` protocol that pages and exports read through.
- :mod:`.events`: what decoding yields per Waku message (chat messages, edits, deletes,
  reactions, pins, identities, undecodable ones).
- :mod:`.decode`: decrypted 26/WAKU-PAYLOAD data -> one event (no I/O); :mod:`.segments`:
  Status payloads split over several Waku messages, joined again.
- :mod:`.ids`: status-go's message ids; :mod:`.alias`: the three-word names and ``zQ3…`` keys;
  :mod:`.rules`: who may edit or delete, moderators, mentions.
- :mod:`.index`: the readable tables in the v2 store's database (SQLite FTS5 / PostgreSQL
  full-text search), folded at write time; ``HistoryIndex``.
- :mod:`.reader`: the ``HistoryReader`` over those tables, honouring a ``ViewPolicy``.
- :mod:`.sources`: store rows and archive entries -> decode -> index.
- :mod:`.export`: static HTML site, JSON, JSONL, CSV, TXT and Markdown exports.
- :mod:`.web`: the pages (templates, rendering, image sniffing) the viewer and exports share.
"""
