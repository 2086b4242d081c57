"""What `adopt` answers, as text and as JSON: each record copied (or, on a dry run, to be)
onto the commit where its change landed, each ambiguity left alone, and why nothing was
adopted."""

from __future__ import annotations

from typing import Any

from majordomus.jsontext import dumps
from majordomus.plaintext import counted, safe, skipped
from majordomus.render import of_task, record_json
from majordomus.values import AdoptResult


def adopt(result: AdoptResult, as_json: bool) -> str:
    if as_json:
        return dumps(_adopt_json(result))
    return "\n".join([*_adopted_lines(result), *_outcome_lines(result)])


def _adopt_json(result: AdoptResult) -> dict[str, Any]:
    return {
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
            {"records": list(a.records), "candidates": list(a.candidates)} for a in result.ambiguous
        ],
        "orphaned": result.orphaned,
        "considered": result.considered,
        "compared": result.compared,
        "invalid": result.invalid,
    }


def _adopted_lines(result: AdoptResult) -> list[str]:
    """Each record adopted (or, on a dry run, to be), under its commit; each ambiguity."""
    verb = "would adopt" if result.dry_run else "adopted"
    lines = []
    for a in result.adopted:
        sources = ", ".join(c[:12] for c in a.sources)
        lines.append(
            f"{verb} {counted(len(a.records), 'record')} onto {a.commit[:12]} "
            f"({a.how} merge of {sources})"
        )
        for loc in a.records:
            record = loc.record
            lines.append(
                f"    {record.kind} {safe(record.id)}{of_task(record)}  "
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
    return lines


def _outcome_lines(result: AdoptResult) -> list[str]:
    """Why nothing was adopted, or that a dry run wrote nothing; invalid notes counted."""
    lines = []
    if not result.orphaned:
        lines.append(
            f"nothing to adopt: every record is on a commit reachable from {result.rev[:12]}"
        )
    elif not result.adopted and not result.ambiguous:
        lines.append(
            f"nothing to adopt: {counted(result.orphaned, 'record')} on commits not reachable "
            f"from {result.rev[:12]}, none whose change landed in the "
            f"{counted(result.compared, 'commit')} compared"
        )
        older = result.orphaned - result.considered
        if older:
            lines.append(
                f"({older} written more than {result.days} days before it were not "
                "considered; --days N widens the search)"
            )
    elif result.dry_run:
        lines.append("dry run: nothing was written")
    return lines + skipped(result.invalid)
