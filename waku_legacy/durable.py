"""Durable files: a write that a crash or kill at any point leaves either untouched or
complete, and that survives a power cut once it returns.

:func:`write_atomic` writes a temporary file, fsyncs it, renames it over the target and
fsyncs the folder (the rename is durable only then). Every step calls a
:data:`~waku_legacy.faults.FaultHook` first, so crash tests can stop the write between any
two steps. Every file the project writes for keeps goes through here.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from waku_legacy.faults import FaultHook, no_fault

__all__ = ["append_durable", "fsync_dir", "write_atomic"]


def fsync_dir(path: Path) -> None:
    """Make a rename or a file creation in ``path`` durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        with contextlib.suppress(OSError):  # some filesystems refuse fsync on directories
            os.fsync(fd)
    finally:
        os.close(fd)


def append_durable(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` in one write and fsync it (and the folder when the file
    is new): once this returns, a kill or a power cut keeps it."""
    new = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    if new:
        fsync_dir(path.parent)


def write_atomic(
    path: Path,
    data: bytes,
    *,
    fault: FaultHook = no_fault,
    step: str = "write",
    tmp: Path | None = None,
    fsync: bool = True,
    mode: int = 0o666,
) -> None:
    """Write temp file, fsync, rename over ``path``, fsync the folder(s).

    ``mode`` is the new file's permission bits before the umask (``0o600`` for key files:
    the secret is never readable by others, not even in the temporary file).
    Fault points: ``<step>:write-tmp`` (half the bytes written), ``<step>:fsync-tmp``,
    ``<step>:rename``, ``<step>:done``.
    """
    tmp = tmp if tmp is not None else path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with open(fd, "wb") as handle:
        half = len(data) // 2
        handle.write(data[:half])
        handle.flush()
        fault(f"{step}:write-tmp")
        handle.write(data[half:])
        handle.flush()
        fault(f"{step}:fsync-tmp")
        if fsync:
            os.fsync(handle.fileno())
    fault(f"{step}:rename")
    os.replace(tmp, path)
    if fsync:
        fsync_dir(path.parent)
        if tmp.parent != path.parent:
            fsync_dir(tmp.parent)
    fault(f"{step}:done")
