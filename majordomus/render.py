"""Records and tasks -> text and JSON: what task, checkpoint, handover, resume, history,
show, check and adopt answer. Every string from a note is escaped on the way out."""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Sequence
from typing import Any

from majordomus.jsontext import (
    ITEM,
    dumps,
    encode_string,
    escaped,
    items,
    record_members,
    rfc3339,
    with_members,
)
from majordomus.plaintext import age, ago, counted, interval, one_line, safe, signature_mark
from majordomus.plaintext import skipped as _skipped
from majordomus.records import HANDOVER_FIELDS, Divergence, Record, skew_s
from majordomus.values import (
    AttachedRecord,
    CheckpointResult,
    CheckResult,
    HandoverResult,
    HistoryEntry,
    HistoryResult,
    RecordText,
    ResumeResult,
    ShowResult,
    TaskCreated,
    TaskSummary,
)


def record_json(loc: AttachedRecord) -> dict[str, Any]:
    """Every stored field, `at` as RFC 3339, plus `kind`, `commit`, and the signature's
    status and signer."""
    out = record_members(loc.record)
    out["commit"] = loc.commit
    out["signature"] = loc.signed.status
    out["signer"] = loc.signed.signer
    return out


def _by(loc: AttachedRecord) -> str:
    """A record's author, and what its signature says of it."""
    return one_line(loc.record.author) + signature_mark(loc.signature, loc.record.author)


def untrusted_lines(untrusted: Sequence[AttachedRecord]) -> list[str]:
    """The records `trust = "signed"` keeps from an agent, named, their text never shown."""
    if not untrusted:
        return []
    lines = [f'not shown: {counted(len(untrusted), "record")} not verified (trust = "signed"):']
    for loc in untrusted:
        lines.append(
            f"    {loc.record.kind} {loc.record.id} on {loc.commit[:12]}, {loc.signed.status}, by "
            f"{one_line(loc.record.author)}"
        )
    return lines


def _field(key: str, text: str) -> str:
    """A labelled field of a note; its further lines indented under the label."""
    return f"{key}: " + safe(text).replace("\n", "\n    ")


def _indent(text: str, prefix: str = "    ") -> str:
    return prefix + safe(text).replace("\n", "\n" + prefix)


def _label(div: Divergence) -> str:
    if div.ahead is None or div.behind is None:
        return div.label
    return f"{div.label}, {div.ahead} ahead, {div.behind} behind"


def of_task(record: Record) -> str:
    """ "  task t-…" after a record's id; nothing after a task's, whose id it is."""
    if record.kind == "task" and record.id == record.task:
        return ""
    return f"  task {safe(record.task)}"


def record_block(loc: AttachedRecord, suffix: str = "") -> str:
    """A record as `git log` would show a commit: a header line, then its text indented."""
    record = loc.record
    header = (
        f"{rfc3339(record.at)}  {record.kind} {safe(record.id)}{of_task(record)}  "
        f"on {loc.commit[:12]}{suffix}"
    )
    session = record.session
    lines = [
        header,
        f"    by {_by(loc)}" + (f", session {one_line(session)}" if session else ""),
    ]
    if record.kind == "task":
        lines.append(_indent(record.text("title")))
    elif record.kind == "checkpoint":
        lines.append(_indent(record.text("body")))
    elif record.kind == "handover":
        for key in HANDOVER_FIELDS:
            lines.append(_indent(f"{key}: {record.text(key)}"))
    elif record.kind == "resume":
        counts = ""
        if record.optional_int("ahead") is not None:
            counts = (
                f", {record.optional_int('ahead')} ahead, {record.optional_int('behind')} behind"
            )
        lines.append(
            f"    resumed {safe(record.text('handover'))}: {safe(record.text('label'))}{counts}"
        )
        if record.supersedes:
            lines.append(f"    superseded {', '.join(safe(s) for s in record.supersedes)}")
    return "\n".join(lines)


def task_created(result: TaskCreated, as_json: bool) -> str:
    record = result.record.record
    if as_json:
        return dumps({"task": record.task, "title": record.text("title")})
    return record.task


def task_list(tasks: Sequence[TaskSummary], now: datetime.datetime, as_json: bool) -> str:
    if as_json:
        return dumps(
            {
                "tasks": [
                    {
                        "task": t.task,
                        "title": t.title,
                        "last_at": rfc3339(t.last_at),
                        "checkpoint_age_s": t.checkpoint_age_s,
                        "open_handover": record_json(t.open_handover) if t.open_handover else None,
                        **({"skew_s": t.skew_s} if t.skew_s is not None else {}),
                    }
                    for t in tasks
                ]
            }
        )
    if not tasks:
        return "no tasks yet; start one with majordomus task new TITLE"
    lines = []
    for t in tasks:
        mark = "*" if t.current else " "
        title = one_line(t.title) if t.title is not None else "(no task record here)"
        checkpoint = (
            f"checkpoint {age(t.checkpoint_age_s)} ago"
            if t.checkpoint_age_s is not None
            else "no checkpoint"
        )
        if t.skew_s is not None and t.checkpoint_age_s is None:
            checkpoint = f"checkpoint {ago(None, t.skew_s)}"
        elif t.skew_s is not None:
            checkpoint += f"; a newer one is {ago(None, t.skew_s)}"
        pending = f"open handover {safe(t.open_handover.record.id)}" if t.open_handover else ""
        last = ago(max(0, int((now - t.last_at).total_seconds())), skew_s(now, t.last_at))
        parts = [f"{mark} {safe(t.task)}", title, f"last activity {last}", checkpoint, pending]
        lines.append("  ".join(p for p in parts if p))
    return "\n".join(lines)


def checkpoint(result: CheckpointResult, as_json: bool) -> str:
    if as_json:
        skew = result.previous_skew_s
        return dumps(
            {
                "record": record_json(result.record),
                "previous_age_s": result.previous_age_s,
                **({"skew_s": skew} if skew is not None else {}),
            }
        )
    previous = (
        f"previous checkpoint of this task: {age(result.previous_age_s)} before this one"
        if result.previous_age_s is not None
        else "first checkpoint of this task"
    )
    if result.previous_skew_s is not None:
        previous = (
            f"previous checkpoint of this task: dated {age(result.previous_skew_s)} after this "
            "one (clock skew?)"
        )
    return f"{record_block(result.record)}\n{previous}"


def handover(result: HandoverResult, as_json: bool) -> str:
    if as_json:
        return dumps({"record": record_json(result.record), "dirty": result.dirty})
    return record_block(result.record)


def resume_json(result: ResumeResult) -> str:
    div = result.divergence
    return dumps(
        {
            "handover": record_json(result.handover) if result.handover else None,
            "label": div.label if div else None,
            "ahead": div.ahead if div else None,
            "behind": div.behind if div else None,
            "recorded": result.recorded is not None,
            "open_handovers": result.open_handovers,
            "superseded": list(result.superseded),
            "untrusted": len(result.untrusted),
            **(
                {"checkpoints_since": [record_json(loc) for loc in result.checkpoints_since]}
                if result.handover is None
                else {}
            ),
        }
    )


def resume_nothing_open(result: ResumeResult) -> str:
    """No open handover: what the task recorded since its last handover or resume, whole."""
    if not result.checkpoints_since:
        return (
            f"no checkpoints of {safe(result.task)} since its last handover or resume; "
            "majordomus history --task shows what came before"
        )
    count = len(result.checkpoints_since)
    lines = [
        f"{counted(count, 'checkpoint')} of {safe(result.task)} since its last handover or "
        "resume, newest first:"
    ]
    lines += [record_block(loc) for loc in result.checkpoints_since]
    lines += untrusted_lines(result.untrusted)
    return "\n".join(lines)


def resume(result: ResumeResult, now: datetime.datetime, as_json: bool) -> str:
    """What resume answers: its JSON, the task's checkpoints when no handover is open, or the
    handover it takes."""
    if as_json:
        return resume_json(result)
    if result.handover is None:
        return resume_nothing_open(result)
    assert result.divergence is not None  # a handover taken is placed against HEAD
    loc = result.handover
    record = loc.record
    written = max(0, int((now - record.at).total_seconds()))
    lines = [
        f"handover {safe(record.id)}  task {safe(record.task)}  on {loc.commit[:12]}",
        f"    by {_by(loc)}, {ago(written, skew_s(now, record.at))}",
        f"code since: {_label(result.divergence)}",
    ]
    lines += [_field(key, record.text(key)) for key in HANDOVER_FIELDS]
    if result.older:
        lines.append("also resolved (older open handovers, newest first):")
        for other in result.older:
            age_s = max(0, int((now - other.record.at).total_seconds()))
            lines.append(
                f"    {other.record.id} on {other.commit[:12]}, by "
                f"{_by(other)}, {ago(age_s, skew_s(now, other.record.at))}"
            )
    lines += untrusted_lines(result.untrusted)
    if result.recorded is not None:
        lines.append(
            f"recorded resume {result.recorded.record.id} on {result.recorded.commit[:12]}"
        )
    else:
        lines.append("peek: nothing recorded")
    return "\n".join(lines)


def _history_suffix(entry: HistoryEntry) -> str:
    notes = []
    if not entry.reachable:
        notes.append("not reachable")
    if entry.divergence is not None:
        notes.append(_label(entry.divergence))
        notes.append("resolved" if entry.resolved else "open")
    return f"  [{'; '.join(notes)}]" if notes else ""


HISTORY_PART = 1000  # records rendered, and written, at a time


def history_parts(result: HistoryResult, as_json: bool) -> Iterator[str]:
    """`history`'s text in parts, a thousand records each, to be written as they come:
    at 100,000 records neither the records as JSON values nor the whole text is ever
    held at once. The parts joined are what `dumps` writes for the whole document. The
    document's head goes with its first part: a command stopped while it made that part
    (exit 3) has written nothing."""
    entries = result.entries
    if as_json:
        head = f'{{\n  "rev": {escaped(encode_string(result.rev))},\n  "records": '
        if not entries:
            yield head + "[]"
        for start in range(0, len(entries), HISTORY_PART):
            part = _history_items(entries[start : start + HISTORY_PART])
            yield (head + "[" if start == 0 else ",") + ITEM + escaped(part)
        if entries:
            yield "\n  ]"
        yield f',\n  "invalid": {result.invalid},\n  "hidden": {result.hidden}\n}}'
        return
    for start in range(0, len(entries), HISTORY_PART):
        blocks = [
            record_block(_record_of(e), _history_suffix(e))
            for e in entries[start : start + HISTORY_PART]
        ]
        yield ("" if start == 0 else "\n") + "\n".join(blocks)
    tail = []
    if not entries:
        tail.append(f"no records on commits reachable from {result.rev[:12]}")
    if result.hidden:
        tail.append(
            f"({result.hidden} more on commits not reachable from {result.rev[:12]}; "
            "--all shows them)"
        )
    tail += _skipped(result.invalid)
    if tail:
        yield ("\n" if entries else "") + "\n".join(tail)


def _history_items(entries: Sequence[HistoryEntry]) -> str:
    """Records of a history as the items of its JSON list (`items` at ITEM): a record the
    document cache keeps as text is spliced, the others encoded from their values."""
    out: list[str] = []
    run: list[dict[str, Any]] = []  # consecutive records without text: one encoding
    for entry in entries:
        shown = entry.located
        if isinstance(shown, RecordText):
            if run:
                out.append(items(run, ITEM))
                run = []
            out.append(with_members(shown.text, shown.commit, _labels(entry)))
        else:
            run.append({**record_json(shown), **_labels(entry)})
    if run:
        out.append(items(run, ITEM))
    return ("," + ITEM).join(out)


def _labels(entry: HistoryEntry) -> dict[str, Any]:
    if entry.divergence is None:
        return {}
    return {
        "label": entry.divergence.label,
        "ahead": entry.divergence.ahead,
        "behind": entry.divergence.behind,
        "resolved": entry.resolved,
    }


def _record_of(entry: HistoryEntry) -> AttachedRecord:
    if isinstance(entry.located, RecordText):  # a history read for JSON shown as text
        raise TypeError("a record kept as JSON text cannot be shown as text")
    return entry.located


def show(result: ShowResult, as_json: bool) -> str:
    if as_json:
        return dumps(
            {
                "commit": result.commit,
                "records": [record_json(loc) for loc in result.records],
                "invalid": result.invalid,
                **({"missing": True} if result.missing else {}),
            }
        )
    blocks = [record_block(loc) for loc in result.records] or [
        f"no records on {result.commit[:12]}"
    ]
    blocks += _skipped(result.invalid)
    return "\n".join(blocks)


def check_json(result: CheckResult) -> dict[str, Any]:
    out = {
        "task": result.task,
        "profile": result.profile,
        "interval_s": result.interval_s,
        "last_checkpoint": record_json(result.last_checkpoint) if result.last_checkpoint else None,
        # Every record dated in the future: no age anyone can know, never a silent 0.
        "age_s": None if result.undated else result.age_s,
        "stale": result.stale,
        "open_handover": record_json(result.open_handover) if result.open_handover else None,
    }
    if result.skew_s is not None:
        out["skew_s"] = result.skew_s
    if result.skewed is not None:
        out["skewed_checkpoint"] = record_json(result.skewed)
    return out


def check_line(result: CheckResult, colour: bool = False) -> str:
    what = (
        "last checkpoint" if result.last_checkpoint is not None else "no checkpoint; task started"
    )
    since = f"{what} {age(result.age_s)} ago"
    if result.undated:
        since = "no checkpoint; every record is dated in the future"
    status = "STALE" if result.stale else "fresh"
    if colour:
        status = f"\x1b[{'31;1' if result.stale else '32'}m{status}\x1b[0m"
    pending = (
        f"open handover {safe(result.open_handover.record.id)}"
        if result.open_handover
        else "no open handover"
    )
    skewed = ""
    if result.skewed is not None:
        skewed = (
            f"; checkpoint {safe(result.skewed.record.id)} is {ago(None, result.skew_s)}, "
            "not counted"
        )
    return (
        f"{safe(result.task)}: {since}, "
        f"interval {interval(result.interval_s)}, {status}, {pending}{skewed}"
    )


def check(
    results: Sequence[CheckResult], as_json: bool, colour: bool = False, every: bool = False
) -> str:
    if as_json:
        if len(results) == 1 and not every:
            return dumps(check_json(results[0]))
        return dumps({"checks": [check_json(r) for r in results]})
    if not results:
        return "no tasks yet"
    return "\n".join(check_line(r, colour) for r in results)
