"""The verbs that write a record on HEAD: `task new` (and `task list`, `task use`: the tasks
records belong to), `checkpoint`, `handover`, `resume`; each a function that returns what
it did, and the command that prints it (`<verb>_command`: it takes the `Invocation` and
returns the exit code)."""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from majordomus.errors import ExitCode, RefusedError, RepositoryError
from majordomus.index import Index
from majordomus.invocation import Inputs, Invocation, OnFirstUse
from majordomus.records import HANDOVER_FIELDS, age_s, new_record, skew_s
from majordomus.tasks import (
    Jobs,
    counted_checkpoint,
    implied_task,
    marks_unsigned,
    no_task,
    open_here,
    resolve_task,
    task_records,
    trusted,
)
from majordomus.values import (
    AttachedRecord,
    CheckpointResult,
    HandoverResult,
    ResumeResult,
    StaleLock,
    TaskCreated,
    TaskSummary,
)
from majordomus.views import Views

if TYPE_CHECKING:
    from majordomus import plaintext, render
    from majordomus.writer import Writer
else:
    plaintext = OnFirstUse("majordomus.plaintext")
    render = OnFirstUse("majordomus.render")

TITLE_MAX = 200
SESSION_MAX = 200


# ---- writing a record ----------------------------------------------------------------


def _validated(field: str, raw: str, cap: int, allow_secret: bool, *, flag: bool = True) -> str:
    """Text that passed the length and character rules and, unless allowed, the secret scan
    (whose refusal offers --allow-secret where the command has it: `flag`)."""
    from majordomus.fieldtext import clean_text  # only what is recorded is checked

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


def _session_of(
    inputs: Inputs, explicit: str | None, allow_secret: bool = False, *, flag: bool = True
) -> str | None:
    """The session a record is written in: given, else MAJORDOMUS_SESSION; None when
    neither names one."""
    value = explicit if explicit is not None else inputs.environ.get("MAJORDOMUS_SESSION")
    return _validated("session", value, SESSION_MAX, allow_secret, flag=flag) if value else None


def _recorded_texts(
    inputs: Inputs, texts: Mapping[str, tuple[str, int]], session: str | None, allow_secret: bool
) -> tuple[dict[str, str], str | None]:
    """The texts a record keeps (by field: the text as given, its cap), each passed through
    `_validated` in that order, then the session it is written in (`_session_of`)."""
    clean = {key: _validated(key, text, cap, allow_secret) for key, (text, cap) in texts.items()}
    return clean, _session_of(inputs, session, allow_secret)


def _new_id(prefix: str, digits: int) -> str:
    return f"{prefix}-{os.urandom(digits // 2).hex()}"


def _writer(jobs: Jobs) -> Writer:
    """What moves the notes ref, once it is known writable (a read never loads it)."""
    from majordomus.writer import writable

    return writable(jobs.repository, jobs.reader, jobs.history)


def _write(
    inputs: Inputs,
    jobs: Jobs,
    writer: Writer,
    kind: str,
    task: str,
    fields: Mapping[str, Any],
    session: str | None,
    views: Views | None = None,
    record_id: str | None = None,
    strict: bool = False,
) -> tuple[AttachedRecord, tuple[StaleLock, ...]]:
    """Write one record on HEAD, signed when this clone signs (refused, nothing written,
    when it cannot); carry the cached views over to the new state. `strict`: the profile
    trusts signed records only."""
    head = jobs.history.head()
    author = jobs.repository.identity()
    landing = _landing_facts(jobs, kind, head)
    from majordomus import signconfig  # what git signs with: a write asks

    config = signconfig.read(jobs.repository)
    record = new_record(
        kind,
        record_id=record_id or _new_id(kind[0], 16),
        task=task,
        head=head,
        at=inputs.now(),
        author=author,
        session=session,
        fields={**fields, **landing},
    )
    if config.signs:
        from majordomus.signing import signed  # only a clone that signs loads it

        record = signed(record, config, author)
    report = writer.append(
        head,
        [record],
        f"majordomus: {kind} {task} on {head[:7]}",
        sleep=inputs.sleep,
        author=author,
    )
    if views is not None:
        views.recorded(report, record)
    located = AttachedRecord(record, head, report.position)
    return jobs.attach_one(located, strict), report.stale_locks


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


def _prepare_write(inputs: Inputs, jobs: Jobs, task: str | None) -> tuple[Writer, Views, str]:
    """Before a record is built: a commit to attach it to, a notes ref a write will not
    destroy (and its writer), the task it belongs to and its records."""
    jobs.history.head()
    jobs.repository.ask_identity()  # git answers while libgit2 loads
    try:
        writer = _writer(jobs)
        views, task_id = task_records(inputs, jobs, task, writing=True)
        if task_id is None:
            raise no_task()
        return writer, views, task_id
    except BaseException:
        jobs.repository.settle()  # refused before the record was built: no git left unwaited
        raise


# ---- task ----------------------------------------------------------------------------


def task_new(
    inputs: Inputs, title: str, session: str | None = None, allow_secret: bool = False
) -> TaskCreated:
    jobs = open_here(inputs)
    text = _validated("title", title, TITLE_MAX, allow_secret)
    jobs.history.head()
    writer = _writer(jobs)
    task = _new_id("t", 12)
    sess = _session_of(inputs, session, allow_secret)
    views = Views.cached(jobs.reader, jobs.history, task, new=True) or Views(
        jobs.reader, jobs.history, writing=True
    )
    located, locks = _write(inputs, jobs, writer, "task", task, {"title": text}, sess, views, task)
    jobs.repository.set_current_task(task)
    return TaskCreated(located, locks)


def task_list(inputs: Inputs) -> list[TaskSummary]:
    jobs = open_here(inputs)
    index = Index(jobs.reader.read_notes(), jobs.reader, jobs.history)
    now = inputs.now()
    current = jobs.repository.current_task()
    tasks = index.tasks()
    open_handovers = {task: index.open_handovers(task) for task in tasks}
    # The records shown whole (each title, each open handover) read in one go, not one
    # process (or libgit2 loaded) for the first of them.
    shown = [*filter(None, tasks.values()), *(p[0] for p in open_handovers.values() if p)]
    index.preload(shown)
    strict = marks_unsigned(jobs)
    handovers = {
        task: jobs.attach_one(index.locate(pending[0]), strict)
        for task, pending in open_handovers.items()
        if pending
    }
    summaries = []
    for task, task_record in tasks.items():
        last_at = max(item.summary.at for item in index.of_task(task))
        last_checkpoint, skewed = counted_checkpoint(index, task, now)
        summaries.append(
            TaskSummary(
                task=task,
                title=index.locate(task_record).record.text("title") if task_record else None,
                last_at=datetime.datetime.fromtimestamp(last_at, datetime.UTC),
                checkpoint_age_s=age_s(now, last_checkpoint.at) if last_checkpoint else None,
                open_handover=handovers.get(task),
                current=task == current,
                skew_s=skew_s(now, skewed.at) if skewed else None,
            )
        )
    return sorted(summaries, key=lambda s: s.last_at, reverse=True)


def task_use(inputs: Inputs, name: str) -> str:
    jobs = open_here(inputs)
    task = resolve_task(Views(jobs.reader, jobs.history).task_ids, name)
    jobs.repository.set_current_task(task)
    return task


def task_new_command(
    invocation: Invocation,
    title: str,
    session_name: str | None = None,
    allow_secret: bool = False,
    as_json: bool = False,
) -> int:
    result = task_new(invocation.inputs(), title, session_name, allow_secret)
    invocation.locks(result.stale_locks)
    invocation.out(render.task_created(result, as_json))
    return ExitCode.OK


def task_list_command(invocation: Invocation, as_json: bool = False) -> int:
    tasks = task_list(invocation.inputs())
    invocation.out(render.task_list(tasks, invocation.now(), as_json))
    return ExitCode.OK


def task_use_command(invocation: Invocation, task: str) -> int:
    invocation.out(task_use(invocation.inputs(), task))
    return ExitCode.OK


# ---- checkpoint and handover ----------------------------------------------------------


def checkpoint(
    inputs: Inputs,
    text: str,
    task: str | None = None,
    session: str | None = None,
    allow_secret: bool = False,
) -> CheckpointResult:
    jobs = open_here(inputs)
    prof = jobs.profile
    texts = {"checkpoint body": (text, prof.checkpoint_max)}
    clean, sess = _recorded_texts(inputs, texts, session, allow_secret)
    writer, views, task_id = _prepare_write(inputs, jobs, task)
    previous = views.index(task_id).last("checkpoint", task_id)
    strict = prof.trust == "signed"
    fields = {"body": clean["checkpoint body"]}
    located, locks = _write(
        inputs, jobs, writer, "checkpoint", task_id, fields, sess, views, None, strict
    )
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
    inputs: Inputs,
    fields: Mapping[str, str | None],
    task: str | None = None,
    session: str | None = None,
    allow_secret: bool = False,
) -> HandoverResult:
    jobs = open_here(inputs)
    prof = jobs.profile
    cap = prof.handover_max
    missing = [key for key in HANDOVER_FIELDS if fields.get(key) is None]
    if missing:
        flags = ", ".join(f"--{key}" for key in missing)
        raise RefusedError(
            f"a handover needs --objective, --state and --next; missing {flags}; "
            "nothing was recorded."
        )
    texts = {key: (fields[key] or "", cap) for key in HANDOVER_FIELDS}
    clean, sess = _recorded_texts(inputs, texts, session, allow_secret)
    writer, views, task_id = _prepare_write(inputs, jobs, task)
    dirty = jobs.repository.is_dirty()
    strict = prof.trust == "signed"
    located, locks = _write(
        inputs, jobs, writer, "handover", task_id, clean, sess, views, None, strict
    )
    return HandoverResult(located, dirty, locks)


def checkpoint_command(
    invocation: Invocation,
    text: str | None = None,
    file: str | None = None,
    task: str | None = None,
    session_name: str | None = None,
    allow_secret: bool = False,
    as_json: bool = False,
) -> int:
    if (text is None) == (file is None):
        raise RefusedError("give the checkpoint text as an argument or with -F FILE (- for stdin).")
    # The invocation read once, in the call: `-F`'s text, then what the verb takes.
    result = checkpoint(
        invocation.inputs(),
        invocation.read_file(file, "checkpoint body") if file is not None else text or "",
        task,
        session_name,
        allow_secret,
    )
    invocation.locks(result.stale_locks)
    invocation.out(render.checkpoint(result, as_json))
    return ExitCode.OK


def handover_command(
    invocation: Invocation,
    objective: str | None = None,
    state: str | None = None,
    next_action: str | None = None,
    file: str | None = None,
    task: str | None = None,
    session_name: str | None = None,
    allow_secret: bool = False,
    as_json: bool = False,
) -> int:
    fields: dict[str, str | None] = {"objective": objective, "state": state, "next": next_action}
    if file is not None:
        if any(value is not None for value in fields.values()):
            raise RefusedError(
                "give the handover either with -F FILE or with the three flags, not both."
            )
        source = "standard input" if file == "-" else file
        fields = dict(parse_handover_file(invocation.read_file(file, "handover file"), source))
    result = handover(invocation.inputs(), fields, task, session_name, allow_secret)
    invocation.locks(result.stale_locks)
    if result.dirty:
        invocation.warn(
            "the work tree has uncommitted changes; the handover is attached to "
            f"{result.record.commit[:12]}, which does not contain them."
        )
    invocation.out(render.handover(result, as_json))
    return ExitCode.OK


# ---- resume ------------------------------------------------------------------------------


def checkpoints_since(index: Index, task: str) -> list[AttachedRecord]:
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
    inputs: Inputs, task: str | None = None, peek: bool = False, session: str | None = None
) -> ResumeResult:
    jobs = open_here(inputs)
    sess = _session_of(inputs, session, allow_secret=peek, flag=False)  # a peek writes nothing
    head = jobs.history.head()
    writer = None if peek else _writer(jobs)
    # Under trust = "signed" only verified handovers are taken, superseded or shown.
    strict = jobs.profile.trust == "signed"
    views, task_id = task_records(inputs, jobs, task)
    implied = task_id is None
    if task_id is None:
        task_id = implied_task(jobs, views, strict)
    index = views.index(task_id)
    pending, untrusted = trusted(
        jobs, [index.locate(h) for h in index.open_handovers(task_id)], strict
    )
    if not pending:
        since, unshown = trusted(jobs, checkpoints_since(index, task_id), strict)
        return ResumeResult(
            task_id, None, None, None, 0, (), (), tuple(since), implied, (*untrusted, *unshown)
        )
    # Every older open handover is named (id, author, age) and superseded: only those named.
    newest, older = pending[0], tuple(pending[1:])
    div = jobs.history.graph().labels(head, [newest.commit])[newest.commit]
    if peek:
        return ResumeResult(
            task_id, newest, div, None, len(pending), older, (), (), implied, tuple(untrusted)
        )
    fields: dict[str, Any] = {"handover": newest.record.id, "label": div.label}
    if div.ahead is not None:
        fields["ahead"] = div.ahead
    if div.behind is not None:
        fields["behind"] = div.behind
    fields["supersedes"] = [loc.record.id for loc in older]
    assert writer is not None  # a peek has returned
    recorded, locks = _write(
        inputs, jobs, writer, "resume", task_id, fields, sess, views, None, strict
    )
    if implied:  # the session now works on it: checkpoints go there
        jobs.repository.set_current_task(task_id)
    return ResumeResult(
        task_id, newest, div, recorded, len(pending), older, locks, (), implied, tuple(untrusted)
    )


def resume_command(
    invocation: Invocation,
    peek: bool = False,
    task: str | None = None,
    session_name: str | None = None,
    as_json: bool = False,
) -> int:
    result = resume(invocation.inputs(), task, peek, session_name)
    invocation.locks(result.stale_locks)
    if result.implied:
        made = "" if peek else "; it is now the current task here"
        invocation.terminal.stderr.write(
            f"majordomus: no current task: took {plaintext.safe(result.task)}, the one task with "
            f"an open handover reachable from HEAD{made}.\n"
        )
    shown = render.resume(result, invocation.now(), as_json)
    if result.handover is None and not as_json:
        invocation.terminal.stderr.write(
            f"majordomus: no open handover for {plaintext.safe(result.task)}; nothing to resume.\n"
        )
    invocation.out(shown)
    return ExitCode.OK if result.handover is not None else ExitCode.NEGATIVE
