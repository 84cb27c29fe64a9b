"""A message's text as HTML: Markdown as Status renders it, with nothing a stranger can inject.

markdown-it-py's CommonMark preset with raw HTML off (``<b>`` stays text), plus ``~~strike~~``
(status-go's parser, ``status-im/markdown``, knows it); images are off (a picture in a message
comes as an IMAGE message, never from a URL, and the pages' CSP loads nothing from outside).
Links are kept only with an ``http``, ``https`` or ``mailto`` scheme (anything else, relative
ones included, stays text) and carry ``rel="nofollow noopener noreferrer ugc"``. Mentions
(``@0x04…`` or ``@zQ3…``, recognised by :data:`waku_legacy.history.rules.MENTION_RE` as
status-go's parser does) become the mentioned member's name (the reader's, else the
three-word alias), escaped as text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from waku_legacy.history.alias import alias
from waku_legacy.history.rules import MENTION_RE, mention_key

__all__ = ["LINK_REL", "render_markdown"]

LINK_REL = "nofollow noopener noreferrer ugc"
ALLOWED_SCHEMES = ("http:", "https:", "mailto:")


def _validate_link(url: str) -> bool:
    return url.strip().lower().startswith(ALLOWED_SCHEMES)


def _mentions(state: StateCore) -> None:
    """Split text tokens at mentions into ``mention`` tokens (rendered as escaped names)."""
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        children: list[Token] = []
        for token in block.children:
            if token.type != "text" or "@" not in token.content:
                children.append(token)
                continue
            position = 0
            for match in MENTION_RE.finditer(token.content):
                key = mention_key(match)  # status-go's rules: a key that is a curve point
                if key is None:
                    continue
                if match.start() > position:
                    text = Token("text", "", 0)
                    text.content = token.content[position : match.start()]
                    children.append(text)
                mention = Token("mention", "", 0)
                mention.meta = {"key": key}
                children.append(mention)
                position = match.end()
            if position < len(token.content):
                tail = Token("text", "", 0)
                tail.content = token.content[position:]
                children.append(tail)
        block.children = children


def _render_mention(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    key = tokens[idx].meta["key"]
    names: Mapping[str, str] = env.get("mentions", {})
    name = names.get(key) or alias(key)
    return f'<span class="mention" title="{escapeHtml(key)}">@{escapeHtml(name)}</span>'


def _render_link_open(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    tokens[idx].attrSet("rel", LINK_REL)
    return self.renderToken(tokens, idx, options, env)


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable("strikethrough")
    md.disable("image")
    md.validateLink = _validate_link  # type: ignore[method-assign]
    md.core.ruler.after("inline", "status_mentions", _mentions)
    md.add_render_rule("mention", _render_mention)
    md.add_render_rule("link_open", _render_link_open)
    return md


_MD = _parser()


#: Text made of these only, not starting with a list marker's character and without
#: surrounding blanks, is one plain paragraph to any CommonMark parser: markdown-it-py's
#: output for it is ``<p>`` + the text + ``</p>`` (no character here is escaped). Most chat
#: messages are such text; they skip the parser (a static export renders millions).
_PLAIN = re.compile(r"[^\W_]+(?:[ ,.;:'?!()/][^\W_]*)*[?!.)]?")


def render_markdown(text: str, mentions: Mapping[str, str] | None = None) -> str:
    """``text`` (a message's Markdown source) as HTML safe to put in a page."""
    if _PLAIN.fullmatch(text) and not text[0].isdigit() and not text.endswith(" "):
        return f"<p>{text}</p>\n"
    env: dict[str, Any] = {"mentions": {k.lower(): v for k, v in (mentions or {}).items()}}
    html: str = _MD.render(text, env)
    return html
