"""The repository as the rest of the package sees it: commits, the current task, notes read
in bulk (through the read cache), records written by compare-and-swap, fetched notes merged.

The jobs behind it have their own modules: `location` finds and opens the repository,
`notestree` lays notes out as git does, `blobs` reads and parses note blobs, `notesread`
reads every note (fetching what a partial clone left out), `notesref` moves the notes
ref by compare-and-swap, `merge` unites fetched notes.
"""

from __future__ import annotations

import contextlib
import datetime
import itertools
import os
import subprocess
import time
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import IO, TYPE_CHECKING, NamedTuple

from majordomus import gitfiles, interrupt, notestree
from majordomus.blobs import NoteBlobs
from majordomus.cachefile import GRAPH_FILE_NAME as GRAPH_FILE
from majordomus.errors import RefusedError, RepositoryError
from majordomus.graph import CommitGraph
from majordomus.graphcache import GraphCache
from majordomus.location import open_repository
from majordomus.notesread import (
    REMOTE_NOTES_SUFFIX,
    Fetcher,
    Listing,
    NotesReader,
    Plain,
    skipped_ref,
)
from majordomus.notesref import NOTES_REF, STALE_LOCK_S, NotesRef
from majordomus.notestree import MissingObjectError
from majordomus.records import (
    REFUSED,
    Note,
    NoteError,
    Record,
    Shown,
    appended,
    parse_note,
    union,
)
from majordomus.values import (
    MergeReport,
    NoteSet,
    StaleLock,
    Swap,
    WriteReport,
)

if TYPE_CHECKING:
    import pygit2

    from majordomus.merge import Merged, Merger

__all__ = ["NOTES_REF", "MissingObjectError", "Store"]

TASK_FILE = "majordomus-task"


class Store:
    """One repository, opened once per command."""

    def __init__(self, path: str, environ: Mapping[str, str]) -> None:
        self._opened = opened = open_repository(path, environ)
        self.gitdir, self.workdir, self.commondir = opened.gitdir, opened.workdir, opened.commondir
        self.environ: Mapping[str, str] = opened.environ
        self._graph: CommitGraph | None = None
        self._started: _Started | None = None
        self._identity: str | None = None
        self._asked: subprocess.Popen[str] | None = None  # git asked for the identity
        self._replaced: bool | None = None  # whether a replacement is in force
        self._remotes: list[str] | None = None
        self._fetch_missing: Fetcher | None = None
        # Where a warning goes (a remote-tracking notes ref left out); None: nowhere.
        self.warn: Callable[[str], None] | None = None

    # libgit2 is loaded and the repository opened when a command first needs more than
    # its refs: a read the caches answer never pays for it.
    @cached_property
    def repo(self) -> pygit2.Repository:
        return self._opened.repo

    @cached_property
    def blobs(self) -> NoteBlobs:
        return NoteBlobs(lambda: self.repo, self._opened.objects_by_git, self._stored)

    def _stored(self, blob: str) -> Note | None:
        """A note the document cache holds (the reader is made after the blobs it reads)."""
        return self.reader.stored(blob)

    @cached_property
    def ref(self) -> NotesRef:
        return NotesRef(self.repo, self.commondir, self.environ)

    @cached_property
    def reader(self) -> NotesReader:
        opened = self._opened
        plain = None
        if opened.refs is not None:
            plain = Plain(
                self._plain_targets,
                opened.objects_by_git,
                opened.shown_by_git,
                opened.tree_notes_by_git,
            )
        reader = NotesReader(lambda: self.repo, self.commondir, self.blobs, plain)
        reader.fetch_missing = self._fetch_missing
        reader.warn = self._warn
        return reader

    def _warn(self, text: str) -> None:
        if self.warn is not None:
            self.warn(text)

    def skipped_refs(self) -> list[str]:
        """What is wrong with each remote-tracking notes ref this command left out (it does
        not point at a commit), and how to remove it."""
        return [skipped_ref(name, target) for name, target in self.reader.skipped.items()]

    # ---- git subprocesses ------------------------------------------------

    def git(
        self, *args: str, check: bool = True, stored: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """Run the user's own git on this repository; arguments never pass through a shell.
        `stored`: on the history as stored (`stored_environ`)."""
        command = self._git_argv(args)
        try:
            result = subprocess.run(
                command,
                capture_output=True,
                text=True,
                env=self.stored_environ() if stored else dict(self.environ),
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
        refs = self._opened.refs
        found = refs.head() if refs is not None else None
        if found is not None:
            return found
        import pygit2

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
        # A commit's full id (what CI passes) is checked by git while libgit2 is not loaded.
        read = self._opened.objects_by_git([rev]) if gitfiles.is_object_id(rev) else None
        if read is not None and (read.get(rev) or ("",))[0] == "commit":
            return rev
        if self._opened.by_git:
            # A branch, a tag, HEAD~3: named by git while libgit2 is not loaded (one
            # process, not 30 ms of loading); a name git does not know goes to libgit2,
            # which says why in the words below.
            named = self.git(
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                f"{rev}^{{commit}}",
                check=False,
            )
            found = named.stdout.strip()
            if named.returncode == 0 and gitfiles.is_object_id(found):
                return found
        import pygit2

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
        import pygit2

        try:
            obj = self.repo.get(hex_id)
        except (ValueError, pygit2.GitError):
            return False
        return isinstance(obj, pygit2.Commit)

    def commits_here(self, ids: Collection[str]) -> set[str]:
        """Which of these ids name a commit in this repository."""
        found = self._opened.objects_by_git(list(ids)) if ids else {}
        if found is None:
            return {hex_id for hex_id in ids if self.has_commit(hex_id)}
        return {hex_id for hex_id, obj in found.items() if obj is not None and obj[0] == "commit"}

    def commit_time(self, hex_id: str) -> int | None:
        found = self._opened.objects_by_git([hex_id])
        if found is not None:
            read = found.get(hex_id)
            return gitfiles.committer_time(read[1]) if read and read[0] == "commit" else None
        import pygit2

        try:
            obj = self.repo.get(hex_id)
        except (ValueError, pygit2.GitError):
            return None
        return obj.commit_time if isinstance(obj, pygit2.Commit) else None

    def is_shallow(self) -> bool:
        if self._opened.refs is not None:  # libgit2's test: a `shallow` file, not empty
            with contextlib.suppress(OSError):
                return (self.commondir / "shallow").stat().st_size > 0
            return False
        return bool(self.repo.is_shallow)

    # ---- the commit graph (graph.Source) -----------------------------------

    def walk(self, tips: Sequence[str], hide: Sequence[str]) -> list[list[str]]:
        """`git rev-list --parents TIPS ^HIDE`: git's order, and a shallow cut as git sees it."""
        args = ["rev-list", "--parents", *tips, *(f"^{commit}" for commit in hide)]
        return [line.split() for line in self.git_output(*args).splitlines()]

    def start_stream(self, tips: Sequence[str]) -> None:
        """Start the git of `stream(tips, topo=False)` now, at the lowest priority, what it
        writes kept in a temporary file: it runs on a CPU the command leaves idle (while
        this process works on one), and `stream` then reads what it wrote rather than
        wait for git's walk. Nothing where git cannot start."""
        if self._started is not None:
            return
        import tempfile

        try:  # closed by `_Started.stop`, once read or never needed
            out = tempfile.TemporaryFile()  # noqa: SIM115
        except OSError:  # no temporary folder to write in: the walk is made when asked
            return
        try:
            process = subprocess.Popen(
                self._git_argv(_walk_args(topo=False)),
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.DEVNULL,  # a failure is walked again as asked, said then
                env=self._buffered_env(),
            )
        except OSError:
            out.close()
            return
        # Lowered once started (a function run in the child would have it forked whole,
        # not spawned: 7.3 ms against 0.5 ms from a 60 MiB process), and before it is given
        # its tips: git reads every tip before it walks, so it walks at the lowest priority.
        _lowest_priority(process.pid)
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # git refused a tip: `stream` says so
            process.stdin.write(_tips(tips).encode("ascii"))
            process.stdin.close()
        self._started = _Started(tuple(tips), process, out)
        weakref.finalize(self, _Started.stop, self._started)  # never read: stopped

    def stream(self, tips: Sequence[str], topo: bool) -> Iterator[list[str]]:
        """`git rev-list --parents` of TIPS, line by line, never held whole."""
        started, self._started = self._started, None
        given = 0
        if started is not None:
            if not topo and started.tips == tuple(tips):
                for walked in started.lines():
                    yield walked
                    given += 1
                if started.process.returncode == 0:
                    return
                # It failed (a full disk, say; or the history is damaged): walked again,
                # past the lines it gave (the same walk gives the same lines), and a walk
                # that fails again says why.
            started.stop()
        args = _walk_args(topo)
        process = self._buffered_git(args, stdin=True)
        assert process.stdin is not None and process.stdout is not None
        assert process.stderr is not None
        with process:
            try:
                # git reads every tip before it writes a line: no pipe can fill both ways.
                with contextlib.suppress(BrokenPipeError):  # git refused a tip: said below
                    process.stdin.write(_tips(tips))
                    process.stdin.close()
                for line in itertools.islice(process.stdout, given, None):
                    yield line.split()
            except BaseException:
                process.kill()  # the reader stopped early: git is not left writing
                raise
            err = process.stderr.read()
        _check_exit(args[0], process.returncode, err)

    def git_output(self, *args: str) -> str:
        """`git` that writes a lot to stdout and little to stderr (`rev-list`), read to its
        end in one call (a walk writes megabytes)."""
        process = self._buffered_git(args, stdin=False)
        assert process.stdout is not None and process.stderr is not None
        with process:
            out = process.stdout.read()
            err = process.stderr.read()  # a few lines at most: it cannot fill its pipe
        _check_exit(args[0], process.returncode, err)
        return out

    def _buffered_git(self, args: Sequence[str], stdin: bool) -> subprocess.Popen[str]:
        """git with its output buffered: GIT_FLUSH=0, since into a pipe git would flush
        every line of a walk, a write per commit."""
        try:
            return subprocess.Popen(
                self._git_argv(args),
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self._buffered_env(),
                text=True,
                encoding="utf-8",
                errors="replace",
            )
        except FileNotFoundError:
            raise RepositoryError("git is not installed or not on PATH; install git.") from None

    def stored_environ(self) -> dict[str, str]:
        """git's environment for the history as stored, whatever replacement (`git replace`,
        a grafts file) this clone has in force: the facts a record states travel to clones
        that have none."""
        return {**self.environ, "GIT_NO_REPLACE_OBJECTS": "1", "GIT_GRAFT_FILE": os.devnull}

    def _git_argv(self, args: Sequence[str]) -> list[str]:
        return ["git", f"--git-dir={self.gitdir}", *args]

    def _buffered_env(self) -> dict[str, str]:
        """GIT_FLUSH=0: into a pipe or a file git would flush every line of a walk."""
        return {**self.environ, "GIT_FLUSH": "0"}

    def parents(self, commit: str) -> tuple[str, ...] | None:
        # Read by git while libgit2 is not loaded (one process for a chain: `reading`).
        found = self._opened.objects_by_git([commit]) if gitfiles.is_object_id(commit) else None
        if found is not None:
            read = found.get(commit)
            if read is None or read[0] != "commit":
                return None
            parents = gitfiles.commit_parents(read[1])
            if parents is not None:  # else headers not as git writes them: libgit2 reads them
                # A shallow clone's boundary commit has none, as libgit2 and a walk see it.
                return () if parents and commit in self.shallow_boundary() else parents
        import pygit2

        try:
            obj = self.repo.get(commit)
        except (ValueError, pygit2.GitError):
            return None
        if not isinstance(obj, pygit2.Commit):
            return None
        return tuple(str(parent) for parent in obj.parent_ids)

    def reading(self) -> contextlib.AbstractContextManager[object]:
        """Objects asked for one by one within the block (`parents` along a chain) read by
        one git process while libgit2 is not loaded."""
        return self._opened.git_batch()

    def true_parents(self, commit: str) -> tuple[str, ...] | None:
        import pygit2

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

    def history_replaced(self) -> bool:
        """Whether git reads this history through replacements, as its rev-list and
        merge-base do (so majordomus' answers, which come from them): a grafts file, or a
        replace ref (under GIT_REPLACE_REF_BASE, else refs/replace/) unless
        GIT_NO_REPLACE_OBJECTS is set or core.useReplaceRefs is false. Asked once."""
        if self._replaced is None:
            self._replaced = self._replacements()
        return self._replaced

    def _replacements(self) -> bool:
        grafts = self.environ.get("GIT_GRAFT_FILE") or str(self.commondir / "info" / "grafts")
        if os.path.exists(grafts):
            return True
        if "GIT_NO_REPLACE_OBJECTS" in self.environ:
            return False
        base = self.environ.get("GIT_REPLACE_REF_BASE") or "refs/replace/"
        base = base if base.endswith("/") else base + "/"
        refs = self._opened.refs
        if refs is None and not (self.commondir / "reftable").exists():  # files, read here
            found = gitfiles.Found(str(self.gitdir), str(self.workdir or ""), str(self.commondir))
            refs = gitfiles.Refs(found)
        if refs is not None:
            if not refs.has_under(base):
                return False
        else:
            listed = self.git("for-each-ref", "--count=1", "--format=%(refname)", base)
            if not listed.stdout.strip():
                return False
        used = self.git("config", "--type=bool", "--get", "core.useReplaceRefs", check=False)
        return used.stdout.strip() != "false"

    def shallow_boundary(self) -> frozenset[str]:
        if not self.is_shallow():
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
        result = self.git("rev-list", "--left-right", "--count", f"{commit}...{base}", check=False)
        _check_exit("rev-list", result.returncode, result.stderr)  # a walk, as every other
        out = result.stdout.split()
        return int(out[0]), int(out[1])

    def current_branch(self) -> str | None:
        """The short name of the branch HEAD is on, or None when detached or unborn."""
        import pygit2

        try:
            if self.repo.head_is_detached or self.repo.head_is_unborn:
                return None
            return self.repo.head.shorthand
        except pygit2.GitError:
            return None

    def config_value(self, name: str) -> str | None:
        import pygit2

        try:
            value = self.repo.config[name]
        except (KeyError, pygit2.GitError, ValueError):
            return None
        return value if isinstance(value, str) else None

    def symbolic_target(self, name: str) -> str | None:
        """Where a symbolic ref such as refs/remotes/origin/HEAD points, when it does."""
        import pygit2

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

    def ask_identity(self) -> None:
        """Start asking git for `identity` now: a write asks it while libgit2 loads."""
        if self._identity is None and self._asked is None:
            self._asked = self._buffered_git(["var", "GIT_COMMITTER_IDENT"], stdin=False)

    def settle(self) -> None:
        """Wait for what was asked early (a command stopping before it needed the answer)."""
        asked, self._asked = self._asked, None
        if asked is not None:
            asked.communicate()

    def identity(self) -> str:
        """`Name <email>` as git itself would sign a commit, or git's own refusal; asked of
        git once per command (a write that retries signs every attempt)."""
        if self._identity is None:
            self.ask_identity()
            asked, self._asked = self._asked, None
            assert asked is not None
            out, err = asked.communicate()
            if asked.returncode != 0:
                lines = [line for line in err.strip().splitlines() if line.strip()]
                why = lines[-1].removeprefix("fatal: ") if lines else "no identity"
                raise RepositoryError(
                    f"git has no identity to sign records with ({why}): run "
                    'git config --global user.name "Your Name" and '
                    "git config --global user.email you@example.com."
                )
            identity = out.strip().rsplit(" ", 2)[0]
            refused = REFUSED.search(identity)
            if refused is not None:
                # The author is shown to whoever reads the record: what a field may not
                # hold, the identity may not either.
                raise RefusedError(
                    f"your git identity holds the invisible or control character "
                    f"U+{ord(refused.group()):04X}, so nothing was recorded: fix user.name "
                    "and user.email (git config user.name / user.email)."
                )
            self._identity = identity
        return self._identity

    def remote_names(self) -> list[str]:
        """`git remote`, asked once per command (a push looks a name up several times)."""
        if self._remotes is None:
            self._remotes = self.git("remote").stdout.split()
        return self._remotes

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

    # ---- reading notes (notesread) ------------------------------------------------

    @property
    def fetch_missing(self) -> Fetcher | None:
        """Set by the caller that knows the remotes: fetches note objects a partial clone
        left out, in one batch; returns the remote it asked and why it failed (or None)."""
        return self._fetch_missing

    @fetch_missing.setter
    def fetch_missing(self, fetcher: Fetcher | None) -> None:
        self._fetch_missing = fetcher
        if "reader" in self.__dict__:  # made already: else it takes the fetcher when made
            self.reader.fetch_missing = fetcher

    def notes_refs(self) -> list[str]:
        return self.reader.notes_refs()

    def ref_targets(self) -> dict[str, str]:
        """Each notes ref and its target: cheap, for noticing that something was written.
        Read from the ref files when the layout is plain; a target that is not a commit is
        then refused by the read that follows, which opens it."""
        found = self._plain_targets()
        return found if found is not None else self.reader.ref_targets()

    def _plain_targets(self) -> dict[str, str] | None:
        refs = self._opened.refs
        return None if refs is None else refs.notes_targets(NOTES_REF, REMOTE_NOTES_SUFFIX)

    def read_notes(self, *, shown: Shown | None = None) -> NoteSet:
        """Every note of every notes ref, read in one pass (through the read cache);
        `shown`: the notes the caller shows whole next (see NotesReader.read_notes)."""
        return self.reader.read_notes(shown=shown)

    def note_listing(self) -> Listing | None:
        """The notes of every notes ref as their trees list them, no note read; None when
        only a full read can tell (see NotesReader.listing)."""
        return self.reader.listing()

    def notes_of(self, listing: Listing, commits: Collection[str]) -> NoteSet:
        """The notes of some commits of a `note_listing`, as `read_notes` reads them."""
        return self.reader.notes_of(listing, commits)

    def is_partial(self) -> bool:
        """Whether git may have left objects out of this clone (a promisor remote is set)."""
        return self.reader.is_partial()

    def note(self, blobs: Sequence[str]) -> Note:
        """The united note of readable blobs, parsed (once per process). A blob a read
        cache summarised that is not here any more is fetched first (`fetch_lost`)."""
        try:
            return self.blobs.note(blobs)
        except MissingObjectError as error:
            self.reader.fetch_lost(error.object_id, blobs)  # exit 3 unless all are here now
            return self.blobs.note(blobs)

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
        with self._opened.git_batch() as batch:
            if batch is not None:
                chosen = targets if targets is not None else self._plain_targets()
                try:
                    if chosen is not None:
                        attached = gitfiles.attached_notes(batch, list(chosen.values()), commit)
                        if attached is None:
                            return None
                        notes, odd = attached
                        return self._readable(notes, len(odd))
                except gitfiles.UnsureError:
                    pass  # libgit2 reads it, or refuses it with its own message
        import pygit2

        blobs: dict[str, None] = {}
        others: dict[tuple[str, str], None] = {}
        try:
            if targets is None:
                trees = [self.reader.notes_tree_id(name)[1] for name in self.notes_refs()]
            else:
                trees = [
                    str(self.reader.notes_commit(n, t).tree_id)
                    for n, t in targets.items()
                    if self.reader.is_read(n, t)
                ]
            for tree_id in trees:
                root = notestree.tree(self.repo, pygit2.Oid(hex=tree_id))
                for oid, kind in notestree.find_kinds(self.repo, root, commit):
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
            commits = [self.repo[target] for target in (old, new)]
            if not all(isinstance(commit, pygit2.Commit) for commit in commits):
                return None  # a notes ref at a tree or a tag is not read (NotesReader.is_read)
            old_tree, new_tree = (commit.peel(pygit2.Tree) for commit in commits)
            found = notestree.changed(self.repo, old_tree, new_tree)
        except (KeyError, ValueError, pygit2.GitError, MissingObjectError):
            return None
        return None if notestree.NAMELESS in found else found

    def notes_commits(self) -> list[str]:
        """The commit each notes ref points at (what holds every object the notes need)."""
        return self.reader.notes_commits()

    def prefetch(self, blobs: Sequence[str]) -> None:
        """Read a few notes in one go before they are parsed (see NoteBlobs.prefetch)."""
        self.blobs.prefetch(blobs)

    def preload(self, blobs: Collection[str], order: Iterable[str] = ()) -> None:
        """Parse many notes through the document cache (decoding beats parsing TOML); the
        notes it lacks read by one git process in a plain layout (see NotesReader.preload)."""
        self.reader.preload(blobs, order)

    def load(self, blobs: Iterable[str]) -> None:
        """Many notes about to be shown read in one go (see NotesReader.load)."""
        self.reader.load(blobs)

    def texts(self, blobs: Iterable[str]) -> dict[str, tuple[str | None, ...]]:
        """The JSON texts of the records of many notes about to be shown, as the document
        cache keeps them (see NotesReader.texts); a note it lacks is not in the answer."""
        return self.reader.texts(blobs)

    def drop_cache(self) -> bool:
        """Remove every derived cache file; the next command rebuilds what it needs."""
        self._graph = None
        return self.reader.drop_cache()

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
        import pygit2

        author = author or self.identity()
        name, _, email = author.rpartition(" <")

        def build(
            tree: pygit2.Tree | None, parents: list[pygit2.Oid]
        ) -> tuple[pygit2.Oid, tuple[str, int]]:
            blob_id, position = _appended_blob(
                self.repo, self.blobs, tree, commit, records, self.is_partial
            )
            now = datetime.datetime.now(datetime.UTC)
            signature = pygit2.Signature(name, email.rstrip(">"), int(now.timestamp()), 0)
            tree_id = notestree.insert(self.repo, tree, commit, blob_id)
            notes_commit = self.repo.create_commit(
                None, signature, signature, message + "\n", tree_id, parents
            )
            return notes_commit, (str(blob_id), position)

        interrupt.writing(records[0].kind, records[0].id)
        swap, (blob, position) = self.ref.swap(
            build, message, "nothing was recorded", timeout_s, sleep, monotonic
        )
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
                    blob, _ = _appended_blob(
                        self.repo, self.blobs, tree, commit, missing, self.is_partial
                    )
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
        import pygit2

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
        import pygit2

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
        swap, merged = self.ref.swap(
            build, message, "nothing was merged", timeout_s, sleep, monotonic
        )
        return MergeReport(
            merged.outcome,
            swap.target,
            merged.records_added,
            merged.notes_united,
            merged.notes_raw,
            swap.attempts,
            merged.left_out,
        )

    def merger(self) -> Merger:
        """What unites fetched notes into ours, reading through this store's caches."""
        from majordomus.merge import Merger  # only a fetch merges: reads start without it

        return Merger(self.repo, self.blobs, self.reader.note_copies, self._merge_signature)

    def _merge_signature(self) -> pygit2.Signature:
        # The notes commit's author is bookkeeping, not part of any record: a CI
        # job without a git identity must still be able to merge what it fetched.
        import pygit2

        try:
            name, _, email = self.identity().rpartition(" <")
        except RepositoryError:
            name, email = "majordomus", "majordomus@localhost>"
        now = datetime.datetime.now(datetime.UTC)
        return pygit2.Signature(name, email.rstrip(">"), int(now.timestamp()), 0)


def _walk_args(topo: bool) -> list[str]:
    """`git rev-list --parents` of the tips written to its standard input."""
    return ["rev-list", "--parents", *(["--topo-order"] if topo else []), "--stdin"]


def _tips(tips: Sequence[str]) -> str:
    return "".join(f"{tip}\n" for tip in tips)


def _lowest_priority(pid: int) -> None:
    """For a git started ahead of need: it yields every CPU to the work in hand."""
    with contextlib.suppress(OSError, AttributeError):  # AttributeError: not on this system
        os.setpriority(os.PRIO_PROCESS, pid, 19)


class _Started(NamedTuple):
    """A `git rev-list --parents` started ahead of need, writing into a temporary file."""

    tips: tuple[str, ...]
    process: subprocess.Popen[bytes]
    out: IO[bytes]

    def lines(self) -> Iterator[list[str]]:
        """Its lines as `Store.stream` gives them, read as git writes them, up to its end;
        a line it did not end (it failed, or was killed) is not one."""
        offset, pending = 0, b""
        try:
            while True:
                ended = self.process.poll() is not None  # before the read: nothing is missed
                chunk = os.pread(self.out.fileno(), 1 << 20, offset)
                if not chunk:
                    if ended:
                        break
                    time.sleep(0.002)
                    continue
                offset += len(chunk)
                *whole, pending = (pending + chunk).split(b"\n")
                for line in whole:
                    yield line.decode("utf-8", "replace").split()
        finally:
            self.stop()

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.kill()
            self.process.wait()
        self.out.close()


def _check_exit(command: str, returncode: int, err: str) -> None:
    """A walk git could not make: the history is damaged or incomplete (an object lost)."""
    if returncode != 0:
        lines = err.strip().splitlines()
        detail = (lines[-1] if lines else f"exit {returncode}").rstrip(".")
        raise RepositoryError(
            f"git {command} failed: {detail}; run git fsck to see what this clone lacks."
        )


def _joined(texts: Sequence[bytes]) -> bytes:
    return b"\n".join(text if text.endswith(b"\n") else text + b"\n" for text in texts)


def _appended_blob(
    repo: pygit2.Repository,
    blobs: NoteBlobs,
    tree: pygit2.Tree | None,
    commit: str,
    records: Sequence[Record],
    is_partial: Callable[[], bool],
) -> tuple[pygit2.Oid, int]:
    """The note on `commit` with these records appended, written as a blob, and the
    position of the first of them among the note's records. A gitlink at its paths (put
    there by hand: a merge never takes one) refuses the write; a symlink or a tree there
    is replaced by the note (a fetch can fast-forward onto a tree where a note belongs,
    which must not stop a write)."""
    texts = []
    notes = []
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
    return repo.create_blob(data), position


def _unreadable(commit: str, why: str) -> str:
    return (
        f"the note on {commit[:12]} cannot be read ({why}); majordomus will not overwrite "
        f"it: inspect it with git notes --ref=majordomus show {commit[:12]}."
    )
