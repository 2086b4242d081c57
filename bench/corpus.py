"""The benchmark data set: which commits carry notes, and the TOML records in them.

Pure and deterministic (seeded): the same shape always gives the same records,
so a cached repository is keyed by the shape, GENERATOR_VERSION and the foreign
notes it draws from the shared corpus (fixtures/notes/): what other writers
leave beside majordomus' records (unknown kinds), appended to one note in
FOREIGN_EVERY, as a union merge or a concatenating rewrite would.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import hashlib
import random
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

# Bump whenever the generated repository changes in any way: it keys the cache.
GENERATOR_VERSION = "3"

CORPUS_NOTES = Path(__file__).resolve().parent.parent / "fixtures" / "notes"
FOREIGN_EVERY = 25  # one note in this many also carries a foreign note of the corpus

EPOCH = datetime.datetime(2024, 1, 8, 9, 0, tzinfo=datetime.UTC)
COMMIT_SPACING_S = 60  # one commit a minute; records land within their commit's minute

AUTHORS = (
    "Ada Lovelace <ada@example.com>",
    "Grace Hopper <grace@example.com>",
    "Edsger Dijkstra <edsger@example.com>",
    "Barbara Liskov <barbara@example.com>",
    "Ken Thompson <ken@example.com>",
    "Frances Allen <frances@example.com>",
)

_PROSE = (
    "retry loop re-enters before the ack under concurrent enqueues; the worker pool "
    "drains slowly when the broker restarts, and the lease expires mid-batch so two "
    "consumers process the same message; reproduced with fifty clients against the "
    "staging cluster, flaky only when the cache is cold; bisected to the change that "
    "moved the timeout into the scheduler; the lock is released in the finally block "
    "but the connection is returned to the pool first; stack trace points at the "
    "serializer, heap grows by forty megabytes per minute; disabling compression hides "
    "it; the test passes alone and fails in the full suite after the fixture reuses "
    "the socket; next suspect is the clock skew between the two hosts"
)
_WORDS = tuple(_PROSE.split())

TomlValue = int | str | datetime.datetime | tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class Shape:
    """How big a benchmark repository is and where its interesting handover sits."""

    commits: int
    notes: int
    tasks: int
    handover_distance: int  # commits between the benchmark task's open handover and HEAD

    @property
    def key(self) -> str:
        foreign = hashlib.sha256("\0".join(foreign_notes()).encode()).hexdigest()[:8]
        return f"g{GENERATOR_VERSION}-{foreign}-c{self.commits}-n{self.notes}-t{self.tasks}"

    @property
    def handover_index(self) -> int:
        return self.commits - 1 - self.handover_distance


def shape_for(commits: int) -> Shape:
    """The standard shape: a note on one commit in ten, 20 tasks, the handover half-way."""
    if commits < 200:
        raise ValueError(f"a benchmark repository needs at least 200 commits, not {commits}")
    return Shape(commits=commits, notes=commits // 10, tasks=20, handover_distance=commits // 2)


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """One record of one kind; `head` is filled in when its commit id is known."""

    kind: str
    fields: tuple[tuple[str, TomlValue], ...]  # in stored order, `head` left out

    def value(self, key: str) -> TomlValue:
        return dict(self.fields)[key]


@dataclasses.dataclass(frozen=True, slots=True)
class PlannedNote:
    """The records one commit's note will hold, by commit index (0 = root commit)."""

    index: int
    records: tuple[Record, ...]
    foreign: str = ""  # a foreign note of the corpus appended after the records, or ""


@dataclasses.dataclass(frozen=True, slots=True)
class Expectation:
    """What a correct reader must answer about the benchmark task."""

    task: str
    task_records: int
    last_checkpoint: str
    open_handover: str
    handover_index: int
    ahead: int


@dataclasses.dataclass(frozen=True, slots=True)
class Plan:
    shape: Shape
    notes: tuple[PlannedNote, ...]
    expectation: Expectation


@functools.cache
def foreign_notes() -> tuple[str, ...]:
    """The corpus notes that hold only what other writers leave: no record, nothing invalid.

    Valid TOML made of arrays of tables, so appended to a note it stays one valid
    document whose records are unchanged (the data set stays spec-valid).
    """
    manifest = tomllib.loads((CORPUS_NOTES / "manifest.toml").read_text(encoding="utf-8"))
    texts = []
    for note in manifest["note"]:
        if note.get("records") or note.get("invalid", 0) or note.get("on", "commit") != "commit":
            continue
        text = (CORPUS_NOTES / note["file"]).read_text(encoding="utf-8")
        if text.strip():
            texts.append(text)
    if not texts:
        raise RuntimeError(f"{CORPUS_NOTES}/manifest.toml names no foreign note to draw from")
    return tuple(texts)


def commit_time(index: int) -> datetime.datetime:
    return EPOCH + datetime.timedelta(seconds=index * COMMIT_SPACING_S)


def plan(shape: Shape) -> Plan:
    """Every note of the data set, in commit order, and the answers about the benchmark task."""
    rng = random.Random(f"majordomus-bench/{shape.key}")
    task_ids = _task_ids(rng, shape.tasks)
    positions = _note_positions(rng, shape)
    owners = _assign_tasks(rng, positions, task_ids, shape.handover_index)
    writer = _TaskWriter(rng, task_ids[0], shape.handover_index)
    foreign = foreign_notes()
    notes = tuple(
        PlannedNote(
            index,
            writer.records_for(index, owner, _next_same(owners, positions, n)),
            foreign[(n // FOREIGN_EVERY) % len(foreign)] if n % FOREIGN_EVERY == 1 else "",
        )
        for n, (index, owner) in enumerate(zip(positions, owners, strict=True))
    )
    return Plan(shape=shape, notes=notes, expectation=writer.expectation(shape))


def _task_ids(rng: random.Random, count: int) -> tuple[str, ...]:
    ids: list[str] = []
    while len(ids) < count:
        candidate = f"t-{rng.getrandbits(48):012x}"
        if candidate not in ids:
            ids.append(candidate)
    return tuple(ids)


def _note_positions(rng: random.Random, shape: Shape) -> tuple[int, ...]:
    others = [i for i in range(shape.commits) if i != shape.handover_index]
    chosen = rng.sample(others, shape.notes - 1)
    return tuple(sorted([*chosen, shape.handover_index]))


def _assign_tasks(
    rng: random.Random, positions: Sequence[int], task_ids: Sequence[str], handover_index: int
) -> tuple[str, ...]:
    # The benchmark task is the first to appear, so its task record comes before the handover.
    owners = [rng.choice(task_ids) for _ in positions]
    owners[0] = task_ids[0]
    owners[positions.index(handover_index)] = task_ids[0]
    return tuple(owners)


def _next_same(owners: Sequence[str], positions: Sequence[int], n: int) -> int | None:
    """The commit index of the next note of the same task, if any."""
    for later in range(n + 1, len(owners)):
        if owners[later] == owners[n]:
            return positions[later]
    return None


class _TaskWriter:
    """Plays each task's session forward: task record, checkpoints, handovers, resumes."""

    def __init__(self, rng: random.Random, bench_task: str, handover_index: int) -> None:
        self._rng = rng
        self._bench_task = bench_task
        self._handover_index = handover_index
        self._seen: set[str] = set()
        self._open: dict[str, list[tuple[str, int]]] = {}  # task -> open (handover id, index)
        self._sessions: dict[str, int] = {}
        self._ids: set[str] = set()
        self._bench_records = 0
        self._bench_checkpoint = ""
        self._bench_handover = ""

    def records_for(self, index: int, task: str, next_index: int | None) -> tuple[Record, ...]:
        kinds = self._kinds(index, task, next_index)
        at = commit_time(index) + datetime.timedelta(seconds=self._rng.randrange(0, 50))
        records = tuple(
            self._record(kind, task, index, at + datetime.timedelta(seconds=n))
            for n, kind in enumerate(kinds)
        )
        if task == self._bench_task:
            self._bench_records += len(records)
        return records

    def _kinds(self, index: int, task: str, next_index: int | None) -> tuple[str, ...]:
        if task not in self._seen:
            self._seen.add(task)
            return ("task", "checkpoint")
        if task == self._bench_task:
            return self._bench_kinds(index, next_index)
        roll = self._rng.random()
        if self._open.get(task) and roll < 0.5:
            return ("resume", "checkpoint") if roll < 0.2 else ("resume",)
        return ("handover",) if roll > 0.93 else ("checkpoint",)

    def _bench_kinds(self, index: int, next_index: int | None) -> tuple[str, ...]:
        # Before the benchmark handover every handover of the task is resumed by its
        # next note; after it the task only checkpoints, so exactly one stays open.
        if index == self._handover_index:
            return ("handover",)
        if index > self._handover_index:
            return ("checkpoint",)
        if self._open.get(self._bench_task):
            return ("resume", "checkpoint")
        before_handover = next_index is not None and next_index < self._handover_index
        if index < self._handover_index and before_handover and self._rng.random() > 0.93:
            return ("handover",)
        return ("checkpoint",)

    def _new_id(self) -> str:
        while True:
            candidate = f"c-{self._rng.getrandbits(64):016x}"
            if candidate not in self._ids:
                self._ids.add(candidate)
                return candidate

    def _record(self, kind: str, task: str, index: int, at: datetime.datetime) -> Record:
        record_id = self._new_id()
        common: list[tuple[str, TomlValue]] = [
            ("v", 1),
            ("id", record_id),
            ("task", task),
            ("at", at),
            ("author", self._rng.choice(AUTHORS)),
        ]
        if self._rng.random() < 0.3:
            common.append(("session", f"session-{task[2:8]}-{self._sessions.get(task, 0)}"))
        record = Record(kind, (*common, *self._kind_fields(kind, task, index, record_id)))
        if task == self._bench_task and kind == "checkpoint":
            self._bench_checkpoint = record_id
        return record

    def _kind_fields(
        self, kind: str, task: str, index: int, record_id: str
    ) -> tuple[tuple[str, TomlValue], ...]:
        if kind == "task":
            return (("title", _text(self._rng, 20, 70)),)
        if kind == "checkpoint":
            return (("body", _text(self._rng, 40, 390)),)
        if kind == "handover":
            self._open.setdefault(task, []).append((record_id, index))
            self._sessions[task] = self._sessions.get(task, 0) + 1
            if task == self._bench_task:
                self._bench_handover = record_id
            return tuple((key, _text(self._rng, 60, 700)) for key in ("objective", "state", "next"))
        return self._resume_fields(task, index)

    def _resume_fields(self, task: str, index: int) -> tuple[tuple[str, TomlValue], ...]:
        open_handovers = self._open.pop(task)
        newest_id, newest_index = open_handovers[-1]
        return (
            ("handover", newest_id),
            ("label", "advanced" if index > newest_index else "current"),
            ("ahead", index - newest_index),
            ("behind", 0),
            ("supersedes", tuple(handover_id for handover_id, _ in open_handovers[:-1])),
        )

    def expectation(self, shape: Shape) -> Expectation:
        return Expectation(
            task=self._bench_task,
            task_records=self._bench_records,
            last_checkpoint=self._bench_checkpoint,
            open_handover=self._bench_handover,
            handover_index=shape.handover_index,
            ahead=shape.handover_distance,
        )


def _text(rng: random.Random, low: int, high: int) -> str:
    """Prose between low and high characters; now and then a line break or quoted word."""
    target = rng.randrange(low, high)
    words: list[str] = []
    length = 0
    while length < target:
        word = rng.choice(_WORDS)
        roll = rng.random()
        if roll < 0.01:
            word = f'"{word}"'
        elif roll < 0.02:
            word = f"{word}\n"
        words.append(word)
        length += len(word) + 1
    return " ".join(words).replace("\n ", "\n").strip()


def render_note(records: Sequence[Record], head: str, foreign: str = "") -> str:
    """The note text: arrays of tables, one per record, `head` after `task` as stored,
    then the foreign note (if any) after a blank line, as git concatenates notes."""
    text = "\n".join(_render_record(record, head) for record in records)
    return text + "\n" + foreign if foreign else text


def _render_record(record: Record, head: str) -> str:
    lines = [f"[[{record.kind}]]"]
    for key, value in record.fields:
        lines.append(f"{key} = {toml_value(value)}")
        if key == "task":
            lines.append(f"head = {toml_value(head)}")
    return "\n".join(lines) + "\n"


def toml_value(value: TomlValue) -> str:
    if isinstance(value, bool):
        raise TypeError("booleans are not part of the note format")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, datetime.datetime):
        return value.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if isinstance(value, tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    return _toml_string(value)


_ESCAPES: Mapping[str, str] = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _toml_string(text: str) -> str:
    return '"' + "".join(_escape_char(char) for char in text) + '"'


def _escape_char(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    if ord(char) < 0x20 or ord(char) == 0x7F:
        return f"\\u{ord(char):04x}"
    return char


def iter_records(notes: Sequence[PlannedNote]) -> Iterator[Record]:
    for note in notes:
        yield from note.records
