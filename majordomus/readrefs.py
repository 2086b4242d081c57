"""The notes refs a read reads: the local one, and every remote-tracking one that points at
a commit (one that does not is left out, and said once); their targets and trees, from a
plain layout's ref files and one git process while libgit2 is not loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from majordomus.errors import RepositoryError
from majordomus.gitfiles import REMOTE_NOTES_PREFIX
from majordomus.repository import NOTES_REF, not_a_commit

if TYPE_CHECKING:
    import pygit2

    from majordomus.repository import Repository

REMOTE_NOTES_SUFFIX = "/majordomus"


class ReadRefs:
    """The notes refs of one repository that a read reads."""

    def __init__(self, repository: Repository) -> None:
        self.repository = repository
        # Told once per ref that a remote-tracking notes ref is left out (see `skipped`).
        self.warn: Callable[[str], None] | None = None
        self.skipped: dict[str, str] = {}  # remote-tracking notes ref -> its non-commit target
        self._objects: dict[str, tuple[str, bytes]] = {}  # a ref target as git read it

    def notes_refs(self) -> list[str]:
        """The local notes ref and every remote-tracking one that points at a commit."""
        references = self.repository.repo.references
        names = [NOTES_REF] if NOTES_REF in references else []
        names += sorted(
            name
            for name in references
            if name.startswith(REMOTE_NOTES_PREFIX)
            and name.endswith(REMOTE_NOTES_SUFFIX)
            and self.is_read(name, str(references[name].resolve().target))
        )
        return names

    def is_read(self, name: str, target: str, kind: str | None = None) -> bool:
        """Whether a notes ref is read: the local one always (a target that is not a commit
        then stops the command), a remote-tracking one only when it points at a commit
        (`kind`, when known; else libgit2 is asked). A teammate can push a blob or a tag
        as the notes ref, and a plain `git fetch` brings it: every command goes on
        without it, and says so once."""
        if name == NOTES_REF:
            return True
        if kind is None:
            import pygit2  # here: a read the caches answer never loads libgit2

            found = self.repository.repo.get(target)
            kind = "commit" if isinstance(found, pygit2.Commit) else "other"
        if kind == "commit":
            return True
        if name not in self.skipped:
            self.skipped[name] = target
            if self.warn is not None:
                self.warn(skipped_ref(name, target))
        return False

    def ref_targets(self) -> dict[str, str]:
        """Each notes ref and its target: cheap, for noticing that something was written.
        Read from the ref files when the layout is plain; a target that is not a commit is
        then refused by the read that follows, which opens it."""
        found = self.plain_targets()
        if found is not None:
            return found
        targets = {}
        for name in self.notes_refs():
            ref = self.repository.repo.references.get(name)
            if ref is not None:
                targets[name] = str(ref.resolve().target)
                self.notes_commit(name, targets[name])
        return targets

    def plain_targets(self) -> dict[str, str] | None:
        """The notes refs' targets read from a plain layout's ref files; None when it is not."""
        refs = self.repository.refs
        return None if refs is None else refs.notes_targets(NOTES_REF, REMOTE_NOTES_SUFFIX)

    def notes_commit(self, name: str, target: str) -> pygit2.Commit:
        """The commit a notes ref points at; a ref at anything else stops every command."""
        import pygit2

        obj = self.repository.repo.get(target)
        if isinstance(obj, pygit2.Commit):
            return obj
        if name == NOTES_REF:
            raise RepositoryError(not_a_commit(target))
        raise RepositoryError(
            f"{name} points at {target[:12]}, which is not a commit; majordomus will not read "
            f"it: inspect it with git cat-file -t {target[:12]}, then delete it "
            f"(git update-ref -d {name}) and fetch again."
        )

    def trees(self) -> list[tuple[str, str, str]]:
        """Each notes ref, its target and the id of that commit's tree."""
        plain = self._plain_trees()
        if plain is not None:
            return plain
        return [(name, *self.notes_tree_id(name)) for name in self.notes_refs()]

    def _plain_trees(self) -> list[tuple[str, str, str]] | None:
        """The same from the ref files and one git process, while libgit2 is not loaded
        (the read cache may then answer the rest); None: ask libgit2."""
        if (targets := self.plain_targets()) is None:
            return None
        if not targets:
            return []
        unread = [target for target in targets.values() if target not in self._objects]
        if unread:  # an object never changes: each target is read once per process
            read = self.repository.objects_by_git(unread)
            if read is None:
                return None
            self._objects.update((oid, held) for oid, held in read.items() if held is not None)
        trees = []
        for name, target in targets.items():
            held = self._objects.get(target)
            if held is not None and not self.is_read(name, target, held[0]):
                continue
            tree = _tree_of(held)
            if tree is None:
                return None  # not a commit, or not here: libgit2 says which
            trees.append((name, target, tree))
        return trees

    def notes_tree_id(self, name: str) -> tuple[str, str]:
        """A notes ref's target and the id of its tree, which may be missing from a partial
        clone; a ref at anything but a commit stops every command."""
        target = str(self.repository.repo.references[name].resolve().target)
        return target, str(self.notes_commit(name, target).tree_id)

    def notes_commits(self) -> list[str]:
        """The commit each notes ref points at (what holds every object the notes need)."""
        import pygit2

        repo = self.repository.repo
        targets = [str(repo.references[name].resolve().target) for name in self.notes_refs()]
        return [t for t in targets if isinstance(repo.get(t), pygit2.Commit)]

    def skipped_refs(self) -> list[str]:
        """What is wrong with each remote-tracking notes ref this command left out (it does
        not point at a commit), and how to remove it."""
        return [skipped_ref(name, target) for name, target in self.skipped.items()]


def skipped_ref(name: str, target: str) -> str:
    """What every command says of a remote-tracking notes ref it leaves out."""
    return (
        f"{name} points at {target[:12]}, which is not a commit, so its records are left out; "
        f"remove it with git update-ref -d {name}, then run majordomus fetch."
    )


def _tree_of(found: tuple[str, bytes] | None) -> str | None:
    """The tree id a commit object names first."""
    if found is None or found[0] != "commit" or not found[1].startswith(b"tree "):
        return None
    tree = found[1][5:45].decode("ascii", "replace")
    return tree if len(tree) == 40 else None
