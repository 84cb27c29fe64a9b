"""Messages, not copies (issue 34): the one rule every report counts by.

With ``archive_topics = "both"`` each channel message is archived twice
(:mod:`waku_legacy.archive.topics`): on its channel topic with its own hash, and on the
community's ``-memberUpdate`` topic with ``relabelled_hash(hash, universal topic)``. A report
that counted archived entries would count that message twice. So every report (the audit,
the member preview, the bridge's status) counts *messages*, one per Waku message hash of the
original, and a message's fate is the best fate of its copies (imported when any copy is,
missing when no copy is archived); copies are counted separately, as copies.

:func:`message_keys` names the message each copy belongs to, :func:`best_copies` picks each
message's best copy, :func:`tally` counts messages by their best fate beside the copies by
theirs, :func:`describe_modes` says which archive-topics mode a report found.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from waku_legacy.archive.topics import ArchiveTopics, relabelled_hash, universal_topic
from waku_legacy.identity.topics import CommunityId

__all__ = ["MIXED", "Tally", "best_copies", "describe_modes", "message_keys", "tally"]

MIXED = "mixed"  # windows written in different modes
T = TypeVar("T")


def message_keys(
    copies: Iterable[tuple[bytes, bytes]],
    community: CommunityId | str,
    known: Mapping[bytes, bytes] | None = None,
) -> dict[bytes, bytes]:
    """copy hash -> the hash of the message it is a copy of, for ``(hash, topic)`` copies.

    ``known`` (copy hash -> original) wins: a reader that has the sources knows every
    expected copy's original. Otherwise a copy on ``-memberUpdate`` whose hash is the
    relabelled hash of a copy on another topic belongs to that copy's message ("both"); any
    other copy is its own message (its hash is the original's: "channel", "universal", or a
    "both" copy whose twin is not among ``copies``)."""
    known = known or {}
    universal = universal_topic(community)
    listed = [(bytes(h), bytes(t)) for h, t in copies]
    twin_of = {
        relabelled_hash(known.get(h, h), universal): known.get(h, h)
        for h, t in listed
        if t != universal
    }
    out: dict[bytes, bytes] = {}
    for digest, topic in listed:
        if digest in known:
            out[digest] = known[digest]
        elif topic == universal and digest in twin_of:
            out[digest] = twin_of[digest]
        else:
            out[digest] = digest
    return out


def best_copies(
    copies: Iterable[tuple[bytes, T]], order: Sequence[str], fate: Callable[[T], str]
) -> dict[bytes, T]:
    """message key -> its copy whose ``fate`` comes first in ``order`` (best first; the
    earliest copy among equals), for ``(message key, copy)`` pairs, in first-seen order."""
    rank = {name: i for i, name in enumerate(order)}
    best: dict[bytes, T] = {}
    for message, copy in copies:
        before = best.get(message)
        if before is None or rank[fate(copy)] < rank[fate(before)]:
            best[message] = copy
    return best


@dataclass(slots=True)
class Tally:
    """Messages by their best fate, copies by their own."""

    messages: Counter[str] = field(default_factory=Counter)
    copies: Counter[str] = field(default_factory=Counter)
    fate_of: dict[bytes, str] = field(default_factory=dict)  # message -> its best fate


def tally(fates: Iterable[tuple[bytes, str]], order: Sequence[str]) -> Tally:
    """Count ``(message key, fate of one copy)`` pairs: each message once, with the fate
    earliest in ``order`` among its copies' (``order`` lists every fate, best first)."""
    listed = list(fates)
    result = Tally(copies=Counter(fate for _, fate in listed))
    result.fate_of = best_copies(listed, order, str)
    result.messages.update(result.fate_of.values())
    return result


def describe_modes(modes: Iterable[ArchiveTopics | str | None]) -> str:
    """The archive-topics mode a report found: the one every window was written in,
    ``"mixed"`` when they differ, ``"unknown"`` when no window says (no topic at all)."""
    found = {str(m) for m in modes if m is not None}
    if not found:
        return "unknown"
    return found.pop() if len(found) == 1 else MIXED
