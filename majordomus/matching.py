"""What `grep` matches: a pattern compiled as `re` reads it (or as a fixed string), the
lines of a record's fields it matches, and which records may hold such a line, found
with one search over every record's lines joined. No git, no repository: text in, places
out."""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections.abc import Sequence

from majordomus.errors import RefusedError
from majordomus.searchcache import SEARCHED, Searched
from majordomus.tuples import NamedTuple
from majordomus.values import MatchedField, MatchedLine


def compile_pattern(pattern: str, ignore_case: bool, fixed: bool) -> re.Pattern[str]:
    """PATTERN as Python's `re` reads it (`-E` and the default alike), or as a fixed
    string (`-F`); `-i`: case folded as `re.IGNORECASE` folds it (Unicode)."""
    flags = re.IGNORECASE if ignore_case else 0
    try:
        return re.compile(re.escape(pattern) if fixed else pattern, flags)
    except (re.error, OverflowError, RecursionError) as error:
        at = error.pos if isinstance(error, re.error) else None
        where = f" at position {at}" if at is not None else ""
        reason = error.msg if isinstance(error, re.error) else "it is too large"
        raise RefusedError(
            f"the pattern is not a valid Python regular expression ({reason}{where}); "
            "give -F to search for it as a fixed string."
        ) from None


def matched_fields(
    pattern: re.Pattern[str], kind: str, value: Searched, marks: bool = False
) -> tuple[MatchedField, ...]:
    """The fields of a record (as `searched` keeps it) in which some line matches, with
    those lines (`marks`: and where in each line the pattern matched)."""
    needle = needle_of(pattern)
    text = value[2]
    hits: list[tuple[int, str, str]]  # each line that matched: its number, it, it as tried
    if needle is None:
        search = pattern.search
        hits = [(n, line, line) for n, line in enumerate(text.split("\n")) if search(line)]
    elif "\n" in needle.text:  # never within a line
        return ()
    else:
        hits = _lines_holding(text, folded(text) if needle.fold else text, needle.text)
    if not hits:
        return ()
    found = []
    at = 0
    pending = iter(hits)
    hit = next(pending, None)
    for key, count in zip(SEARCHED[kind], value[3:], strict=True):
        at += count
        matched = []
        while hit is not None and hit[0] < at:
            n, line, tried = hit
            spans = _spans(pattern, needle, line, tried) if marks else ()
            matched.append(MatchedLine(n - at + count + 1, line, spans))
            hit = next(pending, None)
        if matched:
            found.append(MatchedField(key, tuple(matched)))
    return tuple(found)


def _lines_holding(text: str, tried: str, sought: str) -> list[tuple[int, str, str]]:
    """Each line of `tried` (`text` or its fold: the same lines at the same places) that
    holds `sought` (no line feed in it): its number from 0, the line of `text`, that of
    `tried`. `str.find` skips the lines between, and `str.count` numbers them."""
    found = []
    number, start = 0, 0  # the line searched from, and where it starts
    while (at := tried.find(sought, start)) >= 0:
        begin = tried.rfind("\n", start, at) + 1 or start  # where the line holding it starts
        number += tried.count("\n", start, begin)
        end = tried.find("\n", at)
        if end < 0:
            end = len(tried)
        found.append((number, text[begin:end], tried[begin:end]))
        number, start = number + 1, end + 1
    return found


def _spans(
    pattern: re.Pattern[str], needle: Needle | None, line: str, tried: str
) -> tuple[tuple[int, int], ...]:
    if needle is None:
        return tuple(m.span() for m in pattern.finditer(line) if m.end() > m.start())
    size = len(needle.text)
    if not size:
        return ()
    spans = []
    at = tried.find(needle.text)
    while at >= 0:  # as `finditer` finds a fixed string: each match after the one before
        spans.append((at, at + size))
        at = tried.find(needle.text, at + size)
    return tuple(spans)


class Needle(NamedTuple):
    """A pattern that matches one fixed string: that string, and whether it is matched
    case folded (`-i`): then the string is lower case, and tried on text as `folded`
    makes it."""

    text: str
    fold: bool


_SPECIAL = frozenset(".^$*+?{}[]|()")  # outside these (and a backslash), a pattern's characters
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")  # escapes


@functools.lru_cache(maxsize=16)
def needle_of(pattern: re.Pattern[str]) -> Needle | None:
    """The fixed string a pattern matches (`-F`, or a pattern without a special character:
    `timeout`, `ack\\(\\)`), found with `str.find` rather than the regular expression, which is
    the same thing; None for any other pattern (and one with flags beside `re.IGNORECASE`).
    With `re.IGNORECASE`, only an ASCII string: `folded` is exact for those alone."""
    if pattern.flags & ~(re.UNICODE | re.IGNORECASE):
        return None
    chars = iter(pattern.pattern)
    out = []
    for char in chars:
        if char == "\\":
            escaped = next(chars, "a")  # a backslash at the end: no valid pattern has one
            if escaped in _LETTERS:
                return None
            out.append(escaped)
        elif char in _SPECIAL:
            return None
        else:
            out.append(char)
    text = "".join(out)
    if not pattern.flags & re.IGNORECASE:
        return Needle(text, False)
    if not text.isascii():
        return None
    return Needle(text.lower(), True)


# The characters past ASCII that `re.IGNORECASE` matches with an ASCII letter, as that
# letter: dotted and dotless i (U+0130, U+0131), the long s (U+017F), the Kelvin sign
# (U+212A).
_AS_ASCII = {"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"}


def folded(text: str) -> str:
    """Text as an ASCII string folded by `Needle` is tried on it: a character matches a
    character of that string under `re.IGNORECASE` exactly when it is that character
    here (tests/test_grep.py checks every code point), and each is one character still,
    so a match is at the same place in the text and in its fold."""
    if not text.isascii():
        for char, letter in _AS_ASCII.items():
            if char in text:
                text = text.replace(char, letter)
    return text.lower()


_CONTEXTUAL = re.compile(r"\\[AZ]|\(\?(?!:|P<|P=)|[*+?}]\+")


def candidates(pattern: re.Pattern[str], values: Sequence[Searched]) -> Sequence[int]:
    """The records (their indexes) that may hold a matching line: every one, or, for a
    pattern that sees nothing past its line, those where one search over every record's
    lines joined found a match (a line that matches alone matches there too, at the same
    place, so the search finds a match starting in its record or before it; a match that
    crosses a line names the record it starts in, tried for nothing at worst). For a
    fixed string, exactly the records that hold it in a line."""
    needle = needle_of(pattern)
    if needle is None and _CONTEXTUAL.search(pattern.pattern) is not None:
        return range(len(values))
    lines = [value[2] for value in values]
    joined = "\n".join(lines)
    ends = list(itertools.accumulate(len(line) + 1 for line in lines))  # past each "\n"
    if needle is None:
        search = re.compile(pattern.pattern, pattern.flags | re.MULTILINE).search

        def first(at: int) -> int:
            match = search(joined, at)
            return -1 if match is None else match.start()

    elif "\n" in needle.text:  # never within a line
        return []
    else:
        text, sought = (folded(joined) if needle.fold else joined), needle.text

        def first(at: int) -> int:
            return text.find(sought, at)

    found: list[int] = []
    at = 0
    while at <= len(joined):
        start = first(at)
        if start < 0:
            break
        n = bisect.bisect_right(ends, start)
        if n >= len(values):
            break
        found.append(n)
        at = ends[n]  # the next record's first line
    return found
