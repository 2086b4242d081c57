"""The history as git tells it: commits named and read, walks of `git rev-list`, merge
bases, shallow boundaries, replacements; the `graph.Source` that `CommitGraph` answers
labels and orders from, and the graph cache that keeps what earlier commands learnt
(`GraphCache`)."""

from __future__ import annotations

import contextlib
import os
import time
import weakref
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING

from majordomus import gitfiles, gitobjects
from majordomus.cachefile import GRAPH_FILE_NAME, CacheFile
from majordomus.errors import RepositoryError
from majordomus.graph import CommitGraph
from majordomus.repository import Repository, check_exit
from majordomus.tuples import NamedTuple

if TYPE_CHECKING:
    import subprocess


class History:
    """The commits of one repository, as git reads them (through replacements) or as stored."""

    def __init__(self, repository: Repository) -> None:
        self.repository = repository
        self._graph: CommitGraph | None = None
        self._started: _Started | None = None
        self._replaced: bool | None = None  # whether a replacement is in force

    def head(self) -> str:
        refs = self.repository.refs
        found = refs.head() if refs is not None else None
        if found is not None:
            return found
        import pygit2

        try:
            if self.repository.repo.head_is_unborn:
                raise RepositoryError(
                    "HEAD has no commit yet; make a first commit so records have one to attach to."
                )
            return str(self.repository.repo.head.target)
        except pygit2.GitError as error:
            raise RepositoryError(f"cannot read HEAD: {error}.") from None

    def resolve(self, rev: str | None) -> str:
        if rev is None:
            return self.head()
        # A commit's full id (what CI passes) is checked by git while libgit2 is not loaded.
        read = self.repository.objects_by_git([rev]) if gitobjects.is_object_id(rev) else None
        if read is not None and (read.get(rev) or ("",))[0] == "commit":
            return rev
        if self.repository.by_git:
            # A branch, a tag, HEAD~3: named by git while libgit2 is not loaded (one
            # process, not 30 ms of loading); a name git does not know goes to libgit2,
            # which says why in the words below.
            named = self.repository.git(
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                f"{rev}^{{commit}}",
                check=False,
            )
            found = named.stdout.strip()
            if named.returncode == 0 and gitobjects.is_object_id(found):
                return found
        import pygit2

        try:
            obj = self.repository.repo.revparse_single(rev)
            commit = obj.peel(pygit2.Commit)
        except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
            if self.repository.repo.is_shallow:
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
            obj = self.repository.repo.get(hex_id)
        except (ValueError, pygit2.GitError):
            return False
        return isinstance(obj, pygit2.Commit)

    def commits_here(self, ids: Collection[str]) -> set[str]:
        """Which of these ids name a commit in this repository."""
        found = self.repository.objects_by_git(list(ids)) if ids else {}
        if found is None:
            return {hex_id for hex_id in ids if self.has_commit(hex_id)}
        return {hex_id for hex_id, obj in found.items() if obj is not None and obj[0] == "commit"}

    def commit_time(self, hex_id: str) -> int | None:
        found = self.repository.objects_by_git([hex_id])
        if found is not None:
            read = found.get(hex_id)
            return gitobjects.committer_time(read[1]) if read and read[0] == "commit" else None
        import pygit2

        try:
            obj = self.repository.repo.get(hex_id)
        except (ValueError, pygit2.GitError):
            return None
        return obj.commit_time if isinstance(obj, pygit2.Commit) else None

    def is_shallow(self) -> bool:
        if self.repository.refs is not None:  # libgit2's test: a `shallow` file, not empty
            with contextlib.suppress(OSError):
                return (self.repository.commondir / "shallow").stat().st_size > 0
            return False
        return bool(self.repository.repo.is_shallow)

    def walk(self, tips: Sequence[str], hide: Sequence[str]) -> list[list[str]]:
        """`git rev-list --parents TIPS ^HIDE`: git's order, and a shallow cut as git sees it."""
        args = ["rev-list", "--parents", *tips, *(f"^{commit}" for commit in hide)]
        return [line.split() for line in self.repository.git_output(*args).splitlines()]

    def start_stream(self, tips: Sequence[str]) -> None:
        """Start the git of `stream(tips, topo=False)` now, at the lowest priority, what it
        writes kept in a temporary file: it runs on a CPU the command leaves idle (while
        this process works on one), and `stream` then reads what it wrote rather than
        wait for git's walk. Nothing where git cannot start."""
        import subprocess

        if self._started is not None:
            return
        import tempfile

        try:  # closed by `_Started.stop`, once read or never needed
            out = tempfile.TemporaryFile()  # noqa: SIM115
        except OSError:  # no temporary folder to write in: the walk is made when asked
            return
        try:
            process = subprocess.Popen(
                self.repository.git_argv(_walk_args(topo=False)),
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.DEVNULL,  # a failure is walked again as asked, said then
                env=self.repository.buffered_env(),
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

    def stream(self, tips: Sequence[str], topo: bool) -> Iterator[bytes]:
        """`git rev-list --parents` of TIPS as git writes it, in blocks of whole lines, never
        held whole."""
        started, self._started = self._started, None
        given = 0
        if started is not None:
            if not topo and started.tips == tuple(tips):
                for block in started.blocks():
                    yield block
                    given += block.count(b"\n")
                if started.process.returncode == 0:
                    return
                # It failed (a full disk, say; or the history is damaged): walked again,
                # past the lines it gave (the same walk gives the same lines), and a walk
                # that fails again says why.
            started.stop()
        args = _walk_args(topo)
        process = self.repository.binary_git(args)
        assert process.stdin is not None and process.stdout is not None
        assert process.stderr is not None
        with process:
            try:
                # git reads every tip before it writes a line: no pipe can fill both ways.
                with contextlib.suppress(BrokenPipeError):  # git refused a tip: said below
                    process.stdin.write(_tips(tips).encode("ascii"))
                    process.stdin.close()
                pending = b""
                while chunk := os.read(process.stdout.fileno(), 1 << 20):
                    whole, pending = _whole_lines(pending + chunk)
                    if given and whole:  # the lines a failed walk gave already
                        skipped = min(given, whole.count(b"\n"))
                        given -= skipped
                        whole = whole.split(b"\n", skipped)[-1]
                    if whole:
                        yield whole
            except BaseException:
                process.kill()  # the reader stopped early: git is not left writing
                raise
            err = process.stderr.read()
        check_exit(args[0], process.returncode, err.decode("utf-8", "replace"))

    def parents(self, commit: str) -> tuple[str, ...] | None:
        # Read by git while libgit2 is not loaded (one process for a chain: `reading`).
        found = (
            self.repository.objects_by_git([commit]) if gitobjects.is_object_id(commit) else None
        )
        if found is not None:
            read = found.get(commit)
            if read is None or read[0] != "commit":
                return None
            parents = gitobjects.commit_parents(read[1])
            if parents is not None:  # else headers not as git writes them: libgit2 reads them
                # A shallow clone's boundary commit has none, as libgit2 and a walk see it.
                return () if parents and commit in self.shallow_boundary() else parents
        import pygit2

        try:
            obj = self.repository.repo.get(commit)
        except (ValueError, pygit2.GitError):
            return None
        if not isinstance(obj, pygit2.Commit):
            return None
        return tuple(str(parent) for parent in obj.parent_ids)

    def reading(self) -> contextlib.AbstractContextManager[object]:
        """Objects asked for one by one within the block (`parents` along a chain) read by
        one git process while libgit2 is not loaded."""
        return self.repository.git_batch()

    def true_parents(self, commit: str) -> tuple[str, ...] | None:
        import pygit2

        try:
            kind, data = self.repository.repo.odb.read(commit)
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
            self._replaced = _replacements(self.repository)
        return self._replaced

    def shallow_boundary(self) -> frozenset[str]:
        if not self.is_shallow():
            return frozenset()
        try:
            text = (self.repository.commondir / "shallow").read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError):
            text = ""
        return frozenset(text.split())

    def merge_base(self, a: str, b: str, *, stored: bool = False) -> str | None:
        """`git merge-base A B`; `stored`: in the history as stored (`stored_environ`)."""
        result = self.repository.git("merge-base", a, b, check=False, stored=stored)
        return result.stdout.strip() or None if result.returncode == 0 else None

    def between(self, base: str, tip: str) -> list[str]:
        """`git rev-list BASE..TIP` in the history as stored: newest first."""
        return self.repository.git("rev-list", f"{base}..{tip}", stored=True).stdout.split()

    def since(self, rev: str, since: int) -> list[str]:
        """The commits REV reaches committed after `since` (epoch seconds), merges left out."""
        listed = self.repository.git("rev-list", "--no-merges", f"--max-age={since}", rev)
        return listed.stdout.split()

    def boundary_walk(self, tips: Sequence[str], rev: str) -> list[str]:
        """`git rev-list --parents --boundary TIPS ^REV`: each line a commit and its parents,
        a boundary commit's line starting with `-`."""
        args = ["rev-list", "--parents", "--boundary", *tips, f"^{rev}"]
        return self.repository.git(*args).stdout.splitlines()

    def descends(self, commit: str, ancestor: str) -> bool:
        """Whether COMMIT has ANCESTOR in its history, as libgit2 reads it (the notes
        ref's commits, which no replacement touches)."""
        return bool(self.repository.repo.descendant_of(commit, ancestor))

    def ahead_behind(self, commit: str, base: str) -> tuple[int, int]:
        """(commits in `commit` not in `base`, commits in `base` not in `commit`)."""
        result = self.repository.git(
            "rev-list", "--left-right", "--count", f"{commit}...{base}", check=False
        )
        check_exit("rev-list", result.returncode, result.stderr)  # a walk, as every other
        out = result.stdout.split()
        return int(out[0]), int(out[1])

    def graph(self) -> CommitGraph:
        """The graph's answers for this command, with what earlier commands kept."""
        if self._graph is None:
            self._graph = CommitGraph(self, GraphCache(self.repository.commondir / GRAPH_FILE_NAME))
        return self._graph


READ_SIZE = 1 << 20  # what a walk started ahead is read in, at first


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

    def blocks(self) -> Iterator[bytes]:
        """What it writes, in blocks of whole lines, read as git writes them, up to its end;
        a line it did not end (it failed, or was killed) is not one."""
        offset, size = 0, READ_SIZE  # where the first line not given yet starts; a read's size
        try:
            while True:
                ended = self.process.poll() is not None  # before the read: nothing is missed
                if not ended and os.fstat(self.out.fileno()).st_size - offset < size:
                    time.sleep(0.002)  # read in whole parts: a read costs the same, less or more
                    continue
                chunk = os.pread(self.out.fileno(), size, offset)
                end = chunk.rfind(b"\n") + 1
                if end:  # what follows the last line's end is read again with the next
                    offset += end
                    yield chunk if end == len(chunk) else chunk[:end]
                elif len(chunk) == size:
                    size *= 2  # a line longer than a read (a merge of many parents)
                elif ended:
                    break
                else:
                    time.sleep(0.002)
        finally:
            self.stop()

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.kill()
            self.process.wait()
        self.out.close()


def _whole_lines(data: bytes) -> tuple[bytes, bytes]:
    """The whole lines of `data`, and what follows the last of them."""
    end = data.rfind(b"\n") + 1
    return data[:end], data[end:]


def _replacements(repository: Repository) -> bool:
    """Whether a grafts file or a replace ref is in force (see `History.history_replaced`)."""
    grafts = repository.environ.get("GIT_GRAFT_FILE") or str(
        repository.commondir / "info" / "grafts"
    )
    if os.path.exists(grafts):
        return True
    if "GIT_NO_REPLACE_OBJECTS" in repository.environ:
        return False
    base = repository.environ.get("GIT_REPLACE_REF_BASE") or "refs/replace/"
    base = base if base.endswith("/") else base + "/"
    refs = repository.refs
    if refs is None and not (repository.commondir / "reftable").exists():  # files, read here
        found = gitfiles.Found(
            str(repository.gitdir),
            str(repository.workdir or ""),
            str(repository.commondir),
        )
        refs = gitfiles.Refs(found)
    if refs is not None:
        if not refs.has_under(base):
            return False
    else:
        listed = repository.git("for-each-ref", "--count=1", "--format=%(refname)", base)
        if not listed.stdout.strip():
            return False
    used = repository.git("config", "--type=bool", "--get", "core.useReplaceRefs", check=False)
    return used.stdout.strip() != "false"


Reach = tuple[dict[str, int], tuple[str, ...]]  # reachable commit -> rank, and checked others
Label = tuple[str, int | None, int | None]
KEEP_REVS = 3


class GraphCache(CacheFile):
    """What the commit graph answered: the rank of annotated commits in `git rev-list REV`
    for a few recent revisions, and divergence labels between two commits. Commit ids
    name immutable history, so an answer stays true: nothing is kept where they do not
    (a shallow clone, a replacement in force), and a label of a handover off REV's
    history is used only while that commit is here (graph.CommitGraph)."""

    # Ranks follow git's own order across merges (an older layout derived them).
    # Never written while git reads the history through replacements (graph.CommitGraph).
    FORMAT = "graph:revs reach:(rank-in-rev-list,checked) labels:(label,ahead,behind) unreplaced"

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.revs: list[str] = []  # most recently used last
        self.reaches: dict[str, Reach] = {}
        self.labels: dict[str, Label] = {}
        self.dirty = False
        loaded = self.load()
        try:
            if loaded is not None:
                self.revs, self.reaches, self.labels = (
                    list(loaded[0]),
                    dict(loaded[1]),
                    dict(loaded[2]),
                )
        except (ValueError, TypeError, IndexError):
            self.revs, self.reaches, self.labels = [], {}, {}

    def _touch(self, rev: str) -> None:
        if rev in self.revs:
            self.revs.remove(rev)
        self.revs.append(rev)
        del self.revs[:-KEEP_REVS]
        self.dirty = True

    def reach(self, rev: str) -> Reach | None:
        return self.reaches.get(rev)

    def put_reach(self, rev: str, reach: Reach) -> None:
        self.reaches[rev] = reach
        self._touch(rev)

    def put_label(self, handover: str, rev: str, label: Label) -> None:
        self.labels[f"{handover} {rev}"] = label
        self._touch(rev)

    def label(self, handover: str, rev: str) -> Label | None:
        return self.labels.get(f"{handover} {rev}")

    def kept(self) -> list[str]:
        return self.revs[::-1]

    def save(self) -> None:
        if not self.dirty:
            return
        keep = set(self.revs)
        reach = {rev: value for rev, value in self.reaches.items() if rev in keep}
        labels = {k: v for k, v in self.labels.items() if k.split(" ")[1] in keep}
        self.write(self.revs, reach, labels)
        self.dirty = False
