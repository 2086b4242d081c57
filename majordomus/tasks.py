"""The steps every verb shares: the jobs one command does on one repository, each an object
built with what it needs (git and the refs: `repository`; the commits: `history`; reading
notes: `reader`), opened where the command started (a command that writes makes its
`writer.Writer` of them); the profile; the task a command works on; what `check` says of a task.

Nothing here prints; clock, environment and sleep come in through `Inputs`.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Collection, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from majordomus import profile as profiles
from majordomus import remote
from majordomus.errors import RefusedError
from majordomus.history import History
from majordomus.index import Index
from majordomus.invocation import Inputs
from majordomus.location import open_repository
from majordomus.notesread import NotesReader
from majordomus.records import SIGNATURE_KEY, age_s, skew_s, unsigned
from majordomus.repository import Repository
from majordomus.tuples import NamedTuple
from majordomus.values import AttachedRecord, CheckResult, Listed
from majordomus.views import Views

if TYPE_CHECKING:
    from majordomus.verifying import Verifier

TASK_ID_LENGTH = len("t-") + 12
_TASK_PREFIX = re.compile(r"(?:t-)?([0-9a-f]{4,12})")


class Jobs:
    """The jobs one command does on one repository, each made when the command first needs
    it (a write on a task named in full never makes most of what a read does)."""

    def __init__(self, repository: Repository, inputs: Inputs | None = None) -> None:
        """`inputs`: where a warning goes, and a note object a partial clone left out is
        fetched from its remote (`open_here`); without them, neither."""
        self.repository = repository
        self._inputs = inputs

    @cached_property
    def history(self) -> History:
        return History(self.repository)

    @cached_property
    def reader(self) -> NotesReader:
        reader = NotesReader(self.repository)
        if self._inputs is not None:
            reader.partial.fetch = remote.fetch_missing
            reader.refs.warn = self._inputs.warn
        return reader

    @cached_property
    def profile(self) -> profiles.Profile:
        """The profile the command runs under (refused, each time asked, if unreadable)."""
        inputs = self._inputs or Inputs(".", self.repository.environ)  # none: no profile named
        return profiles.load(self.repository.workdir, inputs.profile_name, inputs.environ)

    @cached_property
    def verifier(self) -> Verifier:
        from majordomus.verifying import Verifier  # loaded once a signed record is shown

        return Verifier(self.repository)

    def attach(
        self, located: Sequence[AttachedRecord], strict: bool = False
    ) -> list[AttachedRecord]:
        """The records with their signature status (`strict`: read under `trust =
        "signed"`); records that hold no signature are told so without a check."""
        if any(SIGNATURE_KEY in loc.record.table for loc in located):
            return self.verifier.attach(located, strict)
        none = unsigned(strict)
        return [loc._replace(signature=none) for loc in located]

    def attach_one(self, loc: AttachedRecord, strict: bool = False) -> AttachedRecord:
        return self.attach([loc], strict)[0]


def open_jobs(path: str, environ: Mapping[str, str]) -> Jobs:
    """The repository at (or above) `path`, and its jobs; nothing is read yet."""
    return Jobs(open_repository(path, environ))


def open_here(inputs: Inputs) -> Jobs:
    """The repository a command works on, and its jobs: a note object a partial clone left
    out is fetched from its remote, a warning said through `inputs.warn`."""
    return Jobs(open_repository(inputs.cwd, inputs.environ), inputs)


def marks_unsigned(jobs: Jobs) -> bool:
    """Whether a listing marks unsigned records too: under `trust = "signed"`, or when the
    profile cannot be read (a listing is not refused for it, and says more, not less)."""
    try:
        return jobs.profile.trust == "signed"
    except RefusedError:
        return True


def missing_note_objects(jobs: Jobs) -> list[str]:
    """The objects under the notes refs' trees this clone lacks, as git lists them
    (never fetching them one by one as it would to read them)."""
    commits = jobs.reader.refs.notes_commits()
    if not commits or not jobs.reader.partial.is_partial():
        return []
    out = jobs.repository.git(
        "rev-list", "--objects", "--no-walk", "--missing=print", *commits
    ).stdout
    return [line[1:].strip() for line in out.splitlines() if line.startswith("?")]


# ---- the task a command works on -------------------------------------------------------


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


def task_name(inputs: Inputs, jobs: Jobs, explicit: str | None) -> str | None:
    """The name a command's task is given: --task beats MAJORDOMUS_TASK beats the task set
    by `task new` / `task use`; None when none of them names one."""
    return explicit or inputs.environ.get("MAJORDOMUS_TASK") or jobs.repository.current_task()


def task_views(inputs: Inputs, jobs: Jobs, explicit: str | None) -> Views:
    """The views a read of the command's task works on: where its name is a task id (or
    the start of one) and no view describes the notes refs as they are, only the notes
    that could hold its records are read (`Views`' `task`), not every note."""
    name = task_name(inputs, jobs, explicit)
    return Views(jobs.reader, jobs.history, task=task_prefix(name) if name else None)


def current_task(
    inputs: Inputs,
    jobs: Jobs,
    views: Views,
    explicit: str | None,
    *,
    imply: bool = False,
    strict: bool = False,
) -> tuple[str, bool]:
    """The task a command works on (`task_name`), and whether it was implied rather than
    named (`implied_task`, with no name and `imply`)."""
    name = task_name(inputs, jobs, explicit)
    if name:
        return resolve_task(views.task_ids, name), False
    if imply:
        return implied_task(jobs, views, strict), True
    raise no_task()


def implied_task(jobs: Jobs, views: Views, strict: bool = False) -> str:
    """The task of the open handover reachable from HEAD when exactly one task has one
    (what a new clone or a new agent session picks up); `strict` (`trust = "signed"`): of
    a verified open handover."""
    candidates = tasks_with_open_handover(jobs, views, strict)
    if len(candidates) == 1:
        return candidates[0]
    if candidates:
        raise AmbiguousTaskError(tuple(candidates))
    raise no_task()


def no_task() -> NoTaskError:
    return NoTaskError(
        "no current task: start one with majordomus task new TITLE, pick one with "
        "majordomus task use TASK, or pass --task TASK."
    )


def task_records(
    inputs: Inputs, jobs: Jobs, explicit: str | None, *, writing: bool = False
) -> tuple[Views, str | None]:
    """The records of the task a command works on, and the task when a name names one
    (`task_name`; else None: see `implied_task`). A task named by its id in full: its view
    alone, as the view cache holds it for the notes refs as they are (`Views.cached`);
    else, or when the cache describes another state, the views of every task (`writing`:
    see `Views`), or for a read those of the notes that could hold the task's records
    (`task_views`)."""
    name = task_name(inputs, jobs, explicit)
    task = task_prefix(name) if name else None
    if task is not None and len(task) == TASK_ID_LENGTH:
        view = Views.cached(jobs.reader, jobs.history, task)
        if view is not None:
            return view, task
    views = Views(jobs.reader, jobs.history, writing=writing, task=None if writing else task)
    return views, resolve_task(views.task_ids, name) if name else None


def tasks_with_open_handover(jobs: Jobs, views: Views, strict: bool = False) -> list[str]:
    """The tasks that have an open handover on a commit reachable from HEAD (`strict`: a
    verified one)."""
    pending: dict[str, set[str]] = {}
    for task in views.task_ids:
        index = views.index(task)
        commits = {item.commit for item in index.open_handovers(task)}
        if commits:
            pending[task] = commits
    if not pending:
        return []
    reach = jobs.history.graph().order(jobs.history.head(), set().union(*pending.values()))
    found = sorted(task for task, commits in pending.items() if commits & reach.keys())
    return [task for task in found if _verified_open(jobs, views, task, reach)] if strict else found


def _verified_open(jobs: Jobs, views: Views, task: str, reach: Collection[str]) -> bool:
    index = views.index(task)
    items = [item for item in index.open_handovers(task) if item.commit in reach]
    index.preload(items)
    located = jobs.attach([index.locate(item) for item in items], strict=True)
    return any(loc.signed.verified for loc in located)


def trusted(
    jobs: Jobs, located: Sequence[AttachedRecord], strict: bool
) -> tuple[list[AttachedRecord], list[AttachedRecord]]:
    """The records with their signature status, split into those an agent may be handed
    and those it may not (`strict`, `trust = "signed"`: every record not verified)."""
    attached = jobs.attach(located, strict)
    if not strict:
        return attached, []
    return [loc for loc in attached if loc.signed.verified], [
        loc for loc in attached if not loc.signed.verified
    ]


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


# ---- what check says of a task ---------------------------------------------------------


def counted_checkpoint(
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
    last, skewed = counted_checkpoint(index, task, now)
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


def attach_checks(jobs: Jobs, checks: Sequence[CheckResult], strict: bool) -> list[CheckResult]:
    """The checks with the signature status of each record they show, checked in one go."""
    shown = [
        loc
        for c in checks
        for loc in (c.last_checkpoint, c.open_handover, c.skewed)
        if loc is not None
    ]
    attached = iter(jobs.attach(shown, strict))

    def again(loc: AttachedRecord | None) -> AttachedRecord | None:
        return None if loc is None else next(attached)

    return [
        check._replace(
            last_checkpoint=again(check.last_checkpoint),
            open_handover=again(check.open_handover),
            skewed=again(check.skewed),
        )
        for check in checks
    ]
