"""The notes of one commit over the notes refs read, found at its note's paths without
walking the notes trees; and which commits' notes differ between two notes commits, by a
comparison of their trees that skips what they share.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from majordomus import gitobjects, notestree
from majordomus.notetoml import MissingObjectError, NoteError

if TYPE_CHECKING:
    from majordomus.blobs import NoteBlobs
    from majordomus.readrefs import ReadRefs
    from majordomus.repository import Repository


class CommitNotes:
    """The notes of single commits of one repository, over the notes refs `refs` reads."""

    def __init__(self, repository: Repository, refs: ReadRefs, blobs: NoteBlobs) -> None:
        self.repository, self.refs, self.blobs = repository, refs, blobs

    def notes_on(
        self, commit: str, targets: Mapping[str, str] | None = None
    ) -> tuple[tuple[str, ...], int] | None:
        """The readable note blobs attached to one commit over every notes ref (or over the
        notes commits `targets` names, in that order), and how many of its notes are
        unreadable (entries at its note's paths that are no note among them: a symlink,
        a gitlink, a tree, each object once per kind, as `read_notes` counts them), found
        without walking the notes trees; None when an object on the way is missing
        (`read_notes` fetches it, or says why it cannot)."""
        # While libgit2 is not loaded, one git process finds the notes and reads them.
        with self.repository.git_batch() as batch:
            if batch is not None:
                chosen = targets if targets is not None else self.refs.plain_targets()
                try:
                    if chosen is not None:
                        attached = gitobjects.attached_notes(batch, list(chosen.values()), commit)
                        if attached is None:
                            return None
                        notes, odd = attached
                        return self._readable(notes, len(odd))
                except gitobjects.UnsureError:
                    pass  # libgit2 reads it, or refuses it with its own message
        import pygit2

        repo, refs = self.repository.repo, self.refs
        blobs: dict[str, None] = {}
        others: dict[tuple[str, str], None] = {}
        try:
            if targets is None:
                trees = [refs.notes_tree_id(name)[1] for name in refs.notes_refs()]
            else:
                trees = [
                    str(refs.notes_commit(n, t).tree_id)
                    for n, t in targets.items()
                    if refs.is_read(n, t)
                ]
            for tree_id in trees:
                root = notestree.tree(repo, pygit2.Oid(hex=tree_id))
                for oid, kind in notestree.find_kinds(repo, root, commit):
                    if kind == "note":
                        blobs[str(oid)] = None
                    else:
                        others[kind, str(oid)] = None
        except MissingObjectError:
            return None
        return self._readable(list(blobs), len(others))

    def _readable(self, blobs: Sequence[str], odd: int) -> tuple[tuple[str, ...], int] | None:
        """The readable ones of a commit's note blobs, and how many are not (with `odd`
        entries that are no note); None when one is missing."""
        readable: list[str] = []
        unreadable = odd
        for blob in blobs:
            parsed = self.blobs.parse(blob)
            if isinstance(parsed, MissingObjectError):
                return None
            if isinstance(parsed, NoteError):
                unreadable += 1
            else:
                readable.append(blob)
        return tuple(readable), unreadable

    def changed_notes(self, old: str, new: str) -> set[str] | None:
        """The commits whose notes differ between two notes commits, from a comparison of
        their trees that skips every subtree the two share; None when either is not here,
        or an entry that names no commit differs (what it counts for is in no commit's
        notes)."""
        import pygit2

        try:
            repo = self.repository.repo
            commits = [repo[target] for target in (old, new)]
            if not all(isinstance(commit, pygit2.Commit) for commit in commits):
                return None  # a notes ref at a tree or a tag is not read (ReadRefs.is_read)
            old_tree, new_tree = (commit.peel(pygit2.Tree) for commit in commits)
            found = notestree.changed(repo, old_tree, new_tree)
        except (KeyError, ValueError, pygit2.GitError, MissingObjectError):
            return None
        return None if notestree.NAMELESS in found else found
