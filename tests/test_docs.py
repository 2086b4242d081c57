"""The README reads in five minutes and the documentation holds together.

The README stays short (everything else lives in docs/), every relative link in it
and in docs/*.md resolves to a file that exists and, when it names an anchor, to a
heading of that file (GitHub's rules: lowercase, spaces to `-`, punctuation
dropped, a repeated heading numbered `-1`, `-2`, ...), and every page in docs/ is
linked from the README or from another page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = sorted((ROOT / "docs").glob("*.md"))
MAX_README_LINES = 250

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", flags=re.DOTALL | re.MULTILINE)
_CODE_SPAN = re.compile(r"(`+).+?\1", flags=re.DOTALL)
_LINK = re.compile(r"\[[^\]]*\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$", flags=re.MULTILINE)


def prose(text: str) -> str:
    """The text without fenced code blocks (a `#` line of a shell script is no heading)."""
    return _FENCE.sub("", text)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: markup dropped, lowercase, punctuation dropped
    (hyphens and underscores kept), each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its words
    text = text.replace("`", "").lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in _HEADING.findall(prose(path.read_text("utf-8"))):
        base = anchor(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    """The relative link targets of a markdown file (code spans and blocks left out)."""
    text = _CODE_SPAN.sub("", prose(path.read_text("utf-8")))
    return [
        target
        for target in _LINK.findall(text)
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # https:, mailto:
    ]


def broken(path: Path, target: str) -> str | None:
    """Why a link of `path` does not resolve, or None when it does."""
    file, _, fragment = target.partition("#")
    goal = (path.parent / file).resolve() if file else path
    if not goal.exists():
        return f"{goal.relative_to(ROOT) if goal.is_relative_to(ROOT) else goal} does not exist"
    if fragment and (goal.suffix != ".md" or fragment not in anchors(goal)):
        return f"{goal.name} has no heading whose anchor is #{fragment}"
    return None


def test_the_readme_is_at_most_250_lines() -> None:
    lines = len(README.read_text("utf-8").splitlines())
    assert lines <= MAX_README_LINES, f"README.md is {lines} lines; move detail to docs/"


@pytest.mark.parametrize("path", [README, *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    failures = [f"{target}: {why}" for target in links(path) if (why := broken(path, target))]
    assert not failures, f"{path.relative_to(ROOT)} has broken links:\n" + "\n".join(failures)


def linkers(page: Path) -> list[Path]:
    """The README and pages other than `page` that link to it."""
    return [
        path
        for path in [README, *PAGES]
        if path != page
        and any(
            target.partition("#")[0] and (path.parent / target.partition("#")[0]).resolve() == page
            for target in links(path)
        )
    ]


def test_every_page_in_docs_is_linked_from_the_readme_or_another_page() -> None:
    orphans = [page.name for page in PAGES if not linkers(page)]
    assert not orphans, f"pages nothing links to: {orphans}"


def test_the_readme_links_to_every_topic_page() -> None:
    readme_links = {target.partition("#")[0] for target in links(README)}
    for name in ("commands", "format", "signing", "sharing", "labels", "profiles",
                 "durability", "behaviour", "speed", "agents", "ci", "architecture"):  # fmt: skip
        assert f"docs/{name}.md" in readme_links, f"README does not link to docs/{name}.md"


# ---- the checker itself, on what it must catch -------------------------------------------


def test_anchors_follow_github_s_rules() -> None:
    assert anchor("After a host's squash or rebase merge: adopt") == (
        "after-a-hosts-squash-or-rebase-merge-adopt"
    )
    assert (
        anchor("Sharing records: init, fetch, push, sync") == "sharing-records-init-fetch-push-sync"
    )
    assert anchor('trust = "signed"') == "trust--signed"
    assert anchor("`majordomus init` and `--remote`") == "majordomus-init-and---remote"
    assert anchor("Where the spec is silent: what majordomus does") == (
        "where-the-spec-is-silent-what-majordomus-does"
    )


def test_the_checker_finds_a_missing_file_a_missing_anchor_and_skips_code(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## Two words\n\n## Two words\n")
    page.write_text(
        "# Page\n\n[a](other.md#two-words) [b](other.md#two-words-1) [c](#page)\n"
        "[d](missing.md) [e](other.md#nowhere) [f](https://example.com/x.md)\n"
        "`[g](in-a-code-span.md)`\n\n```sh\n[h](in-a-block.md)\n# not a heading\n```\n"
    )
    found = links(page)
    assert found == [
        "other.md#two-words",
        "other.md#two-words-1",
        "#page",
        "missing.md",
        "other.md#nowhere",
    ]
    assert [broken(page, target) is None for target in found] == [True, True, True, False, False]
    assert "not-a-heading" not in anchors(page)
