"""One repository as a command works on it: where it is, git run on it (arguments never
through a shell), its configuration and identity, its refs, the current task. libgit2 opens
it on first use of `repo`; `refs` reads a plain layout's refs without it, and a few objects
are then read by git (`objects_by_git`)."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from majordomus import gitfiles, gitobjects
from majordomus.errors import RefusedError, RepositoryError
from majordomus.records import REFUSED

if TYPE_CHECKING:
    import subprocess

    import pygit2

# A warm read reads a few objects through `git cat-file` rather than load libgit2; past
# this many processes, or this many objects in one, libgit2 reads (it is then cheaper).
GIT_READS = 6
GIT_READ_OBJECTS = 2_000

NOTES_REF = "refs/notes/majordomus"
TASK_FILE = "majordomus-task"


class Repository:
    """A repository, opened once per command: where its git directory, work tree and
    shared refs are, and the environment git subprocesses get so that they read what
    libgit2 reads."""

    def __init__(
        self,
        gitdir: Path,
        workdir: Path | None,
        commondir: Path,
        environ: Mapping[str, str],
        refs: gitfiles.Refs | None,
    ) -> None:
        self.gitdir, self.workdir, self.commondir = gitdir, workdir, commondir
        self.environ = environ
        self.refs = refs
        self._git_reads = 0
        self._batch: gitobjects.Batch | None = None
        self._identity: str | None = None
        self._asked: subprocess.Popen[str] | None = None  # git asked for the identity
        self._remotes: list[str] | None = None

    @property
    def by_git(self) -> bool:
        """Whether git reads objects for this process: a plain layout, libgit2 not loaded
        (once it is, it reads them quicker than a process git starts)."""
        return self.refs is not None and "repo" not in self.__dict__

    def objects_by_git(self, ids: Sequence[str]) -> gitobjects.Objects | None:
        """A few objects read by git, while libgit2 is not loaded and the layout is plain;
        None: read them with libgit2 (also past GIT_READS processes or GIT_READ_OBJECTS
        objects: a command that reads more than a warm read does is better served by it)."""
        if not self.by_git:
            return None
        if self._batch is not None:  # one process, running already
            return self._batch.objects(ids)
        if self._git_reads >= GIT_READS or len(ids) > GIT_READ_OBJECTS:
            return None
        self._git_reads += 1
        return gitobjects.cat_file(str(self.gitdir), self.environ, ids)

    def shown_by_git(self, ids: Sequence[str]) -> gitobjects.Objects | None:
        """Notes a command shows, read by git in a plain layout even once libgit2 is loaded:
        a few thousand notes read by libgit2 map most of the pack index into the process,
        git's process ends with the read. None: read them with libgit2."""
        if self.refs is None:
            return None
        return gitobjects.cat_file(str(self.gitdir), self.environ, ids)

    def tree_notes_by_git(self, tree_id: str) -> str | None:
        """The notes of a notes tree listed by one git process in a plain layout, at any
        time (`gitobjects.tree_notes`): quicker than libgit2's walk, object by object, of a
        large one. None: walk it with libgit2."""
        if self.refs is None:
            return None
        return gitobjects.tree_notes(str(self.gitdir), self.environ, tree_id)

    @contextlib.contextmanager
    def git_batch(self) -> Iterator[gitobjects.Batch | None]:
        """One git process that reads objects one by one while the block lasts (what
        `objects_by_git` reads included); None when libgit2 is loaded, the layout is not
        plain or git cannot run."""
        if not self.by_git or self._batch is not None:
            yield None
            return
        try:
            batch = gitobjects.Batch(str(self.gitdir), self.environ)
        except OSError:
            yield None
            return
        self._batch = batch
        try:
            yield batch
        finally:
            self._batch = None
            batch.close()

    @cached_property
    def repo(self) -> pygit2.Repository:
        import pygit2

        try:
            return pygit2.Repository(str(self.gitdir))
        except pygit2.GitError as error:
            raise RepositoryError(unopenable(str(self.gitdir), error)) from None

    # ---- git subprocesses ------------------------------------------------

    def git(
        self, *args: str, check: bool = True, stored: bool = False
    ) -> subprocess.CompletedProcess[str]:
        """Run the user's own git on this repository; arguments never pass through a shell.
        `stored`: on the history as stored (`stored_environ`)."""
        import subprocess

        command = self.git_argv(args)
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

    def git_output(self, *args: str) -> str:
        """`git` that writes a lot to stdout and little to stderr (`rev-list`), read to its
        end in one call (a walk writes megabytes)."""
        process = self.buffered_git(args)
        assert process.stdout is not None and process.stderr is not None
        with process:
            out = process.stdout.read()
            err = process.stderr.read()  # a few lines at most: it cannot fill its pipe
        check_exit(args[0], process.returncode, err)
        return out

    def buffered_git(self, args: Sequence[str]) -> subprocess.Popen[str]:
        """git with its output buffered: GIT_FLUSH=0, since into a pipe git would flush
        every line of a walk, a write per commit."""
        import subprocess

        try:
            return subprocess.Popen(
                self.git_argv(args),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.buffered_env(),
                text=True,
                encoding="utf-8",
                errors="replace",
            )
        except FileNotFoundError:
            raise RepositoryError("git is not installed or not on PATH; install git.") from None

    def binary_git(self, args: Sequence[str]) -> subprocess.Popen[bytes]:
        """`buffered_git` given its standard input, its output as bytes (a walk's tips in,
        its lines out)."""
        import subprocess

        try:
            return subprocess.Popen(
                self.git_argv(args),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.buffered_env(),
            )
        except FileNotFoundError:
            raise RepositoryError("git is not installed or not on PATH; install git.") from None

    def stored_environ(self) -> dict[str, str]:
        """git's environment for the history as stored, whatever replacement (`git replace`,
        a grafts file) this clone has in force: the facts a record states travel to clones
        that have none."""
        return {**self.environ, "GIT_NO_REPLACE_OBJECTS": "1", "GIT_GRAFT_FILE": os.devnull}

    def git_argv(self, args: Sequence[str]) -> list[str]:
        return ["git", f"--git-dir={self.gitdir}", *args]

    def buffered_env(self) -> dict[str, str]:
        """GIT_FLUSH=0: into a pipe or a file git would flush every line of a walk."""
        return {**self.environ, "GIT_FLUSH": "0"}

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

    def config_matching(self, pattern: re.Pattern[str]) -> dict[str, str]:
        """Every configuration key (lowercased) that `pattern` matches, with its value (the
        last one git reads), as libgit2 reads the configuration."""
        import pygit2

        values: dict[str, str] = {}
        try:
            for entry in self.repo.config:
                name = entry.name.lower()
                if pattern.match(name):
                    values[name] = entry.value or ""
        except pygit2.GitError:
            return {}
        return values

    def symbolic_target(self, name: str) -> str | None:
        """Where a symbolic ref such as refs/remotes/origin/HEAD points, when it does."""
        import pygit2

        ref = self.repo.references.get(name)
        if ref is None or ref.type != pygit2.enums.ReferenceType.SYMBOLIC:
            return None
        target = ref.target
        return target if isinstance(target, str) else None

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
            self._asked = self.buffered_git(["var", "GIT_COMMITTER_IDENT"])

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
            self._identity = _identity_of(asked.returncode, out, err)
        return self._identity

    def remote_names(self) -> list[str]:
        """`git remote`, asked once per command (a push looks a name up several times)."""
        if self._remotes is None:
            self._remotes = self.git("remote").stdout.split()
        return self._remotes

    # ---- refs, and the current task ------------------------------------------

    def ref_target(self, name: str) -> str | None:
        if self.by_git and self.refs is not None:
            # Read afresh from the files (a fetch may have moved it), not loading libgit2.
            read, target = gitfiles.Refs(self.refs.found).target(name)
            if read:
                return target
        ref = self.repo.references.get(name)
        return None if ref is None else str(ref.resolve().target)

    def ref_is_direct(self, name: str) -> bool:
        """Whether `name` is read from a plain layout's files as a ref that names an
        object itself: no symbolic ref, nothing these files do not tell."""
        return self.refs is not None and gitfiles.Refs(self.refs.found).is_direct(name)

    def delete_refs(self, prefix: str) -> None:
        """Remove every ref under `prefix` (a private namespace of fetched records)."""
        import pygit2

        for name in [n for n in self.repo.references if n.startswith(prefix)]:
            with contextlib.suppress(KeyError, pygit2.GitError):
                self.repo.references.delete(name)

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


def _identity_of(returncode: int, out: str, err: str) -> str:
    """`Name <email>` from `git var GIT_COMMITTER_IDENT`'s answer, or why there is none."""
    if returncode != 0:
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
        # The author is shown to whoever reads the record: what a field may not hold, the
        # identity may not either.
        raise RefusedError(
            f"your git identity holds the invisible or control character "
            f"U+{ord(refused.group()):04X}, so nothing was recorded: fix user.name "
            "and user.email (git config user.name / user.email)."
        )
    return identity


def unopenable(found: str, error: Exception) -> str:
    gitdir = found.rstrip("/")
    if "object format" in str(error) and "sha256" in str(error):
        return (
            f"{gitdir} is a SHA-256 repository, which majordomus cannot read (its git library, "
            "libgit2, is built for SHA-1 only); use it from a SHA-1 clone."
        )
    return f"cannot open the repository at {gitdir}: {str(error).rstrip('.')}."


def check_exit(command: str, returncode: int, err: str) -> None:
    """A walk git could not make: the history is damaged or incomplete (an object lost)."""
    if returncode != 0:
        lines = err.strip().splitlines()
        detail = (lines[-1] if lines else f"exit {returncode}").rstrip(".")
        raise RepositoryError(
            f"git {command} failed: {detail}; run git fsck to see what this clone lacks."
        )


def not_a_commit(target: str) -> str:
    return (
        f"{NOTES_REF} points at {target[:12]}, which is not a commit; majordomus will not "
        "overwrite it: inspect it with git cat-file -t, then repair or move it."
    )
