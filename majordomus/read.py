"""The verbs that read the records: `history` (every record reachable from a commit, newest
first) and `show` (the records of one commit); each a function that returns what it
read, and the command that prints it (`<verb>_command`)."""

from __future__ import annotations

import heapq
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from majordomus.errors import ExitCode, RefusedError, RepositoryError
from majordomus.index import Index, newest_first
from majordomus.invocation import Inputs, Invocation, OnFirstUse
from majordomus.notes import every_note, notes_of_tasks
from majordomus.tasks import Jobs, marks_unsigned, open_here, resolve_task, task_prefix
from majordomus.values import (
    AttachedRecord,
    GraphRecord,
    GraphResult,
    HistoryEntry,
    HistoryResult,
    Listed,
    Made,
    RecordText,
    ShowResult,
)
from majordomus.views import Views

if TYPE_CHECKING:
    from majordomus import graphtext, markdowntext, render
else:
    graphtext = OnFirstUse("majordomus.graphtext")
    markdowntext = OnFirstUse("majordomus.markdowntext")
    render = OnFirstUse("majordomus.render")


def history(
    inputs: Inputs,
    rev: str | None = None,
    task: str | None = None,
    include_all: bool = False,
    limit: int | None = None,
    as_json: bool = False,
) -> HistoryResult:
    """`as_json`: the entries are to be shown as JSON; a record whose JSON text the document
    cache keeps is given as that text (`RecordText`), its note never decoded."""
    if limit is not None and limit < 1:
        raise RefusedError(f"--limit must be 1 or more, not {limit}.")
    jobs = open_here(inputs)
    commit = jobs.history.resolve(rev)
    # A first read: git walks for the order while the notes are read (if there are any).
    jobs.history.graph().start_order(commit, worth=lambda: bool(jobs.reader.refs.ref_targets()))
    task_id, index = _index_shown(jobs, commit, task, limit)
    chosen = index.records if task_id is None else index.of_task(task_id)
    if limit is None:
        # Every record is shown whole: the notes the document cache lacks are parsed now,
        # by helpers forked before the walk for the order grows this process.
        index.preload(chosen)
    _expect_labels(jobs, commit, chosen, limit)
    order = index.graph_order
    visible = [item for item in chosen if item.commit in order]
    hidden = len(chosen) - len(visible)
    shown = chosen if include_all else visible
    resolved = index.resolved_handovers()
    selected = newest_first(shown, index.order_of)[:limit]
    if limit is not None:
        index.preload(selected)
    handovers = [item.commit for item in selected if item.summary.kind == "handover"]
    labels = jobs.history.graph().labels(commit, handovers)
    strict = not as_json and marks_unsigned(jobs)

    def made(items: Sequence[Listed]) -> list[HistoryEntry]:
        """The entries of a part of the records shown; their notes let go once made."""
        texts = index.texts(items) if as_json else [None] * len(items)
        located = [item for item, text in zip(items, texts, strict=True) if text is None]
        index.load(located)
        signed = iter(jobs.attach([index.locate(item) for item in located], strict))
        entries = []
        for item, text in zip(items, texts, strict=True):
            on = item.commit
            shown = next(signed) if text is None else RecordText(text, on)
            if item.summary.kind == "handover":
                is_resolved = item.summary.id in resolved
                entries.append(HistoryEntry(shown, on in order, labels[on], is_resolved))
            else:
                entries.append(HistoryEntry(shown, on in order, None, None))
        index.forget(located)
        return entries

    return HistoryResult(
        rev=commit,
        task=task_id,
        entries=Made(selected, made),
        invalid=index.invalid,
        hidden=0 if include_all else hidden,
    )


def history_graph(
    inputs: Inputs,
    rev: str | None = None,
    task: str | None = None,
    include_all: bool = False,
    limit: int | None = None,
    colour: bool = False,
) -> GraphResult:
    """`history --graph`: the records on the commit graph, as `git log --graph` draws the
    commits that carry them (at most LIMIT commits drawn); with INCLUDE_ALL, the commits
    here that REV does not reach drawn too, from their own tips."""
    if limit is not None and limit < 1:
        raise RefusedError(f"--limit must be 1 or more, not {limit}.")
    jobs = open_here(inputs)
    commit = jobs.history.resolve(rev)
    jobs.history.graph().start_order(commit, worth=lambda: bool(jobs.reader.refs.ref_targets()))
    task_id, index = _index_shown(jobs, commit, task, 1)
    chosen = index.records if task_id is None else index.of_task(task_id)
    _expect_labels(jobs, commit, chosen, None)
    order = index.graph_order
    off = {item.commit for item in chosen if item.commit not in order}
    here = jobs.history.commits_here(off) if include_all and off else set()
    shown = [item for item in chosen if item.commit in order or item.commit in here]
    selected = newest_first(shown, index.order_of)
    counts: dict[str, int] = {}
    for item in selected:
        counts[item.commit] = counts.get(item.commit, 0) + 1
    tips = [commit, *sorted(here)]
    from majordomus import drawing as drawings  # here: only history --graph draws

    # Nothing to draw: git is not asked (it would draw the root commit alone). Drawn through
    # the replacements git reads the history with.
    drawing = (
        drawings.draw(
            jobs.repository,
            tips,
            counts,
            replacements=jobs.history.history_replaced(),
            colour=colour,
            limit=limit,
        )
        if counts
        else drawings.Drawn((), frozenset())
    )
    unreached = sum(1 for item in chosen if item.commit in off)
    return GraphResult(
        rev=commit,
        task=task_id,
        lines=drawing.lines,
        records=_drawn_records(jobs, index, commit, selected, drawing.commits),
        left_out=sum(n for on, n in counts.items() if on not in drawing.commits),
        hidden=0 if include_all else unreached,
        missing=sum(1 for item in chosen if item.commit in off - here) if include_all else 0,
        invalid=index.invalid,
    )


def _drawn_records(
    jobs: Jobs, index: Index, rev: str, selected: Sequence[Listed], drawn: frozenset[str]
) -> dict[str, tuple[GraphRecord, ...]]:
    """The records of each commit drawn, in the order given, a handover with its label
    against REV (read for the handovers drawn only) and whether it is resolved."""
    selected = [item for item in selected if item.commit in drawn]
    handovers = [item.commit for item in selected if item.summary.kind == "handover"]
    labels = jobs.history.graph().labels(rev, handovers)
    resolved = index.resolved_handovers()
    records: dict[str, list[GraphRecord]] = {}
    for item in selected:
        summary = item.summary
        if summary.kind == "handover":
            record = GraphRecord(summary, labels[item.commit], summary.id in resolved)
        else:
            record = GraphRecord(summary, None, None)
        records.setdefault(item.commit, []).append(record)
    return {on: tuple(items) for on, items in records.items()}


def _index_shown(
    jobs: Jobs, commit: str, task: str | None, limit: int | None
) -> tuple[str | None, Index]:
    """The task `history` shows (None: every task), and the index it reads from `commit`."""
    if task is not None:
        # A first read keeps the notes of the task (of each the name could be) it parses.
        prefix = task_prefix(task)
        shown = notes_of_tasks(prefix) if prefix else None
        views = Views(jobs.reader, jobs.history, shown=shown, task=prefix)
        task_id = resolve_task(views.task_ids, task)
        return task_id, views.index(task_id, rev=commit)
    # Every record shown whole (no --limit): a first read keeps each note it parses.
    # (The note set is the index's alone: it lets go of what it has made its own.)
    every = every_note if limit is None else None
    return None, Views(jobs.reader, jobs.history, shown=every, every=True).whole(commit)


def _expect_labels(jobs: Jobs, commit: str, chosen: Sequence[Listed], limit: int | None) -> None:
    """A walk made for the order reads the handovers' labels in the same pass: those of
    every record shown, or, with --limit, of the newest records (those it shows are most
    likely among them; a label not read there is counted when it is asked for)."""
    likely = chosen if limit is None else heapq.nlargest(2 * limit + 64, chosen, key=_at)
    jobs.history.graph().expect_labels(
        commit, [item.commit for item in likely if item.summary.kind == "handover"]
    )


def _at(item: Listed) -> float:
    return item.summary.at


_OBJECT_ID = re.compile(r"[0-9a-f]{4,40}")


def show(inputs: Inputs, rev: str | None = None) -> ShowResult:
    jobs = open_here(inputs)
    try:
        commit, missing = jobs.history.resolve(rev), False
    except RepositoryError as error:
        # A commit this clone lacks (records fetched without it, or dropped) can still
        # carry notes: list what they hold for a full or abbreviated id.
        name = (rev or "").strip().lower()
        if rev is None or _OBJECT_ID.fullmatch(name) is None:
            raise
        noteset = jobs.reader.read_notes()
        found = sorted(
            c for c in noteset.commits.keys() | {u.commit for u in noteset.unreadable} if c
        )
        candidates = [c for c in found if c.startswith(name)]
        if not candidates:
            raise error from None
        if len(candidates) > 1:
            raise RepositoryError(
                f"'{rev}' is ambiguous: notes are attached to "
                f"{', '.join(c[:12] for c in candidates)}; give more digits."
            ) from None
        commit, missing = candidates[0], True
    else:
        from majordomus.commitnotes import CommitNotes  # here: only show reads one commit's

        # One note, not every note, when all of it is here.
        one = CommitNotes(jobs.repository, jobs.reader.refs, jobs.reader.blobs).notes_on(commit)
        if one is not None:
            blobs, unread = one
            return _shown(jobs, commit, blobs, unread, False, marks_unsigned(jobs))
        noteset = jobs.reader.read_notes()
    annotated = noteset.commits.get(commit)
    unreadable = sum(1 for u in noteset.unreadable if u.commit == commit)
    blobs = annotated.blobs if annotated else ()
    return _shown(jobs, commit, blobs, unreadable, missing, marks_unsigned(jobs))


def _shown(
    jobs: Jobs, commit: str, blobs: Sequence[str], unreadable: int, missing: bool, strict: bool
) -> ShowResult:
    note = jobs.reader.note(blobs) if blobs else None
    records = [AttachedRecord(r, commit, i) for i, r in enumerate(note.records)] if note else []
    attached = tuple(jobs.attach(records, strict))
    return ShowResult(commit, attached, (note.invalid if note else 0) + unreadable, missing)


def history_command(
    invocation: Invocation,
    rev: str | None = None,
    include_all: bool = False,
    limit: int | None = None,
    task: str | None = None,
    as_json: bool = False,
    graph: bool = False,
) -> int:
    if graph:
        if as_json:
            raise RefusedError("give --graph or --json, not both.")
        colour = invocation.terminal.colour
        drawn = history_graph(invocation.inputs(), rev, task, include_all, limit, colour)
        invocation.out(graphtext.history_graph(drawn, colour))
        return ExitCode.OK
    result = history(invocation.inputs(), rev, task, include_all, limit, as_json)
    invocation.out_parts(render.history_parts(result, as_json))
    return ExitCode.OK


def show_command(
    invocation: Invocation, rev: str | None = None, as_json: bool = False, markdown: bool = False
) -> int:
    if as_json and markdown:
        raise RefusedError("give --json or --markdown, not both.")
    result = show(invocation.inputs(), rev)
    if result.missing:
        invocation.warn(
            f"{result.commit[:12]} names no commit in this clone; listing what the notes hold "
            "for it (fetch the commit to see it in history)."
        )
    invocation.out(markdowntext.show(result) if markdown else render.show(result, as_json))
    return ExitCode.OK
