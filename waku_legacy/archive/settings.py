"""Where community archives are written and in which layout: the keys both applications
share (the bridge's ``[archive]``, the migration's ``[output]`` and ``[pipeline]``), declared
once here (:func:`~waku_legacy.config.keys.key`) and taken by each app's table with
:func:`~waku_legacy.config.keys.same_key`."""

from __future__ import annotations

from dataclasses import dataclass

from waku_legacy.archive import defaults
from waku_legacy.config.keys import Kind, key

__all__ = ["ArchiveOutput"]


@dataclass(frozen=True, slots=True)
class ArchiveOutput:
    """the archive and torrent folders, and the archive layout"""

    archive_dir: str = key(
        kind=Kind.PATH,
        example="archives",
        doc="the communities' archive data and index files (bridges sharing a store: shared "
        "storage)",
    )
    torrent_dir: str = key(
        kind=Kind.PATH, example="torrents", doc="torrents and signed archive-link messages"
    )
    flavour: str = key(
        defaults.FLAVOUR,
        choices=defaults.FLAVOURS,
        doc="archive layout: status-go's, or the seed spec's",
    )
