"""One function per verb: open the repository, read or write records, return result values.

Nothing here prints; clock, environment and sleep come in through `Context`.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import secrets
import time
import tomllib
from collections.abc import Callable, Iterable, Mapping
from typing import IO, Any

from majordomus import profile as profiles
from majordomus import remote
from majordomus.errors import RefusedError, RepositoryError
from majordomus.graph import Divergence, divergence
from majordomus.records import HANDOVER_FIELDS, Record, clean_text, new_record
from majordomus.secret import find_secret
from majordomus.store import NoteSet, StaleLock, Store

TITLE_MAX = 200
SESSION_MAX = 200
INPUT_MAX_BYTES = 64 * 1024  # no cap is near this: larger input is refused unread
_TASK_PREFIX = re.compile(r"(?:t-)?([0-9a-f]{4,12})")


@dataclasses.dataclass(frozen=True, slots=True)
class Context:
    cwd: str
    environ: Mapping[str, str]
    profile_name: str | None = None
    now: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC)
    sleep: Callable[[float], None] = time.sleep


@dataclasses.dataclass(frozen=True, slots=True)
class Located:
    """A record and the commit its note is attached to now."""

    record: Record
    commit: str
    position: int  # order of the record within that commit's note


# ---- the index of every record --------------------------------------------------


class Index:
    """Every record of a NoteSet, each id once, with the copy chosen as the spec says."""

    def __init__(self, noteset: NoteSet, store: Store, rev: str | None = None) -> None:
        self.noteset = noteset
        self._store = store
        self._rev = rev
        self._order: dict[str, int] | None = None
        copies: dict[str, list[Located]] = {}
        for commit, note in noteset.notes.items():
            for position, record in enumerate(note.records):
                copies.setdefault(record.id, []).append(Located(record, commit, position))
        self._copies = copies
        self.records: list[Located] = [self._choose(c) for c in copies.values()]

    @property
    def graph_order(self) -> dict[str, int]:
        """Commit -> position in `git rev-list REV` (children first); computed once, lazily."""
        if self._order is None:
            rev = self._rev or self._store.head()
            self._order = {commit: i for i, commit in enumerate(self._store.rev_list(rev))}
        return self._order

    def _choose(self, copies: list[Located]) -> Located:
        if len(copies) == 1:
            return copies[0]
        reachable = [c for c in copies if c.commit in self.graph_order]
        if reachable:
            return min(reachable, key=lambda c: self.graph_order[c.commit])
        return max(copies, key=lambda c: self._store.commit_time(c.commit) or 0)

    def of_kind(self, kind: str, task: str | None = None) -> list[Located]:
        return [
            loc
            for loc in self.records
            if loc.record.kind == kind and (task is None or loc.record.task == task)
        ]

    def tasks(self) -> dict[str, Located | None]:
        """Task id -> its task record (None when only other records name it)."""
        found: dict[str, Located | None] = {}
        for loc in self.records:
            if loc.record.kind == "task":
                found[loc.record.task] = loc
            else:
                found.setdefault(loc.record.task, None)
        return found

    def resolved_handovers(self) -> set[str]:
        resolved: set[str] = set()
        for loc in self.of_kind("resume"):
            resolved.add(loc.record.text("handover"))
            resolved.update(loc.record.supersedes)
        return resolved

    def open_handovers(self, task: str) -> list[Located]:
        resolved = self.resolved_handovers()
        pending = [h for h in self.of_kind("handover", task) if h.record.id not in resolved]
        return newest_first(pending, self.order_of)

    def last(self, kind: str, task: str) -> Located | None:
        found = newest_first(self.of_kind(kind, task), self.order_of)
        return found[0] if found else None

    def order_of(self, commit: str) -> int:
        """Graph order when it is already known, else a neutral rank (ties stay in note order)."""
        if self._order is None:
            return 0
        return self._order.get(commit, len(self._order))


def newest_first(items: Iterable[Located], order_of: Callable[[str], int]) -> list[Located]:
    """By `at`, then graph order (children first), then position in the note, newest first."""
    return sorted(
        items,
        key=lambda loc: (-loc.record.at.timestamp(), order_of(loc.commit), -loc.position),
    )


# ---- shared steps ------------------------------------------------------------------


def open_store(ctx: Context) -> Store:
    return Store(ctx.cwd, ctx.environ)


def load_profile(ctx: Context, store: Store) -> profiles.Profile:
    return profiles.load(store.workdir, ctx.profile_name, ctx.environ)


def resolve_task(index: Index, name: str) -> str:
    """A task id from a unique prefix of at least 4 hex digits, with or without `t-`."""
    match = _TASK_PREFIX.fullmatch(name.strip().lower())
    if match is None:
        raise RefusedError(
            f"'{name}' is not a task id: give t- and at least 4 of its hex digits "
            "(see majordomus task list)."
        )
    digits = match.group(1)
    candidates = sorted(task for task in index.tasks() if task[2:].startswith(digits))
    if not candidates:
        raise RefusedError(f"no task matches '{name}'; see majordomus task list.")
    if len(candidates) > 1:
        raise RefusedError(
            f"'{name}' is ambiguous: it matches {', '.join(candidates)}; give more digits."
        )
    return candidates[0]


def current_task(ctx: Context, store: Store, index: Index, explicit: str | None) -> str:
    """--task beats MAJORDOMUS_TASK beats the task set by `task new` / `task use`."""
    for name in (explicit, ctx.environ.get("MAJORDOMUS_TASK") or None, store.current_task()):
        if name:
            return resolve_task(index, name)
    raise RefusedError(
        "no current task: start one with majordomus task new TITLE, pick one with "
        "majordomus task use TASK, or pass --task TASK."
    )


def validated(field: str, raw: str, cap: int, allow_secret: bool) -> str:
    """Text that passed the length and character rules and, unless allowed, the secret scan."""
    text = clean_text(field, raw, cap)
    found = None if allow_secret else find_secret(text)
    if found is not None:
        what, position = found
        raise RefusedError(
            f"{field} looks like it contains {what} (at character {position}); notes are "
            "pushed and their history is permanent, so nothing was recorded: remove it, or "
            "pass --allow-secret if it is not a secret."
        )
    return text


def session_of(ctx: Context, explicit: str | None) -> str | None:
    value = explicit if explicit is not None else ctx.environ.get("MAJORDOMUS_SESSION")
    return clean_text("session", value, SESSION_MAX) if value else None


def read_bounded(stream: IO[bytes], what: str, cap: int) -> str:
    """Read text input, refusing (unread) anything larger than INPUT_MAX_BYTES."""
    data = stream.read(INPUT_MAX_BYTES + 1)
    if len(data) > INPUT_MAX_BYTES:
        raise RefusedError(
            f"{what} is over {INPUT_MAX_BYTES} bytes, far over the cap of {cap} characters; "
            "nothing was recorded."
        )
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise RefusedError(f"{what} is not UTF-8 text; nothing was recorded.") from None


def read_input_file(source: str, stdin: IO[bytes], what: str, cap: int) -> str:
    """Text from `-F FILE` or `-F -` (standard input)."""
    if source == "-":
        return read_bounded(stdin, what, cap)
    try:
        with open(source, "rb") as handle:
            return read_bounded(handle, what, cap)
    except OSError as error:
        raise RefusedError(
            f"cannot read {source} ({error.strerror}); nothing was recorded."
        ) from None


def _new_id(prefix: str, digits: int) -> str:
    return f"{prefix}-{secrets.token_hex(digits // 2)}"


def _write(
    ctx: Context,
    store: Store,
    kind: str,
    task: str,
    fields: Mapping[str, Any],
    session: str | None,
    index: Index | None = None,
    record_id: str | None = None,
) -> tuple[Located, tuple[StaleLock, ...]]:
    head = store.head()
    author = store.identity()
    record = new_record(
        kind,
        record_id=record_id or _new_id(kind[0], 16),
        task=task,
        head=head,
        at=ctx.now(),
        author=author,
        session=session,
        fields=fields,
    )
    note = index.noteset.notes.get(head) if index is not None else None
    position = len(note.records) if note else 0
    report = store.append(
        head, [record], f"majordomus: {kind} {task} on {head[:7]}", sleep=ctx.sleep
    )
    return Located(record, head, position), report.stale_locks


def age_s(now: datetime.datetime, then: datetime.datetime) -> int:
    return max(0, int((now - then).total_seconds()))


# ---- task ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class TaskCreated:
    record: Located
    stale_locks: tuple[StaleLock, ...]


def task_new(
    ctx: Context, title: str, session: str | None = None, allow_secret: bool = False
) -> TaskCreated:
    store = open_store(ctx)
    text = validated("title", title, TITLE_MAX, allow_secret)
    store.head()
    store.check_writable()
    task = _new_id("t", 12)
    located, locks = _write(
        ctx, store, "task", task, {"title": text}, session_of(ctx, session), record_id=task
    )
    store.set_current_task(task)
    return TaskCreated(located, locks)


@dataclasses.dataclass(frozen=True, slots=True)
class TaskSummary:
    task: str
    title: str | None
    last_at: datetime.datetime
    checkpoint_age_s: int | None
    open_handover: Located | None
    current: bool


def task_list(ctx: Context) -> list[TaskSummary]:
    store = open_store(ctx)
    index = Index(store.read_notes(), store)
    now = ctx.now()
    current = store.current_task()
    summaries = []
    for task, task_record in index.tasks().items():
        mine = [loc for loc in index.records if loc.record.task == task]
        last_checkpoint = index.last("checkpoint", task)
        pending = index.open_handovers(task)
        summaries.append(
            TaskSummary(
                task=task,
                title=task_record.record.text("title") if task_record else None,
                last_at=max(loc.record.at for loc in mine),
                checkpoint_age_s=age_s(now, last_checkpoint.record.at) if last_checkpoint else None,
                open_handover=pending[0] if pending else None,
                current=task == current,
            )
        )
    return sorted(summaries, key=lambda s: s.last_at, reverse=True)


def task_use(ctx: Context, name: str) -> str:
    store = open_store(ctx)
    task = resolve_task(Index(store.read_notes(), store), name)
    store.set_current_task(task)
    return task


# ---- checkpoint and handover ----------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class CheckpointResult:
    record: Located
    previous_age_s: int | None
    stale_locks: tuple[StaleLock, ...]


def checkpoint(
    ctx: Context,
    text: str,
    task: str | None = None,
    session: str | None = None,
    allow_secret: bool = False,
) -> CheckpointResult:
    store = open_store(ctx)
    cap = load_profile(ctx, store).checkpoint_max
    body = validated("checkpoint body", text, cap, allow_secret)
    sess = session_of(ctx, session)
    store.head()
    store.check_writable()
    index = Index(store.read_notes(), store)
    task_id = current_task(ctx, store, index, task)
    previous = index.last("checkpoint", task_id)
    located, locks = _write(ctx, store, "checkpoint", task_id, {"body": body}, sess, index)
    previous_age = age_s(located.record.at, previous.record.at) if previous else None
    return CheckpointResult(located, previous_age, locks)


@dataclasses.dataclass(frozen=True, slots=True)
class HandoverResult:
    record: Located
    dirty: bool
    stale_locks: tuple[StaleLock, ...]


def parse_handover_file(text: str, source: str) -> dict[str, str]:
    """A TOML table with exactly `objective`, `state` and `next`, each a string."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise RefusedError(f"{source} is not valid TOML ({error}); nothing was recorded.") from None
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
    store = open_store(ctx)
    cap = load_profile(ctx, store).handover_max
    missing = [key for key in HANDOVER_FIELDS if fields.get(key) is None]
    if missing:
        flags = ", ".join(f"--{key}" for key in missing)
        raise RefusedError(
            f"a handover needs --objective, --state and --next; missing {flags}; "
            "nothing was recorded."
        )
    clean = {key: validated(key, fields[key] or "", cap, allow_secret) for key in HANDOVER_FIELDS}
    sess = session_of(ctx, session)
    store.head()
    store.check_writable()
    index = Index(store.read_notes(), store)
    task_id = current_task(ctx, store, index, task)
    dirty = store.is_dirty()
    located, locks = _write(ctx, store, "handover", task_id, clean, sess, index)
    return HandoverResult(located, dirty, locks)


# ---- resume ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class ResumeResult:
    task: str
    handover: Located | None
    divergence: Divergence | None
    recorded: Located | None
    open_handovers: int
    superseded: tuple[str, ...]
    stale_locks: tuple[StaleLock, ...]


def resume(
    ctx: Context, task: str | None = None, peek: bool = False, session: str | None = None
) -> ResumeResult:
    store = open_store(ctx)
    sess = session_of(ctx, session)
    head = store.head()
    if not peek:
        store.check_writable()
    index = Index(store.read_notes(), store)
    task_id = current_task(ctx, store, index, task)
    pending = index.open_handovers(task_id)
    if not pending:
        return ResumeResult(task_id, None, None, None, 0, (), ())
    newest, older = pending[0], pending[1:]
    label = divergence(store, newest.commit, head)
    superseded = tuple(h.record.id for h in older)
    if peek:
        return ResumeResult(task_id, newest, label, None, len(pending), superseded, ())
    fields: dict[str, Any] = {"handover": newest.record.id, "label": label.label}
    if label.ahead is not None:
        fields["ahead"] = label.ahead
    if label.behind is not None:
        fields["behind"] = label.behind
    fields["supersedes"] = list(superseded)
    recorded, locks = _write(ctx, store, "resume", task_id, fields, sess, index)
    return ResumeResult(task_id, newest, label, recorded, len(pending), superseded, locks)


# ---- history and show -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class HistoryEntry:
    located: Located
    reachable: bool
    divergence: Divergence | None  # handovers only
    resolved: bool | None  # handovers only


@dataclasses.dataclass(frozen=True, slots=True)
class HistoryResult:
    rev: str
    task: str | None
    entries: tuple[HistoryEntry, ...]
    invalid: int
    hidden: int


def history(
    ctx: Context,
    rev: str | None = None,
    task: str | None = None,
    include_all: bool = False,
    limit: int | None = None,
) -> HistoryResult:
    if limit is not None and limit < 1:
        raise RefusedError(f"--limit must be 1 or more, not {limit}.")
    store = open_store(ctx)
    commit = store.resolve(rev)
    noteset = store.read_notes()
    index = Index(noteset, store, rev=commit)
    task_id = resolve_task(index, task) if task is not None else None
    order = index.graph_order
    chosen = [loc for loc in index.records if task_id is None or loc.record.task == task_id]
    visible = [loc for loc in chosen if loc.commit in order]
    hidden = len(chosen) - len(visible)
    shown = chosen if include_all else visible
    resolved = index.resolved_handovers()
    entries = []
    for loc in newest_first(shown, index.order_of)[:limit]:
        is_handover = loc.record.kind == "handover"
        entries.append(
            HistoryEntry(
                located=loc,
                reachable=loc.commit in order,
                divergence=divergence(store, loc.commit, commit) if is_handover else None,
                resolved=(loc.record.id in resolved) if is_handover else None,
            )
        )
    return HistoryResult(
        rev=commit,
        task=task_id,
        entries=tuple(entries),
        invalid=noteset.invalid,
        hidden=0 if include_all else hidden,
    )


@dataclasses.dataclass(frozen=True, slots=True)
class ShowResult:
    commit: str
    records: tuple[Located, ...]
    invalid: int


def show(ctx: Context, rev: str | None = None) -> ShowResult:
    store = open_store(ctx)
    commit = store.resolve(rev)
    noteset = store.read_notes()
    note = noteset.notes.get(commit)
    records = tuple(Located(r, commit, i) for i, r in enumerate(note.records)) if note else ()
    unreadable = sum(1 for u in noteset.unreadable if u.commit == commit)
    return ShowResult(commit, records, (note.invalid if note else 0) + unreadable)


# ---- check and watch ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class CheckResult:
    task: str
    title: str | None
    profile: str
    interval_s: int
    last_checkpoint: Located | None
    age_s: int
    stale: bool
    open_handover: Located | None


def _check_task(
    index: Index, task: str, prof: profiles.Profile, now: datetime.datetime
) -> CheckResult:
    last = index.last("checkpoint", task)
    task_record = index.tasks().get(task)
    if last is not None:
        since = last.record.at
    elif task_record is not None:
        since = task_record.record.at
    else:
        since = min(loc.record.at for loc in index.records if loc.record.task == task)
    age = age_s(now, since)
    pending = index.open_handovers(task)
    return CheckResult(
        task=task,
        title=task_record.record.text("title") if task_record else None,
        profile=prof.name,
        interval_s=prof.interval_s,
        last_checkpoint=last,
        age_s=age,
        stale=age > prof.interval_s,
        open_handover=pending[0] if pending else None,
    )


def check(ctx: Context, task: str | None = None, all_tasks: bool = False) -> list[CheckResult]:
    store = open_store(ctx)
    prof = load_profile(ctx, store)
    index = Index(store.read_notes(), store)
    now = ctx.now()
    if all_tasks:
        return [_check_task(index, t, prof, now) for t in sorted(index.tasks())]
    return [_check_task(index, current_task(ctx, store, index, task), prof, now)]


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
    store = open_store(ctx)
    prof = load_profile(ctx, store)
    start = monotonic()
    last_key: tuple[object, ...] | None = None
    cached: tuple[dict[str, str], Index] | None = None
    reports = 0
    while True:
        targets = store.ref_targets()
        if cached is None or cached[0] != targets:
            store = open_store(ctx)  # a fresh handle sees refs other processes moved
            cached = (targets, Index(store.read_notes(), store))
        index = cached[1]
        result = _check_task(index, current_task(ctx, store, index, task), prof, ctx.now())
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


@dataclasses.dataclass(frozen=True, slots=True)
class Finding:
    """One line of `doctor`: what was checked, whether it is healthy, and what to do."""

    topic: str
    healthy: bool
    detail: str


def doctor(ctx: Context) -> list[Finding]:
    store = open_store(ctx)
    findings: list[Finding] = []
    try:
        prof = load_profile(ctx, store)
        findings.append(Finding("profile", True, f"{prof.name} ({_profile_line(prof)})"))
    except RefusedError as error:
        findings.append(Finding("profile", False, error.message))
    try:
        findings.append(Finding("identity", True, store.identity()))
    except RepositoryError as error:
        findings.append(Finding("identity", False, error.message))
    findings.extend(_config_findings(store))
    locks = [
        Finding(
            "lock",
            False,
            f"{lock.path} is {lock.age_s} s old; if no git or majordomus "
            f"process is running, remove it (rm '{lock.path}').",
        )
        for lock in store.stale_locks(older_than_s=0)
    ]
    findings.extend(locks or [Finding("locks", True, "no lock files")])
    noteset = store.read_notes()
    for bad in noteset.unreadable:
        where = f"note on {bad.commit[:12]} in {bad.ref}" if bad.commit else bad.ref
        findings.append(Finding("invalid", False, f"{where}: {bad.reason}"))
    for commit, note in sorted(noteset.notes.items()):
        if note.invalid:
            findings.append(
                Finding(
                    "invalid",
                    False,
                    f"note on {commit[:12]}: {note.invalid} invalid record(s) skipped "
                    f"(see git notes --ref=majordomus show {commit[:12]})",
                )
            )
    records = sum(len(note.records) for note in noteset.notes.values())
    annotated = set(noteset.notes) | {bad.commit for bad in noteset.unreadable if bad.commit}
    findings.append(
        Finding(
            "notes",
            noteset.invalid == 0,
            f"{len(annotated)} notes, {records} records, {noteset.invalid} invalid",
        )
    )
    return findings


def _config_findings(store: Store) -> list[Finding]:
    rewrite = store.git("config", "--get-all", "notes.rewriteRef", check=False).stdout.split()
    if "refs/notes/majordomus" in rewrite:
        return [Finding("config", True, "notes.rewriteRef includes refs/notes/majordomus")]
    return [
        Finding(
            "config",
            True,
            "notes.rewriteRef does not include refs/notes/majordomus: records will not follow "
            "amended or rebased commits (run majordomus init)",
        )
    ]


def _profile_line(prof: profiles.Profile) -> str:
    return (
        f"interval {prof.interval_s}s, checkpoint_max {prof.checkpoint_max}, "
        f"handover_max {prof.handover_max}"
    )


def profile_info(ctx: Context) -> profiles.Profile:
    store = open_store(ctx)
    return load_profile(ctx, store)


# ---- remote verbs ----------------------------------------------------------------------------


def init(ctx: Context, remote_name: str | None = None) -> remote.InitReport:
    """Configure this clone so records travel with the code (see remote.configure)."""
    return remote.configure(open_store(ctx), remote_name)


def fetch(ctx: Context, remote_name: str | None = None) -> remote.FetchReport:
    store = open_store(ctx)
    name = remote.locate(store, remote_name, ctx.cwd)
    return remote.fetch(store, remote.Git(store), name, sleep=ctx.sleep)


def push(ctx: Context, remote_name: str | None = None, hook: bool = False) -> remote.PushReport:
    """Publish the records; as the pre-push hook (`hook`), within a time budget and unprompted."""
    store = open_store(ctx)
    name = remote.locate(store, remote_name, ctx.cwd)
    if hook and ctx.environ.get(remote.HOOK_GUARD):
        return remote.PushReport(name, "skipped", None, 0, ())
    git = (
        remote.Git(store, budget_s=remote.hook_budget(ctx.environ), detached=True)
        if hook
        else remote.Git(store)
    )
    return remote.push(store, git, name, sleep=ctx.sleep)


@dataclasses.dataclass(frozen=True, slots=True)
class SyncResult:
    fetch: remote.FetchReport
    push: remote.PushReport


def sync(ctx: Context, remote_name: str | None = None) -> SyncResult:
    store = open_store(ctx)
    name = remote.locate(store, remote_name, ctx.cwd)
    git = remote.Git(store)
    fetched = remote.fetch(store, git, name, sleep=ctx.sleep)
    return SyncResult(fetched, remote.push(store, git, name, sleep=ctx.sleep))
