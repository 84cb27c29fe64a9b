"""The one default of each archive setting (issue 22), imported by the ``[[community]]``
parser (migration and bridge), ``migrate``/``export``, ``audit``, ``archive`` and the bridge,
and named in each command's ``--help``. Plain strings: importing this imports nothing else.

- ``ARCHIVE_TOPICS``: which 4-byte topics archived channel messages carry
  (:mod:`waku_legacy.archive.topics`): both the channel topic (clients from before status-go
  PR #5993) and ``<id>-memberUpdate`` (current clients).
- ``ARCHIVE_LINK_CHATS``: the chats the archive-link message is sent on
  (:mod:`waku_legacy.archive.magnet`; docs/compat/archive-link.md).
- ``FLAVOUR``: the archive format (what Status clients import), one of ``FLAVOURS``.
- ``BACKEND``: where the archives go (:mod:`waku_legacy.archive.logos_storage`).
"""

from __future__ import annotations

__all__ = ["ARCHIVE_LINK_CHATS", "ARCHIVE_TOPICS", "BACKEND", "FLAVOUR", "FLAVOURS"]

ARCHIVE_TOPICS = "both"
ARCHIVE_LINK_CHATS = "both"
FLAVOUR = "status-go"
FLAVOURS = ("status-go", "seed-spec")
BACKEND = "torrent"
