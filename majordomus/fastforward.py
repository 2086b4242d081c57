"""What a merge of fetched notes did (`Merged`), and how its records are counted (`Added`);
and the common merge of a fetch, a fast-forward of the notes ref, checked and counted
through one git process (`GitNotes`, `fast_forward`) rather than libgit2, whose loading
costs more than the whole check.

`fast_forward` answers as `merge.Merger.build` does when that builds a fast-forward:
their notes commit descends from ours, drops no note or record we have and brings no
note entry a merge leaves out. Whatever it is not sure of (a tree git would not write,
an object not here, a longer history than it walks, a commit with two copies of one
note) makes it answer None, and libgit2 merges (merge.Merger), which reads every case.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from majordomus import gitobjects
from majordomus.blobs import NoteBlobs
from majordomus.notes import Note
from majordomus.notestree import NAMELESS, is_note_path
from majordomus.notetoml import NOTE_MAX_BYTES, NoteError
from majordomus.tuples import NamedTuple

Differing = dict[str, tuple[list[str], list[str]]]  # object -> (its blobs in one, in other)
WALK_MAX = 256  # notes commits walked from theirs to find ours; past it, libgit2 walks
_HEX2 = re.compile(r"[0-9a-f]{2}")
# The kind of entry at a note's path (as `notestree.find_kinds` names it), by the kind of
# object its mode names.
_AT_NOTE_PATH = {"blob": "note", "link": "link", "commit": "gitlink", "tree": "tree"}


class Merged(NamedTuple):
    """What one attempt at a merge built (the ref may still move under it)."""

    outcome: str
    records_added: int  # records new here, each counted once
    copies_added: int  # copies new here: a record on three new commits is three
    notes_united: int = 0
    notes_raw: int = 0
    left_out: tuple[tuple[str, str, str], ...] = ()  # (commit, blob, why) of notes not taken


UP_TO_DATE = Merged("up-to-date", 0, 0)


def atoms(blobs: NoteBlobs, blob_ids: Iterable[str]) -> set[tuple[str, ...]]:
    """What notes hold, as identities: their records' ids, other tables by content, and
    the blob id of a text that is not valid TOML (kept whole in `[[unreadable]]`)."""
    found: set[tuple[str, ...]] = set()
    for blob_id in blob_ids:
        parsed = blobs.parse(blob_id)
        if isinstance(parsed, NoteError):
            found.add(("blob", blob_id))
            continue
        for entry in parsed.entries:
            found.add(entry.key)
            kept = entry.table.get("blob")
            if entry.kind == "unreadable" and isinstance(kept, str):
                found.add(("blob", kept))
        found.update(("plain", key, repr(value)) for key, value in parsed.other.items())
    return found


def heads(blobs: NoteBlobs, blob_ids: Iterable[str]) -> dict[str, str]:
    """Record id -> the commit it was written on, of the records these notes hold."""
    found: dict[str, str] = {}
    for blob_id in blob_ids:
        parsed = blobs.parse(blob_id)
        if isinstance(parsed, Note):
            found.update((record.id, record.head) for record in parsed.records)
    return found


class Added:
    """What a merge adds, counted twice: records (ids new here) and copies (a record new
    on a commit). A record a rewrite or `adopt` copied is one record on several commits.

    A copy whose record is here already sits, as a rule, beside the record's first copy,
    on the commit it was written on (`head`): that note is looked at, not every note.
    `notes_before` gives the note blobs on a commit before the merge (None: there were
    no notes before it).
    """

    def __init__(self, blobs: NoteBlobs, notes_before: Callable[[str], list[str]] | None) -> None:
        self._blobs = blobs
        self._notes_before = notes_before
        self._copies = 0
        self._fresh: dict[str, str] = {}  # record id -> its head, of copies new here
        self._had: set[str] = set()  # ids the changed notes held before
        self._changed: set[str] = set()

    def note(self, commit: str, before: Sequence[str], after: Sequence[str]) -> None:
        had = self._blobs.record_ids(before)
        self._had |= had
        self._changed.add(commit)
        for record_id, head in heads(self._blobs, after).items():
            if record_id not in had:
                self._copies += 1
                self._fresh.setdefault(record_id, head)

    def counts(self) -> tuple[int, int]:
        new = {i: head for i, head in self._fresh.items() if i not in self._had}
        if self._notes_before is not None:
            for head in {h for h in new.values() if h not in self._changed}:
                for record_id in self._blobs.record_ids(self._notes_before(head)):
                    new.pop(record_id, None)
        return len(new), self._copies


# One entry of a tree object, as git writes them: a mode git writes, a name, its id.
_TREE_ENTRY = re.compile(rb"(40000|100644|100755|120000|160000) ([^\0]+)\0(.{20})", re.DOTALL)
_KINDS = {b"40000": "tree", b"100644": "blob", b"100755": "blob", b"120000": "link"}
_KINDS[b"160000"] = "commit"


def tree_entries(data: bytes) -> dict[bytes, tuple[bytes, bytes]]:
    """A tree object's entries, raw: name -> (mode, id). UnsureError for a tree git would
    not write (another mode, a name twice, entries out of git's order, bytes left over), as
    `gitobjects.tree_entries` refuses it, read with one scan rather than entry by entry."""
    found = _TREE_ENTRY.findall(data)
    if sum(len(mode) + len(name) for mode, name, _ in found) + 22 * len(found) != len(data):
        raise UnsureError("a tree git would not write")
    keys = [name + b"/" if mode == b"40000" else name for mode, name, _ in found]
    if not all(map(bytes.__lt__, keys, keys[1:])):
        raise UnsureError("a tree git would not write")
    entries = {name: (mode, oid) for mode, name, oid in found}
    if len(entries) != len(found):  # one name as a tree and as a file: both sort apart
        raise UnsureError("a tree git would not write")
    return entries


def _kind(entry: tuple[bytes, bytes] | None) -> tuple[str, str] | None:
    """A raw entry as (the kind of object its mode names, its hex id)."""
    return None if entry is None else (_KINDS[entry[0]], entry[1].hex())


class UnsureError(Exception):
    """Something `GitNotes` does not read as libgit2 would be sure to: libgit2 merges."""


class GitNotes:
    """Notes commits and trees of a plain repository read through one `git cat-file
    --batch`, as `merge.Merger` reads them through libgit2 (UnsureError where it cannot
    be sure to read alike); note blobs through `blobs`, which the same git reads."""

    def __init__(self, batch: gitobjects.Batch, blobs: NoteBlobs) -> None:
        self.batch = batch
        self.blobs = blobs
        self._objects: gitobjects.Objects = {}  # read ahead, not looked at yet
        self._trees: dict[str, dict[bytes, tuple[bytes, bytes]]] = {}
        self._not_files: set[tuple[str, str]] = set()  # (commit, entry): a gitlink, a symlink
        self._fits: dict[str, bool] = {}

    def _read(self, oid: str, kind: str) -> bytes:
        found = self._objects.pop(oid) if oid in self._objects else self._ask([oid])[oid]
        if found is None or found[0] != kind:
            raise UnsureError(oid)  # not here, or not what it should be: libgit2 says which
        return found[1]

    def _ask(self, ids: Sequence[str], over: dict[str, int] | None = None) -> gitobjects.Objects:
        """Objects read by git; with `over`, blobs past the read limit are not kept (their
        sizes are put there)."""
        limit = None if over is None else NOTE_MAX_BYTES
        try:
            return self.batch.read_many(ids, limit, over)
        except gitobjects.UnsureError:
            raise UnsureError(ids[0] if ids else "") from None

    def _read_ahead(self, ids: Iterable[str]) -> None:
        wanted = [oid for oid in dict.fromkeys(ids) if oid not in self._trees]
        if len(wanted) > 1:
            self._objects.update(self._ask(wanted))

    def commit(self, oid: str) -> tuple[str, tuple[str, ...]]:
        """A commit's tree and parents."""
        data = self._read(oid, "commit")
        parents = gitobjects.commit_parents(data)
        first = data.split(b"\n", 1)[0].decode("ascii", "replace")
        if parents is None or not gitobjects.is_object_id(first.removeprefix("tree ")):
            raise UnsureError(oid)
        return first.removeprefix("tree "), parents

    def descends(self, commit: str, ancestor: str) -> bool:
        """Whether `commit` has `ancestor` in its history (never itself, as libgit2 says)."""
        seen = {commit}
        todo = [commit]
        while todo:
            if len(seen) > WALK_MAX:
                raise UnsureError(commit)
            parents = [p for oid in todo for p in self.commit(oid)[1]]
            if ancestor in parents:
                return True
            todo = [p for p in dict.fromkeys(parents) if p not in seen]
            seen.update(todo)
        return False

    def entries(self, tree_id: str) -> dict[bytes, tuple[bytes, bytes]]:
        """A tree's entries: name -> (mode, id), raw (see `tree_entries`)."""
        known = self._trees.get(tree_id)
        if known is None:
            known = self._trees[tree_id] = tree_entries(self._read(tree_id, "tree"))
        return known

    def changed(self, old: str | None, new: str | None) -> set[str]:
        """The annotated objects whose notes differ between two notes trees, as
        `notestree.changed` finds them; the subtrees of one level are read together, and
        only the entries that differ are looked at."""
        found: set[str] = set()
        level = [(old, new, "")]
        while level:
            self._read_ahead(t for pair in level for t in pair[:2] if t is not None)
            deeper = []
            for old_id, new_id, prefix in level:
                before = self.entries(old_id) if old_id is not None else {}
                after = self.entries(new_id) if new_id is not None else {}
                names = {n for n, e in before.items() if after.get(n) != e}
                names.update(n for n, e in after.items() if before.get(n) != e)
                for raw in names:
                    a, b = _kind(before.get(raw)), _kind(after.get(raw))
                    if a == b:  # the same kind of entry (a note either way) of one object
                        continue
                    name = raw.decode("utf-8", "replace")  # a name that is no hex is no note
                    fanned = _HEX2.fullmatch(name) is not None and len(prefix) < 38
                    subtrees: list[str | None] = []
                    for entry in (a, b):
                        if entry is not None and entry[0] == "tree" and fanned:
                            subtrees.append(entry[1])
                        else:
                            subtrees.append(None)
                            if entry is not None:
                                path = prefix + name
                                found.add(path if is_note_path(path) else NAMELESS)
                    if subtrees[0] is not None or subtrees[1] is not None:
                        deeper.append((subtrees[0], subtrees[1], prefix + name))
            level = deeper
        return found

    def find_kinds(self, tree_id: str, rest: str) -> list[tuple[str, str]]:
        """Every entry at a path of the note for `rest`, as `notestree.find_kinds` finds
        them: (its id, what it is)."""
        found = []
        while True:
            entries = self.entries(tree_id)
            flat = _kind(entries.get(rest.encode("ascii", "replace")))
            if flat is not None:
                found.append((flat[1], _AT_NOTE_PATH[flat[0]]))
            sub = _kind(entries.get(rest[:2].encode("ascii", "replace"))) if len(rest) > 2 else None
            if sub is None or sub[0] != "tree":
                return found
            tree_id, rest = sub[1], rest[2:]

    def _found(self, tree_id: str, name: str) -> list[str]:
        """The note entries for `name` (as `merge.Merger._found`): files, symlinks and
        gitlinks, the last two noted as no files."""
        found = []
        for oid, kind in self.find_kinds(tree_id, name):
            if kind == "tree":
                continue
            found.append(oid)
            if kind != "note":
                self._not_files.add((name, oid))
        return found

    def differing(self, tree: str, other: str) -> Differing:
        """Annotated object -> (its note blobs in `tree`, in `other`), for the notes that
        differ; UnsureError for two notes of one object (a tree written badly)."""
        pairs: Differing = {}
        for name in self.changed(tree, other):
            mine, theirs = self._found(tree, name), self._found(other, name)
            if len(mine) > 1 or len(theirs) > 1:
                raise UnsureError(name)
            pairs[name] = (mine, theirs)
        return pairs

    def fit(self, commit: str, blob_ids: Sequence[str]) -> list[str]:
        """The ones of a commit's note entries a record can be read from (as
        `merge.Merger._fit`): blobs within the read limit, read ahead for the parse."""
        unread = [b for b in blob_ids if b not in self._fits and (commit, b) not in self._not_files]
        if unread:
            over: dict[str, int] = {}
            read = self._ask(unread, over)
            for blob_id, found in read.items():
                if found is None:
                    raise UnsureError(blob_id)  # missing: libgit2 says so, or fetches it
                # What a merge leaves out: not a blob, or a blob over the read limit.
                fits = found[0] == "blob" and blob_id not in over
                self._fits[blob_id] = fits
                if fits and not self.blobs.is_parsed(blob_id):
                    self.blobs.prefetch([blob_id], read)
        return [b for b in blob_ids if (commit, b) not in self._not_files and self._fits[b]]

    def prefetch_fits(self, differing: Differing) -> None:
        """Every blob of these notes checked and read ahead, in one pipelined request."""
        wanted = [
            blob
            for commit, (mine, theirs) in differing.items()
            for blob in (*mine, *theirs)
            if blob not in self._fits and (commit, blob) not in self._not_files
        ]
        if wanted:
            self.fit("", list(dict.fromkeys(wanted)))


def fast_forward(notes: GitNotes, ours: str, theirs: str) -> Merged | None:
    """What moving the notes ref from our notes commit to theirs adds, when the move is the
    fast-forward `merge.Merger.build` makes (or they are one commit: up to date); None when
    a merge must build a commit instead; UnsureError where libgit2 must look."""
    our_tree = notes.commit(ours)[0]
    their_tree = notes.commit(theirs)[0]
    if ours == theirs:
        return UP_TO_DATE
    if not notes.descends(theirs, ours):
        return None
    differing = notes.differing(our_tree, their_tree)
    notes.prefetch_fits(differing)
    for commit, (mine, their_blobs) in differing.items():
        # Theirs brings no note entry a merge does not take (Merger._brings_unfit), so
        # what is parsed below is only what a read reads: no gitlink, nothing oversized.
        fresh = [blob for blob in their_blobs if blob not in mine]
        if len(notes.fit(commit, fresh)) < len(fresh):
            return None
        # And lacks nothing we have (Merger.lacks): a note, a record or a text.
        have = notes.fit(commit, [blob for blob in mine if blob not in their_blobs])
        if have and (
            not their_blobs or not atoms(notes.blobs, have) <= atoms(notes.blobs, their_blobs)
        ):
            return None

    def notes_before(head: str) -> list[str]:
        return [oid for oid, kind in notes.find_kinds(our_tree, head) if kind == "note"]

    added = Added(notes.blobs, notes_before)
    for commit, (previous, blobs) in differing.items():
        if blobs and blobs != previous:
            added.note(commit, previous, blobs)
    return Merged("fast-forward", *added.counts())
