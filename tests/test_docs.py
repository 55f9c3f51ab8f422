"""The manuals link to each other by file and heading: every relative link of README.md and docs/ names a file of the
project, and a link to a heading of a Markdown page names one that page has (GitHub's anchor of that heading)."""

from __future__ import annotations

import re
from pathlib import Path

from fabctl.render import PROJECT_DIR

PAGES = [PROJECT_DIR / "README.md", *sorted((PROJECT_DIR / "docs").rglob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings (lower case, punctuation dropped, spaces as hyphens), code blocks aside."""
    found, fence = set(), False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            found.add(re.sub(r"[^\w -]", "", line.lstrip("#").strip().lower()).replace(" ", "-"))
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    return broken


def test_every_relative_link_of_the_manuals_resolves():
    assert len(PAGES) > 1
    assert {page.relative_to(PROJECT_DIR).as_posix(): broken_links(page) for page in PAGES if broken_links(page)} == {}
