"""What setting up and syncing a repository reports -> text and JSON: init, profile,
doctor, agent install, fetch, push (and its pre-push hook line) and sync."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from majordomus.jsontext import dumps
from majordomus.plaintext import counted, interval, safe
from majordomus.profile import Profile
from majordomus.values import Change, FetchReport, Finding, InitReport, PushReport, SyncResult


def doctor(findings: Sequence[Finding], as_json: bool) -> str:
    if as_json:
        return dumps(
            {
                "healthy": all(f.healthy for f in findings),
                "findings": [
                    {
                        "topic": f.topic,
                        "healthy": f.healthy,
                        "status": _status(f),
                        "detail": f.detail,
                    }
                    for f in findings
                ],
            }
        )
    return "\n".join(f"{_status(f):<4}  {f.topic:<9} {safe(f.detail)}" for f in findings)


def _status(finding: Finding) -> str:
    if not finding.healthy:
        return "FAIL"
    return "note" if finding.note else "ok"


def profile(prof: Profile, as_json: bool) -> str:
    values: Mapping[str, str] = {
        "profile": prof.name,
        "interval": f"{interval(prof.interval_s)} ({prof.interval_s}s)",
        "checkpoint_max": str(prof.checkpoint_max),
        "handover_max": str(prof.handover_max),
        "trust": prof.trust,
    }
    if as_json:
        return dumps(
            {
                "profile": prof.name,
                "interval_s": prof.interval_s,
                "checkpoint_max": prof.checkpoint_max,
                "handover_max": prof.handover_max,
                "trust": prof.trust,
                "sources": dict(prof.sources),
            }
        )
    return "\n".join(
        f"{key:<15} {value:<16} from {safe(prof.sources[key])}" for key, value in values.items()
    )


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
        "copies_added": merge.copies_added if merge else 0,
        "notes_united": merge.notes_united if merge else 0,
        "notes_raw": merge.notes_raw if merge else 0,
        "left_out": [
            {"commit": commit, "blob": blob, "reason": why}
            for commit, blob, why in (merge.left_out if merge else ())
        ],
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
        detail += f", {counted(merge.notes_united, 'note')} on both sides united"
    lines = [f"{where}: {_added(merge.records_added, merge.copies_added)} ({detail})"]
    if merge.notes_raw:
        lines.append(
            f"{counted(merge.notes_raw, 'note')} on both sides could not be read; both texts "
            "were kept as they are (majordomus doctor lists them)"
        )
    for commit, _, why in merge.left_out:  # `why` names the blob
        lines.append(f"{where}'s note on {commit[:12]} left out, not published from here: {why}")
    return lines


def _added(records: int, copies: int) -> str:
    """New records, each counted once, and the further copies of records (on other
    commits: a rewrite or `adopt` copied them) said apart."""
    text = counted(records, "new record")
    more = copies - records
    if more > 0:
        text += f" and {more} more {'copy' if more == 1 else 'copies'} on other commits"
    return text


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
        copies = sum(f.merge.copies_added for f in report.fetches if f.merge)
        line += (
            f" ({where} had moved: merged {_added(added, copies)} from it, "
            f"{counted(report.attempts, 'attempt')})"
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
