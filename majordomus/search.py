"""The verb that searches the records: `grep` (every record's text matched line by line
against a pattern, newest first), the function that returns what it found and the
command that prints it (`grep_command`)."""

from __future__ import annotations

import bisect
import datetime
import functools
import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from majordomus.cachefile import SEARCH_FILE_NAME
from majordomus.documentcache import DocumentCache
from majordomus.errors import ExitCode, RefusedError
from majordomus.index import Index
from majordomus.invocation import Inputs, Invocation, OnFirstUse
from majordomus.jsontext import record_text
from majordomus.notes import notes_of_tasks
from majordomus.records import unsigned
from majordomus.searchcache import (
    SEARCHED,
    JsonTexts,
    NoteSearched,
    SearchCache,
    Searched,
    searched,
    searched_text,
)
from majordomus.tasks import Jobs, marks_unsigned, open_here, resolve_task, task_prefix
from majordomus.values import (
    AttachedRecord,
    GrepHit,
    GrepResult,
    Listed,
    MatchedField,
    MatchedLine,
    RecordText,
)
from majordomus.views import Views

if TYPE_CHECKING:
    from majordomus import greptext
else:
    greptext = OnFirstUse("majordomus.greptext")

MATCHED_KEY = "matched"  # the member of a record in `grep --json` naming what matched
PART = 1000  # records parsed whole at a time


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


def grep(
    inputs: Inputs,
    pattern: str | None,
    task: str | None = None,
    include_all: bool = False,
    ignore_case: bool = False,
    fixed: bool = False,
    extended: bool = False,
    limit: int | None = None,
    trusted: bool = False,
    as_json: bool = False,
    marks: bool = False,
) -> GrepResult:
    """Every record of the task (None: of every task) whose text matches, newest first:
    those on commits reachable from HEAD, and with `include_all` the others too.
    `trusted`: only what an agent may be handed: under `trust = "signed"` (or a profile
    that cannot be read), records whose signature is not verified are neither searched
    nor shown, only counted. `as_json`: the records are to be shown as JSON; `marks`:
    where each match lies in its line is wanted (a terminal marks it)."""
    if pattern is None:
        raise RefusedError("give a PATTERN to search for, e.g. majordomus grep timeout.")
    if fixed and extended:
        raise RefusedError("give -F (a fixed string) or -E (a regular expression), not both.")
    if limit is not None and limit < 1:
        raise RefusedError(f"--limit must be 1 or more, not {limit}.")
    compiled = compile_pattern(pattern, ignore_case, fixed)
    jobs = open_here(inputs)
    head = jobs.history.resolve(None)
    # A first read: git walks for the order while the notes are read (if there are any).
    jobs.history.graph().start_order(head, worth=lambda: bool(jobs.reader.refs.ref_targets()))
    task_id, index = _index_searched(jobs, head, task, as_json)
    chosen = index.records if task_id is None else index.of_task(task_id)
    strict = marks_unsigned(inputs, jobs)
    verified_only = trusted and strict
    cache = SearchCache(jobs.repository.commondir / SEARCH_FILE_NAME)
    keys = [
        f"{blob} {item.summary.position}" if blob else None
        for item, blob in zip(chosen, index.note_blobs(chosen), strict=True)
    ]
    values = _values(index, chosen, keys, cache, jobs.reader.searched)
    jobs.reader.searched = {}
    encoder = DocumentCache.version()
    current = [key for key in keys if key is not None] if task_id is None else None
    cache.save(current, encoder)
    json_texts = cache.texts(encoder) if as_json else None
    cache.close()
    found, verified, untrusted = _matches(
        jobs, index, chosen, keys, values, compiled, verified_only, marks
    )
    order = index.graph_order
    shown = [item for item in found if include_all or item.commit in order]
    selected = index.newest_first(shown)[:limit]
    hits = tuple(_made(jobs, index, selected, found, verified, strict, json_texts, cache))
    if cache.added:  # the JSON texts `_made` found of records whose text it did not keep
        cache.save(current, encoder)
    return GrepResult(
        pattern=pattern,
        rev=head,
        task=task_id,
        hits=hits,
        invalid=index.invalid,
        hidden=len(found) - len(shown),
        untrusted=untrusted if verified_only else None,
    )


def _index_searched(
    jobs: Jobs, head: str, task: str | None, as_json: bool
) -> tuple[str | None, Index]:
    """The task searched (None: every task), and the index of the records read from HEAD
    (as `history` reads them: from the views when they describe the notes refs)."""
    if task is not None:
        prefix = task_prefix(task)
        views = Views(jobs.reader, jobs.history, shown=notes_of_tasks(prefix) if prefix else None)
        task_id = resolve_task(views.task_ids, task)
        return task_id, views.index(task_id, rev=head)
    # A first read has its helpers make what a search keeps of each record, not the notes'
    # forms: none is shown whole (`grep --json` shows the JSON texts the search cache
    # keeps, made by its first read, or by the first search that shows the record).
    views = Views(jobs.reader, jobs.history, every=True, search=as_json)
    return None, views.whole(head)


def _values(
    index: Index,
    chosen: Sequence[Listed],
    keys: Sequence[str | None],
    cache: SearchCache,
    read: Mapping[str, NoteSearched],
) -> list[Searched]:
    """What is searched of each record: from the search cache, else from what the read of
    every note this command made keeps of it (`read`: the helpers of a first read made
    it of their parse), else from the JSON text the document cache keeps (its searched
    strings decoded alone: `searched_text`), else from its note parsed whole (`preload`).
    The records new to the search cache are put in it, with their JSON text."""
    held = cache.records
    values: list[Searched | None] = [held.get(key) if key else None for key in keys]
    missing = [n for n, value in enumerate(values) if value is None]
    if missing and read:
        left = []
        for n in missing:
            key = keys[n]
            found = None if key is None else read.get(key[:40])
            position = chosen[n].summary.position
            if key is None or found is None or position >= len(found[0]):
                left.append(n)
                continue
            values[n] = found[0][position]
            if found[1] is None:  # its text is made when a `grep --json` shows it
                cache.put_searched(key, found[0][position])
            else:
                cache.put(key, found[0][position], found[1][position])
        missing = left
    if missing:
        items = [chosen[n] for n in missing]
        index.preload(items)
        texts = index.texts(items)
        parsed = []
        whole: list[tuple[int, str]] = []  # a member not a string: those decoded whole
        made: dict[int, str | None] = {}
        for n, item, text in zip(missing, items, texts, strict=True):
            if text is None:
                parsed.append(n)
                continue
            made[n] = text
            values[n] = searched_text(item.summary.kind, text)
            if values[n] is None:
                whole.append((n, text))
        if whole:
            import json  # here: only records new to the search cache are decoded

            decoded = json.loads("[" + ",".join(text + "}" for _, text in whole) + "]")
            for (n, _), table in zip(whole, decoded, strict=True):
                values[n] = searched(chosen[n].summary.kind, table)
        numbers = iter(parsed)
        for part, located in _located(index, [chosen[n] for n in parsed]):
            for item, loc in zip(part, located, strict=True):
                n = next(numbers)
                values[n] = searched(item.summary.kind, loc.record.table)
                made[n] = record_text(loc.record)
        for n in missing:
            key, value = keys[n], values[n]
            if key is not None and value is not None:
                cache.put(key, value, made[n])
    return [value for value in values if value is not None]


# What is kept of each record that matched, what matched, its key in the search cache.
Found = dict[Listed, tuple[Searched, tuple[MatchedField, ...], str | None]]


def _matches(
    jobs: Jobs,
    index: Index,
    chosen: Sequence[Listed],
    keys: Sequence[str | None],
    values: Sequence[Searched],
    pattern: re.Pattern[str],
    verified_only: bool,
    marks: bool,
) -> tuple[Found, dict[Listed, AttachedRecord], int]:
    """The records that match, with what matched; with `verified_only`, only verified
    records are searched: those, checked, and how many others were not searched."""
    found: Found = {}
    signed: list[Listed] = []
    untrusted = 0
    if verified_only:
        for item, value in zip(chosen, values, strict=True):
            if value[0]:
                signed.append(item)
            else:
                untrusted += 1  # holds no signature: never verified
    else:
        for n in candidates(pattern, values):
            item, value = chosen[n], values[n]
            matched = matched_fields(pattern, item.summary.kind, value, marks)
            if matched:
                found[item] = (value, matched, keys[n])
    verified: dict[Listed, AttachedRecord] = {}
    for part, located in _located(index, signed):
        for item, loc in zip(part, jobs.attach(located, True), strict=True):
            if not loc.signed.verified:
                untrusted += 1
                continue
            value = searched(item.summary.kind, loc.record.table)
            matched = matched_fields(pattern, item.summary.kind, value, marks)
            if matched:
                found[item], verified[item] = (value, matched, None), loc
    return found, verified, untrusted


def _located(
    index: Index, items: Sequence[Listed]
) -> Iterator[tuple[Sequence[Listed], list[AttachedRecord]]]:
    """The records parsed whole, PART at a time: a part of `items` and those records
    located; each part's notes let go once the next part is asked for."""
    for start in range(0, len(items), PART):
        part = items[start : start + PART]
        index.load(part)
        yield part, [index.locate(item) for item in part]
        index.forget(part)


# What in a pattern can see past the line it matches in: \A and \Z, a group that is not a
# plain one (lookarounds, inline flags, conditionals, atomic groups), and a possessive
# quantifier (`a?+`, `\W*+`, `x{1,2}+`: like an atomic group, it may keep a line feed it
# took and fail where the line alone matches).
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


def _made(
    jobs: Jobs,
    index: Index,
    selected: Sequence[Listed],
    found: Found,
    verified: Mapping[Listed, AttachedRecord],
    strict: bool,
    json_texts: JsonTexts | None,
    cache: SearchCache,
) -> list[GrepHit]:
    """The records selected, as `grep` shows them: a signed one parsed whole and its
    signature checked; an unsigned one as what the search cache keeps (text), or as its
    JSON text (`json_texts`: those the search cache keeps, else those the document cache
    keeps, put in the search cache for the next search; else parsed whole)."""
    rows = [(item, found[item]) for item in selected]  # each record hashed once
    # Signed ones, parsed whole (their signatures checked), and the others.
    parsed = [n for n, (item, row) in enumerate(rows) if row[0][0] and item not in verified]
    texts: list[str | None] = [None] * len(rows)
    unknown: dict[int, str] = {}  # records whose JSON text the search cache does not know
    if json_texts is not None:
        absent = []
        for n, (_, (value, _, key)) in enumerate(rows):
            if value[0]:
                continue
            try:
                if key is None:  # a record not in the search cache
                    raise KeyError(key)
                texts[n] = json_texts[key]
            except KeyError:
                absent.append(n)
        if absent:
            items = [rows[n][0] for n in absent]
            index.preload(items)
            for n, text in zip(absent, index.texts(items), strict=True):
                texts[n] = text
                key = rows[n][1][2]
                if key is not None and text is not None:
                    cache.put_text(key, text)
                elif key is not None:
                    unknown[n] = key  # the text is made of the record parsed whole
        forged = f'"{MATCHED_KEY}"'  # a member of that name, forged: shown from the record
        parsed += [
            n
            for n, text in enumerate(texts)
            if not rows[n][1][0][0] and (text is None or forged in text)
        ]
    attached: dict[int, AttachedRecord] = {}
    if verified:
        attached = {n: verified[item] for n, (item, _) in enumerate(rows) if item in verified}
    numbers = iter(parsed)
    for _, records in _located(index, [rows[n][0] for n in parsed]):
        for whole in jobs.attach(records, strict):
            n = next(numbers)
            attached[n] = whole
            if n in unknown:  # kept for the next search: None for a record encoded whole
                cache.put_text(unknown[n], record_text(whole.record))
    none = unsigned(strict)
    utc = datetime.UTC
    fromtimestamp = datetime.datetime.fromtimestamp
    hits = []
    for n, (item, ((_, author, *_), matched, _)) in enumerate(rows):
        loc = attached.get(n)
        if loc is not None:
            record = loc.record
            hits.append(
                GrepHit(loc, loc.commit, record.kind, record.id, record.task, record.author,
                        record.at, loc.signature, matched)
            )  # fmt: skip
            continue
        text = texts[n]
        summary = item.summary
        located = RecordText(text, item.commit) if text is not None else None
        hits.append(
            GrepHit(located, item.commit, summary.kind, summary.id, summary.task, author,
                    fromtimestamp(summary.at, utc), none, matched)
        )  # fmt: skip
    return hits


def grep_command(
    invocation: Invocation,
    pattern: str | None = None,
    task: str | None = None,
    include_all: bool = False,
    ignore_case: bool = False,
    fixed: bool = False,
    extended: bool = False,
    limit: int | None = None,
    trusted: bool = False,
    as_json: bool = False,
) -> int:
    result = grep(
        invocation.inputs(),
        pattern,
        task,
        include_all,
        ignore_case,
        fixed,
        extended,
        limit,
        trusted,
        as_json,
        marks=invocation.terminal.colour and not as_json,
    )
    if as_json:
        invocation.out(greptext.grep_json(result))
    else:
        text = greptext.grep_text(result, invocation.now(), invocation.terminal.colour)
        if text:
            invocation.out(text)
    return ExitCode.OK if result.hits else ExitCode.NEGATIVE
