"""Notes merge: fetched records united into the local notes by record id, nothing dropped.

A note on one side only is taken as it is; a note on both sides becomes the union
of their records in canonical form; a note that is not valid TOML keeps its text,
byte for byte. What a merge did is returned, for the caller to report.

A note entry that no record can be read from (a gitlink or a symlink, an object that
is not a blob, a blob over the read limit) is never taken: the local notes keep what
they had for that commit, so a note that size never joins readable records, and this
clone does not publish it onwards. Leaving it out drops no record; the merge reports it.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from typing import Any

import pygit2

from majordomus import notestree
from majordomus.blobs import NoteBlobs, UnfitNoteError, not_a_blob, oversized
from majordomus.fastforward import UP_TO_DATE, Added, Merged, atoms, heads
from majordomus.notes import Entry, Note, dump_note, dump_tables, parse_note, union
from majordomus.notetoml import NOTE_MAX_BYTES, MissingObjectError, NoteError

Copies = Callable[[pygit2.Tree | None], dict[str, list[str]]]
Differing = dict[str, tuple[list[str], list[str]]]  # object -> (its blobs in one, in other)


class Merger:
    """Builds the notes commit that unites `theirs` into the local notes ref.

    `copies` lists the note blobs of a notes tree (annotated object -> blob ids);
    `signature` signs the notes commit, which is bookkeeping, not part of any record.
    """

    def __init__(
        self,
        repo: pygit2.Repository,
        blobs: NoteBlobs,
        copies: Copies,
        signature: Callable[[], pygit2.Signature],
        descends: Callable[[str, str], bool],
    ) -> None:
        self.repo = repo
        self.blobs = blobs
        self.copies = copies
        self.signature = signature
        self.descends = descends  # whether a notes commit has another in its history
        self._differing: dict[tuple[pygit2.Oid, pygit2.Oid], Differing] = {}
        self._not_files: set[tuple[str, str]] = set()  # (commit, entry): a gitlink, a symlink
        self._unfit: dict[str, str] = {}  # entry -> why no record can be read from it
        self._left_out: dict[tuple[str, str], str] = {}  # what the last build did not take
        self._fits: set[str] = set()  # entries found to be blobs a record can be read from

    def build(
        self,
        theirs: pygit2.Commit,
        message: str,
        ours_tree: pygit2.Tree | None,
        parents: list[pygit2.Oid],
    ) -> tuple[pygit2.Oid | None, Merged]:
        """The notes commit to move the ref to (None: nothing to move), and what it does."""
        self._left_out = {}
        their_tree = notestree.tree(self.repo, theirs.tree_id)
        if not parents:
            return self._created(theirs, their_tree, message)
        assert ours_tree is not None
        ours = parents[0]
        if ours == theirs.id:
            return None, UP_TO_DATE
        if self.descends(str(ours), str(theirs.id)):
            # Their ref is in our history: what it has and we lack was removed here
            # by hand (git notes prune/remove), which holds in this clone only until
            # a fetch from a remote that still has it brings it back.
            if not self.lacks(ours_tree, their_tree):
                return None, UP_TO_DATE
            tree_id, added, united, raw = self.merged_tree(ours_tree, their_tree)
            if tree_id == ours_tree.id:
                return None, UP_TO_DATE
            commit = self._commit(message, tree_id, [ours])
            return commit, Merged("restored", *added, united, raw, self.left_out())
        if (
            self.descends(str(theirs.id), str(ours))
            and not self.lacks(their_tree, ours_tree)
            and not self._brings_unfit(ours_tree, their_tree)
        ):
            return theirs.id, Merged("fast-forward", *self.records_added(ours_tree, their_tree))
        # Diverged, or their ref descends from ours but dropped records we have, or
        # brings notes that are not taken: never a fast-forward over a deletion or onto
        # what this clone would not publish, a union instead.
        tree_id, added, united, raw = self.merged_tree(ours_tree, their_tree)
        commit = self._commit(message, tree_id, [ours, theirs.id])
        return commit, Merged("merged", *added, united, raw, self.left_out())

    def _created(
        self, theirs: pygit2.Commit, their_tree: pygit2.Tree, message: str
    ) -> tuple[pygit2.Oid, Merged]:
        """The first records here: their notes commit itself, unless it holds notes that
        are not taken; then a commit on top of it of the notes that are."""
        added = self.records_added(None, their_tree)  # parses: most are then known to fit
        notes: dict[str, pygit2.Oid] = {}
        for name, blob, is_file in notestree.walk_files(self.repo, their_tree):
            if not is_file:
                self._not_files.add((name, blob))
            if self._fit(name, [blob], report=True):
                notes[name] = pygit2.Oid(hex=blob)
        if not self._left_out:
            return theirs.id, Merged("created", *added)
        empty = self.repo.TreeBuilder().write()
        tree_id = notestree.insert_many(self.repo, None, notes) if notes else empty
        commit = self._commit(message, tree_id, [theirs.id])
        return commit, Merged("created", *added, left_out=self.left_out())

    def left_out(self) -> tuple[tuple[str, str, str], ...]:
        """The notes the last build did not take: (commit, blob, why), by commit."""
        return tuple((c, b, why) for (c, b), why in sorted(self._left_out.items()))

    def _fit(self, commit: str, blob_ids: Sequence[str], *, report: bool = False) -> list[str]:
        """The ones of a commit's note entries a record can be read from; with `report`,
        the others are noted as left out."""
        fit = []
        for blob_id in blob_ids:
            why = self._unfit_reason(commit, blob_id)
            if why is None:
                fit.append(blob_id)
            elif report:
                self._left_out[commit, blob_id] = why
        return fit

    def _unfit_reason(self, commit: str, blob_id: str) -> str | None:
        if (commit, blob_id) in self._not_files:
            return f"note entry {blob_id[:12]} is a gitlink or a symlink, not a note blob"
        known = self._unfit.get(blob_id)
        if known is not None or blob_id in self._fits:
            return known
        if self.blobs.is_parsed(blob_id):  # parsed already: no need to ask for its header
            parsed = self.blobs.parse(blob_id)
            if not isinstance(parsed, UnfitNoteError):
                return None
        try:
            kind, size = self.repo.odb.read_header(blob_id)
        except KeyError:
            raise MissingObjectError(blob_id) from None
        error: UnfitNoteError | None = None
        if kind != pygit2.enums.ObjectType.BLOB:
            error = not_a_blob(blob_id)
        elif size > NOTE_MAX_BYTES:
            error = oversized(blob_id, size)
        if error is None:
            self._fits.add(blob_id)
            return None
        self._unfit[blob_id] = str(error)
        return str(error)

    def _brings_unfit(self, ours: pygit2.Tree, theirs: pygit2.Tree) -> bool:
        """Whether `theirs` holds note entries `ours` has not that a merge does not take."""
        for commit, (have, blobs) in self.differing(ours, theirs).items():
            fresh = [blob for blob in blobs if blob not in have]
            if len(self._fit(commit, fresh)) < len(fresh):
                return True
        return False

    def _commit(self, message: str, tree_id: pygit2.Oid, parents: list[pygit2.Oid]) -> pygit2.Oid:
        signature = self.signature()
        return self.repo.create_commit(None, signature, signature, message + "\n", tree_id, parents)

    def differing(self, tree: pygit2.Tree | None, other: pygit2.Tree) -> Differing:
        """Annotated object -> (its note blobs in `tree`, in `other`), for the notes that
        differ: found by comparing the trees where they differ, not by listing both
        (a fetch of a thousand notes into a hundred thousand looks at a thousand)."""
        if tree is None:
            return {name: ([], blobs) for name, blobs in self.copies(other).items()}
        known = self._differing.get((tree.id, other.id))
        if known is not None:
            return known
        swapped = self._differing.get((other.id, tree.id))  # a merge asks both ways round
        if swapped is not None:
            return {name: (theirs, mine) for name, (mine, theirs) in swapped.items()}
        pairs = self._differing[tree.id, other.id] = self._compared(tree, other)
        return pairs

    def _compared(self, tree: pygit2.Tree, other: pygit2.Tree) -> Differing:
        pairs: Differing = {}
        for name in notestree.changed(self.repo, tree, other):
            mine = self._found(tree, name)
            theirs = self._found(other, name)
            if len(mine) > 1 or len(theirs) > 1:
                # Two notes for one object (a tree written badly): in the walk's order.
                before, after = self.copies(tree), self.copies(other)
                names = before.keys() | after.keys()
                return {
                    n: (before.get(n, []), after.get(n, []))
                    for n in names
                    if before.get(n, []) != after.get(n, [])
                }
            pairs[name] = (mine, theirs)
        return pairs

    def _found(self, tree: pygit2.Tree, name: str) -> list[str]:
        """The note entries for `name` in `tree`; those that are not files are noted."""
        found = []
        for oid, kind in notestree.find_kinds(self.repo, tree, name):
            if kind == "tree":
                continue  # a merge takes files only: what a gitlink or a symlink names is no note
            found.append(str(oid))
            if kind != "note":
                self._not_files.add((name, str(oid)))
        return found

    def lacks(self, tree: pygit2.Tree, other: pygit2.Tree) -> bool:
        """Whether `tree` lacks anything `other` holds: a note, a record (by id), or text
        it could not read. Only notes whose blobs differ are parsed; a note entry no
        record can be read from (see `_fit`) holds nothing to lack."""
        if tree.id == other.id:
            return False
        for commit, (have, theirs) in self.differing(tree, other).items():
            blobs = self._fit(commit, [blob for blob in theirs if blob not in have])
            if not blobs:
                continue
            if not have or not self._atoms(blobs) <= self._atoms(have):
                return True
        return False

    def _atoms(self, blob_ids: Sequence[str]) -> set[tuple[str, ...]]:
        return atoms(self.blobs, blob_ids)

    def merged_tree(
        self, ours: pygit2.Tree, theirs: pygit2.Tree
    ) -> tuple[pygit2.Oid, tuple[int, int], int, int]:
        """Their notes written into our tree.

        Returns the tree, the records and copies it adds, the notes on both sides that
        were united, and how many of those kept their texts unread (not valid TOML).
        """
        changes: dict[str, pygit2.Oid] = {}
        added = self._added(ours)
        united = raw = 0
        for commit, (have, their_blobs) in self.differing(ours, theirs).items():
            fresh = [blob for blob in their_blobs if blob not in have]
            taken = self._fit(commit, fresh, report=True)
            if not taken:
                continue  # ours stays as it is: theirs holds nothing to add
            # Ours without what holds no record: a note over the limit is never joined.
            blobs = self._fit(commit, have) + taken
            added.note(commit, have, blobs)
            if len(blobs) == 1:
                changes[commit] = pygit2.Oid(hex=blobs[0])
            else:
                changes[commit], readable = self._united_blob(blobs)
                united += 1
                raw += not readable
        tree = notestree.insert_many(self.repo, ours, changes) if changes else ours.id
        return tree, added.counts(), united, raw

    def _united_blob(self, blob_ids: Sequence[str]) -> tuple[pygit2.Oid, bool]:
        """One note from several: the union of their records.

        A note that cannot be read is kept as text inside an `[[unreadable]]` table
        (an unknown kind, which every reader keeps and ignores), so the readable
        records beside it stay readable. Only when even that cannot make one valid
        note (foreign plain keys that disagree, or the result over the size limit)
        is every distinct text concatenated, unread; nothing is ever dropped.
        """
        parsed = [self.blobs.parse(blob_id) for blob_id in blob_ids]
        if any(isinstance(note, Note) and note.salvaged for note in parsed):
            onto = _united_onto_text(self.blobs, blob_ids, parsed)
            if onto is not None:
                return self.repo.create_blob(onto[0]), onto[1]
            notes: list[Note] = []  # every text is kept as it is, below
        else:
            notes = [note for note in parsed if isinstance(note, Note)]
        if notes and _plain_keys_agree(notes):
            kept = [
                _unreadable_entry(blob_id, self.blobs.data(blob_id))
                for blob_id, note in zip(blob_ids, parsed, strict=True)
                if isinstance(note, NoteError)
            ]
            united = union(notes)
            text = dump_note(Note(united.entries + tuple(kept), united.other, united.invalid_plain))
            data = text.encode("utf-8")
            try:
                parse_note(data)
            except NoteError:
                pass
            else:
                return self.repo.create_blob(data), not kept
        kept_data: list[bytes] = []
        for blob_id in blob_ids:
            data = self.blobs.data(blob_id)
            if any(data in other for other in kept_data):
                continue
            kept_data = [other for other in kept_data if other not in data] + [data]
        parts = [data if data.endswith(b"\n") else data + b"\n" for data in kept_data]
        return self.repo.create_blob(b"\n".join(parts)), False

    def records_added(self, before: pygit2.Tree | None, after: pygit2.Tree) -> tuple[int, int]:
        """The records and the copies the move from `before` to `after` adds."""
        added = self._added(before)
        for commit, (previous, blobs) in self.differing(before, after).items():
            if blobs and blobs != previous:
                added.note(commit, previous, blobs)
        return added.counts()

    def heads(self, blob_ids: Sequence[str]) -> dict[str, str]:
        """Record id -> the commit it was written on, of the records these notes hold."""
        return heads(self.blobs, blob_ids)

    def _added(self, before: pygit2.Tree | None) -> Added:
        """What a move from `before` adds, counted (see `fastforward.Added`)."""
        if before is None:
            return Added(self.blobs, None)

        def notes_before(head: str) -> list[str]:
            found = notestree.find_kinds(self.repo, before, head)
            return [str(oid) for oid, kind in found if kind == "note"]

        return Added(self.blobs, notes_before)


def _united_onto_text(
    blobs: NoteBlobs, blob_ids: Sequence[str], parsed: Sequence[Note | NoteError]
) -> tuple[bytes, bool] | None:
    """Notes united on the bytes of the first one that is not TOML as a whole (edited
    by hand): its text stays byte for byte, and what the others hold that it lacks is
    appended as tables, as a write would. None when that cannot keep everything.
    """
    base_id, base = next(
        (blob_id, note)
        for blob_id, note in zip(blob_ids, parsed, strict=True)
        if isinstance(note, Note) and note.salvaged
    )
    data = blobs.data(base_id)
    present = {entry.key for entry in base.entries}
    extra: list[Entry] = []
    for blob_id, note in zip(blob_ids, parsed, strict=True):
        if blob_id == base_id:
            continue
        if isinstance(note, NoteError):
            extra.append(_unreadable_entry(blob_id, blobs.data(blob_id)))
            continue
        if any(base.other.get(key, value) != value for key, value in note.other.items()):
            return None
        if note.other.keys() - base.other.keys():
            return None  # plain keys cannot be appended below tables
        for entry in note.entries:
            if entry.key not in present:
                present.add(entry.key)
                extra.append(entry)
        if any(part not in data for part in note.unreadable):
            extra.append(_unreadable_entry(blob_id, blobs.data(blob_id)))
    if extra:
        addition = dump_tables((entry.kind, entry.table) for entry in extra).encode("utf-8")
        data += (b"\n" if data.endswith(b"\n") else b"\n\n") + addition
    try:
        united = parse_note(data)
    except NoteError:
        return None
    if not present <= {entry.key for entry in united.entries}:
        return None
    readable = not any(isinstance(note, NoteError) for note in parsed)
    return data, readable


def _unreadable_entry(blob_id: str, data: bytes) -> Entry:
    """A note that could not be read, kept whole as an unknown-kind table."""
    table: dict[str, Any] = {"blob": blob_id}
    try:
        table["text"] = data.decode("utf-8")
    except UnicodeDecodeError:
        table["base64"] = base64.b64encode(data).decode("ascii")
    return Entry("unreadable", table, None)


def _plain_keys_agree(notes: Sequence[Note]) -> bool:
    """Whether foreign top-level keys can be united without dropping a value, and written
    beside the records (`checkpoint = "x"` and a `[[checkpoint]]` cannot share a document)."""
    seen: dict[str, Any] = {}
    for note in notes:
        for key, value in note.other.items():
            if key in seen and seen[key] != value:
                return False
            seen[key] = value
    kinds = {entry.kind for note in notes for entry in note.entries}
    return not kinds & set(seen)
