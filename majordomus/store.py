"""The repository as the rest of the package sees it: commits, the current task, notes read
in bulk (through the read cache), records written by compare-and-swap, fetched notes merged.

The jobs behind it have their own modules: `location` finds and opens the repository,
`notestree` lays notes out as git does, `blobs` reads and parses note blobs,
`notesref` moves the notes ref by compare-and-swap, `merge` unites fetched notes.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import subprocess
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path

import pygit2

from majordomus import interrupt, notestree
from majordomus.blobs import NoteBlobs
from majordomus.cache import FILE_NAME as CACHE_FILE
from majordomus.cache import FILES as CACHE_FILES
from majordomus.cache import GRAPH_FILE_NAME as GRAPH_FILE
from majordomus.cache import RECORDS_FILE_NAME as DOCUMENTS_FILE
from majordomus.cache import BlobEntry, DocumentCache, GraphCache, ReadCache
from majordomus.errors import RepositoryError
from majordomus.graph import CommitGraph
from majordomus.location import open_repository
from majordomus.merge import Merged, Merger
from majordomus.notesref import NOTES_REF, STALE_LOCK_S, NotesRef, not_a_commit
from majordomus.notestree import MissingObjectError
from majordomus.records import (
    Note,
    NoteError,
    Record,
    Summary,
    append_note,
    load_document,
    note_from_document,
    parse_note,
    summarise,
    union,
)
from majordomus.values import (
    MergeReport,
    NoteSet,
    NotesOn,
    StaleLock,
    Swap,
    UnreadableNote,
    WriteReport,
)

__all__ = ["NOTES_REF", "MissingObjectError", "Store"]

REMOTE_NOTES_PREFIX = "refs/notes/remotes/"
REMOTE_NOTES_SUFFIX = "/majordomus"
TASK_FILE = "majordomus-task"


class Store:
    """One repository, opened once per command."""

    def __init__(self, path: str, environ: Mapping[str, str]) -> None:
        opened = open_repository(path, environ)
        self.repo = opened.repo
        self.gitdir, self.workdir, self.commondir = opened.gitdir, opened.workdir, opened.commondir
        self.environ: Mapping[str, str] = opened.environ
        self.blobs = NoteBlobs(self.repo)
        self.ref = NotesRef(self.repo, self.commondir, self.environ)
        self._disk_cache: ReadCache | None = None
        self._graph: CommitGraph | None = None
        self._current_blobs: set[str] = set()
        # Set by the caller that knows the remotes: fetches note objects a partial clone
        # left out, in one batch; returns the remote it asked and why it failed (or None).
        self.fetch_missing: Callable[[Sequence[str]], tuple[str, str | None]] | None = None

    # ---- git subprocesses ------------------------------------------------

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run the user's own git on this repository; arguments never pass through a shell."""
        command = ["git", f"--git-dir={self.gitdir}", *args]
        try:
            result = subprocess.run(
                command,
                capture_output=True,
                text=True,
                env=dict(self.environ),
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except FileNotFoundError:
            raise RepositoryError("git is not installed or not on PATH; install git.") from None
        if check and result.returncode != 0:
            lines = result.stderr.strip().splitlines()
            detail = lines[-1] if lines else f"exit {result.returncode}"
            raise RepositoryError(f"git {args[0]} failed: {detail}.")
        return result

    # ---- commits ----------------------------------------------------------

    def head(self) -> str:
        try:
            if self.repo.head_is_unborn:
                raise RepositoryError(
                    "HEAD has no commit yet; make a first commit so records have one to attach to."
                )
            return str(self.repo.head.target)
        except pygit2.GitError as error:
            raise RepositoryError(f"cannot read HEAD: {error}.") from None

    def resolve(self, rev: str | None) -> str:
        if rev is None:
            return self.head()
        try:
            obj = self.repo.revparse_single(rev)
            commit = obj.peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            if self.repo.is_shallow:
                raise RepositoryError(
                    f"cannot find a commit named '{rev}' in this shallow clone, whose history "
                    "stops at its boundary; run git fetch --unshallow (or --deepen N) to bring "
                    "the older commits, or give a branch, tag or commit id that is here."
                ) from None
            raise RepositoryError(
                f"cannot find a commit named '{rev}'; give a branch, tag or commit id."
            ) from None
        return str(commit.id)

    def has_commit(self, hex_id: str) -> bool:
        try:
            obj = self.repo.get(hex_id)
        except (ValueError, pygit2.GitError):
            return False
        return isinstance(obj, pygit2.Commit)

    def commit_time(self, hex_id: str) -> int | None:
        try:
            obj = self.repo.get(hex_id)
        except (ValueError, pygit2.GitError):
            return None
        return obj.commit_time if isinstance(obj, pygit2.Commit) else None

    def is_shallow(self) -> bool:
        return bool(self.repo.is_shallow)

    # ---- the commit graph (graph.Source) -----------------------------------

    def walk(self, tips: Sequence[str], hide: Sequence[str]) -> list[list[str]]:
        """`git rev-list --parents TIPS ^HIDE`: git's order, and a shallow cut as git sees it."""
        args = ["rev-list", "--parents", *tips, *(f"^{commit}" for commit in hide)]
        return [line.split() for line in self.git(*args).stdout.splitlines()]

    def parents(self, commit: str) -> tuple[str, ...] | None:
        try:
            obj = self.repo.get(commit)
        except (ValueError, pygit2.GitError):
            return None
        if not isinstance(obj, pygit2.Commit):
            return None
        return tuple(str(parent) for parent in obj.parent_ids)

    def true_parents(self, commit: str) -> tuple[str, ...] | None:
        try:
            kind, data = self.repo.odb.read(commit)
        except (KeyError, ValueError, pygit2.GitError):
            return None
        if kind != pygit2.enums.ObjectType.COMMIT:
            return None
        header = data.split(b"\n\n", 1)[0]
        return tuple(
            line[7:].decode("ascii") for line in header.split(b"\n") if line.startswith(b"parent ")
        )

    def shallow_boundary(self) -> frozenset[str]:
        if not self.repo.is_shallow:
            return frozenset()
        try:
            text = (self.commondir / "shallow").read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError):
            text = ""
        return frozenset(text.split())

    def merge_base(self, a: str, b: str) -> str | None:
        result = self.git("merge-base", a, b, check=False)
        return result.stdout.strip() or None if result.returncode == 0 else None

    def ahead_behind(self, commit: str, base: str) -> tuple[int, int]:
        """(commits in `commit` not in `base`, commits in `base` not in `commit`)."""
        out = self.git("rev-list", "--left-right", "--count", f"{commit}...{base}").stdout.split()
        return int(out[0]), int(out[1])

    def patch_text(self, commit: str, base: str | None = None) -> str:
        """The diff of `commit` against `base` (default: its first parent; a root commit:
        the empty tree) as git prints it; "" for a merge commit with no base given."""
        try:
            obj = self.repo.get(commit)
            if not isinstance(obj, pygit2.Commit):
                return ""
            if base is None:
                if len(obj.parents) > 1:
                    return ""
                if not obj.parents:
                    return obj.tree.diff_to_tree(swap=True).patch or ""
                return self.repo.diff(obj.parents[0], obj).patch or ""
            old = self.repo.get(base)
            if not isinstance(old, pygit2.Commit):
                return ""
            return self.repo.diff(old, obj).patch or ""
        except (KeyError, ValueError, pygit2.GitError):
            return ""  # objects a partial clone left out: no patch is stated, none is guessed

    def current_branch(self) -> str | None:
        """The short name of the branch HEAD is on, or None when detached or unborn."""
        try:
            if self.repo.head_is_detached or self.repo.head_is_unborn:
                return None
            return self.repo.head.shorthand
        except pygit2.GitError:
            return None

    def config_value(self, name: str) -> str | None:
        try:
            value = self.repo.config[name]
        except (KeyError, pygit2.GitError, ValueError):
            return None
        return value if isinstance(value, str) else None

    def symbolic_target(self, name: str) -> str | None:
        """Where a symbolic ref such as refs/remotes/origin/HEAD points, when it does."""
        ref = self.repo.references.get(name)
        if ref is None or ref.type != pygit2.enums.ReferenceType.SYMBOLIC:
            return None
        target = ref.target
        return target if isinstance(target, str) else None

    def graph(self) -> CommitGraph:
        """The graph's answers for this command, with what earlier commands kept."""
        if self._graph is None:
            self._graph = CommitGraph(self, GraphCache(self.commondir / GRAPH_FILE))
        return self._graph

    def flush(self) -> None:
        """Write what the graph answered this time, for the next command."""
        if self._graph is not None and isinstance(self._graph.memory, GraphCache):
            self._graph.memory.save()

    def is_dirty(self) -> bool:
        if self.workdir is None:
            return False
        result = self.git(
            f"--work-tree={self.workdir}",
            "status",
            "--porcelain",
            "--untracked-files=no",
            check=False,
        )
        return result.returncode != 0 or bool(result.stdout.strip())

    def identity(self) -> str:
        """`Name <email>` as git itself would sign a commit, or git's own refusal."""
        result = self.git("var", "GIT_COMMITTER_IDENT", check=False)
        if result.returncode != 0:
            lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
            why = lines[-1].removeprefix("fatal: ") if lines else "no identity"
            raise RepositoryError(
                f"git has no identity to sign records with ({why}): run "
                'git config --global user.name "Your Name" and '
                "git config --global user.email you@example.com."
            )
        ident = result.stdout.strip()
        return ident.rsplit(" ", 2)[0]

    # ---- the current task -------------------------------------------------

    def current_task(self) -> str | None:
        try:
            text = (self.gitdir / TASK_FILE).read_text(encoding="utf-8").strip()
        except (FileNotFoundError, UnicodeDecodeError):
            return None
        return text or None

    def set_current_task(self, task: str) -> None:
        path = self.gitdir / TASK_FILE
        tmp = path.with_name(f"{TASK_FILE}.{os.getpid()}.tmp")
        tmp.write_text(task + "\n", encoding="utf-8")
        os.replace(tmp, path)

    # ---- reading notes ----------------------------------------------------

    def notes_refs(self) -> list[str]:
        names = [NOTES_REF] if NOTES_REF in self.repo.references else []
        names += sorted(
            name
            for name in self.repo.references
            if name.startswith(REMOTE_NOTES_PREFIX) and name.endswith(REMOTE_NOTES_SUFFIX)
        )
        return names

    def ref_targets(self) -> dict[str, str]:
        """Each notes ref and its target: cheap, for noticing that something was written."""
        targets = {}
        for name in self.notes_refs():
            ref = self.repo.references.get(name)
            if ref is not None:
                targets[name] = str(ref.resolve().target)
                self._notes_commit(name, targets[name])
        return targets

    def _notes_commit(self, name: str, target: str) -> pygit2.Commit:
        """The commit a notes ref points at; a ref at anything else stops every command."""
        obj = self.repo.get(target)
        if isinstance(obj, pygit2.Commit):
            return obj
        if name == NOTES_REF:
            raise RepositoryError(not_a_commit(target))
        raise RepositoryError(
            f"{name} points at {target[:12]}, which is not a commit; majordomus will not read "
            f"it: inspect it with git cat-file -t {target[:12]}, then delete it "
            f"(git update-ref -d {name}) and fetch again."
        )

    def read_notes(self) -> NoteSet:
        """Every note of every notes ref, read in one pass (through the read cache).

        In a partial clone, note objects the clone left out are fetched from the
        promisor remote in one batch (`fetch_missing`), then read; when they cannot
        be, the read stops (exit 3) rather than answer from what happens to be here.
        """
        noteset, missing = self._read_present()
        if not missing or not self.is_partial():
            return noteset
        remote, reason = "the promisor remote", "majordomus did not ask it"
        asked: set[str] = set()
        # One batch brings each tree with everything under it; a second round is
        # only for objects the first could not name (under a tree that was missing).
        while self.fetch_missing is not None and missing - asked:
            asked |= missing
            remote, failure = self.fetch_missing(sorted(missing))
            reason = failure or "it did not send them"
            noteset, missing = self._read_present()
        if missing:
            raise RepositoryError(
                f"{len(missing)} note object(s) are missing from this partial clone and "
                f"{remote} did not send them ({reason}); check that {remote} is reachable, "
                f"then run majordomus fetch {remote}."
            )
        return noteset

    def _read_present(self) -> tuple[NoteSet, set[str]]:
        """The notes whose objects are here, and the ids of the note objects that are not.

        A missing object is never cached: it can arrive with the next fetch.
        """
        cache = self._read_cache()
        found: dict[str, dict[str, str]] = {}  # commit -> blob -> first ref holding it
        unreadable: list[UnreadableNote] = []
        targets: dict[str, str] = {}
        trees: list[str] = []
        missing: set[str] = set()
        for name in self.notes_refs():
            target, tree_id = self._notes_tree_id(name)
            targets[name] = target
            trees.append(tree_id)
            pairs = cache.trees.get(tree_id)
            if pairs is None:
                lacking: set[str] = set()
                pairs = tuple(notestree.walk_present(self.repo, tree_id, lacking))
                if lacking:
                    missing |= lacking
                    for object_id in sorted(lacking):
                        reason = f"notes tree {object_id[:12]} is missing; not read"
                        unreadable.append(UnreadableNote("", name, reason))
                else:
                    cache.put_tree(tree_id, pairs)
            for commit, blob in pairs:
                found.setdefault(commit, {}).setdefault(blob, name)
        commits: dict[str, NotesOn] = {}
        for commit, blobs in found.items():
            readable: list[tuple[str, tuple[tuple[Summary, ...], int]]] = []
            for blob, name in blobs.items():
                entry = self._blob_entry(blob, cache)
                if entry is None:
                    missing.add(blob)
                    why = f"note object {blob[:12]} is missing; not read"
                    unreadable.append(UnreadableNote(commit, name, why))
                elif isinstance(entry, str):
                    unreadable.append(UnreadableNote(commit, name, entry))
                else:
                    readable.append((blob, entry))
            if len(readable) == 1:
                blob, (summaries, invalid) = readable[0]
                commits[commit] = NotesOn((blob,), summaries, invalid)
            elif readable:
                ids = tuple(blob for blob, _ in readable)
                note = self.note(ids)
                commits[commit] = NotesOn(ids, summarise(note), note.invalid)
        self._current_blobs = {blob for blobs in found.values() for blob in blobs}
        cache.save(trees, self._current_blobs)
        return NoteSet(commits, tuple(unreadable), targets, len(missing)), missing

    def is_partial(self) -> bool:
        """Whether git may have left objects out of this clone (a promisor remote is set)."""
        config = self.repo.config
        for entry in config:
            name = entry.name.lower()
            if name == "extensions.partialclone" and entry.value:
                return True
            if name.startswith("remote.") and name.endswith(".promisor"):
                with contextlib.suppress(pygit2.GitError, ValueError):
                    if config.get_bool(entry.name):
                        return True
        return False

    def note(self, blobs: Sequence[str]) -> Note:
        """The united note of readable blobs, parsed (once per process)."""
        return self.blobs.note(blobs)

    def _read_cache(self) -> ReadCache:
        if self._disk_cache is None:
            self._disk_cache = ReadCache(self.commondir / CACHE_FILE)
        return self._disk_cache

    def drop_cache(self) -> bool:
        """Remove every derived cache file; the next command rebuilds what it needs."""
        dropped = False
        for name in CACHE_FILES:
            with contextlib.suppress(FileNotFoundError):
                (self.commondir / name).unlink()
                dropped = True
        self._disk_cache = self._graph = None
        return dropped

    def _blob_entry(self, blob: str, cache: ReadCache) -> BlobEntry | None:
        """A note's summaries (or why it is unreadable); None when its blob is not here."""
        entry = cache.blobs.get(blob)
        if entry is None:
            parsed = self.blobs.parse(blob)
            if isinstance(parsed, MissingObjectError):
                return None
            if isinstance(parsed, NoteError):
                entry = str(parsed)
            else:
                # Summarised as `note` presents it: records de-duplicated by id.
                united = union([parsed])
                entry = (summarise(united), united.invalid)
            cache.put_blob(blob, entry)
        return entry

    def _notes_tree_id(self, name: str) -> tuple[str, str]:
        """A notes ref's target and the id of its tree, which may be missing from a partial
        clone; a ref at anything but a commit stops every command."""
        target = str(self.repo.references[name].resolve().target)
        return target, str(self._notes_commit(name, target).tree_id)

    def notes_commits(self) -> list[str]:
        """The commit each notes ref points at (what holds every object the notes need)."""
        targets = [str(self.repo.references[name].resolve().target) for name in self.notes_refs()]
        return [t for t in targets if isinstance(self.repo.get(t), pygit2.Commit)]

    def preload(self, blobs: Collection[str]) -> None:
        """Parse many notes through the document cache (decoding beats parsing TOML)."""
        missing = [blob for blob in blobs if not self.blobs.is_parsed(blob)]
        if not missing:
            return
        documents = DocumentCache(self.commondir / DOCUMENTS_FILE)
        for blob in missing:
            document = documents.get(blob)
            if document is None:
                try:
                    document = load_document(self.blobs.data(blob))
                except MissingObjectError:
                    continue
                except NoteError:
                    # Not one TOML document: read the way every other read does.
                    self.blobs.parse(blob)
                    continue
                documents.put(blob, document)
            self.blobs.remember(blob, note_from_document(document))
        documents.save(self._current_blobs or blobs)

    # ---- writing notes ----------------------------------------------------

    def append(
        self,
        commit: str,
        records: Sequence[Record],
        message: str,
        *,
        timeout_s: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        author: str | None = None,
    ) -> WriteReport:
        """Append records to the note on `commit`, all or nothing, by compare-and-swap."""
        author = author or self.identity()
        name, _, email = author.rpartition(" <")

        def build(
            tree: pygit2.Tree | None, parents: list[pygit2.Oid]
        ) -> tuple[pygit2.Oid, tuple[str, int]]:
            blob_id, position = _appended_blob(self.repo, self.blobs, tree, commit, records)
            now = datetime.datetime.now(datetime.UTC)
            signature = pygit2.Signature(name, email.rstrip(">"), int(now.timestamp()), 0)
            tree_id = notestree.insert(self.repo, tree, commit, blob_id)
            notes_commit = self.repo.create_commit(
                None, signature, signature, message + "\n", tree_id, parents
            )
            return notes_commit, (str(blob_id), position)

        interrupt.writing(records[0].kind, records[0].id)
        try:
            swap, (blob, position) = self.ref.swap(
                build, message, "nothing was recorded", timeout_s, sleep, monotonic
            )
        except MissingObjectError as error:
            raise RepositoryError(
                f"note object {error.object_id[:12]} is missing from this clone; nothing was "
                "recorded: run majordomus fetch, then try again."
            ) from None
        return WriteReport(
            notes_commit=swap.target,
            attempts=swap.attempts,
            stale_locks=swap.stale_locks,
            parent=swap.parent,
            blob=blob,
            position=position,
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

        def build(
            tree: pygit2.Tree | None, parents: list[pygit2.Oid]
        ) -> tuple[pygit2.Oid | None, None]:
            changes = {}
            for commit, records in notes.items():
                # Another writer may have copied some of them meanwhile: never twice.
                found = notestree.find(self.repo, tree, commit) if tree is not None else iter(())
                have = self.blobs.record_ids([str(blob) for blob in found])
                missing = [record for record in records if record.id not in have]
                if missing:
                    blob, _ = _appended_blob(self.repo, self.blobs, tree, commit, missing)
                    changes[commit] = blob
            if not changes:
                return None, None
            signature = self._merge_signature()
            tree_id = notestree.insert_many(self.repo, tree, changes)
            notes_commit = self.repo.create_commit(
                None, signature, signature, message + "\n", tree_id, parents
            )
            return notes_commit, None

        swap, _ = self.ref.swap(build, message, "nothing was adopted", timeout_s, sleep, monotonic)
        return swap

    def check_writable(self) -> None:
        """Refuse early when the notes ref is something a write would have to destroy."""
        self.ref.check_writable()

    def lock_paths(self) -> list[Path]:
        return self.ref.lock_paths()

    def stale_locks(self, older_than_s: float = STALE_LOCK_S) -> list[StaleLock]:
        return self.ref.stale_locks(older_than_s)

    # ---- merging notes refs (remote) ----------------------------------------------------

    def notes_target(self) -> str | None:
        """Where the local notes ref points, or None when nothing was written here yet."""
        return self.ref_target(NOTES_REF)

    def ref_target(self, name: str) -> str | None:
        ref = self.repo.references.get(name)
        return None if ref is None else str(ref.resolve().target)

    def delete_refs(self, prefix: str) -> None:
        """Remove every ref under `prefix` (a private namespace of fetched records)."""
        for name in [n for n in self.repo.references if n.startswith(prefix)]:
            with contextlib.suppress(KeyError, pygit2.GitError):
                self.repo.references.delete(name)

    def merge_notes(
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
        their_commit = self.repo.get(theirs)
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
        try:
            swap, merged = self.ref.swap(
                build, message, "nothing was merged", timeout_s, sleep, monotonic
            )
        except MissingObjectError as error:
            raise RepositoryError(
                f"{error}; the fetched records are incomplete and nothing was merged: run "
                "majordomus fetch again (in a partial clone it brings what the notes need)."
            ) from None
        return MergeReport(
            merged.outcome,
            swap.target,
            merged.records_added,
            merged.notes_united,
            merged.notes_raw,
            swap.attempts,
        )

    def merger(self) -> Merger:
        """What unites fetched notes into ours, reading through this store's caches."""
        return Merger(self.repo, self.blobs, self._note_copies, self._merge_signature)

    def _merge_signature(self) -> pygit2.Signature:
        # The notes commit's author is bookkeeping, not part of any record: a CI
        # job without a git identity must still be able to merge what it fetched.
        try:
            name, _, email = self.identity().rpartition(" <")
        except RepositoryError:
            name, email = "majordomus", "majordomus@localhost>"
        now = datetime.datetime.now(datetime.UTC)
        return pygit2.Signature(name, email.rstrip(">"), int(now.timestamp()), 0)

    def _note_copies(self, tree: pygit2.Tree | None) -> dict[str, list[str]]:
        """Annotated object -> the blob ids of its notes (more than one only in a damaged tree)."""
        copies: dict[str, list[str]] = {}
        if tree is None:
            return copies
        pairs = self._read_cache().trees.get(str(tree.id))
        for commit, blob_id in notestree.walk(self.repo, tree) if pairs is None else pairs:
            copies.setdefault(commit, []).append(blob_id)
        return copies


def _joined(texts: Sequence[bytes]) -> bytes:
    return b"\n".join(text if text.endswith(b"\n") else text + b"\n" for text in texts)


def _appended_blob(
    repo: pygit2.Repository,
    blobs: NoteBlobs,
    tree: pygit2.Tree | None,
    commit: str,
    records: Sequence[Record],
) -> tuple[pygit2.Oid, int]:
    """The note on `commit` with these records appended, written as a blob, and the
    position of the first of them among the note's records."""
    texts = []
    for blob_id in notestree.find(repo, tree, commit) if tree is not None else []:
        try:
            data = blobs.data(str(blob_id))
            parse_note(data)
            texts.append(data)
        except NoteError as error:
            raise RepositoryError(
                f"the note on {commit[:12]} cannot be read ({error}); majordomus will not "
                f"overwrite it: inspect it with git notes --ref=majordomus show {commit[:12]}."
            ) from None
    # Two copies of one note (a damaged tree) become one, each copy's text kept.
    existing = (texts[0] if len(texts) == 1 else _joined(texts)) if texts else None
    try:
        data = append_note(existing, records)
    except NoteError as error:
        raise RepositoryError(
            f"the note on {commit[:12]} is not in majordomus format ({error}); majordomus "
            "will not overwrite it: inspect it with git notes --ref=majordomus show "
            f"{commit[:12]}."
        ) from None
    written = union([parse_note(data)]).records
    first = records[0]
    position = next(i for i, r in enumerate(written) if (r.kind, r.id) == (first.kind, first.id))
    return repo.create_blob(data), position
