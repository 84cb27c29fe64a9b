"""Who may change a message after it is sent, and whom it mentions: status-go's rules (pure).

Read in status-go at ``c72f491`` (Oct 2024) unless said otherwise:

Edits (``handleEditMessage``, ``protocol/messenger_handler.go``; ``applyEditMessage``,
``protocol/messenger_messages.go``; ``ValidateEditMessage``, ``protocol/message_validator.go``):
  an edit counts only when its signer is the original's author ("invalid edit, not the right
  author"); it replaces the text (the bridge content for a BRIDGE_MESSAGE) and, when its own
  ``content_type`` is not 0, the content type. The newest edit wins: an edit whose clock is
  not above the message's ``EditedAt`` is stored, not applied. An edit that arrives before its
  target is stored (``SaveEdit``) and applied when the target arrives (``checkForEdits``,
  called from ``handleChatMessage``; ``GetEdits`` reads that author's pending edits newest
  first, ``protocol/message_persistence.go``). :func:`edit_applies` and
  :func:`edit_supersedes` are that rule made independent of arrival order: the author's
  edits, the highest clock winning (ties, which status-go settles by arrival, settled here by
  the higher edit id). status-go's pending path also wants ``edit clock >= message clock``;
  the usual in-order path does not, and this follows the in-order path.

Deletes (``handleDeleteMessage``, ``protocol/messenger_handler.go``):
  the author may delete their message; in a community chat so may a member for whom
  ``CanDeleteMessageForEveryone`` holds, which is ``IsPrivilegedMember``: a member of the
  community's description with role ``ROLE_OWNER`` (1), ``ROLE_ADMIN`` (4) or
  ``ROLE_TOKEN_MASTER`` (5) (``manageCommunityRoles``, ``protocol/communities/community.go``).
  Moderators' deletes arrived with status-go ``684e9654d`` (2022-12-02, "Allow owner/admin to
  delete messages of a community", roles ``ROLE_ALL`` and ``ROLE_MODERATE_CONTENT`` then; the
  latter is now reserved 3, the former renamed ``ROLE_OWNER``); before it only the author could
  delete. The deleted message (and, for an image of an album, every image of the album:
  ``getOtherMessagesInAlbum``) is marked deleted and never shown. A delete that arrives
  before its target is stored (``SaveDelete``) and applied on arrival (``checkForDeletes``),
  but only when its signer is the target's author (``GetDeletes(id, from)`` and
  ``applyDeleteMessage``'s "invalid edit or delete author"): an early moderator delete is
  lost there, an order accident of status-go. :func:`delete_applies` gives the in-order
  answer whatever the order: the author, or a moderator of the newest description.

Pins (``handlePinMessage``): the newest clock per (message, chat) wins (``SavePinMessage``)
  among the pins a member's client accepts. ``matchChatEntity``
  (``protocol/messenger_handler.go``) refuses a community chat's PinMessage, pin or unpin,
  unless ``CanPost(signer, chat, PIN_MESSAGE)`` (``protocol/communities/community.go``):
  beyond ``CanView``, the signer ``IsPrivilegedMember`` (``ROLE_OWNER``, ``ROLE_ADMIN`` or
  ``ROLE_TOKEN_MASTER``: the moderators' roles) or the description's
  ``admin_settings.pin_message_all_members_enabled`` (``AllowsAllMembersToPinMessage``) is
  set. The community key itself is no member, so the pins status-go's Discord import signs
  with it count only when pinning is open to all. :func:`pinners_of` and
  :func:`pin_applies`, against the newest description as for deletes (older status-go,
  before the message type reached ``CanPost``, asked ``IsMemberAdmin`` instead).

Mentions (status-go's Markdown parser ``github.com/status-im/markdown`` ``parser/inline.go``
  ``mention``, vendored at ``v0.0.0-20240404192634-b7e33c6ac3d4``; ``PrepareContent`` and
  ``MentionsAndLinksVisitor`` in ``protocol/common/message.go`` collect them): ``@`` then
  ``0x`` and 130 lowercase hex digits (``pkLength`` 132), followed by the end of the text, a
  space or one of ``.,:;!?``; or ``@`` then a ``zQ3…`` serialized key (the longest run of
  base58 characters, which must decode to ``e7 01`` and a 33-byte key). ``@0x00001`` is the
  "everyone" tag (``EveryoneMentionTag``), not an author.
"""

from __future__ import annotations

import re

from waku_legacy.history.events import ChatMessageEvent, DeleteEvent, EditEvent
from waku_legacy.identity.descriptions import SignedDescription

__all__ = [
    "EVERYONE_MENTION",
    "MENTION_RE",
    "MODERATOR_ROLES",
    "delete_applies",
    "edit_applies",
    "edit_supersedes",
    "mention_key",
    "mentioned_keys",
    "moderators_of",
    "pin_applies",
    "pinners_of",
]

ROLE_OWNER, ROLE_ADMIN, ROLE_TOKEN_MASTER = 1, 4, 5  # CommunityMember.Roles
MODERATOR_ROLES = frozenset({ROLE_OWNER, ROLE_ADMIN, ROLE_TOKEN_MASTER})  # manageCommunityRoles
EVERYONE_MENTION = "0x00001"  # EveryoneMentionTag

# group 1: an uncompressed key mention; group 2: a zQ3… candidate, the longest run of the
# parser's key characters (isValidCompressedPublicKeyChar, which admits "0"), checked by
# mention_key
MENTION_RE = re.compile(
    r"@(?:(0x[0-9a-f]{130})(?=[ \t\n\r\f\v.,:;!?]|\Z)"
    r"|(zQ3[0-9A-HJ-NP-Za-km-z]*))"
)


def edit_applies(edit: EditEvent, original: ChatMessageEvent) -> bool:
    """Whether ``edit`` may change ``original``: it targets it and its signer is its author."""
    return edit.author == original.author and edit.target_id in (original.id, original.legacy_id)


def edit_supersedes(candidate: EditEvent, current: EditEvent | None) -> bool:
    """Whether ``candidate`` replaces ``current`` as the edit shown (newest clock wins)."""
    return current is None or (candidate.clock, candidate.id) > (current.clock, current.id)


def delete_applies(
    delete: DeleteEvent, original: ChatMessageEvent, moderators: frozenset[str]
) -> bool:
    """Whether ``delete`` removes ``original``: by its author, or by a community moderator
    (``moderators``: :func:`moderators_of` the newest description)."""
    if delete.target_id not in (original.id, original.legacy_id):
        return False
    return delete.author == original.author or delete.author in moderators


def moderators_of(description: SignedDescription) -> frozenset[str]:
    """The ``"0x04…"`` keys whose deletes count for everyone's messages: the description's
    members with an owner, admin or token-master role."""
    return frozenset(
        key for key, member in description.members.items()
        if MODERATOR_ROLES.intersection(member.roles)
    )  # fmt: skip


def pinners_of(description: SignedDescription) -> frozenset[str] | None:
    """The ``"0x04…"`` keys whose pins a member's client accepts: the description's members
    with an owner, admin or token-master role (``IsPrivilegedMember``), or None (anyone's)
    when it opens pinning to all members."""
    if description.pin_all_members:
        return None
    return moderators_of(description)


def pin_applies(author: str, pinners: frozenset[str] | None) -> bool:
    """Whether a pin or unpin signed by ``author`` counts (``pinners``: :func:`pinners_of`;
    None, also when no description is known: anyone's)."""
    return pinners is None or author in pinners


def mention_key(match: re.Match[str]) -> str | None:
    """The ``"0x04…"`` key a :data:`MENTION_RE` match names, or None when it names none (a
    ``zQ3…`` run that is no serialized key, an uncompressed one that is no curve point)."""
    from waku_legacy.errors import DecodeError
    from waku_legacy.history.alias import public_key_bytes, public_key_of_serialized

    try:
        if match.group(1) is not None:
            return "0x" + public_key_bytes(match.group(1)).hex()
        return "0x" + public_key_of_serialized(match.group(2)).hex()
    except DecodeError:
        return None


def mentioned_keys(text: str) -> list[str]:
    """The distinct ``"0x04…"`` keys ``text`` mentions, in order of first mention."""
    keys: dict[str, None] = {}
    for match in MENTION_RE.finditer(text):
        key = mention_key(match)
        if key is not None:
            keys.setdefault(key, None)
    return list(keys)
