"""Plain values the package passes around: notes as read, records as listed, and what each
command found or did. No git here, so the renderer and the tests import them freely."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Generic, TypeVar, overload

from majordomus.records import UNSIGNED, Divergence, Record, Signature, Summary
from majordomus.tuples import NamedTuple

# ---- Notes as a read finds them, and what a write did ------------------------------------


class UnreadableNote(NamedTuple):
    """A note (or a whole notes ref) that could not be read, and why."""

    commit: str
    ref: str
    reason: str


class NotesOn(NamedTuple):
    """The readable notes on one object, united across refs and summarised."""

    blobs: tuple[str, ...]  # distinct note blobs (one per ref that differs)
    summaries: tuple[Summary, ...]
    invalid: int


class NoteSet(NamedTuple):
    """Every note of the local and remote-tracking refs, united per annotated object."""

    commits: Mapping[str, NotesOn]
    unreadable: tuple[UnreadableNote, ...]
    refs: Mapping[str, str]  # ref name -> target it was read at
    missing: int = 0  # note objects not in this clone (yet): an answer not to cache

    @property
    def invalid(self) -> int:
        return len(self.unreadable) + sum(a.invalid for a in self.commits.values())


class WriteReport(NamedTuple):
    notes_commit: str
    attempts: int
    stale_locks: tuple[StaleLock, ...]
    parent: str | None  # the notes commit the write was built on
    blob: str  # the note blob now on the commit
    position: int  # of the first record written, among the note's records
    # Whether the records the note held keep their positions (the new ones come after
    # them all; a record of a kind the note holds earlier joins that kind's records).
    in_place: bool = True
    # Whether every record the note held is of the written record's task (no other
    # task's view names the note).
    alone: bool = True
    # The blob the note on the commit was before the write (None: it had none, or two).
    replaced: str | None = None


# ---- The notes ref -----------------------------------------------------------------------


class StaleLock(NamedTuple):
    path: str
    age_s: int


class Swap(NamedTuple):
    """Where a compare-and-swap left the notes ref."""

    target: str
    parent: str | None  # the value it was built on
    attempts: int
    stale_locks: tuple[StaleLock, ...]


# ---- Fetched notes united ----------------------------------------------------------------


class MergeReport(NamedTuple):
    """What uniting fetched records into the local notes ref did."""

    outcome: str  # up-to-date, created, fast-forward, merged, restored (removed here by hand)
    notes_commit: str
    records_added: int  # records new here, each counted once
    copies_added: int  # copies new here (a record copied onto other commits has several)
    notes_united: int  # notes present on both sides, united record by record
    notes_raw: int  # of those, notes kept as concatenated text (one side is not valid TOML)
    attempts: int
    # (commit, blob, why) of their notes no record can be read from (over the read limit,
    # not a blob): not taken, so not published from here; the remote-tracking ref keeps them.
    left_out: tuple[tuple[str, str, str], ...] = ()


# ---- Records as a read lists them --------------------------------------------------------


class AttachedRecord(NamedTuple):
    """A record, the commit its note is attached to now, and its place in that note."""

    record: Record
    commit: str
    position: int  # order of the record within that commit's note
    signature: Signature | None = None  # set by the read that shows it (`verifying`)

    @property
    def signed(self) -> Signature:
        """Its signature status; unsigned when no read set one."""
        return self.signature or UNSIGNED


class RecordText(NamedTuple):
    """A record as its JSON text (`jsontext.record_text`, kept by the document cache) and the
    commit its note is attached to now: what `history --json` shows of it, without the
    record itself."""

    text: str
    commit: str


class Listed(NamedTuple):
    """A record as the index knows it, without its text: its summary and its commit."""

    summary: Summary
    commit: str

    @property
    def at(self) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.summary.at, datetime.UTC)


# ---- What each command found or did ------------------------------------------------------


class TaskCreated(NamedTuple):
    record: AttachedRecord
    stale_locks: tuple[StaleLock, ...]


class TaskSummary(NamedTuple):
    task: str
    title: str | None
    last_at: datetime.datetime
    checkpoint_age_s: int | None
    open_handover: AttachedRecord | None
    current: bool
    skew_s: int | None = None  # a newer checkpoint is dated this far in the future


class CheckpointResult(NamedTuple):
    record: AttachedRecord
    previous_age_s: int | None
    stale_locks: tuple[StaleLock, ...]
    previous_skew_s: int | None = None  # the previous one is dated this far after this one


class HandoverResult(NamedTuple):
    record: AttachedRecord
    dirty: bool
    stale_locks: tuple[StaleLock, ...]


class ResumeResult(NamedTuple):
    task: str
    handover: AttachedRecord | None
    divergence: Divergence | None
    recorded: AttachedRecord | None
    open_handovers: int
    older: tuple[AttachedRecord, ...]  # the other open handovers, superseded with it, newest first
    stale_locks: tuple[StaleLock, ...]
    checkpoints_since: tuple[AttachedRecord, ...] = ()  # when nothing is open, newest first
    implied: bool = False  # the task was taken from the one open handover reachable from HEAD
    untrusted: tuple[AttachedRecord, ...] = ()  # under trust = "signed": not verified, not shown

    @property
    def superseded(self) -> tuple[str, ...]:
        return tuple(loc.record.id for loc in self.older)


class HistoryEntry(NamedTuple):
    located: AttachedRecord | RecordText  # RecordText only in a history read to be shown as JSON
    reachable: bool
    divergence: Divergence | None  # handovers only
    resolved: bool | None  # handovers only


_Source = TypeVar("_Source")
_Made = TypeVar("_Made")


class Made(Sequence[_Made], Generic[_Source, _Made]):
    """Items made from their sources when asked for, a slice at a time, and not kept: a
    command that shows 100,000 records holds the records of the part it writes, never
    all of them at once."""

    def __init__(
        self, sources: Sequence[_Source], make: Callable[[Sequence[_Source]], list[_Made]]
    ) -> None:
        self._sources = sources
        self._make = make

    def __len__(self) -> int:
        return len(self._sources)

    @overload
    def __getitem__(self, index: int) -> _Made: ...

    @overload
    def __getitem__(self, index: slice) -> list[_Made]: ...

    def __getitem__(self, index: int | slice) -> _Made | list[_Made]:
        if isinstance(index, slice):
            return self._make(self._sources[index])
        return self._make([self._sources[index]])[0]

    def __iter__(self) -> Iterator[_Made]:
        """Every item, made a part of MADE_PART at a time (not one by one)."""
        for start in range(0, len(self._sources), MADE_PART):
            yield from self._make(self._sources[start : start + MADE_PART])


MADE_PART = 1000


class HistoryResult(NamedTuple):
    rev: str
    task: str | None
    entries: Sequence[HistoryEntry]  # made a part at a time (`Made`) by `history`
    invalid: int
    hidden: int


class DrawnLine(NamedTuple):
    """One line of git's drawing of a history (`history --graph`): its graph (git's
    colours in it when asked for), and, on a line that carries one of a commit's lines,
    the commit and which of its lines (0: the commit's own line, where git draws `*`)."""

    graph: str
    commit: str | None
    line: int | None


class GraphRecord(NamedTuple):
    """A record drawn on its commit: what the index knows of it, and a handover's label."""

    summary: Summary
    divergence: Divergence | None  # handovers only
    resolved: bool | None  # handovers only


class GraphResult(NamedTuple):
    rev: str
    task: str | None
    lines: tuple[DrawnLine, ...]
    records: Mapping[str, tuple[GraphRecord, ...]]  # by commit, newest first
    left_out: int  # records on commits the drawing does not show (--limit, an empty root)
    hidden: int  # records on commits not reachable from REV (without --all)
    missing: int  # records on commits not in this clone (with --all)
    invalid: int


class ShowResult(NamedTuple):
    commit: str
    records: tuple[AttachedRecord, ...]
    invalid: int
    missing: bool = False  # no such commit in this clone: what the notes hold for the id


class CheckResult(NamedTuple):
    task: str
    title: str | None
    profile: str
    interval_s: int
    last_checkpoint: AttachedRecord | None
    age_s: int
    stale: bool
    open_handover: AttachedRecord | None
    skewed: AttachedRecord | None = None  # a newer checkpoint dated in the future, not counted
    skew_s: int | None = None  # how far in the future it is dated
    undated: bool = False  # every record of the task is dated in the future: age unknown


class Finding(NamedTuple):
    """One line of `doctor`: what was checked, whether it is healthy, and what to do.
    A `note` is healthy for this clone as it is used (reading) and says what writing
    records would need."""

    topic: str
    healthy: bool
    detail: str
    note: bool = False


class SyncResult(NamedTuple):
    fetch: FetchReport
    push: PushReport


# ---- Remotes: fetch, push, init ----------------------------------------------------------


class FetchReport(NamedTuple):
    remote: str
    remote_commit: str | None  # None: the remote has no records yet
    merge: MergeReport | None


class PushReport(NamedTuple):
    remote: str
    outcome: str  # pushed, up-to-date, nothing (no records here), skipped (inside majordomus)
    notes_commit: str | None
    attempts: int
    fetches: tuple[FetchReport, ...]  # merges made when the remote had moved


class Setting(NamedTuple):
    key: str
    value: str
    state: str  # added, already, kept (the user's own value was left alone: see note)
    note: str = ""


class HookReport(NamedTuple):
    path: str
    state: str  # installed, updated, already, manual
    reason: str = ""  # why it is manual
    line: str = ""  # what to add by hand when it is manual


class InitReport(NamedTuple):
    remote: str | None
    settings: tuple[Setting, ...]
    hook: HookReport
    no_remote: str = ""  # why no fetch refspec was configured


# ---- The context block ----------------------------------------------------------------------

# Its budget in characters: here, not in `context`, so that the command line states them
# in its help without loading git.
CONTEXT_DEFAULT_CHARS = 4000
CONTEXT_MIN_CHARS = 200
CONTEXT_MAX_CHARS = 100_000


# ---- Adoption after a squash or rebase merge ---------------------------------------------


DEFAULT_DAYS = 90  # how far back adoption looks, by default


class Adoption(NamedTuple):
    """Records copied (or, on a dry run, to be copied) onto one landing commit."""

    commit: str  # where the change landed
    how: str  # "squash" or "rebase"
    sources: tuple[str, ...]  # the orphaned commits the records sat on
    records: tuple[AttachedRecord, ...]  # as they read on `commit` afterwards


class Ambiguity(NamedTuple):
    """Records whose change matches several commits: adopted onto none."""

    records: tuple[str, ...]
    candidates: tuple[str, ...]


class AdoptResult(NamedTuple):
    rev: str
    dry_run: bool
    adopted: tuple[Adoption, ...]
    ambiguous: tuple[Ambiguity, ...]
    orphaned: int  # records with no copy on a commit reachable from REV
    considered: int  # of those, written within the window
    compared: int  # commits of REV whose patch ids were compared
    stale_locks: tuple[StaleLock, ...]
    days: int = DEFAULT_DAYS
    invalid: int = 0  # unreadable notes and invalid records, skipped as every read skips them


# ---- Agent set-up ------------------------------------------------------------------------


class Change(NamedTuple):
    """What `agent install` did, or would do with --dry-run."""

    agent: str
    scope: str
    path: Path
    changed: bool
    written: bool
    events: tuple[str, ...]  # the events that carry a majordomus entry afterwards
    command: str
    diff: str
    excluded: str | None  # the line added to .git/info/exclude, if any
    warnings: tuple[str, ...]


class AgentFinding(NamedTuple):
    healthy: bool
    detail: str
    note: bool = False  # healthy, with advice (doctor's `note`)


# ---- Records searched (grep) ---------------------------------------------------------------


class MatchedLine(NamedTuple):
    """A line of a field that matched: its number in the field (from 1), its text (no
    newline: a field is matched line by line), and where the pattern matched in it."""

    number: int
    text: str
    spans: tuple[tuple[int, int], ...]  # (start, end) of each non-empty match


class MatchedField(NamedTuple):
    field: str  # title, body, objective, state, next, session
    lines: tuple[MatchedLine, ...]


class GrepHit(NamedTuple):
    """A record that matched: as `history --json` shows it (for an answer in JSON), what
    its header names, and its matched fields in the order a record shows them."""

    located: AttachedRecord | RecordText | None  # None in an answer shown as text
    commit: str
    kind: str
    id: str
    task: str
    author: str
    at: datetime.datetime
    signature: Signature | None
    matched: tuple[MatchedField, ...]


class GrepResult(NamedTuple):
    pattern: str
    rev: str  # HEAD, which reachability is read from
    task: str | None
    hits: tuple[GrepHit, ...]  # newest first
    invalid: int
    hidden: int  # records that matched on commits not reachable from HEAD, not shown
    untrusted: int | None  # not verified, so not searched (--trusted, trust = "signed"); else None
