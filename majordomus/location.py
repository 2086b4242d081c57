"""Which repository a command works on: found as git finds it (the environment's GIT_DIR,
GIT_WORK_TREE and GIT_COMMON_DIR included), and opened with libgit2 when a command first
needs more than its refs (a plain layout is found without libgit2: see `gitfiles`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from majordomus import gitfiles
from majordomus.errors import RepositoryError
from majordomus.repository import Repository, unopenable
from majordomus.tuples import NamedTuple

if TYPE_CHECKING:
    import pygit2

_LOCATION_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR")


class _GitDirs(NamedTuple):
    """Where git finds a repository: its git dir, its work tree (None: bare), its common dir."""

    gitdir: str
    workdir: str | None
    common: str  # where git reads the shared refs: GIT_COMMON_DIR, if it names one


def _located_by_environment(path: str, environ: Mapping[str, str]) -> _GitDirs | None:
    """The git dir, work tree and common dir, as git finds them when its environment names them.

    libgit2 ignores GIT_DIR and GIT_WORK_TREE, so git itself is asked, from `path`
    (where -C went): relative values resolve from there, GIT_DIR without
    GIT_WORK_TREE makes `path` the top of the work tree, a bare repository has none.
    None when the environment names nothing, and discovery is libgit2's, as git's.
    """
    import subprocess

    named = {name: environ[name] for name in _LOCATION_VARIABLES if environ.get(name)}
    if not named:
        return None
    command = ["git", "rev-parse", "--absolute-git-dir", "--git-common-dir"]
    command += ["--is-bare-repository", "--show-toplevel"]
    try:
        result = subprocess.run(
            command,
            cwd=path,
            env=dict(environ),
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError:
        raise RepositoryError("git is not installed or not on PATH; install git.") from None
    lines = result.stdout.splitlines()
    if len(lines) < 3:
        where = ", ".join(
            f"{name} names {os.path.normpath(os.path.join(os.path.abspath(path), value))}"
            for name, value in named.items()
        )
        fatal = [line for line in result.stderr.splitlines() if line.startswith("fatal: ")]
        if fatal and "not a git repository" not in fatal[0]:
            raise RepositoryError(
                f"git cannot use the repository the environment names ({where}): "
                f"{fatal[0].removeprefix('fatal: ').rstrip('.')}; fix that, or unset "
                f"{' and '.join(named)}."
            )
        raise RepositoryError(
            f"{where}, which is not a git repository; point "
            f"{' and '.join(named)} at one, or unset {'it' if len(named) == 1 else 'them'}."
        )
    bare = lines[2] == "true"
    workdir = None if bare or len(lines) < 4 else lines[3]
    return _GitDirs(lines[0], workdir, os.path.join(path, lines[1]))


def _common_dir(gitdir: Path) -> Path:
    """Where a git directory keeps its refs: itself, or what its `commondir` file names
    (a linked work tree's)."""
    pointer = gitdir / "commondir"
    if pointer.exists():
        return (gitdir / pointer.read_text().strip()).resolve()
    return gitdir


def _discover(path: str) -> str:
    import pygit2

    try:
        found = pygit2.discover_repository(path)
    except pygit2.GitError:
        found = None
    if found is None:
        raise RepositoryError(
            f"not a git repository (or any parent up to /): {os.path.abspath(path)}; "
            "run majordomus inside a clone, or pass -C PATH."
        )
    return str(found)


def _absolute_locations(
    environ: Mapping[str, str], gitdir: Path, workdir: Path | None
) -> Mapping[str, str]:
    if not any(environ.get(name) for name in _LOCATION_VARIABLES):
        return environ
    env = {k: v for k, v in environ.items() if k not in _LOCATION_VARIABLES}
    env["GIT_DIR"] = str(gitdir)
    if workdir is not None:
        env["GIT_WORK_TREE"] = str(workdir)
    return env


def _graft_file_as_git_reads_it(
    environ: Mapping[str, str], path: str, gitdir: str, workdir: str | None
) -> Mapping[str, str]:
    """GIT_GRAFT_FILE made absolute where git resolves a relative one: git started in the
    work tree (`path`, where -C went) moves to its top first and reads it from there;
    started anywhere else (a bare repository, a git dir, outside a GIT_WORK_TREE), from
    where it started. The git subprocesses run elsewhere, and read what git would."""
    named = environ.get("GIT_GRAFT_FILE")
    if not named or os.path.isabs(named):
        return environ
    here = os.path.realpath(path)
    base = here
    if workdir:
        top, inner = os.path.realpath(workdir), os.path.realpath(gitdir)
        if _within(here, top) and not _within(here, inner):
            base = top
    return {**environ, "GIT_GRAFT_FILE": os.path.join(base, named)}


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def open_repository(path: str, environ: Mapping[str, str]) -> Repository:
    """The repository at (or above) `path`; RepositoryError naming the fix when there is none."""
    if not os.path.isabs(path):
        try:
            os.getcwd()
        except FileNotFoundError:
            raise RepositoryError(
                "the current directory no longer exists; cd into a clone, or pass -C PATH."
            ) from None
    if not os.path.isdir(path):
        raise RepositoryError(f"cannot change to '{path}': no such directory.")
    plain = gitfiles.discover(path, environ)
    work: Path | None
    if plain is not None:
        gitdir, work, common = Path(plain.gitdir), Path(plain.workdir), Path(plain.commondir)
        env, refs, repo = environ, gitfiles.Refs(plain), None
    else:
        gitdir, work, common, env, repo = _opened_by_libgit2(path, environ)
        refs = None
    env = _graft_file_as_git_reads_it(env, path, str(gitdir), str(work) if work else None)
    repository = Repository(gitdir, work, common, env, refs)
    if repo is not None:
        repository.repo = repo
    return repository


def _opened_by_libgit2(
    path: str, environ: Mapping[str, str]
) -> tuple[Path, Path | None, Path, Mapping[str, str], pygit2.Repository]:
    """Where the repository `gitfiles` could not read is: its git dir, work tree (None when
    bare), common dir, the environment its git subprocesses get, and libgit2's handle."""
    located = _located_by_environment(path, environ)
    found = located.gitdir if located is not None else _discover(path)
    common = _common_dir(Path(found))
    if located is not None and os.path.realpath(located.common) != os.path.realpath(common):
        raise RepositoryError(
            f"GIT_COMMON_DIR names {os.path.realpath(located.common)}, but the repository at "
            f"{located.gitdir} keeps its refs elsewhere and majordomus reads them from there; "
            "unset GIT_COMMON_DIR."
        )
    import pygit2

    try:
        repo = pygit2.Repository(found)
    except pygit2.GitError as error:
        raise RepositoryError(unopenable(found, error)) from None
    gitdir = Path(repo.path)
    workdir = located.workdir if located is not None else repo.workdir
    work = Path(workdir) if workdir else None
    # The git subprocesses run elsewhere than `path`: what the environment names
    # reaches them as absolute paths, so they read what this object reads.
    return gitdir, work, common, _absolute_locations(environ, gitdir, work), repo
