"""The archive writers' fencing hook: a writer that may have lost its right to write (a
bridge that lost the archiving role, :mod:`waku_legacy.bridge.leader`) checks it at every
step where the builder is about to change a file.

The builders already call a :data:`~waku_legacy.faults.FaultHook` at each durable step:
``data:open`` before the data file is appended to, ``data:append:<n>[:partial]`` between
archives' bytes, ``repair:truncate`` and ``repair:remove-tmp`` before a repair, and
``<step>:rename`` right before every temporary file is renamed over its target (index,
digests, state, torrent, link message files). :func:`fenced` wraps a hook so that the check
runs at each of those steps; a check that fails raises, and the step's change is not made.

What this does not cover: the time between a check that passed and the write that follows
(a rename, or one archive's append), which no check on a shared file system can close.
"""

from __future__ import annotations

from collections.abc import Callable

from waku_legacy.faults import FaultHook, no_fault

__all__ = ["fenced"]


def fenced(check: Callable[[], None], fault: FaultHook = no_fault) -> FaultHook:
    """``fault``, then ``check()`` (which raises when the writer must stop), at every step."""

    def hook(step: str) -> None:
        fault(step)
        check()

    return hook
