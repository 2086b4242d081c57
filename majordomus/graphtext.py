"""`history --graph` as text: git's drawing of the commits that carry records, each record
written on its commit's lines (a commit's first record on the line of its `*`, each other
on a line of its own, under the graph's column lines as git continues a multi-line
commit). A record's id and task come from a note: escaped to one line each, so no note
can draw a line of the graph or pass for another record."""

from __future__ import annotations

import re

from majordomus.plaintext import counted, one_line, skipped
from majordomus.values import GraphRecord, GraphResult

_SGR = re.compile(r"\x1b\[[0-9;]*m")  # git's colours in a graph it drew
_PLAIN = re.compile(r"[| ]*")  # a graph line of columns only
SHORT = 12  # a commit's id as every other output of majordomus shortens it
_YELLOW, _RESET = "\x1b[33m", "\x1b[m"
_LABEL_COLOURS = {
    "current": "\x1b[32m",  # green: the code is where the handover left it
    "advanced": "\x1b[33m",
    "behind": "\x1b[33m",
    "diverged": "\x1b[31m",
    "unrelated": "\x1b[31m",
}


def record_text(drawn: GraphRecord, colour: bool = False) -> str:
    """`kind id  task t-…`, and a handover's label and whether it is resolved."""
    summary = drawn.summary
    text = f"{summary.kind} {one_line(summary.id)}"
    if not (summary.kind == "task" and summary.id == summary.task):
        text += f"  task {one_line(summary.task)}"
    div = drawn.divergence
    if div is not None:
        label = div.label
        if colour and label in _LABEL_COLOURS:
            label = f"{_LABEL_COLOURS[label]}{label}{_RESET}"
        counts = "" if div.ahead is None or div.behind is None else f", {div.ahead} ahead"
        counts += "" if div.ahead is None or div.behind is None else f", {div.behind} behind"
        text += f"  [{label}{counts}; {'resolved' if drawn.resolved else 'open'}]"
    return text


def history_graph(result: GraphResult, colour: bool = False) -> str:
    out: list[str] = []
    for line in result.lines:
        if line.commit is None or line.line is None:
            out.append(line.graph)
            continue
        drawn = result.records.get(line.commit, ())
        if 0 < len(drawn) <= line.line:
            # A line past the commit's records: git's `grafted` word of a shallow clone's
            # boundary took one. A line of columns only is left out (git draws a commit of
            # fewer lines without it); a line that bends a column is git's next line anyway.
            if _PLAIN.fullmatch(_SGR.sub("", line.graph)) is None:
                out.append(line.graph.rstrip(" "))
            continue
        text = record_text(drawn[line.line], colour) if line.line < len(drawn) else ""
        if line.line == 0:
            short = line.commit[:SHORT]
            short = f"{_YELLOW}{short}{_RESET}" if colour else short
            out.append(f"{line.graph}{short} {text}".rstrip(" "))
        else:
            out.append(f"{line.graph}{' ' * (SHORT + 1)}{text}".rstrip(" "))
    out += _tail(result)
    return "\n".join(out)


def _tail(result: GraphResult) -> list[str]:
    rev = result.rev[:SHORT]
    tail = []
    if not result.records and not result.missing:  # as `history` says it
        tail.append(f"no records on commits reachable from {rev}")
    if result.left_out:
        tail.append(
            f"({counted(result.left_out, 'more record')} on commits not drawn; "
            "majordomus history lists them)"
        )
    if result.hidden:
        tail.append(f"({result.hidden} more on commits not reachable from {rev}; --all shows them)")
    if result.missing:
        tail.append(
            f"({counted(result.missing, 'record')} on commits missing from this clone; "
            "majordomus history --all lists them)"
        )
    return tail + skipped(result.invalid)
