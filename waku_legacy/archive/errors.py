"""Errors of the history-archive package (all subclasses of the project's own types)."""

from __future__ import annotations

from waku_legacy.errors import ConfigError, DecodeError, SignatureError, WakuLegacyError

__all__ = [
    "ArchiveCorrupted",
    "ArchiveDecodeError",
    "ArchiveError",
    "FetchError",
    "FetchTimeout",
    "ForgedMagnetMessage",
    "MagnetMessageError",
    "SeederError",
    "StaleMagnetMessage",
    "TorrentError",
    "UnexpectedTorrentLayout",
]


class ArchiveError(WakuLegacyError):
    """Something about community history archives went wrong (base class)."""


class ArchiveDecodeError(DecodeError):
    """Archive, index, torrent or magnet-message bytes that do not parse."""


class ArchiveCorrupted(ArchiveDecodeError):
    """On-disk archive files that contradict each other or their own hashes.

    Raised with the path and what disagrees (for example an index entry whose key is not the
    keccak256 of its metadata, or an index that accounts for more bytes than ``data`` holds).
    """


class TorrentError(ArchiveError):
    """A torrent that cannot be built, loaded or checked."""


class UnexpectedTorrentLayout(ArchiveDecodeError):
    """A torrent that is not a community history archive: not one ``0x<id>`` folder holding
    exactly ``data`` and ``index`` (refused before anything of it is written or read)."""


class SeederError(ArchiveError):
    """The seeding session failed (bind address in use, missing files, failed check)."""


class FetchError(ArchiveError):
    """Fetching archives from peers failed."""


class FetchTimeout(FetchError):
    """No metadata or data arrived within the configured time."""


class MagnetMessageError(DecodeError):
    """A magnet-link message that is not what it should be (type, encoding, clock)."""


class StaleMagnetMessage(MagnetMessageError):
    """A magnet-link message whose clock is lower than the last one accepted (status-go takes
    an equal clock)."""


class ForgedMagnetMessage(SignatureError):
    """A magnet-link message not signed by the community key."""


# Re-exported so that callers can catch configuration mistakes from this package alone.
ArchiveConfigError = ConfigError
