"""Adoption: records left on commits a host's squash or rebase merge orphaned, copied onto
the commit where their change landed, as a rewrite would copy them.

Only what can be proved counts, by stable patch id (`patches`):

- rebase: a commit whose own change equals that of a commit S of REV lands on S;
- squash: a branch whose whole change since its merge base equals that of S lands
  on S, every commit of it. The branch is recomputed where its commits still
  exist, else read from the facts a handover stored (`branch_commits`,
  `branch_patch`); a commit that is gone is matched by its record's `patch`.

A record with two candidate landings is adopted onto neither. The commits of REV
compared are those (merges left out) no older than a day before the oldest orphaned
record considered; records older than `days` before REV are not considered. In a
shallow clone the commits at the boundary are never compared: their parent, and so
their change, is not known.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from majordomus import patches
from majordomus.errors import ExitCode, RefusedError
from majordomus.index import Index, newest_copy
from majordomus.invocation import Inputs, Invocation, OnFirstUse
from majordomus.records import Record
from majordomus.tasks import Jobs, open_here
from majordomus.tuples import NamedTuple
from majordomus.values import (
    DEFAULT_DAYS,
    Adoption,
    AdoptResult,
    Ambiguity,
    AttachedRecord,
    Listed,
    NotesOn,
    StaleLock,
)
from majordomus.views import Views

if TYPE_CHECKING:
    from majordomus import adopttext
    from majordomus.writer import Writer
else:
    adopttext = OnFirstUse("majordomus.adopttext")

SLACK_S = 86400  # clocks of the writer and of the host may disagree by this much


class _Orphan(NamedTuple):
    listed: Listed
    record: Record
    commits: tuple[str, ...]  # every commit a copy sits on


def adopt(
    inputs: Inputs, rev: str | None = None, dry_run: bool = False, days: int = DEFAULT_DAYS
) -> AdoptResult:
    """Copy records a squash or rebase merge orphaned onto the commit where they landed."""
    jobs = open_here(inputs)
    if days < 1:
        raise RefusedError(f"--days must be 1 or more, not {days}.")
    commit = jobs.history.resolve(rev)
    if not dry_run:
        from majordomus.writer import writable  # here: a dry run loads no write path

        writer = writable(jobs.repository, jobs.reader, jobs.history)
    views = Views(jobs.reader, jobs.history)
    invalid = views.invalid
    notes = _unreached(jobs, commit)
    copies = _copies(notes)
    orphaned = _orphaned(jobs, views, commit, notes, copies)
    horizon = (jobs.history.commit_time(commit) or 0) - days * 86400
    recent = [item for item in orphaned if item.summary.at >= horizon]
    if not recent:
        return AdoptResult(commit, dry_run, (), (), len(orphaned), 0, 0, (), days, invalid)
    rows = [(tuple(item.summary), item.commit, notes[item.commit].blobs) for item in recent]
    index = Index.of_view(jobs.reader, jobs.history, rows, set(), (), invalid, rev=commit)
    index.preload(recent)
    orphans = [
        _Orphan(
            item,
            index.locate(item).record,
            tuple(c.commit for c in copies[item.summary.kind, item.summary.id]),
        )
        for item in recent
    ]
    window, existing, ids, whole = _compared(jobs, commit, orphans)
    candidates = _candidates(orphans, window, existing, ids, whole)
    adopted, ambiguous = _decide(orphans, candidates)
    locks: tuple[StaleLock, ...] = ()
    if adopted and not dry_run:
        locks = _write(writer, adopted, inputs.sleep)
    return AdoptResult(
        commit,
        dry_run,
        tuple(adopted),
        tuple(ambiguous),
        len(orphaned),
        len(recent),
        len(window),
        locks,
        days,
        invalid,
    )


def _copies(notes: Mapping[str, NotesOn]) -> dict[tuple[str, str], list[Listed]]:
    """Each record of these notes (by kind and id), and its copies on them."""
    copies: dict[tuple[str, str], list[Listed]] = {}
    for annotated_commit, annotated in notes.items():
        for summary in annotated.summaries:
            key = (summary.kind, summary.id)
            copies.setdefault(key, []).append(Listed(summary, annotated_commit))
    return copies


def _orphaned(
    jobs: Jobs,
    views: Views,
    rev: str,
    notes: Mapping[str, NotesOn],
    copies: Mapping[tuple[str, str], list[Listed]],
) -> list[Listed]:
    """The records on the notes REV does not reach that it reaches no copy of.

    A record is orphaned when REV reaches none of its copies: when the copy a read from
    REV lists (a reachable one when there is one) is on a commit REV does not reach. It
    is listed, as every read lists it then, by its copy on the newest commit."""
    tasks = {listed[0].summary.task for listed in copies.values()}
    reached = {
        (item.summary.kind, item.summary.id)
        for item in views.listed(sorted(tasks), rev)
        if item.commit not in notes
    }
    return [newest_copy(c, jobs.history) for key, c in copies.items() if key not in reached]


def _compared(
    jobs: Jobs, rev: str, orphans: Sequence[_Orphan]
) -> tuple[list[str], list[str], dict[str, str], dict[str, _Branch]]:
    """The commits of REV compared, the orphaned commits that still exist, the patch id of
    each, and the branches of those that exist with their whole changes."""
    since = int(min(orphan.listed.summary.at for orphan in orphans)) - SLACK_S
    existing = sorted(jobs.history.commits_here({c for orphan in orphans for c in orphan.commits}))
    cut = jobs.history.shallow_boundary()  # their diffs cannot be known: never compared
    # Two chains of git processes, run side by side: the branches of the orphaned
    # commits and their whole changes; the commits of REV compared and every change.
    with ThreadPoolExecutor(max_workers=1) as pool:
        branches = pool.submit(_branch_changes, jobs, rev, existing)
        window = [c for c in jobs.history.since(rev, since) if c not in cut]
        ids = patches.ids_of_commits(jobs.history, [*window, *existing])
        whole = branches.result()
    return window, existing, ids, whole


def adopt_command(
    invocation: Invocation,
    rev: str | None = None,
    dry_run: bool = False,
    days: int = DEFAULT_DAYS,
    as_json: bool = False,
) -> int:
    result = adopt(invocation.inputs(), rev, dry_run, days)
    invocation.locks(result.stale_locks)
    invocation.out(adopttext.adopt(result, as_json))
    return ExitCode.OK


def _unreached(jobs: Jobs, rev: str) -> Mapping[str, NotesOn]:
    """The notes on commits REV does not reach: from the notes trees' listings and the
    order of REV, with only those notes read when the listings are at hand (at 100,000
    notes, a few read rather than every one summarised), else from a read of every note.
    Those few are here as a rule (the views `adopt` read first are kept only for a state
    whose every note object was here); one that is not (lost since) sends it to the read
    of every note, which fetches it from the promisor remote or stops (exit 3): never a
    record left out as if REV reached it."""
    listing = jobs.reader.listing()
    if listing is not None:
        commits = listing.commits()
        commits.difference_update(jobs.history.graph().order(rev, commits))
        found = jobs.reader.notes_of(listing, commits)
        if not found.missing:
            return found.commits
    notes = jobs.reader.read_notes().commits
    reachable = jobs.history.graph().order(rev, notes.keys())
    return {c: on for c, on in notes.items() if c not in reachable}


class _Branch(NamedTuple):
    commits: tuple[str, ...]  # the orphaned commits of one branch that still exist
    patch: str | None  # the patch id of its whole change since it left REV


def _branch_changes(jobs: Jobs, rev: str, existing: Sequence[str]) -> dict[str, _Branch]:
    """Tip -> its branch and whole change, for the orphaned commits that still exist."""
    branches = _branches(jobs, rev, existing)
    whole = patches.ids_against(jobs.history, {tip: base for tip, (base, _) in branches.items()})
    return {tip: _Branch(branch, whole.get(tip)) for tip, (_, branch) in branches.items()}


def _candidates(
    orphans: Sequence[_Orphan],
    window: Sequence[str],
    existing: Sequence[str],
    ids: Mapping[str, str],
    branches: Mapping[str, _Branch],
) -> dict[int, dict[str, str]]:
    """Orphan position -> {landing commit: how}, from every proof found: `ids` holds the
    patch id of every commit compared, on both sides (one diff-tree | patch-id pipeline)."""
    landed: dict[str, list[str]] = {}
    for commit in window:
        if commit in ids:
            landed.setdefault(ids[commit], []).append(commit)
    own = {commit: ids[commit] for commit in existing if commit in ids}
    found: dict[int, dict[str, str]] = {}

    def add(position: int, patch: str | None, how: str) -> None:
        for target in landed.get(patch or "", ()):
            found.setdefault(position, {}).setdefault(target, how)

    # Rebase: each commit's own change, computed, or as its records stated it.
    for position, orphan in enumerate(orphans):
        stated: list[str | None] = [own[c] for c in orphan.commits if c in own]
        for patch in stated or [orphan.record.patch]:
            add(position, patch, "rebase")
    # Squash: whole branches, recomputed where their commits exist...
    on_commit: dict[str, list[int]] = {}
    for position, orphan in enumerate(orphans):
        for c in orphan.commits:
            on_commit.setdefault(c, []).append(position)
    for branch in branches.values():
        for c in branch.commits:
            for position in on_commit.get(c, ()):
                add(position, branch.patch, "squash")
    # ... and as handovers stated them when the branch was closed.
    for orphan in orphans:
        record = orphan.record
        if record.kind != "handover" or record.branch_patch is None:
            continue
        branch_commits = {*record.branch_commits, record.head, *orphan.commits}
        for c in branch_commits:
            for position in on_commit.get(c, ()):
                add(position, record.branch_patch, "squash")
    return found


def _branches(
    jobs: Jobs, rev: str, existing: Sequence[str]
) -> dict[str, tuple[str, tuple[str, ...]]]:
    """Tip -> (merge base with REV, the branch's commits), for the orphaned commits that
    still exist and are not an ancestor of another one: one `git rev-list --boundary`
    for all of them; `git merge-base` only where a branch meets REV more than once."""
    if not existing:
        return {}
    listing = jobs.history.boundary_walk(existing, rev)
    parents: dict[str, list[str]] = {}
    boundary: set[str] = set()
    for line in listing:
        ids = line.split()
        if line.startswith("-"):
            boundary.add(ids[0][1:])
        elif ids:
            parents[ids[0]] = ids[1:]
    reach: dict[str, tuple[set[str], set[str]]] = {}
    for commit in existing:
        branch: set[str] = set()
        bases: set[str] = set()
        pending = [commit]
        while pending:
            current = pending.pop()
            if current in boundary:
                bases.add(current)
            elif current in parents and current not in branch:
                branch.add(current)
                pending.extend(parents[current])
        reach[commit] = (branch, bases)
    found = {}
    for tip in existing:
        branch, bases = reach[tip]
        if any(tip in reach[other][0] for other in existing if other != tip):
            continue  # an ancestor of another orphaned commit: its branch covers it
        base = next(iter(bases)) if len(bases) == 1 else jobs.history.merge_base(tip, rev)
        if base is not None and branch:
            found[tip] = (base, tuple(branch))
    return found


def _decide(
    orphans: Sequence[_Orphan], candidates: Mapping[int, Mapping[str, str]]
) -> tuple[list[Adoption], list[Ambiguity]]:
    groups: dict[tuple[str, str], list[_Orphan]] = {}
    unsure: dict[tuple[str, ...], list[str]] = {}
    for position, orphan in enumerate(orphans):
        targets = candidates.get(position, {})
        if len(targets) == 1:
            (target, how), *_ = targets.items()
            groups.setdefault((target, how), []).append(orphan)
        elif targets:
            unsure.setdefault(tuple(sorted(targets)), []).append(orphan.record.id)
    adopted = []
    for (target, how), members in sorted(groups.items()):
        members.sort(key=lambda o: (o.record.at, o.listed.summary.position))
        sources = _unique(c for o in members for c in o.commits)
        located = tuple(AttachedRecord(o.record, target, i) for i, o in enumerate(members))
        adopted.append(Adoption(target, how, sources, located))
    ambiguous = [Ambiguity(tuple(ids), targets) for targets, ids in sorted(unsure.items())]
    return adopted, ambiguous


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))


def _write(
    writer: Writer, adopted: Sequence[Adoption], sleep: Callable[[float], None]
) -> tuple[StaleLock, ...]:
    notes: dict[str, list[Record]] = {}
    for adoption in adopted:
        notes.setdefault(adoption.commit, []).extend(loc.record for loc in adoption.records)
    count = sum(len(records) for records in notes.values())
    where = ", ".join(commit[:7] for commit in notes)
    swap = writer.append_many(notes, f"majordomus: adopt {count} records onto {where}", sleep=sleep)
    return swap.stale_locks
