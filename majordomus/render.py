"""Result values -> text and JSON. Every string from a note is escaped on the way out."""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from majordomus.graph import Divergence
from majordomus.ops import (
    CheckpointResult,
    CheckResult,
    Finding,
    HandoverResult,
    HistoryEntry,
    HistoryResult,
    Located,
    ResumeResult,
    ShowResult,
    TaskCreated,
    TaskSummary,
)
from majordomus.profile import Profile
from majordomus.records import HANDOVER_FIELDS

# The refused set of the spec (controls but newline and tab, C1 included; bidi
# overrides and isolates), matched in one pass.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape_text(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str) -> str:
    """Text from a note, fit for a terminal: the refused set shown as escapes."""
    return _UNSAFE.sub(_escape_text, text)


def dumps(value: Any) -> str:
    """JSON with every character of the refused set as a \\uXXXX escape, never raw."""
    text = json.dumps(value, ensure_ascii=False, indent=2, default=_json_default)
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _json_default(value: object) -> object:
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__}")


def rfc3339(when: datetime.datetime) -> str:
    text = when.astimezone(datetime.UTC).isoformat()
    return text.removesuffix("+00:00") + "Z"


def record_json(loc: Located) -> dict[str, Any]:
    """Every stored field, `at` as RFC 3339, plus `kind` and `commit`."""
    out: dict[str, Any] = {"kind": loc.record.kind}
    for key, value in loc.record.table.items():
        out[key] = rfc3339(value) if key == "at" else value
    out["commit"] = loc.commit
    return out


def age(seconds: int | None) -> str:
    """A short human age: 45s, 12m 03s, 3h 05m, 2d 04h."""
    if seconds is None:
        return "never"
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours:02d}h"


def interval(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{hours}h" if hours else "",
        f"{minutes}m" if minutes else "",
        f"{secs}s" if secs else "",
    ]
    return "".join(parts) or "0s"


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in safe(text).split("\n"))


def _label(div: Divergence) -> str:
    if div.ahead is None or div.behind is None:
        return div.label
    return f"{div.label}, {div.ahead} ahead, {div.behind} behind"


def record_block(loc: Located, suffix: str = "") -> str:
    """A record as `git log` would show a commit: a header line, then its text indented."""
    record = loc.record
    head = (
        f"{rfc3339(record.at)}  {record.kind} {safe(record.id)}  task {safe(record.task)}  "
        f"on {loc.commit[:12]}{suffix}"
    )
    lines = [
        head,
        f"    by {safe(record.author)}"
        + (f", session {safe(record.session)}" if record.session else ""),
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


# ---- per command -------------------------------------------------------------------------


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
        title = safe(t.title) if t.title is not None else "(no task record here)"
        checkpoint = (
            f"checkpoint {age(t.checkpoint_age_s)} ago"
            if t.checkpoint_age_s is not None
            else "no checkpoint"
        )
        pending = f"open handover {safe(t.open_handover.record.id)}" if t.open_handover else ""
        last = age(max(0, int((now - t.last_at).total_seconds())))
        parts = [f"{mark} {t.task}", title, f"last activity {last} ago", checkpoint, pending]
        lines.append("  ".join(p for p in parts if p))
    return "\n".join(lines)


def checkpoint(result: CheckpointResult, as_json: bool) -> str:
    if as_json:
        return dumps(
            {"record": record_json(result.record), "previous_age_s": result.previous_age_s}
        )
    previous = (
        f"previous checkpoint of this task: {age(result.previous_age_s)} before this one"
        if result.previous_age_s is not None
        else "first checkpoint of this task"
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
        }
    )


def resume(result: ResumeResult, now: datetime.datetime, as_json: bool) -> str:
    if as_json:
        return resume_json(result)
    assert result.handover is not None and result.divergence is not None
    loc = result.handover
    record = loc.record
    written = max(0, int((now - record.at).total_seconds()))
    lines = [
        f"handover {safe(record.id)}  task {safe(record.task)}  on {loc.commit[:12]}",
        f"    by {safe(record.author)}, {age(written)} ago",
        f"code since: {_label(result.divergence)}",
    ]
    lines += [f"{key}: {safe(record.text(key))}" for key in HANDOVER_FIELDS]
    if result.superseded:
        lines.append(f"also resolved (older open handovers): {', '.join(result.superseded)}")
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


def history(result: HistoryResult, as_json: bool) -> str:
    if as_json:
        records = []
        for entry in result.entries:
            item = record_json(entry.located)
            if entry.divergence is not None:
                item["label"] = entry.divergence.label
                item["ahead"] = entry.divergence.ahead
                item["behind"] = entry.divergence.behind
                item["resolved"] = entry.resolved
            records.append(item)
        return dumps(
            {
                "rev": result.rev,
                "records": records,
                "invalid": result.invalid,
                "hidden": result.hidden,
            }
        )
    blocks = [record_block(e.located, _history_suffix(e)) for e in result.entries]
    if not blocks:
        blocks.append(f"no records on commits reachable from {result.rev[:12]}")
    if result.hidden:
        blocks.append(
            f"({result.hidden} more on commits not reachable from {result.rev[:12]}; "
            "--all shows them)"
        )
    if result.invalid:
        blocks.append(
            f"({result.invalid} invalid notes or records skipped; majordomus doctor lists them)"
        )
    return "\n".join(blocks)


def show(result: ShowResult, as_json: bool) -> str:
    if as_json:
        return dumps(
            {
                "commit": result.commit,
                "records": [record_json(loc) for loc in result.records],
                "invalid": result.invalid,
            }
        )
    blocks = [record_block(loc) for loc in result.records] or [
        f"no records on {result.commit[:12]}"
    ]
    if result.invalid:
        blocks.append(
            f"({result.invalid} invalid notes or records skipped; majordomus doctor lists them)"
        )
    return "\n".join(blocks)


def check_json(result: CheckResult) -> dict[str, Any]:
    return {
        "task": result.task,
        "profile": result.profile,
        "interval_s": result.interval_s,
        "last_checkpoint": record_json(result.last_checkpoint) if result.last_checkpoint else None,
        "age_s": result.age_s,
        "stale": result.stale,
        "open_handover": record_json(result.open_handover) if result.open_handover else None,
    }


def check_line(result: CheckResult, colour: bool = False) -> str:
    what = (
        "last checkpoint" if result.last_checkpoint is not None else "no checkpoint; task started"
    )
    status = "STALE" if result.stale else "fresh"
    if colour:
        status = f"\x1b[{'31;1' if result.stale else '32'}m{status}\x1b[0m"
    pending = (
        f"open handover {safe(result.open_handover.record.id)}"
        if result.open_handover
        else "no open handover"
    )
    return (
        f"{result.task}: {what} {age(result.age_s)} ago, interval {interval(result.interval_s)}, "
        f"{status}, {pending}"
    )


def check(results: Sequence[CheckResult], as_json: bool, colour: bool = False) -> str:
    if as_json:
        if len(results) == 1:
            return dumps(check_json(results[0]))
        return dumps({"checks": [check_json(r) for r in results]})
    if not results:
        return "no tasks yet"
    return "\n".join(check_line(r, colour) for r in results)


def doctor(findings: Sequence[Finding], as_json: bool) -> str:
    if as_json:
        return dumps(
            {
                "healthy": all(f.healthy for f in findings),
                "findings": [
                    {"topic": f.topic, "healthy": f.healthy, "detail": f.detail} for f in findings
                ],
            }
        )
    return "\n".join(
        f"{'ok  ' if f.healthy else 'FAIL'}  {f.topic:<9} {safe(f.detail)}" for f in findings
    )


def profile(prof: Profile, as_json: bool) -> str:
    values: Mapping[str, str] = {
        "profile": prof.name,
        "interval": f"{interval(prof.interval_s)} ({prof.interval_s}s)",
        "checkpoint_max": str(prof.checkpoint_max),
        "handover_max": str(prof.handover_max),
    }
    if as_json:
        return dumps(
            {
                "profile": prof.name,
                "interval_s": prof.interval_s,
                "checkpoint_max": prof.checkpoint_max,
                "handover_max": prof.handover_max,
                "sources": dict(prof.sources),
            }
        )
    return "\n".join(
        f"{key:<15} {value:<16} from {safe(prof.sources[key])}" for key, value in values.items()
    )
