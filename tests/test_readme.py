"""The README stays a ten-minute read, and no link of the README or docs/ leads nowhere.

A link is checked as GitHub renders it: a relative path must name a file of the repository, and
an anchor (`page.md#heading`, or `#heading` on the same page) must be the slug GitHub gives one
of that page's headings (lower case, punctuation dropped, spaces as hyphens, `-1`, `-2` for
repeats). Headings and links inside fenced code blocks or code spans are not markup, so they are
skipped. Links to other sites are not followed (the suite runs without the internet)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]
MAX_README_LINES = 350

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+).*?\1")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)


def prose(path: Path) -> list[tuple[int, str]]:
    """The page's lines outside fenced code blocks, with their numbers."""
    lines, fenced = [], False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text: what it renders as, lower-cased, without punctuation."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link renders as its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every anchor GitHub makes for the page's headings, repeats numbered as it numbers them."""
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose(path):
        heading = HEADING.match(line)
        if heading is None:
            continue
        base = slug(heading.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def links(path: Path) -> list[tuple[int, str]]:
    """The page's relative link targets (`path`, `path#anchor` or `#anchor`), with their lines."""
    found = []
    for number, line in prose(path):
        for target in LINK.findall(CODE_SPAN.sub("", line)):
            if not EXTERNAL.match(target):
                found.append((number, target))
    return found


def broken(path: Path, root: Path = ROOT) -> list[str]:
    """What is wrong with each relative link of the page (in the repository at `root`), one line each."""
    problems = []
    for number, target in links(path):
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(root)}:{number}: {target}"
        if not linked.exists():
            problems.append(f"{where}: no such file")
        elif not linked.is_relative_to(root.resolve()):
            problems.append(f"{where}: outside the repository")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"{where}: {linked.name} has no heading with that anchor")
    return problems


def test_the_readme_stays_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines < MAX_README_LINES, (
        f"README.md has {lines} lines; keep it under {MAX_README_LINES} and move the detail to docs/"
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_and_heading(page: Path) -> None:
    assert broken(page) == []


def test_the_readme_links_into_docs() -> None:
    targets = {target.partition("#")[0] for _, target in links(README)}
    assert {"docs/architecture.md", "docs/operations.md", "bench/README.md"} <= targets


def test_the_checker_finds_a_broken_anchor_and_file(tmp_path: Path) -> None:
    """The checker itself: a wrong anchor, a missing file and a link in code (not a link)."""
    (tmp_path / "README.md").write_text("# taskyard\n\n## The two commands\n")
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "check.md"
    page.write_text(
        "# A page: its `title`\n\n## Repeated\n\n## Repeated\n\n"
        "[ok](#a-page-its-title) [ok](#repeated-1) [ok](../README.md#the-two-commands)\n"
        "[bad](#repeated-2) [bad](nowhere.md) [bad](../README.md#no-such-heading)\n"
        "`[code](nowhere.md)`\n\n```\n[fenced](nowhere.md)\n# not a heading\n```\n"
    )
    assert [problem.split(": ")[1] for problem in broken(page, tmp_path)] == [
        "#repeated-2",
        "nowhere.md",
        "../README.md#no-such-heading",
    ]
