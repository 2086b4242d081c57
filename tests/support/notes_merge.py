"""Two notes commits that fork from a common one, merged by majordomus' writer: what the
merge property tests (and the soak) feed with generated notes on both sides."""

from __future__ import annotations

import pygit2
from hypothesis import strategies as st

from majordomus.notes import dump_note
from majordomus.repository import NOTES_REF
from tests.support.repo import Repo, writer_of
from tests.support.strategies import notes, raw_notes


class NotesRepo:
    """One repository in which each example builds two notes commits that fork from a
    common one and puts a note on the same commit in each."""

    def __init__(self, repo: Repo) -> None:
        self.repo = repo
        self.git = repo.pygit
        self.head = repo.head()
        signature = pygit2.Signature("A", "a@example.com", 0, 0)
        self.signature = signature
        self.base = self.git.create_commit(
            None, signature, signature, "base", self.git.TreeBuilder().write(), []
        )

    def notes_commit(self, data: bytes) -> pygit2.Oid:
        builder = self.git.TreeBuilder()
        builder.insert(self.head, self.git.create_blob(data), pygit2.enums.FileMode.BLOB)
        tree = builder.write()
        return self.git.create_commit(None, self.signature, self.signature, "n", tree, [self.base])

    def merge(self, ours: bytes, theirs: bytes) -> bytes:
        self.git.references.create(NOTES_REF, self.notes_commit(ours), force=True)
        their_commit = self.notes_commit(theirs)
        writer_of(self.repo.path, self.repo.environ).merge(str(their_commit), "merge")
        merged = self.git.references[NOTES_REF].peel(pygit2.Commit).tree[self.head]
        blob = self.git[merged.id]
        assert isinstance(blob, pygit2.Blob)
        return bytes(blob.data)


both_sides = st.one_of(
    raw_notes,
    notes().filter(lambda n: not n.other).map(lambda n: dump_note(n).encode("utf-8")),
)
