"""Markdown text as majordomus writes it: the records on one commit, for a CI job summary or
a pull-request comment; no note text can break out of its code span or fenced block."""

from __future__ import annotations

import re

from majordomus.jsontext import rfc3339
from majordomus.plaintext import counted, safe
from majordomus.records import HANDOVER_FIELDS
from majordomus.values import AttachedRecord, ShowResult


def _code_span(text: str) -> str:
    """Inline code that no backtick, newline or markup in `text` can break out of."""
    flat = safe(text).replace("\n", " ")
    longest = max((len(run) for run in re.findall("`+", flat)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _fenced_block(text: str) -> list[str]:
    """A fenced block: text from a note is shown, never interpreted (no links, no HTML)."""
    body = safe(text)
    longest = max((len(run) for run in re.findall("~+", body)), default=0)
    fence = "~" * max(3, longest + 1)
    return [f"{fence}text", body, fence]


def _signature(loc: AttachedRecord) -> str:
    """The signature's status after the author (an unsigned record's only under `trust =
    "signed"`), outside the author's code span: never taken for its text."""
    sig = loc.signed
    if not sig.marked:
        return ""
    return f" (**{'BAD SIGNATURE' if sig.status == 'bad' else sig.status}**)"


def show(result: ShowResult) -> str:
    """Records on one commit as Markdown: for a CI job summary or a pull-request comment."""
    commit = f"`{result.commit[:12]}`"
    if not result.records:
        lines = [f"### majordomus: no records on {commit}"]
    else:
        lines = [f"### majordomus: {counted(len(result.records), 'record')} on {commit}"]
    for loc in result.records:
        record = loc.record
        lines += ["", f"#### {record.kind} {_code_span(record.id)}", ""]
        facts = [
            f"task {_code_span(record.task)}",
            f"by {_code_span(record.author)}{_signature(loc)}",
            rfc3339(record.at),
        ]
        if record.session:
            facts.append(f"session {_code_span(record.session)}")
        if record.head != loc.commit:
            facts.append(f"written on `{record.head[:12]}`")
        lines.append(" · ".join(facts))
        if record.kind == "task":
            lines += ["", *_fenced_block(record.text("title"))]
        elif record.kind == "checkpoint":
            lines += ["", *_fenced_block(record.text("body"))]
        elif record.kind == "handover":
            for key in HANDOVER_FIELDS:
                lines += ["", f"**{key}**", "", *_fenced_block(record.text(key))]
        elif record.kind == "resume":
            counts = ""
            if record.optional_int("ahead") is not None:
                counts = (
                    f", {record.optional_int('ahead')} ahead, "
                    f"{record.optional_int('behind')} behind"
                )
            lines += [
                "",
                f"resumed {_code_span(record.text('handover'))}: "
                f"{_code_span(record.text('label'))}{counts}",
            ]
    if result.invalid:
        lines += [
            "",
            f"_{result.invalid} invalid notes or records skipped; `majordomus doctor` lists them._",
        ]
    return "\n".join(lines)
