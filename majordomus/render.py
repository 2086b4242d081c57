"""Result values -> text and JSON. Every string from a note is escaped on the way out."""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from majordomus.graph import Divergence
from majordomus.profile import Profile
from majordomus.records import HANDOVER_FIELDS, REFUSED, skew_s
from majordomus.values import (
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
    Located,
    PushReport,
    ResumeResult,
    ShowResult,
    SyncResult,
    TaskCreated,
    TaskSummary,
)


def _escape_text(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: str) -> str:
    """Text from a note, fit for a terminal: the refused set shown as escapes."""
    if text.isprintable():
        return text  # the set is all control and format characters: none is printable
    return REFUSED.sub(_escape_text, text)


def dumps(value: Any) -> str:
    """JSON with every character of the refused set as a \\uXXXX escape, never raw."""
    out: list[str] = []
    try:
        _indented(value, "\n", out)
        text = "".join(out)
    except _NotPlain:
        import json

        text = json.dumps(_finite(value), ensure_ascii=False, indent=2, default=_json_default)
    return _escaped(text)


def _escaped(text: str) -> str:
    """JSON text with every character of the refused set as a \\uXXXX escape."""
    if text.isascii() and "\x7f" not in text:
        return text  # the encoder escaped every other character of the set (all below 0x20)
    return REFUSED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _items(values: Sequence[Any], inner: str) -> str:
    """The items of a non-empty list as `dumps` writes them inside it, `inner` being the
    newline and indentation of its items (one after another, without the brackets)."""
    out: list[str] = []
    try:
        _list_items(values, inner, out, "")
        return "".join(out)
    except _NotPlain:  # as json.dumps writes each, indented as the list's items are
        import json

        return ("," + inner).join(
            json.dumps(_finite(v), ensure_ascii=False, indent=2, default=_json_default).replace(
                "\n", inner
            )
            for v in values
        )


class _NotPlain(Exception):
    """A value `_indented` leaves to the json module (a key that is not a string)."""


# What json.dumps uses with ensure_ascii=False, from the json module's C part: the module
# itself (a millisecond to import) is loaded only by output that is JSON.
try:
    from _json import encode_basestring as _encode_string
except ImportError:  # a Python without it
    from json.encoder import encode_basestring as _encode_string


def _indented(value: Any, newline: str, out: list[str]) -> None:
    """`json.dumps(_finite(value), ensure_ascii=False, indent=2, default=_json_default)`,
    written into `out`: the json module indents only with its pure-Python encoder, which
    costs more than the rest of a large `history --json`."""
    if isinstance(value, str):
        out.append(_encode_string(value))
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        flat = _flat_object(value, newline)
        if flat is not None:
            out.append(flat)
            return
        inner = newline + "  "
        separator = "{" + inner
        for key, item in value.items():
            if not isinstance(key, str):
                raise _NotPlain
            out.append(separator)
            out.append(_encode_string(key))
            out.append(": ")
            _indented(item, inner, out)
            separator = "," + inner
        out.append(newline + "}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        out.append("[")
        _list_items(value, newline + "  ", out, newline + "  ")
        out.append(newline + "]")
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        finite = _finite(value)
        out.append(float.__repr__(value) if finite is value else _encode_string(finite))
    else:
        _indented(_json_default(value), newline, out)


def _list_items(value: Sequence[Any], inner: str, out: list[str], first: str) -> None:
    """The items of a non-empty list into `out`, after `first` (the newline before the
    first item, or nothing), `inner` before each of the others."""
    separator = first
    run: list[dict[str, Any]] = []  # consecutive flat objects (records): one encoding
    for item in value:
        if type(item) is dict and item and _is_flat(item):
            run.append(item)
            continue
        if run:
            out.append(separator)
            out.append(_flat_objects(run, inner))
            separator = "," + inner
            run = []
        out.append(separator)
        _indented(item, inner, out)
        separator = "," + inner
    if run:
        out.append(separator)
        out.append(_flat_objects(run, inner))


_PLAIN = frozenset({str, int, bool, type(None)})  # scalars whose JSON needs no check
_TEXT = frozenset({str})
_flat_encoders: dict[str, Callable[[Any], str]] = {}


def _is_flat(value: dict[Any, Any]) -> bool:
    """Whether an object has only plain keys and scalar values (most records; an empty
    list counts as one): the json module's C encoder writes it as `_indented` does, its
    item separator carrying the newline and the indentation (nothing inside needs
    another)."""
    items = value.values()
    return _TEXT.issuperset(map(type, value)) and (
        _PLAIN.issuperset(map(type, items))
        or all(
            type(item) in _PLAIN
            or (type(item) is list and not item)
            or (type(item) is float and math.isfinite(item))
            for item in items
        )
    )


def _flat_object(value: dict[Any, Any], newline: str) -> str | None:
    """A flat object as `_indented` writes it; None for any other object."""
    if not _is_flat(value):
        return None
    inner = newline + "  "
    encode = _flat_encoders.get(inner) or _flat_encoder(inner)
    return "{" + inner + encode(value)[1:-1] + newline + "}"


def _flat_objects(run: list[dict[str, Any]], newline: str) -> str:
    """Non-empty flat objects, items of one list, as `_indented` writes them, in one call
    to the C encoder: a newline appears in its output only in separators (a string's
    newline is escaped), so where one object ends and the next begins, `}` separator
    `{`, is rewritten to the separators an indented list of them has."""
    inner = newline + "  "
    encode = _flat_encoders.get(inner) or _flat_encoder(inner)
    body = encode(run)[2:-2]  # without the list's `[{` and `}]`
    between = "}," + inner + "{"
    return (
        "{" + inner + body.replace(between, newline + "}," + newline + "{" + inner) + newline + "}"
    )


_SAMPLE = [{"a": "x\n}", "b": 1, "c": None, "d": True, "e": 1.5, "f": []}, {"g": ""}]


def _flat_encoder(inner: str) -> Callable[[Any], str]:
    """`JSONEncoder(ensure_ascii=False, separators=...).encode` for flat objects, without
    the set-up that method repeats on every call (made once per indentation). The C
    encoder is private to the json module: where it is missing, or takes other arguments,
    or answers otherwise, that method is used."""
    import json

    encoder = json.JSONEncoder(ensure_ascii=False, separators=("," + inner, ": "))
    encode: Callable[[Any], str] = encoder.encode
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    try:
        # (markers, default, encoder, indent, key and item separators, sort_keys,
        # skipkeys, allow_nan): what `encode` passes it
        chunks = make(
            None, encoder.default, _encode_string, None, ": ", "," + inner, False, False, True
        )
        if "".join(chunks(_SAMPLE, 0)) == encoder.encode(_SAMPLE):
            encode = lambda value: "".join(chunks(value, 0))  # noqa: E731
    except TypeError:  # missing (None), or made with other arguments
        pass
    _flat_encoders[inner] = encode
    return encode


def _finite(value: Any) -> Any:
    """NaN and infinities (TOML has them, JSON does not: jq refuses `NaN`) as TOML spells them."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


def _json_default(value: object) -> object:
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__}")


def rfc3339(when: datetime.datetime) -> str:
    text = (when if when.tzinfo is datetime.UTC else when.astimezone(datetime.UTC)).isoformat()
    return text.removesuffix("+00:00") + "Z"


def record_json(loc: Located) -> dict[str, Any]:
    """Every stored field, `at` as RFC 3339, plus `kind` and `commit`."""
    out: dict[str, Any] = {"kind": loc.record.kind}
    out.update(loc.record.table)
    out["at"] = rfc3339(loc.record.at)  # in its stored place: a valid record has one
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


def ago(seconds: int | None, skew: int | None = None) -> str:
    """An age as a sentence says it, or the flag for a record dated in the future."""
    if skew is not None:
        return f"in the future by {age(skew)} (clock skew?)"
    return f"{age(seconds)} ago"


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
    return prefix + safe(text).replace("\n", "\n" + prefix)


def _label(div: Divergence) -> str:
    if div.ahead is None or div.behind is None:
        return div.label
    return f"{div.label}, {div.ahead} ahead, {div.behind} behind"


def record_block(loc: Located, suffix: str = "") -> str:
    """A record as `git log` would show a commit: a header line, then its text indented."""
    record = loc.record
    header = (
        f"{rfc3339(record.at)}  {record.kind} {safe(record.id)}  task {safe(record.task)}  "
        f"on {loc.commit[:12]}{suffix}"
    )
    session = record.session
    lines = [
        header,
        f"    by {safe(record.author)}" + (f", session {safe(session)}" if session else ""),
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
        title = safe(t.title) if t.title is not None else "(no task record here)"
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
        f"{_count(count, 'checkpoint')} of {safe(result.task)} since its last handover or "
        "resume, newest first:"
    ]
    lines += [record_block(loc) for loc in result.checkpoints_since]
    return "\n".join(lines)


def resume(result: ResumeResult, now: datetime.datetime, as_json: bool) -> str:
    if as_json:
        return resume_json(result)
    assert result.handover is not None and result.divergence is not None
    loc = result.handover
    record = loc.record
    written = max(0, int((now - record.at).total_seconds()))
    lines = [
        f"handover {safe(record.id)}  task {safe(record.task)}  on {loc.commit[:12]}",
        f"    by {safe(record.author)}, {ago(written, skew_s(now, record.at))}",
        f"code since: {_label(result.divergence)}",
    ]
    lines += [f"{key}: {safe(record.text(key))}" for key in HANDOVER_FIELDS]
    if result.superseded:
        lines.append(
            f"also resolved (older open handovers): {', '.join(safe(s) for s in result.superseded)}"
        )
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


def history(result: HistoryResult, as_json: bool) -> str:
    return "".join(history_parts(result, as_json))


def history_parts(result: HistoryResult, as_json: bool) -> Iterator[str]:
    """`history`'s text in parts, a thousand records each, to be written as they come:
    at 100,000 records neither the records as JSON values nor the whole text is ever
    held at once. The parts joined are what `dumps` writes for the whole document."""
    entries = result.entries
    if as_json:
        yield f'{{\n  "rev": {_escaped(_encode_string(result.rev))},\n  "records": '
        if not entries:
            yield "[]"
        for start in range(0, len(entries), HISTORY_PART):
            values = [_history_json(entry) for entry in entries[start : start + HISTORY_PART]]
            yield ("[\n    " if start == 0 else ",\n    ") + _escaped(_items(values, "\n    "))
        if entries:
            yield "\n  ]"
        yield f',\n  "invalid": {result.invalid},\n  "hidden": {result.hidden}\n}}'
        return
    for start in range(0, len(entries), HISTORY_PART):
        blocks = [
            record_block(e.located, _history_suffix(e))
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
    if result.invalid:
        tail.append(
            f"({result.invalid} invalid notes or records skipped; majordomus doctor lists them)"
        )
    if tail:
        yield ("\n" if entries else "") + "\n".join(tail)


def _history_json(entry: HistoryEntry) -> dict[str, Any]:
    item = record_json(entry.located)
    if entry.divergence is not None:
        item["label"] = entry.divergence.label
        item["ahead"] = entry.divergence.ahead
        item["behind"] = entry.divergence.behind
        item["resolved"] = entry.resolved
    return item


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
    if result.invalid:
        blocks.append(
            f"({result.invalid} invalid notes or records skipped; majordomus doctor lists them)"
        )
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


# ---- remote verbs and markdown ------------------------------------------------------------


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def init(report: InitReport, as_json: bool) -> str:
    hook = report.hook
    if as_json:
        return dumps(
            {
                "remote": report.remote,
                "settings": [
                    {"key": s.key, "value": s.value, "state": s.state, "note": s.note or None}
                    for s in report.settings
                ],
                "hook": {
                    "path": hook.path,
                    "state": hook.state,
                    "reason": hook.reason or None,
                    "line": hook.line or None,
                },
                "no_remote": report.no_remote or None,
            }
        )
    width = max(len(s.key) for s in report.settings)
    lines = [f"{s.key:<{width}}  {s.state:<9} {safe(s.value)}" for s in report.settings]
    state = "NOT SET" if hook.state == "manual" else hook.state
    lines.append(f"{'pre-push hook':<{width}}  {state:<9} {safe(hook.path)}")
    lines += [f"note: {safe(s.note)}" for s in report.settings if s.note]
    if report.no_remote:
        lines.append(f"note: {safe(report.no_remote)}")
    if hook.state == "manual":
        lines.append(
            f"note: {safe(hook.reason)}; so that git push publishes records, add this line to "
            f"{safe(hook.path)}, before any exit:"
        )
        lines.append(f"    {safe(hook.line)}")
    return "\n".join(lines)


def _fetch_json(report: FetchReport) -> dict[str, Any]:
    merge = report.merge
    return {
        "remote": report.remote,
        "remote_commit": report.remote_commit,
        "outcome": merge.outcome if merge else "none",
        "notes_commit": merge.notes_commit if merge else None,
        "records_added": merge.records_added if merge else 0,
        "notes_united": merge.notes_united if merge else 0,
        "notes_raw": merge.notes_raw if merge else 0,
    }


def _fetch_lines(report: FetchReport) -> list[str]:
    where = safe(report.remote)
    merge = report.merge
    if merge is None:
        return [f"{where} has no records yet"]
    if merge.outcome == "up-to-date":
        return [f"{where}: every record it has is already here"]
    how = {
        "created": "first fetch",
        "fast-forward": "fast-forward",
        "merged": "merged",
        "restored": "restored records removed here",
    }
    detail = how.get(merge.outcome, merge.outcome)
    if merge.notes_united:
        detail += f", {_count(merge.notes_united, 'note')} on both sides united"
    lines = [f"{where}: {_count(merge.records_added, 'new record')} ({detail})"]
    if merge.notes_raw:
        lines.append(
            f"{_count(merge.notes_raw, 'note')} on both sides could not be read; both texts "
            "were kept as they are (majordomus doctor lists them)"
        )
    return lines


def fetch(report: FetchReport, as_json: bool) -> str:
    if as_json:
        return dumps(_fetch_json(report))
    return "\n".join(_fetch_lines(report))


def _push_json(report: PushReport) -> dict[str, Any]:
    return {
        "remote": report.remote,
        "outcome": report.outcome,
        "notes_commit": report.notes_commit,
        "attempts": report.attempts,
        "fetched": [_fetch_json(f) for f in report.fetches],
    }


def push(report: PushReport, as_json: bool) -> str:
    if as_json:
        return dumps(_push_json(report))
    where = safe(report.remote)
    if report.outcome == "nothing":
        return "no records here to publish yet"
    if report.outcome == "skipped":
        return "not publishing from inside majordomus's own push"
    if report.outcome == "up-to-date":
        line = f"{where} already has every record"
    else:
        line = f"published records to {where}"
    if report.fetches:
        added = sum(f.merge.records_added for f in report.fetches if f.merge)
        line += (
            f" ({where} had moved: merged {_count(added, 'new record')} from it, "
            f"{_count(report.attempts, 'attempt')})"
        )
    return line


def push_hook(report: PushReport) -> str | None:
    """The one line the pre-push hook prints, or None when there is nothing worth saying."""
    if report.outcome != "pushed":
        return None
    return f"majordomus: {push(report, as_json=False)}"


def sync(result: SyncResult, as_json: bool) -> str:
    if as_json:
        return dumps({"fetch": _fetch_json(result.fetch), "push": _push_json(result.push)})
    return "\n".join([*_fetch_lines(result.fetch), push(result.push, as_json=False)])


def _md_code(text: str) -> str:
    """Inline code that no backtick, newline or markup in `text` can break out of."""
    flat = safe(text).replace("\n", " ")
    longest = max((len(run) for run in re.findall("`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _md_block(text: str) -> list[str]:
    """A fenced block: text from a note is shown, never interpreted (no links, no HTML)."""
    body = safe(text)
    longest = max((len(run) for run in re.findall("~+", body)), default=0)
    fence = "~" * max(3, longest + 1)
    return [f"{fence}text", body, fence]


def show_markdown(result: ShowResult) -> str:
    """Records on one commit as Markdown: for a CI job summary or a pull-request comment."""
    commit = f"`{result.commit[:12]}`"
    if not result.records:
        lines = [f"### majordomus: no records on {commit}"]
    else:
        lines = [f"### majordomus: {_count(len(result.records), 'record')} on {commit}"]
    for loc in result.records:
        record = loc.record
        lines += ["", f"#### {record.kind} {_md_code(record.id)}", ""]
        facts = [
            f"task {_md_code(record.task)}",
            f"by {_md_code(record.author)}",
            rfc3339(record.at),
        ]
        if record.session:
            facts.append(f"session {_md_code(record.session)}")
        if record.head != loc.commit:
            facts.append(f"written on `{record.head[:12]}`")
        lines.append(" · ".join(facts))
        if record.kind == "task":
            lines += ["", *_md_block(record.text("title"))]
        elif record.kind == "checkpoint":
            lines += ["", *_md_block(record.text("body"))]
        elif record.kind == "handover":
            for key in HANDOVER_FIELDS:
                lines += ["", f"**{key}**", "", *_md_block(record.text(key))]
        elif record.kind == "resume":
            counts = ""
            if record.optional_int("ahead") is not None:
                counts = (
                    f", {record.optional_int('ahead')} ahead, "
                    f"{record.optional_int('behind')} behind"
                )
            lines += [
                "",
                f"resumed {_md_code(record.text('handover'))}: "
                f"{_md_code(record.text('label'))}{counts}",
            ]
    if result.invalid:
        lines += [
            "",
            f"_{result.invalid} invalid notes or records skipped; `majordomus doctor` lists them._",
        ]
    return "\n".join(lines)


def agent_change(change: Change, dry_run: bool, remove: bool) -> str:
    """What `agent install` did or, with --dry-run, would do (the diff first)."""
    lines = [change.diff.rstrip("\n")] if dry_run and change.diff else []
    if not change.changed:
        lines.append(f"{change.path}: already as asked; nothing to change")
    elif dry_run:
        lines.append(f"{change.path}: would be written (--dry-run: nothing was changed)")
    elif remove:
        lines.append(f"{change.path}: majordomus hooks removed")
    else:
        lines.append(f"{change.path}: hooks on {', '.join(change.events)}")
    if change.excluded is not None:
        verb = "would add" if dry_run else "added"
        lines.append(f"{verb} {change.excluded} to .git/info/exclude (kept out of git)")
    if not remove and change.changed:
        lines.append(f"hook command: {change.command}")
    return "\n".join(lines)


# ---- adopt -------------------------------------------------------------------------------------


def adopt(result: AdoptResult, as_json: bool) -> str:
    if as_json:
        return dumps(
            {
                "rev": result.rev,
                "dry_run": result.dry_run,
                "adopted": [
                    {
                        "commit": a.commit,
                        "how": a.how,
                        "from": list(a.sources),
                        "records": [record_json(loc) for loc in a.records],
                    }
                    for a in result.adopted
                ],
                "ambiguous": [
                    {"records": list(a.records), "candidates": list(a.candidates)}
                    for a in result.ambiguous
                ],
                "orphaned": result.orphaned,
                "considered": result.considered,
                "compared": result.compared,
                "invalid": result.invalid,
            }
        )
    verb = "would adopt" if result.dry_run else "adopted"
    lines = []
    for a in result.adopted:
        sources = ", ".join(c[:12] for c in a.sources)
        lines.append(
            f"{verb} {_count(len(a.records), 'record')} onto {a.commit[:12]} "
            f"({a.how} merge of {sources})"
        )
        for loc in a.records:
            record = loc.record
            lines.append(
                f"    {record.kind} {safe(record.id)}  task {safe(record.task)}  "
                f"written on {record.head[:12]}"
            )
    for amb in result.ambiguous:
        ids = ", ".join(safe(i) for i in amb.records)
        where = ", ".join(c[:12] for c in amb.candidates)
        lines.append(
            f"not adopted: {ids}: their change matches {len(amb.candidates)} commits ({where}), "
            "so nothing was guessed; copy them by hand with git notes --ref=majordomus copy "
            "if you know where they belong"
        )
    if not result.orphaned:
        lines.append(
            f"nothing to adopt: every record is on a commit reachable from {result.rev[:12]}"
        )
    elif not result.adopted and not result.ambiguous:
        lines.append(
            f"nothing to adopt: {_count(result.orphaned, 'record')} on commits not reachable "
            f"from {result.rev[:12]}, none whose change landed in the "
            f"{_count(result.compared, 'commit')} compared"
        )
        older = result.orphaned - result.considered
        if older:
            lines.append(
                f"({older} written more than {result.days} days before it were not "
                "considered; --days N widens the search)"
            )
    elif result.dry_run:
        lines.append("dry run: nothing was written")
    if result.invalid:
        lines.append(
            f"({result.invalid} invalid notes or records skipped; majordomus doctor lists them)"
        )
    return "\n".join(lines)
