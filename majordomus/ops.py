"""One function per verb: open the repository, read or write records, return result values.

Nothing here prints; clock, environment and sleep come in through `Context`.
"""

from __future__ import annotations

import datetime
import heapq
import os
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import IO, Any, NamedTuple

from majordomus import profile as profiles
from majordomus import remote
from majordomus.errors import RefusedError, RepositoryError
from majordomus.index import Index, Views, newest_first
from majordomus.jobs import Jobs, open_jobs
from majordomus.records import (
    HANDOVER_FIELDS,
    age_s,
    clean_text,
    every_note,
    new_record,
    notes_of_tasks,
    skew_s,
)
from majordomus.repository import Repository
from majordomus.values import (
    DEFAULT_DAYS,
    AdoptResult,
    Change,
    CheckpointResult,
    CheckResult,
    FetchReport,
    Finding,
    HandoverResult,
    HistoryEntry,
    HistoryResult,
    InitReport,
    Listed,
    Located,
    Made,
    PushReport,
    RecordText,
    ResumeResult,
    ShowResult,
    StaleLock,
    SyncResult,
    TaskCreated,
    TaskSummary,
)

TITLE_MAX = 200
SESSION_MAX = 200
INPUT_MAX_BYTES = 64 * 1024  # no cap is near this: larger input is refused unread
_TASK_PREFIX = re.compile(r"(?:t-)?([0-9a-f]{4,12})")


class Context(NamedTuple):
    cwd: str
    environ: Mapping[str, str]
    profile_name: str | None = None
    now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)
    sleep: Callable[[float], None] = time.sleep
    warn: Callable[[str], None] | None = None  # a warning line on stderr; None: not said


# ---- shared steps ------------------------------------------------------------------


def open_here(ctx: Context) -> Jobs:
    """The repository a command works on, and its jobs: a note object a partial clone left
    out is fetched from its remote, a warning said through `ctx.warn`."""
    jobs = open_jobs(ctx.cwd, ctx.environ)
    jobs.reader.partial.fetch_missing = remote.missing_fetcher(jobs.repository)
    jobs.reader.refs.warn = ctx.warn
    return jobs


def load_profile(ctx: Context, jobs: Jobs) -> profiles.Profile:
    return profiles.load(jobs.repository.workdir, ctx.profile_name, ctx.environ)


def task_prefix(name: str) -> str | None:
    """The start of a task id a name gives (`t-` and 4 to 12 hex digits, the `t-` optional);
    None when it is no task id."""
    match = _TASK_PREFIX.fullmatch(name.strip().lower())
    return None if match is None else f"t-{match.group(1)}"


def resolve_task(task_ids: Collection[str], name: str) -> str:
    """A task id from a unique prefix of at least 4 hex digits, with or without `t-`."""
    prefix = task_prefix(name)
    if prefix is None:
        raise RefusedError(
            f"'{name}' is not a task id: give t- and at least 4 of its hex digits "
            "(see majordomus task list)."
        )
    candidates = sorted(task for task in task_ids if task.startswith(prefix))
    if not candidates:
        raise RefusedError(f"no task matches '{name}'; see majordomus task list.")
    if len(candidates) > 1:
        raise RefusedError(
            f"'{name}' is ambiguous: it matches {', '.join(candidates)}; give more digits."
        )
    return candidates[0]


def current_task(
    ctx: Context, jobs: Jobs, views: Views, explicit: str | None, *, imply: bool = False
) -> tuple[str, bool]:
    """The task a command works on, and whether it was implied rather than named.

    --task beats MAJORDOMUS_TASK beats the task set by `task new` / `task use`. With none
    of them and `imply`: the task of the open handover reachable from HEAD when exactly one
    task has one (what a new clone or a new agent session picks up).
    """
    for name in (
        explicit,
        ctx.environ.get("MAJORDOMUS_TASK") or None,
        jobs.repository.current_task(),
    ):
        if name:
            return resolve_task(views.task_ids, name), False
    candidates = tasks_with_open_handover(jobs, views) if imply else []
    if len(candidates) == 1:
        return candidates[0], True
    if candidates:
        raise AmbiguousTaskError(tuple(candidates))
    raise NoTaskError(
        "no current task: start one with majordomus task new TITLE, pick one with "
        "majordomus task use TASK, or pass --task TASK."
    )


def tasks_with_open_handover(jobs: Jobs, views: Views) -> list[str]:
    """The tasks that have an open handover on a commit reachable from HEAD."""
    pending: dict[str, set[str]] = {}
    for task in views.task_ids:
        index = views.index(task)
        commits = {item.commit for item in index.open_handovers(task)}
        if commits:
            pending[task] = commits
    if not pending:
        return []
    reach = jobs.history.graph().order(jobs.history.head(), set().union(*pending.values()))
    return sorted(task for task, commits in pending.items() if commits & reach.keys())


class NoTaskError(RefusedError):
    """No task named, none current, and no open handover reachable from HEAD to take."""


class AmbiguousTaskError(RefusedError):
    """No current task, and several tasks have an open handover reachable from HEAD."""

    SHOWN = 10  # candidates named; a teammate's hundred tasks must not flood an agent

    def __init__(self, candidates: tuple[str, ...]) -> None:
        super().__init__(self.sentence(candidates, "majordomus"))
        self.candidates = candidates

    @classmethod
    def sentence(cls, candidates: tuple[str, ...], program: str) -> str:
        """The refusal, its commands spelt with `program` (a hook's is the entry's path)."""
        named = ", ".join(candidates[: cls.SHOWN])
        if len(candidates) > cls.SHOWN:
            named += f" and {len(candidates) - cls.SHOWN} more ({program} task list)"
        return (
            f"no current task, and {len(candidates)} tasks have an open handover reachable "
            f"from HEAD: {named}; pick one with {program} task use TASK (or pass --task TASK)."
        )


def validated(field: str, raw: str, cap: int, allow_secret: bool, *, flag: bool = True) -> str:
    """Text that passed the length and character rules and, unless allowed, the secret scan
    (whose refusal offers --allow-secret where the command has it: `flag`)."""
    text = clean_text(field, raw, cap)
    from majordomus.secret import find_secret  # writes only: its patterns cost a start-up

    found = None if allow_secret else find_secret(text)
    if found is not None:
        what, position = found
        remedy = "remove it, or pass --allow-secret if it is not a secret" if flag else (
            "name the session otherwise"
        )  # fmt: skip
        raise RefusedError(
            f"{field} looks like it contains {what} (at character {position}); notes are "
            f"pushed and their history is permanent, so nothing was recorded: {remedy}."
        )
    return text


def session_of(
    ctx: Context, explicit: str | None, allow_secret: bool = False, *, flag: bool = True
) -> str | None:
    value = explicit if explicit is not None else ctx.environ.get("MAJORDOMUS_SESSION")
    return validated("session", value, SESSION_MAX, allow_secret, flag=flag) if value else None


def read_bounded(stream: IO[bytes], what: str, cap: int) -> str:
    """Read text input, refusing (unread) anything larger than INPUT_MAX_BYTES."""
    data = stream.read(INPUT_MAX_BYTES + 1)
    if len(data) > INPUT_MAX_BYTES:
        raise RefusedError(
            f"{what} is over {INPUT_MAX_BYTES} bytes, far over the cap of {cap} characters; "
            "nothing was recorded."
        )
    try:
        # A byte-order mark some editors put first is no part of the text.
        return bytes(data).decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise RefusedError(f"{what} is not UTF-8 text; nothing was recorded.") from None


def read_input_file(ctx: Context, source: str, stdin: IO[bytes], what: str, cap: int) -> str:
    """Text from `-F FILE` (relative to where `-C` went, as `git -C` reads `commit -F`) or
    `-F -` (standard input)."""
    if source == "-":
        return read_bounded(stdin, what, cap)
    try:
        with open(os.path.join(ctx.cwd, source), "rb") as handle:
            return read_bounded(handle, what, cap)
    except OSError as error:
        raise RefusedError(
            f"cannot read {source} ({error.strerror}); nothing was recorded."
        ) from None


def _new_id(prefix: str, digits: int) -> str:
    return f"{prefix}-{os.urandom(digits // 2).hex()}"


def _write(
    ctx: Context,
    jobs: Jobs,
    kind: str,
    task: str,
    fields: Mapping[str, Any],
    session: str | None,
    views: Views | None = None,
    record_id: str | None = None,
) -> tuple[Located, tuple[StaleLock, ...]]:
    """Write one record on HEAD; carry the cached views over to the new state."""
    head = jobs.history.head()
    author = jobs.repository.identity()
    record = new_record(
        kind,
        record_id=record_id or _new_id(kind[0], 16),
        task=task,
        head=head,
        at=ctx.now(),
        author=author,
        session=session,
        fields={**fields, **_landing_facts(jobs, kind, head)},
    )
    report = jobs.writer.append(
        head, [record], f"majordomus: {kind} {task} on {head[:7]}", sleep=ctx.sleep, author=author
    )
    if views is not None:
        views.recorded(report, record, report.blob, report.position)
    return Located(record, head, report.position), report.stale_locks


def _landing_facts(jobs: Jobs, kind: str, head: str) -> dict[str, Any]:
    """What `adopt` will need once the commit is gone: its patch id, and for a handover
    the branch it closes. Optional facts: when git cannot tell, the record goes without."""
    from majordomus import patches  # git patch ids: only a write needs them

    try:
        if kind == "handover":
            return patches.handover_facts(jobs.history, head)
        return patches.commit_fact(jobs.history, head)
    except RepositoryError:
        return {}


def _prepare_write(ctx: Context, jobs: Jobs, task: str | None) -> tuple[Views, str]:
    """Before a record is built: a commit to attach it to, a notes ref a write will not
    destroy, the views of the current state, and the task it belongs to."""
    jobs.history.head()
    jobs.repository.ask_identity()  # git answers while libgit2 loads
    try:
        jobs.writer.check_writable()
        views = Views(jobs.reader, jobs.history, writing=True)
        return views, current_task(ctx, jobs, views, task)[0]
    except BaseException:
        jobs.repository.settle()  # refused before the record was built: no git left unwaited
        raise


def _counted_checkpoint(
    index: Index, task: str, now: datetime.datetime
) -> tuple[Listed | None, Listed | None]:
    """The newest checkpoint that can say how fresh the task is (not dated in the future),
    and the newest one dated in the future after it, if any."""
    skewed = None
    for item in index.newest_first(index.of_kind("checkpoint", task)):
        if skew_s(now, item.at) is None:
            return item, skewed
        skewed = skewed or item
    return None, skewed


# ---- task ----------------------------------------------------------------------------


def task_new(
    ctx: Context, title: str, session: str | None = None, allow_secret: bool = False
) -> TaskCreated:
    jobs = open_here(ctx)
    text = validated("title", title, TITLE_MAX, allow_secret)
    jobs.history.head()
    jobs.writer.check_writable()
    task = _new_id("t", 12)
    sess = session_of(ctx, session, allow_secret)
    views = Views(jobs.reader, jobs.history, writing=True)
    located, locks = _write(ctx, jobs, "task", task, {"title": text}, sess, views, task)
    jobs.repository.set_current_task(task)
    return TaskCreated(located, locks)


def task_list(ctx: Context) -> list[TaskSummary]:
    jobs = open_here(ctx)
    index = Index(jobs.reader.read_notes(), jobs.reader, jobs.history)
    now = ctx.now()
    current = jobs.repository.current_task()
    tasks = index.tasks()
    open_handovers = {task: index.open_handovers(task) for task in tasks}
    # The records shown whole (each title, each open handover) read in one go, not one
    # process (or libgit2 loaded) for the first of them.
    shown = [*filter(None, tasks.values()), *(p[0] for p in open_handovers.values() if p)]
    index.preload(shown)
    summaries = []
    for task, task_record in tasks.items():
        last_at = max(item.summary.at for item in index.of_task(task))
        last_checkpoint, skewed = _counted_checkpoint(index, task, now)
        pending = open_handovers[task]
        summaries.append(
            TaskSummary(
                task=task,
                title=index.locate(task_record).record.text("title") if task_record else None,
                last_at=datetime.datetime.fromtimestamp(last_at, datetime.UTC),
                checkpoint_age_s=age_s(now, last_checkpoint.at) if last_checkpoint else None,
                open_handover=index.locate(pending[0]) if pending else None,
                current=task == current,
                skew_s=skew_s(now, skewed.at) if skewed else None,
            )
        )
    return sorted(summaries, key=lambda s: s.last_at, reverse=True)


def task_use(ctx: Context, name: str) -> str:
    jobs = open_here(ctx)
    task = resolve_task(Views(jobs.reader, jobs.history).task_ids, name)
    jobs.repository.set_current_task(task)
    return task


# ---- checkpoint and handover ----------------------------------------------------------


def checkpoint(
    ctx: Context,
    text: str,
    task: str | None = None,
    session: str | None = None,
    allow_secret: bool = False,
) -> CheckpointResult:
    jobs = open_here(ctx)
    cap = load_profile(ctx, jobs).checkpoint_max
    body = validated("checkpoint body", text, cap, allow_secret)
    sess = session_of(ctx, session, allow_secret)
    views, task_id = _prepare_write(ctx, jobs, task)
    previous = views.index(task_id).last("checkpoint", task_id)
    located, locks = _write(ctx, jobs, "checkpoint", task_id, {"body": body}, sess, views)
    previous_age = age_s(located.record.at, previous.at) if previous else None
    skew = skew_s(located.record.at, previous.at) if previous else None
    return CheckpointResult(located, previous_age, locks, skew)


def parse_handover_file(text: str, source: str) -> dict[str, str]:
    """A TOML table with exactly `objective`, `state` and `next`, each a string."""
    import tomllib  # here: only handover -F pays for it

    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise RefusedError(f"{source} is not valid TOML ({error}); nothing was recorded.") from None
    except (ValueError, RecursionError) as error:  # a huge integer, nesting past the stack
        raise RefusedError(
            f"{source} cannot be read as TOML ({error}); nothing was recorded."
        ) from None
    unknown = sorted(set(document) - set(HANDOVER_FIELDS))
    if unknown:
        raise RefusedError(
            f"{source} has unknown key '{unknown[0]}' (expected objective, state, next); "
            "nothing was recorded."
        )
    fields: dict[str, str] = {}
    for key in HANDOVER_FIELDS:
        value = document.get(key)
        if value is None:
            raise RefusedError(
                f"{source} has no '{key}'; all three of objective, state, next are "
                "required; nothing was recorded."
            )
        if not isinstance(value, str):
            raise RefusedError(f"{source}: '{key}' must be a string; nothing was recorded.")
        fields[key] = value
    return fields


def handover(
    ctx: Context,
    fields: Mapping[str, str | None],
    task: str | None = None,
    session: str | None = None,
    allow_secret: bool = False,
) -> HandoverResult:
    jobs = open_here(ctx)
    cap = load_profile(ctx, jobs).handover_max
    missing = [key for key in HANDOVER_FIELDS if fields.get(key) is None]
    if missing:
        flags = ", ".join(f"--{key}" for key in missing)
        raise RefusedError(
            f"a handover needs --objective, --state and --next; missing {flags}; "
            "nothing was recorded."
        )
    clean = {key: validated(key, fields[key] or "", cap, allow_secret) for key in HANDOVER_FIELDS}
    sess = session_of(ctx, session, allow_secret)
    views, task_id = _prepare_write(ctx, jobs, task)
    dirty = jobs.repository.is_dirty()
    located, locks = _write(ctx, jobs, "handover", task_id, clean, sess, views)
    return HandoverResult(located, dirty, locks)


# ---- resume ------------------------------------------------------------------------------


def checkpoints_since(index: Index, task: str) -> list[Located]:
    """The task's checkpoints newer than its last handover or resume, newest first."""
    relevant = [
        item
        for item in index.of_task(task)
        if item.summary.kind in ("checkpoint", "handover", "resume")
    ]
    found = []
    for item in index.newest_first(relevant):
        if item.summary.kind != "checkpoint":
            break
        found.append(item)
    index.preload(found)
    return [index.locate(item) for item in found]


def resume(
    ctx: Context, task: str | None = None, peek: bool = False, session: str | None = None
) -> ResumeResult:
    jobs = open_here(ctx)
    sess = session_of(ctx, session, allow_secret=peek, flag=False)  # a peek writes nothing
    head = jobs.history.head()
    if not peek:
        jobs.writer.check_writable()
    views = Views(jobs.reader, jobs.history)
    task_id, implied = current_task(ctx, jobs, views, task, imply=True)
    index = views.index(task_id)
    pending = index.open_handovers(task_id)
    if not pending:
        since = tuple(checkpoints_since(index, task_id))
        return ResumeResult(task_id, None, None, None, 0, (), (), since, implied)
    # Every older open handover is named (id, author, age) and superseded: only those named.
    newest, older = index.locate(pending[0]), tuple(index.locate(h) for h in pending[1:])
    div = jobs.history.graph().labels(head, [newest.commit])[newest.commit]
    if peek:
        return ResumeResult(task_id, newest, div, None, len(pending), older, (), (), implied)
    fields: dict[str, Any] = {"handover": newest.record.id, "label": div.label}
    if div.ahead is not None:
        fields["ahead"] = div.ahead
    if div.behind is not None:
        fields["behind"] = div.behind
    fields["supersedes"] = [loc.record.id for loc in older]
    recorded, locks = _write(ctx, jobs, "resume", task_id, fields, sess, views)
    if implied:
        jobs.repository.set_current_task(
            task_id
        )  # the session now works on it: checkpoints go there
    return ResumeResult(task_id, newest, div, recorded, len(pending), older, locks, (), implied)


# ---- history and show -----------------------------------------------------------------------


def history(
    ctx: Context,
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
    jobs = open_here(ctx)
    commit = jobs.history.resolve(rev)
    # A first read: git walks for the order while the notes are read (if there are any).
    jobs.history.graph().start_order(commit, worth=lambda: bool(jobs.reader.refs.ref_targets()))
    if task is not None:
        # A first read keeps the notes of the task (of each the name could be) it parses.
        prefix = task_prefix(task)
        views = Views(jobs.reader, jobs.history, shown=notes_of_tasks(prefix) if prefix else None)
        task_id: str | None = resolve_task(views.task_ids, task)
        index = views.index(task_id or "", rev=commit)
    else:
        # Every record shown whole (no --limit): a first read keeps each note it parses.
        # (The note set is the index's alone: it lets go of what it has made its own.)
        every = every_note if limit is None else None
        task_id, index = (
            None,
            Views(jobs.reader, jobs.history, shown=every, every=True).whole(commit),
        )
    chosen = index.records if task_id is None else index.of_task(task_id)
    if limit is None:
        # Every record is shown whole: the notes the document cache lacks are parsed now,
        # by helpers forked before the walk for the order grows this process.
        index.preload(chosen)
    # A walk made for the order reads the handovers' labels in the same pass: those of
    # every record shown, or, with --limit, of the newest records (those it shows are
    # most likely among them; a label not read there is counted when it is asked for).
    likely = chosen if limit is None else heapq.nlargest(2 * limit + 64, chosen, key=_at)
    jobs.history.graph().expect_labels(
        commit, [item.commit for item in likely if item.summary.kind == "handover"]
    )
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

    def made(items: Sequence[Listed]) -> list[HistoryEntry]:
        """The entries of a part of the records shown; their notes let go once made."""
        texts = index.texts(items) if as_json else [None] * len(items)
        located = [item for item, text in zip(items, texts, strict=True) if text is None]
        index.load(located)
        entries = []
        for item, text in zip(items, texts, strict=True):
            on = item.commit
            shown = index.locate(item) if text is None else RecordText(text, on)
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


def _at(item: Listed) -> float:
    return item.summary.at


_OBJECT_ID = re.compile(r"[0-9a-f]{4,40}")


def show(ctx: Context, rev: str | None = None) -> ShowResult:
    jobs = open_here(ctx)
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
            return _shown(jobs, commit, blobs, unread, missing=False)
        noteset = jobs.reader.read_notes()
    annotated = noteset.commits.get(commit)
    unreadable = sum(1 for u in noteset.unreadable if u.commit == commit)
    return _shown(jobs, commit, annotated.blobs if annotated else (), unreadable, missing)


def _shown(
    jobs: Jobs, commit: str, blobs: Sequence[str], unreadable: int, missing: bool
) -> ShowResult:
    note = jobs.reader.note(blobs) if blobs else None
    records = tuple(Located(r, commit, i) for i, r in enumerate(note.records)) if note else ()
    return ShowResult(commit, records, (note.invalid if note else 0) + unreadable, missing)


# ---- check and watch ------------------------------------------------------------------------


def check_task(
    index: Index,
    task: str,
    prof: profiles.Profile,
    now: datetime.datetime,
    also: Sequence[Listed] = (),
) -> CheckResult:
    """What `check` says of one task: the age of its last checkpoint against the interval.
    `also`: records the caller shows next, read in one go with those the check shows."""
    return check_tasks(index, [task], prof, now, also)[0]


def check_tasks(
    index: Index,
    tasks: Sequence[str],
    prof: profiles.Profile,
    now: datetime.datetime,
    also: Sequence[Listed] = (),
) -> list[CheckResult]:
    """`check_task` of each task, the notes all of them show (and `also`) read in one go:
    one git process, not one a task."""
    picked = [_picked(index, task, now) for task in tasks]
    shown = [i for p in picked for i in (p.record, p.last, p.handover, p.skewed) if i]
    index.preload([*shown, *also])
    return [
        CheckResult(
            task=p.task,
            title=index.locate(p.record).record.text("title") if p.record else None,
            profile=prof.name,
            interval_s=prof.interval_s,
            last_checkpoint=index.locate(p.last) if p.last else None,
            age_s=p.age,
            stale=p.since is None or p.age > prof.interval_s,
            open_handover=index.locate(p.handover) if p.handover else None,
            skewed=index.locate(p.skewed) if p.skewed else None,
            skew_s=skew_s(now, p.skewed.at) if p.skewed else _least_skew(index, p.task, now),
            undated=p.since is None,
        )
        for p in picked
    ]


class _Picked(NamedTuple):
    """What `check` of a task looks at: its task record, its last checkpoint (and one dated
    in the future), its open handover, and the time its age counts from."""

    task: str
    record: Listed | None
    last: Listed | None
    skewed: Listed | None
    handover: Listed | None
    since: datetime.datetime | None
    age: int  # seconds since `since` (0 when there is none)


def _picked(index: Index, task: str, now: datetime.datetime) -> _Picked:
    # A record dated in the future says nothing about when it was written: freshness
    # is judged on what is dated up to now, so a fast clock can make a task look
    # stale, never fresh.
    last, skewed = _counted_checkpoint(index, task, now)
    record = index.tasks().get(task)
    since: datetime.datetime | None
    if last is not None:
        since = last.at
    elif record is not None and skew_s(now, record.at) is None:
        since = record.at
    else:
        since = min((i.at for i in index.of_task(task) if skew_s(now, i.at) is None), default=None)
    pending = index.open_handovers(task)
    age = age_s(now, since) if since is not None else 0
    return _Picked(task, record, last, skewed, pending[0] if pending else None, since, age)


def _least_skew(index: Index, task: str, now: datetime.datetime) -> int | None:
    """How far in the future the nearest of a task's records is, when every one of them is
    dated in the future (its age unknowable); None when any is not."""
    skews = [skew_s(now, item.at) for item in index.of_task(task)]
    if not skews or None in skews:
        return None
    return min(s for s in skews if s is not None)


def check(ctx: Context, task: str | None = None, all_tasks: bool = False) -> list[CheckResult]:
    jobs = open_here(ctx)
    prof = load_profile(ctx, jobs)
    now = ctx.now()
    if all_tasks:
        index = Index(jobs.reader.read_notes(), jobs.reader, jobs.history)
        return check_tasks(index, sorted(index.tasks()), prof, now)
    return [_check_current(ctx, jobs, task, prof)]


def _check_current(
    ctx: Context, jobs: Jobs, task: str | None, prof: profiles.Profile
) -> CheckResult:
    views = Views(jobs.reader, jobs.history)
    task_id, _ = current_task(ctx, jobs, views, task)
    return check_task(views.index(task_id), task_id, prof, ctx.now())


def watch(
    ctx: Context,
    emit: Callable[[CheckResult, bool], None],
    task: str | None = None,
    every_s: float = 5.0,
    max_updates: int | None = None,
    timeout_s: float | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> int:
    """Call `emit(result, changed)` every `every_s` seconds until stopped.

    `changed` says the status, the last checkpoint or the open handover differs
    from the previous report. Re-reads the notes refs each time, so records
    written by other processes show. Returns the number of reports.
    """
    if every_s <= 0:
        raise RefusedError(f"--every must be more than 0 seconds, not {every_s:g}.")
    if not every_s <= 86400:  # NaN too: time.sleep refuses NaN and overflows on inf
        raise RefusedError(f"--every must be at most 86400 seconds (a day), not {every_s:g}.")
    jobs = open_here(ctx)
    prof = load_profile(ctx, jobs)
    start = monotonic()
    last_key: tuple[object, ...] | None = None
    reports = 0
    while True:
        # A fresh handle sees refs (and HEAD) other processes moved; the views cache
        # makes an unchanged state cheap to read again.
        result = _check_current(ctx, open_here(ctx), task, prof)
        key = (
            result.task,
            result.stale,
            result.last_checkpoint.record.id if result.last_checkpoint else None,
            result.open_handover.record.id if result.open_handover else None,
        )
        emit(result, key != last_key)
        last_key = key
        reports += 1
        if max_updates is not None and reports >= max_updates:
            return reports
        if timeout_s is not None and monotonic() - start + every_s > timeout_s:
            return reports
        ctx.sleep(every_s)


# ---- doctor and profile --------------------------------------------------------------------


def doctor(ctx: Context, drop_cache: bool = False) -> list[Finding]:
    from majordomus import agents  # two commands use it: not loaded by the others

    jobs = open_here(ctx)
    findings: list[Finding] = []
    if drop_cache:
        dropped = jobs.reader.drop_cache()
        findings.append(
            Finding("cache", True, "read caches dropped" if dropped else "no read caches to drop")
        )
    try:
        prof = load_profile(ctx, jobs)
        findings.append(Finding("profile", True, f"{prof.name} ({_profile_line(prof)})"))
    except RefusedError as error:
        findings.append(Finding("profile", False, error.message))
    try:
        findings.append(Finding("identity", True, jobs.repository.identity()))
    except RepositoryError as error:
        findings.append(Finding("identity", False, error.message))
    findings.extend(_config_findings(jobs))
    locks = [
        Finding(
            "lock",
            False,
            f"{lock.path} is {lock.age_s} s old; if no git or majordomus "
            f"process is running, remove it (rm '{lock.path}').",
        )
        for lock in jobs.writer.stale_locks(older_than_s=0)
    ]
    findings.extend(locks or [Finding("locks", True, "no lock files")])
    # Before the read, which fetches what a partial clone lacks: what is missing now.
    clone = _clone_findings(jobs)
    agent = [
        Finding("agent", found.healthy, found.detail)
        for found in agents.findings(jobs.repository.workdir, ctx.environ)
    ]
    try:
        noteset = jobs.reader.read_notes()
    except RepositoryError as error:  # e.g. note objects a partial clone cannot fetch now
        findings.append(Finding("notes", False, error.message.rstrip(".")))
        return [*findings, *agent, *clone]
    skipped = jobs.reader.refs.skipped_refs()
    findings += [Finding("notes", False, why.rstrip(".")) for why in skipped]
    for bad in noteset.unreadable:
        where = f"note on {bad.commit[:12]} in {bad.ref}" if bad.commit else bad.ref
        findings.append(Finding("invalid", False, f"{where}: {bad.reason}"))
    for commit, annotated in sorted(noteset.commits.items()):
        if annotated.invalid:
            try:
                parts = len(jobs.reader.note(annotated.blobs).unreadable)
            except RepositoryError as error:  # its object lost since it was summarised
                findings.append(Finding("invalid", False, error.message.rstrip(".")))
                continue
            what = (
                [f"{annotated.invalid - parts} invalid record(s)"]
                if annotated.invalid > parts
                else []
            )
            if parts:
                what.append(
                    f"{parts} part{'s' if parts > 1 else ''} that "
                    f"{'are' if parts > 1 else 'is'} not TOML (written by hand?)"
                )
            findings.append(
                Finding(
                    "invalid",
                    False,
                    f"note on {commit[:12]}: {' and '.join(what)} skipped "
                    f"(see git notes --ref=majordomus show {commit[:12]})",
                )
            )
    findings.extend(agent)
    records = sum(len(a.summaries) for a in noteset.commits.values())
    with_notes = set(noteset.commits) | {bad.commit for bad in noteset.unreadable if bad.commit}
    findings.append(
        Finding(
            "notes",
            noteset.invalid == 0,
            f"{len(with_notes)} notes, {records} records, {noteset.invalid} invalid",
        )
    )
    findings.extend(clone)
    return findings


def _clone_findings(jobs: Jobs) -> list[Finding]:
    """A shallow or partial clone, and what it limits. Informational: such a clone is
    what CI makes on purpose, and every answer it gives is exact or says it cannot be."""
    findings = []
    if jobs.history.is_shallow():
        cut = len(jobs.history.shallow_boundary())
        findings.append(
            Finding(
                "clone",
                True,
                f"shallow clone (history cut at {cut} commit{'s' if cut != 1 else ''} listed "
                "in .git/shallow): a label that depends on history past the cut is unknown, "
                "never guessed, and records on commits past it are not reachable from here; "
                "git fetch --unshallow gives exact answers",
            )
        )
    promisors: dict[str, str] = {}
    pattern = r"^remote\..*\.(promisor|partialclonefilter)$"
    listed = jobs.repository.git("config", "--get-regexp", pattern, check=False).stdout
    for line in listed.splitlines():
        key, _, value = line.partition(" ")
        name, _, setting = key.removeprefix("remote.").rpartition(".")
        if setting == "partialclonefilter":
            promisors[name] = value
        elif value.lower() in ("true", "yes", "on", "1"):
            promisors.setdefault(name, "")
    if not promisors:
        return findings
    missing = len(remote.missing_note_objects(jobs))
    for name, filter_spec in sorted(promisors.items()):
        counted = f"; {missing} note objects are not here yet" if missing else ""
        findings.append(
            Finding(
                "clone",
                True,
                f"partial clone of {name} (filter {filter_spec or 'unknown'}): objects the "
                f"filter left out, note objects included, are not here until fetched{counted}; "
                f"majordomus fetch {name} brings every note object in one batch",
            )
        )
    return findings


def _config_findings(jobs: Jobs) -> list[Finding]:
    """What `init` sets up: missing rewrite settings strand records on rebase (unhealthy);
    a remote that plain `git fetch` does not bring records from is worth knowing."""
    rewrite = jobs.repository.git(
        "config", "--get-all", "notes.rewriteRef", check=False
    ).stdout.split()
    findings = []
    if "refs/notes/majordomus" not in rewrite:
        findings.append(
            Finding(
                "config",
                False,
                "notes.rewriteRef does not include refs/notes/majordomus: records will not "
                "follow amended or rebased commits (run majordomus init)",
            )
        )
    for action in ("amend", "rebase"):
        value = jobs.repository.git("config", "--type=bool", f"notes.rewrite.{action}", check=False)
        if value.stdout.strip() == "false":
            findings.append(
                Finding(
                    "config",
                    False,
                    f"notes.rewrite.{action} is false: records will not follow git "
                    f"{'commit --amend' if action == 'amend' else 'rebase'} (git config "
                    f"--unset notes.rewrite.{action})",
                )
            )
    if not findings:
        findings.append(Finding("config", True, "records follow amended and rebased commits"))
    for name in jobs.repository.remote_names():
        specs = jobs.repository.git(
            "config", "--get-all", f"remote.{name}.fetch", check=False
        ).stdout
        if remote.fetch_refspec(name) not in specs.split():
            findings.append(
                Finding(
                    "config",
                    True,
                    f"plain git fetch does not bring {name}'s records (majordomus fetch {name} "
                    f"does; majordomus init --remote {name} makes git fetch do it too)",
                )
            )
    return findings


def _profile_line(prof: profiles.Profile) -> str:
    return (
        f"interval {prof.interval_s}s, checkpoint_max {prof.checkpoint_max}, "
        f"handover_max {prof.handover_max}"
    )


def profile_info(ctx: Context) -> profiles.Profile:
    jobs = open_here(ctx)
    return load_profile(ctx, jobs)


# ---- remote verbs ----------------------------------------------------------------------------


def init(ctx: Context, remote_name: str | None = None) -> InitReport:
    """Configure this clone so records travel with the code (see remote.configure)."""
    return remote.configure(open_here(ctx).repository, remote_name)


def fetch(ctx: Context, remote_name: str | None = None) -> FetchReport:
    jobs = open_here(ctx)
    name = remote.locate(jobs.repository, remote_name, ctx.cwd)
    return remote.fetch(jobs, remote.Git(jobs.repository), name, sleep=ctx.sleep)


def push(ctx: Context, remote_name: str | None = None, hook: bool = False) -> PushReport:
    """Publish the records; as the pre-push hook (`hook`), within a time budget and unprompted."""
    jobs = open_here(ctx)
    name = remote.locate(jobs.repository, remote_name, ctx.cwd)
    if hook and ctx.environ.get(remote.HOOK_GUARD):
        return PushReport(remote.shown(name), "skipped", None, 0, ())
    git = (
        remote.Git(jobs.repository, budget_s=remote.hook_budget(ctx.environ), detached=True)
        if hook
        else remote.Git(jobs.repository)
    )
    return remote.push(jobs, git, name, sleep=ctx.sleep)


def sync(ctx: Context, remote_name: str | None = None) -> SyncResult:
    jobs = open_here(ctx)
    name = remote.locate(jobs.repository, remote_name, ctx.cwd)
    git = remote.Git(jobs.repository)
    fetched = remote.fetch(jobs, git, name, sleep=ctx.sleep)
    return SyncResult(fetched, remote.push(jobs, git, name, sleep=ctx.sleep, fetched=fetched))


# ---- coding agents -----------------------------------------------------------------------


def agent_install(
    ctx: Context,
    agent: str,
    scope: str = "local",
    enforce: bool = False,
    dry_run: bool = False,
    remove: bool = False,
) -> Change:
    """Write (or remove) majordomus' hook entries in a coding agent's settings file."""
    try:
        repository: Repository | None = open_here(ctx).repository
    except RepositoryError:
        if scope != "user":
            raise
        repository = None  # the user's own settings need no repository
    from majordomus import agents  # two commands use it: not loaded by the others

    return agents.install(repository, ctx.environ, agent, scope, enforce, dry_run, remove)


# ---- adopt -------------------------------------------------------------------------------------


def adopt(
    ctx: Context, rev: str | None = None, dry_run: bool = False, days: int = DEFAULT_DAYS
) -> AdoptResult:
    """Copy records a squash or rebase merge orphaned onto the commit where they landed."""
    from majordomus import adopt as adoption

    return adoption.adopt(open_here(ctx), rev, dry_run=dry_run, days=days, sleep=ctx.sleep)
