"""Audit a community's published archives against the sources (issue 14, read-only):
``waku-legacy audit`` and ``audit --repair``.

The sources are read in plain Python with the migration's own readers, converted and
deduplicated as the migration does, and turned into the copies the archives should hold;
every archive is decoded and checked; the two are compared hash by hash, per window and
channel, counting messages (one per original hash) and copies apart. Modules, one concept
each:

- ``request``: :class:`AuditRequest` (what to audit, each window's archive-topics mode) and
  the audited channels' topic mapping.
- ``sources``: the sources' side: records read, decoded, deduplicated, decrypted where needed
  and turned into the expected copies (:func:`read_sources`).
- ``archives``: the archives' side: every archive decoded and checked, overlapping windows,
  and the mode each archived window was written in (:func:`with_published_archive_topics`).
- ``compare``: the comparison (in both, missing, extra, duplicates, per window and channel)
  and the version 2 JSON document.
- ``run``: one audit end to end (:func:`audit_community`; :func:`audit_missing` for a repair).
- ``render``: the document as a terminal table (:func:`render_audit_table`).
- ``html``: the document as one self-contained HTML page (``--html``).
- ``repair``: ``--repair``: archive what is missing, sign the new link, audit again.
"""
