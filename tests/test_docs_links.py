"""Issue 36: the README is a guide that links to docs/; every relative link in README.md,
docs/**/*.md and bench/README.md names a file that exists, and every ``#anchor`` a heading
of the file it points to (GitHub's anchors: the heading in lower case, punctuation dropped,
spaces as hyphens, a repeated heading numbered -1, -2, ...)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import REPO_ROOT

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`[^`]*`")
HEADING = re.compile(r"(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def documents(root: Path) -> list[Path]:
    found = [root / "README.md", root / "bench" / "README.md"]
    return [*(p for p in found if p.exists()), *sorted((root / "docs").rglob("*.md"))]


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in prose_lines(text):
        found.update(HTML_ANCHOR.findall(line))
        if heading := HEADING.fullmatch(line):
            base = slug(heading.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken_links(root: Path) -> list[str]:
    problems = []
    for doc in documents(root):
        for line in prose_lines(doc.read_text()):
            for target in LINK.findall(CODE_SPAN.sub("", line)):
                if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
                    continue
                path_part, _, anchor = target.partition("#")
                path = (doc.parent / path_part).resolve() if path_part else doc
                where = f"{doc.relative_to(root)}: ({target})"
                if not path.exists():
                    problems.append(f"{where}: no such file")
                elif anchor and path.suffix == ".md" and anchor not in anchors(path.read_text()):
                    problems.append(f"{where}: no heading #{anchor} in {path.name}")
    return problems


def test_every_relative_link_and_anchor_resolves() -> None:
    assert not broken_links(REPO_ROOT), "\n".join(broken_links(REPO_ROOT))


def test_the_readme_links_to_every_doc() -> None:
    """Each page under docs/ is reachable from the README (moved there, not dropped)."""
    readme = (REPO_ROOT / "README.md").read_text()
    for doc in sorted((REPO_ROOT / "docs").rglob("*.md")):
        assert f"]({doc.relative_to(REPO_ROOT)}" in readme, doc


def test_the_check_finds_a_broken_file_and_anchor(tmp_path) -> None:
    """Not a rubber stamp: a missing file, a missing heading, links in code left alone."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text(
        '# Why `x = "both"` and `y_z`\n\n## Twice\n\n## Twice\n\n[up](../README.md#guide)\n'
    )
    (tmp_path / "README.md").write_text(
        "## Guide\n\n"
        "[ok](docs/a.md#why-x--both-and-y_z) [second](docs/a.md#twice-1) [web](https://x.org/y)\n"
        "[gone](docs/b.md) [no anchor](docs/a.md#thrice) [self](#nowhere)\n"
        "`[in code](docs/c.md)`\n\n```\n[fenced](docs/d.md)\n```\n"
    )
    assert broken_links(tmp_path) == [
        "README.md: (docs/b.md): no such file",
        "README.md: (docs/a.md#thrice): no heading #thrice in a.md",
        "README.md: (#nowhere): no heading #nowhere in README.md",
    ]
