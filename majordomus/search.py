"""The verb that searches the records: `grep` (every record's text matched line by line
against a pattern, newest first), the function that returns what it found and the
command that prints it (`grep_command`)."""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from majordomus.cachefile import SEARCH_FILE_NAME
from majordomus.documentcache import DocumentCache
from majordomus.errors import ExitCode, RefusedError
from majordomus.index import Index
from majordomus.invocation import Inputs, Invocation, OnFirstUse
from majordomus.jsontext import record_text
from majordomus.matching import candidates, compile_pattern, matched_fields
from majordomus.notes import notes_of_tasks
from majordomus.records import unsigned
from majordomus.searchcache import (
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
    RecordText,
)
from majordomus.views import Views

if TYPE_CHECKING:
    from majordomus import greptext
else:
    greptext = OnFirstUse("majordomus.greptext")

MATCHED_KEY = "matched"  # the member of a record in `grep --json` naming what matched
PART = 1000  # records parsed whole at a time


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
    compiled = _pattern_given(pattern, ignore_case, fixed, extended, limit)
    assert pattern is not None  # refused above when it is
    jobs = open_here(inputs)
    head = jobs.history.resolve(None)
    # A first read: git walks for the order while the notes are read (if there are any).
    jobs.history.graph().start_order(head, worth=lambda: bool(jobs.reader.refs.ref_targets()))
    task_id, index = _index_searched(jobs, head, task, as_json)
    chosen = index.records if task_id is None else index.of_task(task_id)
    strict = marks_unsigned(jobs)
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


def _pattern_given(
    pattern: str | None, ignore_case: bool, fixed: bool, extended: bool, limit: int | None
) -> re.Pattern[str]:
    """The pattern compiled, or the refusal of what the command line gave."""
    if pattern is None:
        raise RefusedError("give a PATTERN to search for, e.g. majordomus grep timeout.")
    if fixed and extended:
        raise RefusedError("give -F (a fixed string) or -E (a regular expression), not both.")
    if limit is not None and limit < 1:
        raise RefusedError(f"--limit must be 1 or more, not {limit}.")
    return compile_pattern(pattern, ignore_case, fixed)


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
        missing = _from_read(chosen, keys, cache, read, values, missing)
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


def _from_read(
    chosen: Sequence[Listed],
    keys: Sequence[str | None],
    cache: SearchCache,
    read: Mapping[str, NoteSearched],
    values: list[Searched | None],
    missing: list[int],
) -> list[int]:
    """What is searched of the records missing, from what the read of every note keeps of
    them (put in the search cache too); the ones it does not keep."""
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
    return left


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
    rows: Rows = [(item, found[item]) for item in selected]  # each record hashed once
    # Signed ones, parsed whole (their signatures checked), and the others.
    parsed = [n for n, (item, row) in enumerate(rows) if row[0][0] and item not in verified]
    texts: list[str | None] = [None] * len(rows)
    unknown: dict[int, str] = {}  # records whose JSON text the search cache does not know
    if json_texts is not None:
        parsed += _json_texts(index, rows, json_texts, cache, texts, unknown)
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


Rows = list[tuple[Listed, tuple[Searched, tuple[MatchedField, ...], str | None]]]


def _json_texts(
    index: Index,
    rows: Rows,
    json_texts: JsonTexts,
    cache: SearchCache,
    texts: list[str | None],
    unknown: dict[int, str],
) -> list[int]:
    """The JSON text of each unsigned record shown, into `texts`: the search cache's, else
    the document cache's (put in the search cache); `unknown`: the records whose text
    neither keeps. The records to parse whole: no text, or one that forges `matched`."""
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
    return [
        n
        for n, text in enumerate(texts)
        if not rows[n][1][0][0] and (text is None or forged in text)
    ]


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
