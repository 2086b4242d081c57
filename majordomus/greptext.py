"""What `grep` answers, as text and as JSON: each record that matched, its header and the
lines that matched (the match marked on a terminal). Every string from a note is escaped
on the way out, as every read escapes it."""

from __future__ import annotations

import datetime
from typing import Any

from majordomus.jsontext import ITEM, encode_string, escaped, items, with_members
from majordomus.plaintext import ago, counted, one_line, safe, signature_mark
from majordomus.records import Signature, age_s, skew_s
from majordomus.render import record_json
from majordomus.values import GrepHit, GrepResult, MatchedField, MatchedLine, RecordText

MARK = "\x1b[1;31m"  # a match, as git grep marks it by default (bold red)
RESET = "\x1b[0m"


def marked(line: MatchedLine, colour: bool) -> str:
    """A matched line, fit for a terminal; with `colour`, each match marked. The line is
    escaped piece by piece, so that no escape of ours falls inside one of the line's."""
    if not colour or not line.spans:
        return safe(line.text)
    out, at = [], 0
    for start, end in line.spans:
        out += [safe(line.text[at:start]), MARK, safe(line.text[start:end]), RESET]
        at = end
    out.append(safe(line.text[at:]))
    return "".join(out)


def header(hit: GrepHit, now: datetime.datetime, by: str) -> str:
    """kind, id, task, commit, `by` (the author and signature status, made once for each),
    age."""
    of_task = "" if hit.kind == "task" and hit.id == hit.task else f"  task {safe(hit.task)}"
    when = ago(age_s(now, hit.at), skew_s(now, hit.at))
    return f"{hit.kind} {safe(hit.id)}{of_task}  on {hit.commit[:12]}  by {by}, {when}"


def _field_lines(field: MatchedField, colour: bool) -> list[str]:
    return [f"    {field.field}:{line.number}: {marked(line, colour)}" for line in field.lines]


def grep_text(result: GrepResult, now: datetime.datetime, colour: bool) -> str:
    """Each record that matched: its header, then each line that matched as `FIELD:LINE:
    text`; then what was not shown. Nothing at all when nothing matched anywhere."""
    lines: list[str] = []
    authors: dict[tuple[str, Signature | None], str] = {}  # a few authors sign most records
    for hit in result.hits:
        key = (hit.author, hit.signature)
        by = authors.get(key)
        if by is None:
            by = authors[key] = one_line(hit.author) + signature_mark(hit.signature, hit.author)
        lines.append(header(hit, now, by))
        for field in hit.matched:
            lines += _field_lines(field, colour)
    if result.hidden:
        lines.append(
            f"({counted(result.hidden, 'more matching record')} on commits not reachable "
            f"from HEAD ({result.rev[:12]}); --all shows them)"
        )
    if result.untrusted:
        lines.append(
            f"({counted(result.untrusted, 'record')} not verified, so not searched "
            '(trust = "signed"))'
        )
    if result.invalid:
        lines.append(
            f"({result.invalid} invalid notes or records skipped; majordomus doctor lists them)"
        )
    return "\n".join(lines)


def matched_json(hit: GrepHit) -> dict[str, list[int]]:
    """Each field that matched, and the numbers of its lines that did."""
    return {field.field: [line.number for line in field.lines] for field in hit.matched}


_INNER = ITEM + "  "  # a record's members
_END = ITEM + "}"  # a record's end


def matched_text(hit: GrepHit) -> str:
    """The member `matched` as `dumps` writes it among a record's members, after a comma:
    field names are a record's own (plain ASCII), line numbers plain integers."""
    if not hit.matched:
        return f',{_INNER}"matched": {{}}'
    field = _INNER + "  "
    number = field + "  "
    between = "," + number
    fields = ",".join(
        f'{field}"{f.field}": [{number}{between.join(str(n.number) for n in f.lines)}{field}]'
        for f in hit.matched
    )
    return f',{_INNER}"matched": {{{fields}{_INNER}}}'


def _record_item(hit: GrepHit) -> str:
    if isinstance(hit.located, RecordText):  # most records: their text with our members
        whole = with_members(hit.located.text, hit.located.commit, {})
        return whole[: -len(_END)] + matched_text(hit) + _END
    if hit.located is None:  # a search made for text
        raise TypeError("a record found for a text answer cannot be shown as JSON")
    return items([{**record_json(hit.located), "matched": matched_json(hit)}], ITEM)


def grep_json(result: GrepResult) -> str:
    """`{"pattern", "rev", "task", "records": [{..., "matched": {FIELD: [LINE, ...]}}],
    "invalid", "hidden"}`, and `"untrusted"` with --trusted under `trust = "signed"`; as
    `dumps` writes it."""
    head: dict[str, Any] = {"pattern": result.pattern, "rev": result.rev, "task": result.task}
    out = ["{"]
    for key, value in head.items():
        shown = "null" if value is None else encode_string(value)
        out.append(f"\n  {encode_string(key)}: {shown},")
    if result.hits:
        records = ("," + ITEM).join(map(_record_item, result.hits))
        out.append(f'\n  "records": [{ITEM}{records}\n  ],')
    else:
        out.append('\n  "records": [],')
    out.append(f'\n  "invalid": {result.invalid},\n  "hidden": {result.hidden}')
    if result.untrusted is not None:
        out.append(f',\n  "untrusted": {result.untrusted}')
    out.append("\n}")
    return escaped("".join(out))
