"""`Repo`: a throwaway git repository and the means to drive majordomus in it.

Commits are made with pygit2 in-process (about ten times faster than git); majordomus
runs in-process through `__main__.run` with the repository's environment, its clock and no
sleeping, or as a real process where a test needs one (concurrency, kills, terminals).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pygit2

from majordomus.cachefile import FILES as CACHE_FILES
from majordomus.cachefile import VIEWS_FOLDER_NAME
from majordomus.tasks import Jobs, open_jobs
from majordomus.writer import Writer
from tests.support import cli
from tests.support.env import EMAIL, NAME, Clock
from tests.support.git import NOTES_REF, bare
from tests.support.git import git as run_git


class Repo:
    """A throwaway git repository and the means to drive majordomus in it."""

    def __init__(self, path: Path, environ: dict[str, str], clock: Clock) -> None:
        self.path = path
        self.environ = environ
        self.clock = clock
        self.sleeps: list[float] = []

    @classmethod
    def init(cls, path: Path, environ: dict[str, str], clock: Clock, commit: bool = True) -> Repo:
        path.mkdir(parents=True, exist_ok=True)
        pygit2.init_repository(str(path), initial_head="main")
        repo = cls(path, environ, clock)
        if commit:
            repo.commit("initial")
        return repo

    @property
    def pygit(self) -> pygit2.Repository:
        return pygit2.Repository(str(self.path))

    def commit(self, message: str, files: Mapping[str, str] | None = None) -> str:
        """A commit on HEAD (with `files` written and staged), made in-process."""
        repo = self.pygit
        for name, text in (files or {}).items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            repo.index.add(name)
        repo.index.write()
        tree = repo.index.write_tree()
        when = int(self.clock.now.timestamp())
        signature = pygit2.Signature(NAME, EMAIL, when, 0)
        parents = [] if repo.head_is_unborn else [repo.head.target]
        oid = repo.create_commit("HEAD", signature, signature, message, tree, parents)
        return str(oid)

    def git(self, *args: str, check: bool = True, input: str | None = None) -> str:
        """Real git in this repository; its stdout."""
        return run_git(self.path, self.environ, *args, stdin=input, check=check)

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def notes_ref(self) -> str | None:
        out = self.git("rev-parse", "--verify", "-q", NOTES_REF, check=False)
        return out.strip() or None

    def drop_caches(self) -> None:
        """Every cache file gone, and nothing read again: the next command reads afresh.
        (`doctor --drop-cache` reads the notes again, so what follows it reads caches.)"""
        common = self.path / self.git("rev-parse", "--git-common-dir").strip()
        for name in CACHE_FILES:
            (common / name).unlink(missing_ok=True)
        shutil.rmtree(common / VIEWS_FOLDER_NAME, ignore_errors=True)

    def run(
        self,
        *argv: str,
        stdin: bytes = b"",
        environ: Mapping[str, str] | None = None,
        tty: bool = False,
    ) -> cli.Result:
        """majordomus in-process, in this repository, with its clock and no sleeping."""
        return cli.run_cli(
            self.path,
            {**self.environ, **(environ or {})},
            *argv,
            stdin=stdin,
            now=self.clock,
            sleep=self.sleeps.append,
            tty=tty,
        )

    def spawn(
        self, *argv: str, stdin: bool = False, environ: Mapping[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """majordomus as a real process (real clock); stdin is a pipe when asked for."""
        return cli.spawn(self.path, {**self.environ, **(environ or {})}, *argv, stdin=stdin)

    def task(self, title: str = "queue drops acks under load") -> str:
        result = self.run("task", "new", title)
        assert result.code == 0, result.err
        return result.out.strip()


def writer_of(jobs: Jobs | Path, environ: Mapping[str, str] | None = None) -> Writer:
    """The notes ref's writer, as a command that writes makes it: of these jobs, or of the
    repository at a path (with its environment)."""
    if not isinstance(jobs, Jobs):
        assert environ is not None
        jobs = open_jobs(str(jobs), environ)
    return Writer(jobs.repository, jobs.reader, jobs.history)


def clone(url: str, path: Path, environ: dict[str, str], clock: Clock, *options: str) -> Repo:
    """`git clone url path` (with `options`), as a `Repo`."""
    run_git(path.parent, environ, "clone", "-q", *options, url, str(path))
    return Repo(path, environ, clock)


def seeded(root: Path, environ: dict[str, str], clock: Clock) -> tuple[Path, Repo]:
    """A bare repository holding one commit on main, and the clone that pushed it."""
    remote = bare(root / "remote.git", environ)
    first = clone(str(remote), root / "a", environ, clock)
    first.commit("initial")
    first.git("push", "-q", "origin", "main")
    return remote, first


def shared(root: Path, environ: dict[str, str], clock: Clock) -> tuple[Path, Repo, Repo, str]:
    """A bare remote; Alice, who made a task `shared`, checkpointed on it and pushed; and
    Bob, a clone of the remote that fetched her records. (remote, alice, bob, task)"""
    remote, alice = seeded(root, environ, clock)
    task = alice.task("shared")
    assert alice.run("checkpoint", "alice 1").code == 0
    assert alice.run("push").code == 0
    bob = clone(str(remote), root / "bob", environ, clock)
    assert bob.run("fetch").code == 0
    return remote, alice, bob, task


def worked(repo: Repo, bodies: Sequence[str]) -> None:
    """A task, a commit and a checkpoint for each body, a handover on the last, then one
    more commit (so the handover reads as `advanced`)."""
    repo.task()
    for n, body in enumerate(bodies):
        repo.commit(f"work {n}")
        assert repo.run("checkpoint", body).code == 0
    assert repo.run("handover", "-o", "find it", "-s", "half", "-n", "bisect").code == 0
    repo.commit("after")


def history_ids(repo: Repo) -> list[str]:
    """Record ids as every read command sees them (local and remote-tracking refs united)."""
    result = repo.run("history", "--all", "--json")
    assert result.code == 0, result.err
    return sorted(record["id"] for record in json.loads(result.out)["records"])


def git_push(repo: Repo, *args: str, env: Mapping[str, str] | None = None) -> tuple[int, str]:
    """A plain `git push ARGS` (the pre-push hook runs): its exit code and its stderr."""
    result = subprocess.run(
        ["git", "push", *args],
        cwd=repo.path,
        env=dict(env or repo.environ),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return result.returncode, result.stderr
