"""Whether a community's archive link reaches its members (:func:`link_reach`), and why not."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from waku_legacy.archive.logos_storage import TORRENT

__all__ = ["NOT_SEEDING", "NO_KEY", "NO_RELAY", "LinkReach", "link_reach"]


@dataclass(frozen=True, slots=True)
class LinkReach:
    """Whether members' clients can get this community's history through its archive link,
    and if not, every reason why. One concept under one name (``linkReach``, with
    ``reachesMembers`` and ``why``) in ``/admin/v1/communities``, the status page's JSON
    and, as ``link_reach`` among its snake_case keys, `serve --check`."""

    reaches_members: bool
    why: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"reachesMembers": self.reaches_members, "why": list(self.why)}


#: The reasons :func:`link_reach` gives, each with what the operator does about it.
NO_KEY = (
    "no community key (key_file): the link cannot be signed by the community, and members' "
    "clients drop a link their community did not sign"
)
NO_RELAY = "no [relay]: nothing publishes the link on the community's shard"
NOT_SEEDING = "not seeding: members' clients find no peer for the torrent"


def link_reach(
    *, has_key: bool, has_relay: bool, seeding: bool, backend: str, backend_down: str | None
) -> LinkReach:
    """The one place that decides whether a community's archive link reaches members."""
    why: list[str] = []
    if not has_key:
        why.append(NO_KEY)
    if not has_relay:
        why.append(NO_RELAY)
    if backend == TORRENT and not seeding:
        why.append(NOT_SEEDING)
    if backend_down is not None:
        why.append(f"archives degraded ({backend} back end down?): {backend_down}")
    return LinkReach(not why, tuple(why))
