"""Writing notes: records appended to a commit's note, copies of many notes at once, and
fetched notes merged, each all or nothing, by compare-and-swap of the notes ref."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

from majordomus import fastforward, interrupt, notestree
from majordomus.blobs import NoteBlobs
from majordomus.errors import RepositoryError
from majordomus.fastforward import Merged
from majordomus.notes import appended, parse_note, union
from majordomus.notesref import NotesRef, move_by_git
from majordomus.notetoml import MissingObjectError, NoteError
from majordomus.records import Record
from majordomus.repository import NOTES_REF
from majordomus.values import MergeReport, Swap, WriteReport

if TYPE_CHECKING:
    import pygit2

    from majordomus.history import History
    from majordomus.merge import Merger
    from majordomus.notesread import NotesReader
    from majordomus.repository import Repository


def writable(repository: Repository, reader: NotesReader, history: History) -> Writer:
    """The writer of a repository's notes ref, once the ref is one a write will not
    destroy (else refused, before any record is built)."""
    writer = Writer(repository, reader, history)
    writer.ref.check_writable()
    return writer


class Writer:
    """What moves the notes ref of one repository, reading what it must through `reader`.
    A command that writes makes one (`writable`); a read never loads this module."""

    def __init__(self, repository: Repository, reader: NotesReader, history: History) -> None:
        self.repository = repository
        self.reader = reader
        self.history = history

    @cached_property
    def ref(self) -> NotesRef:
        repository = self.repository
        return NotesRef(repository.repo, repository.commondir, repository.environ)

    def append(
        self,
        commit: str,
        records: Sequence[Record],
        message: str,
        *,
        timeout_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        author: str,
    ) -> WriteReport:
        """Append records to the note on `commit`, all or nothing, by compare-and-swap,
        written by `author` (the records' author, as git names the committer)."""
        import pygit2

        name, _, email = author.rpartition(" <")
        repo, reader = self.repository.repo, self.reader

        def build(
            tree: pygit2.Tree | None, parents: list[pygit2.Oid]
        ) -> tuple[pygit2.Oid, tuple[str, int, bool, bool, str | None]]:
            blob_id, position, in_place, alone, replaced = _appended_blob(
                repo, reader.blobs, tree, commit, records, reader.partial.is_partial
            )
            now = datetime.datetime.now(datetime.UTC)
            signature = pygit2.Signature(name, email.rstrip(">"), int(now.timestamp()), 0)
            tree_id = notestree.insert(repo, tree, commit, blob_id)
            notes_commit = repo.create_commit(
                None, signature, signature, message + "\n", tree_id, parents
            )
            return notes_commit, (str(blob_id), position, in_place, alone, replaced)

        interrupt.writing(records[0].kind, records[0].id)
        swap, (blob, position, in_place, alone, replaced) = self.ref.swap(
            build, message, "nothing was recorded", timeout_s, sleep, monotonic
        )
        return WriteReport(
            notes_commit=swap.target,
            attempts=swap.attempts,
            stale_locks=swap.stale_locks,
            parent=swap.parent,
            blob=blob,
            position=position,
            in_place=in_place,
            alone=alone,
            replaced=replaced,
        )

    def append_many(
        self,
        notes: Mapping[str, Sequence[Record]],
        message: str,
        *,
        timeout_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> Swap:
        """Append records to the notes of several commits in one compare-and-swap: all or
        nothing. The notes commit is bookkeeping, signed as a merge of fetched records is."""
        repo, reader = self.repository.repo, self.reader

        def build(
            tree: pygit2.Tree | None, parents: list[pygit2.Oid]
        ) -> tuple[pygit2.Oid | None, None]:
            changes = {}
            for commit, records in notes.items():
                # Another writer may have copied some of them meanwhile: never twice.
                found = notestree.find(repo, tree, commit) if tree is not None else iter(())
                have = reader.blobs.record_ids([str(blob) for blob in found])
                missing = [record for record in records if record.id not in have]
                if missing:
                    blob = _appended_blob(
                        repo, reader.blobs, tree, commit, missing, reader.partial.is_partial
                    )[0]
                    changes[commit] = blob
            if not changes:
                return None, None
            signature = self.signature()
            tree_id = notestree.insert_many(repo, tree, changes)
            notes_commit = repo.create_commit(
                None, signature, signature, message + "\n", tree_id, parents
            )
            return notes_commit, None

        swap, _ = self.ref.swap(build, message, "nothing was adopted", timeout_s, sleep, monotonic)
        return swap

    def merge(
        self,
        theirs: str,
        message: str,
        *,
        timeout_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> MergeReport:
        """Unite the notes commit `theirs` into the local ref by record id, by compare-and-swap.

        Nothing is dropped on either side: a note on one side only is taken as it
        is, a note on both sides becomes the union of their records in canonical
        form, and a note that is not valid TOML keeps its text, byte for byte.
        """
        fast = self._fast_forward(theirs, message)
        if fast is not None:
            return fast
        import pygit2

        their_commit = self.repository.repo.get(theirs)
        if not isinstance(their_commit, pygit2.Commit):
            raise RepositoryError(
                f"the fetched records point at {theirs[:12]}, which is not a commit; nothing was "
                "merged: ask whoever published them to repair their refs/notes/majordomus."
            )
        merger = self.merger()

        def build(
            ours_tree: pygit2.Tree | None, parents: list[pygit2.Oid]
        ) -> tuple[pygit2.Oid | None, Merged]:
            return merger.build(their_commit, message, ours_tree, parents)

        interrupt.writing("fetched records")
        swap, merged = self.ref.swap(
            build, message, "nothing was merged", timeout_s, sleep, monotonic
        )
        return MergeReport(
            merged.outcome,
            swap.target,
            merged.records_added,
            merged.copies_added,
            merged.notes_united,
            merged.notes_raw,
            swap.attempts,
            merged.left_out,
        )

    def _fast_forward(self, theirs: str, message: str) -> MergeReport | None:
        """The merge as a fast-forward (or up to date) checked through one git process,
        while libgit2 is not loaded (see fastforward.py); None: libgit2 merges."""
        repository = self.repository
        if not repository.by_git or self._walks_otherwise():
            return None
        ours = repository.ref_target(NOTES_REF)
        if ours is None or not repository.ref_is_direct(NOTES_REF):
            return None  # none yet, or a symbolic ref: libgit2 says what a write does
        with repository.git_batch() as batch:
            if batch is None:
                return None
            try:
                merged = fastforward.fast_forward(
                    fastforward.GitNotes(batch, self.reader.blobs), ours, theirs
                )
            except fastforward.UnsureError:
                return None
        if merged is None:
            return None
        if merged.outcome == "up-to-date":
            return MergeReport(merged.outcome, ours, 0, 0, 0, 0, 1)
        interrupt.writing("fetched records")
        swap = move_by_git(repository, ours, theirs, message)
        if swap is None:
            return None  # the ref moved meanwhile: the swap reads it again and retries
        return MergeReport(
            merged.outcome, swap.target, merged.records_added, merged.copies_added, 0, 0, 1
        )

    def _walks_otherwise(self) -> bool:
        """Whether libgit2 walks the notes history otherwise than its commits say: a shallow
        clone (or grafts) cuts it short."""
        common = self.repository.commondir
        return (common / "shallow").exists() or (common / "info" / "grafts").exists()

    def merger(self) -> Merger:
        """What unites fetched notes into ours, reading through the reader's caches."""
        from majordomus.merge import Merger  # only a fetch merges: reads start without it

        reader = self.reader
        return Merger(
            self.repository.repo,
            reader.blobs,
            reader.note_copies,
            self.signature,
            self.history.descends,
        )

    def signature(self) -> pygit2.Signature:
        # The notes commit's author is bookkeeping, not part of any record: a CI
        # job without a git identity must still be able to merge what it fetched.
        import pygit2

        try:
            name, _, email = self.repository.identity().rpartition(" <")
        except RepositoryError:
            name, email = "majordomus", "majordomus@localhost>"
        now = datetime.datetime.now(datetime.UTC)
        return pygit2.Signature(name, email.rstrip(">"), int(now.timestamp()), 0)


def _joined(texts: Sequence[bytes]) -> bytes:
    return b"\n".join(text if text.endswith(b"\n") else text + b"\n" for text in texts)


def _appended_blob(
    repo: pygit2.Repository,
    blobs: NoteBlobs,
    tree: pygit2.Tree | None,
    commit: str,
    records: Sequence[Record],
    is_partial: Callable[[], bool],
) -> tuple[pygit2.Oid, int, bool, bool, str | None]:
    """The note on `commit` with these records appended, written as a blob, the position
    of the first of them among the note's records, whether the records it held keep
    their positions (`WriteReport.in_place`), whether they were all of the first one's
    task (`WriteReport.alone`), and the blob the note was (`WriteReport.replaced`). A
    gitlink at its paths (put there by hand: a merge never takes one) refuses the write;
    a symlink or a tree there is replaced by the note (a fetch can fast-forward onto a
    tree where a note belongs, which must not stop a write)."""
    texts = []
    notes = []
    blobs_read = []
    for blob_id, kind in notestree.find_kinds(repo, tree, commit) if tree is not None else []:
        blob = str(blob_id)
        if kind == "gitlink":
            why = f"its entry is {notestree.ODD_KINDS[kind]}"
            raise RepositoryError(_unreadable(commit, why))
        if kind != "note":
            continue
        try:
            data = blobs.data(blob)
            # A parse this command made already, else the bytes in hand: not read again.
            note = blobs.parse(blob) if blobs.is_parsed(blob) else parse_note(data)
        except MissingObjectError:
            if is_partial():
                raise  # not unreadable: not here yet (the swap says what to run)
            raise RepositoryError(_unreadable(commit, "its object is not in this clone")) from None
        except NoteError as error:
            raise RepositoryError(_unreadable(commit, str(error))) from None
        if isinstance(note, NoteError):  # as parsed already
            raise RepositoryError(_unreadable(commit, str(note)))
        notes.append(note)
        texts.append(data)
        blobs_read.append(blob)
    # Two copies of one note (a damaged tree) become one, each copy's text kept.
    existing = (texts[0] if len(texts) == 1 else _joined(texts)) if texts else None
    try:
        data, after = appended(existing, records, notes[0] if len(notes) == 1 else None)
    except NoteError as error:
        raise RepositoryError(
            f"the note on {commit[:12]} is not in majordomus format ({error}); majordomus "
            "will not overwrite it: inspect it with git notes --ref=majordomus show "
            f"{commit[:12]}."
        ) from None
    written = union([after]).records
    first = records[0]
    position = next(i for i, r in enumerate(written) if (r.kind, r.id) == (first.kind, first.id))
    held = union(notes).records if notes else []
    alone = all(record.task == first.task for record in held)
    replaced = blobs_read[0] if len(blobs_read) == 1 else None
    return repo.create_blob(data), position, position == len(held), alone, replaced


def _unreadable(commit: str, why: str) -> str:
    return (
        f"the note on {commit[:12]} cannot be read ({why}); majordomus will not overwrite "
        f"it: inspect it with git notes --ref=majordomus show {commit[:12]}."
    )
