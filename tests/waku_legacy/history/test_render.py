"""The readable history's pages: every content type, replies, reactions, edits, pins,
mentions, ENS claims and aliases rendered as a reader should see them, everything a stranger
wrote escaped, and each page's JSON form holding the same data.

Expected values are written by hand from the sample community (memory_reader.sample_history)
and from status-go's rules as the model states them (a name shown is the display name, else
the three-word alias; an ENS name is the sender's claim)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.browser import page_text, text_of
from tests.waku_legacy.history.memory_reader import (
    ALICE,
    BOB,
    CAROL,
    COMMUNITY,
    DAY1,
    DAY2,
    DEV,
    GENERAL,
    key,
    message,
    mid,
    sample_history,
    waku_hash,
)
from waku_legacy.history.model import ContentType, ViewPolicy
from waku_legacy.history.web.markdown import render_markdown
from waku_legacy.history.web.render import (
    ServerLinks,
    StaticLinks,
    day_document,
    index_document,
    message_page_document,
    render_html,
    render_json,
    search_document,
)

LINKS = ServerLinks("/history")
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&"


def _day_html(history=None, day=None, channel=GENERAL, links=LINKS):
    day = day or DAY1.date()
    history = history or sample_history()
    reader = history.reader()
    summary = reader.community(COMMUNITY)
    document = day_document(reader, summary, channel, day)
    messages = list(reader.day(COMMUNITY, channel, day))
    return document, render_html(document, links, messages=messages)


def _article(html: str, n: int) -> str:
    match = re.search(rf'<article[^>]*id="m-{mid(n)}".*?</article>', html, re.S)
    assert match, f"message {n} is not on the page"
    return match.group(0)


def test_day_page_lists_the_days_messages_in_order_and_hides_the_banned():
    document, html = _day_html()
    # Alice 1, 2, 5, 9, 10; Bob 3, 6, 8; Carol 4, 7 on 12 March in #general; Mallory's 11 is
    # hidden (banned in the description), Bob's 14 is in #dev, 12 and 13 on 14 March
    assert [m["id"] for m in document["messages"]] == [
        mid(n) for n in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
    ]
    assert document["day"] == "2024-03-12"
    assert document["previous_day"] is None and document["next_day"] == "2024-03-14"
    assert "buy cheap tokens" not in html and "Mallory" not in html
    assert 'href="/history/' + COMMUNITY + "/" + GENERAL + '/2024-03-14"' in html
    assert "Tuesday, 12 March 2024" in text_of(html)


def test_text_is_markdown_with_html_off_and_safe_links():
    _, html = _day_html()
    assert "<strong>v2 migration</strong>" in _article(html, 1)
    assert "<code>waku-legacy migrate --config c.toml</code>" in _article(html, 5)
    out = render_markdown(
        "[a](javascript:alert(1)) [b](https://status.app) <b>bold</b> [c](/relative) "
        "[d](mailto:x@example.org) [e](data:text/html,x)"
    )
    assert '<a href="https://status.app" rel="nofollow noopener noreferrer ugc">b</a>' in out
    assert '<a href="mailto:x@example.org" rel="nofollow noopener noreferrer ugc">d</a>' in out
    assert "&lt;b&gt;bold&lt;/b&gt;" in out
    assert out.count("<a ") == 2  # javascript:, the relative link and data: stay text


def test_each_content_type():
    _, html = _day_html()
    image = _article(html, 6)
    assert f'src="/history/{COMMUNITY}/image/{mid(6)}"' in image
    assert 'class="placeholder sticker"' in _article(html, 7)
    assert "Voice message, 0:14" in text_of(_article(html, 8))  # 14 000 ms
    assert 'class="text emoji-only">🔥<' in _article(html, 9)
    discord = text_of(_article(html, 10))
    assert "Imported from Discord" in discord and "oldtimer#1234" in discord
    assert "2021-06-01T10:00:00Z" in discord


def test_an_image_that_did_not_sniff_is_a_placeholder_not_an_img():
    history = sample_history()
    history.messages[5] = dataclasses.replace(history.messages[5], image_type="")
    _, html = _day_html(history)
    assert "<img" not in _article(html, 6)
    assert "Image not shown" in text_of(_article(html, 6))


def test_system_message_is_shown_as_a_system_line():
    history = sample_history()
    history.messages.append(
        message(20, ALICE, DAY1.replace(hour=23), "Alice pinned a message",
                content_type=ContentType.SYSTEM_MESSAGE_PINNED_MESSAGE)
    )  # fmt: skip
    _, html = _day_html(history)
    article = _article(html, 20)
    assert (
        'class="msg system"' in article
        and '<p class="system-text">Alice pinned a message' in article
    )


def test_reply_reaction_edit_pin_marks():
    document, html = _day_html()
    reply = _article(html, 4)
    # Carol's reply quotes Bob's question and links to it
    assert f'href="/history/{COMMUNITY}/m/{mid(3)}"' in reply
    assert "Nice! Does it keep replies and reactions?" in text_of(reply)
    assert "(edited)" in text_of(reply)
    reactions = " ".join(text_of(_article(html, 3)).split())
    assert "❤️ 2 👍 1" in reactions
    assert "Pinned" in text_of(_article(html, 5))
    entry = document["messages"][3]
    assert entry["reply"]["id"] == mid(3) and entry["edited"] is True
    assert entry["edited_at"] == "2024-03-12T09:11:00.000Z"
    assert document["messages"][2]["reactions"] == [
        {"emoji": "❤️", "count": 2, "authors": [key(9), key(41)]},
        {"emoji": "👍", "count": 1, "authors": [key(9)]},
    ]


def test_a_deleted_or_hidden_original_leaves_the_reply_without_context():
    history = sample_history()
    history.messages = [m for m in history.messages if m.id != mid(3)]  # deleted: not shown
    document, html = _day_html(history)
    assert mid(3) not in [m["id"] for m in document["messages"]]
    reply = _article(html, 4)
    assert document["messages"][2]["reply"] is None
    assert "Replying to a message that is not shown" in text_of(reply)
    assert "Nice! Does it keep" not in html
    # the takedown list hides it the same way
    document = day_document(
        sample_history().reader(ViewPolicy(takedown_ids=frozenset({mid(3)}))),
        sample_history().reader().community(COMMUNITY), GENERAL, DAY1.date(),
    )  # fmt: skip
    assert [m["reply"] for m in document["messages"] if m["id"] == mid(4)] == [None]


def test_mentions_are_names_and_names_are_escaped():
    _, html = _day_html()
    assert "@Fond Bossy Buck</span>" in _article(html, 4)
    assert key(22) not in text_of(_article(html, 4)).replace(" ", "")
    # a mention the reader has no name for: the alias status-go derives from the key; the
    # zQ3… form too; a key that is no curve point is no mention
    assert "@Fond Bossy Buck</span>" in render_markdown(f"@{key(22)} hi")
    assert "@Fond Bossy Buck</span>" in render_markdown(f"@{BOB.compressed} hi")
    assert "mention" not in render_markdown("@0x04" + "ab" * 64 + " hi")
    out = render_markdown(f"hi @{key(22)}", {key(22): HOSTILE})
    assert "<script>" not in out and "<img" not in out
    assert "@&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x onerror=alert(2)&gt;" in out


def test_ens_is_a_claim_and_the_alias_is_shown():
    document, html = _day_html()
    carol = _article(html, 4)  # Carol: ENS claim only, no display name
    who = text_of(re.search(r'<span class="who">.*?</span>\s*<a', carol, re.S).group(0))
    assert "Brisk Medical Goral" in who  # the alias is her name here
    assert '<span class="name">Brisk Medical Goral</span>' in carol
    assert '<span class="name">carol.eth</span>' not in carol
    assert "claims carol.eth" in who
    alice = _article(html, 1)
    assert '<span class="name">Alice</span>' in alice and "claims alice.eth" in text_of(alice)
    assert "Active Curly Goat" in text_of(alice)  # the alias beside the display name
    assert ALICE.compressed[:7] in text_of(alice) and ALICE.compressed[-4:] in text_of(alice)
    bob = _article(html, 3)
    assert "claims" not in text_of(bob)
    author = document["messages"][3]["author"]
    assert author == {
        "public_key": key(41), "compressed": CAROL.compressed, "alias": "Brisk Medical Goral",
        "display_name": "", "ens_claim": "carol.eth", "shown_name": "Brisk Medical Goral",
    }  # fmt: skip


def test_hostile_text_everywhere_is_escaped():
    history = sample_history()
    summary = history.communities[0]
    history.communities[0] = dataclasses.replace(
        summary, name=HOSTILE, description=HOSTILE,
        channels=tuple(dataclasses.replace(c, name=HOSTILE, description=HOSTILE)
                       for c in summary.channels),
    )  # fmt: skip
    hostile_author = dataclasses.replace(
        BOB, display_name=HOSTILE, ens_name=HOSTILE, shown_name=HOSTILE
    )
    history.messages.append(
        message(21, hostile_author, DAY1.replace(hour=22), HOSTILE,
                content_type=ContentType.DISCORD_MESSAGE, discord_author=HOSTILE,
                discord_timestamp=HOSTILE)
    )  # fmt: skip
    reader = history.reader()
    summary = reader.community(COMMUNITY)
    pages = [
        render_html(index_document(summary), LINKS),
        _day_html(history)[1],
        render_html(
            message_page_document(reader, summary, reader.message(COMMUNITY, mid(21))), LINKS,
            messages=[reader.message(COMMUNITY, mid(21))],
        ),
        render_html(
            search_document(summary, HOSTILE, reader.search(COMMUNITY, "script"), page=1,
                            page_size=10), LINKS,
            messages=[h.message for h in reader.search(COMMUNITY, "script")],
        ),
    ]  # fmt: skip
    for html in pages:
        parsed = page_text(html)
        assert "script" not in parsed.tags
        assert not [name for name, _ in parsed.attributes if name.startswith("on")]
        assert "<script>" not in html
        assert HOSTILE in text_of(html) or "&lt;script&gt;" in html


def test_index_page_and_its_json():
    reader = sample_history().reader()
    summary = reader.community(COMMUNITY)
    document = index_document(summary)
    assert document["community"]["messages"] == 13  # 14 messages, Mallory's hidden
    general, dev = document["channels"]
    assert (general["name"], general["messages"]) == ("general", 12)
    assert (general["first_day"], general["last_day"]) == ("2024-03-12", "2024-03-14")
    assert general["first"] == "2024-03-12T09:02:00.000Z"
    assert (dev["name"], dev["messages"], dev["first_day"]) == ("dev", 1, "2024-03-12")
    archive = document["community"]["archive"]
    assert archive["kind"] == "magnet" and archive["link"].startswith("magnet:?xt=urn:btih:")
    assert archive["last_archived"] == "2024-03-14T00:00:00.000Z"
    html = render_html(document, LINKS)
    assert f'href="/history/{COMMUNITY}/{GENERAL}/2024-03-14"' in html
    assert f'href="/history/{COMMUNITY}/{DEV}/2024-03-12"' in html
    assert "12 messages · 2024-03-12 – 2024-03-14" in text_of(html)
    assert f'action="/history/{COMMUNITY}/search"' in html
    assert f'href="/history/{COMMUNITY}/index.json"' in html
    assert json.loads(render_json(document)) == document
    assert '<meta name="robots" content="noindex,nofollow">' in html
    assert "robots" not in render_html(document, LINKS, noindex=False)


def test_permalink_page_has_provenance_and_reply_context():
    reader = sample_history().reader()
    summary = reader.community(COMMUNITY)
    target = reader.message(COMMUNITY, mid(4))
    document = message_page_document(reader, summary, target)
    html = render_html(document, LINKS, messages=[target])
    text = text_of(html)
    provenance = document["message"]["provenance"]
    assert provenance["waku_hash"] == waku_hash(4)
    assert provenance["signer"] == key(41)  # Carol's
    # 09:07 on 12 March 2024 falls in the week window starting Thursday 7 March 00:00 UTC
    assert provenance["archive_window"] == [1709769600, 1710374400]
    assert "2024-03-07 00:00 UTC – 2024-03-14 00:00 UTC" in text
    assert provenance["waku_hash"] in text and key(41) in text
    assert document["message"]["reply"]["text"] == "Nice! Does it keep replies and reactions?"
    assert f'href="/history/{COMMUNITY}/{GENERAL}/2024-03-12#m-{mid(4)}"' in html


def test_search_page_marks_the_words_and_echoes_the_query_escaped():
    reader = sample_history().reader()
    summary = reader.community(COMMUNITY)
    hits = reader.search(COMMUNITY, "call")
    document = search_document(summary, "call <b>x</b>", hits, page=1, page_size=10)
    html = render_html(document, LINKS, messages=[h.message for h in hits])
    assert "Anyone up for a <mark>call</mark> on the archives?" in html
    assert "call &lt;b&gt;x&lt;/b&gt;" in html
    assert document["results"][0]["message"]["id"] == mid(12)
    assert document["next_page"] is None


def test_static_links_are_relative_and_have_no_forms():
    links = StaticLinks(1)
    _, html = _day_html(links=links, day=DAY2.date())
    assert 'href="../history.css"' in html
    assert f'href="../{GENERAL}/2024-03-12.html"' in html  # previous day
    assert "<form" not in html
    assert f'href="../{GENERAL}/2024-03-14.html#m-{mid(12)}"' in html  # the reply's original
    assert dt.date(2024, 3, 14).isoformat() in html


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab1é中 ,.;:'?!()/-*_#>[]<&`~\n@0x", max_size=40))
def test_plain_text_fast_path_is_what_markdown_it_renders(text):
    """Plain chat text skips the parser (export speed): the output must be the parser's."""
    from waku_legacy.history.web.markdown import _MD

    assert render_markdown(text) == _MD.render(text, {"mentions": {}})
