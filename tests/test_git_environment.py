"""git's own environment: GIT_DIR, GIT_WORK_TREE and -C are honoured as git honours them,
and a repository majordomus cannot open (SHA-256) is refused in one sentence."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping
from pathlib import Path

from tests.support.cli import MAJORDOMUS
from tests.support.env import Clock
from tests.support.git import bare, git
from tests.support.repo import Repo


def git_in(cwd: Path, environ: Mapping[str, str], *args: str) -> str:
    """git as the user's shell would run it in `cwd` with that environment."""
    return git(cwd, environ, *args).strip()


def two_repositories(tmp_path: Path, environ: dict[str, str], clock: Clock) -> tuple[Repo, Repo]:
    """`here` and `other`, each with one task and a checkpoint of its own on its HEAD."""
    here = Repo.init(tmp_path / "here", environ, clock)
    other = Repo.init(tmp_path / "other", environ, clock)
    other.commit("other's second commit", {"file.txt": "other\n"})
    for repo, body in ((here, "read here"), (other, "read over there")):
        task = repo.task(f"task of {repo.path.name}")
        assert repo.run("checkpoint", "--task", task, body).code == 0
    return here, other


def bodies(result_out: str) -> list[str]:
    return [r["body"] for r in json.loads(result_out)["records"] if r["kind"] == "checkpoint"]


def test_git_dir_names_the_repository_read(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    here, other = two_repositories(tmp_path, environ, clock)
    env = {**environ, "GIT_DIR": str(other.path / ".git")}
    result = here.run("show", "--json", environ=env)
    assert result.code == 0, result.err
    shown = json.loads(result.out)
    # What git itself reads from the same place with the same environment.
    assert shown["commit"] == git_in(here.path, env, "rev-parse", "HEAD") == other.head()
    listed = git_in(here.path, env, "notes", "--ref=majordomus", "list").split()
    assert listed[1::2] == [other.head()]  # "<note blob> <annotated commit>" per line
    assert bodies(result.out) == ["read over there"]
    assert bodies(here.run("show", "--json").out) == ["read here"]


def test_a_relative_git_dir_resolves_after_minus_c(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    here, _other = two_repositories(tmp_path, environ, clock)
    # -C here, then GIT_DIR=../other/.git: relative to where -C went, as git does.
    env = {**environ, "GIT_DIR": "../other/.git"}
    result = here.run("history", "--json", environ=env)
    assert result.code == 0, result.err
    assert bodies(result.out) == ["read over there"]
    assert json.loads(result.out)["rev"] == git_in(here.path, env, "rev-parse", "HEAD")


def test_writes_go_to_the_repository_git_dir_names(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    here, other = two_repositories(tmp_path, environ, clock)
    before_here = here.notes_ref()
    env = {**environ, "GIT_DIR": str(other.path / ".git")}
    task = json.loads(here.run("task", "list", "--json", environ=env).out)["tasks"][0]["task"]
    result = here.run("checkpoint", "--task", task, "written through GIT_DIR", environ=env)
    assert result.code == 0, result.err
    assert here.notes_ref() == before_here
    note = git_in(here.path, env, "notes", "--ref=majordomus", "show", "HEAD")
    assert 'body = "written through GIT_DIR"' in note.splitlines()
    assert (
        'body = "written through GIT_DIR"'
        in other.git("notes", "--ref=majordomus", "show", "HEAD").splitlines()
    )


def test_a_bare_repository_named_by_git_dir(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    here, other = two_repositories(tmp_path, environ, clock)
    remote = bare(tmp_path / "shared.git", environ)
    other.git("push", "-q", str(remote), "main", "refs/notes/majordomus")
    env = {**environ, "GIT_DIR": str(remote)}
    result = here.run("history", "--json", environ=env)
    assert result.code == 0, result.err
    assert json.loads(result.out)["rev"] == git_in(here.path, env, "rev-parse", "HEAD")
    assert bodies(result.out) == ["read over there"]
    # A bare repository has no work tree to be dirty, and no .majordomus.toml.
    task = json.loads(here.run("task", "list", "--json", environ=env).out)["tasks"][0]["task"]
    written = here.run(
        "handover", "--task", task, "-o", "o", "-s", "s", "-n", "n", "--json", environ=env
    )
    assert written.code == 0, written.err
    assert json.loads(written.out)["dirty"] is False
    assert git_in(here.path, env, "notes", "--ref=majordomus", "list", "HEAD")


def test_git_work_tree_beside_git_dir(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    here, other = two_repositories(tmp_path, environ, clock)
    # A work tree of `other` somewhere else: its profile file and its changes count.
    tree = tmp_path / "elsewhere"
    tree.mkdir()
    env = {**environ, "GIT_DIR": str(other.path / ".git"), "GIT_WORK_TREE": "../elsewhere"}
    git_in(here.path, env, "checkout", "-f", "HEAD", "--", ".")
    (tree / ".majordomus.toml").write_text('[profiles.default]\ninterval = "5m"\n')
    result = here.run("profile", "--json", environ=env)
    assert result.code == 0, result.err
    profile = json.loads(result.out)
    assert (profile["interval_s"], profile["sources"]["interval"]) == (
        300,
        str(tree / ".majordomus.toml"),
    )
    (tree / "file.txt").write_text("changed in the other work tree\n")
    assert git_in(here.path, env, "status", "--porcelain", "--untracked-files=no") == ("M file.txt")
    task = json.loads(here.run("task", "list", "--json", environ=env).out)["tasks"][0]["task"]
    written = here.run(
        "handover", "--task", task, "-o", "o", "-s", "s", "-n", "n", "--json", environ=env
    )
    assert written.code == 0, written.err
    assert json.loads(written.out)["dirty"] is True
    assert json.loads(written.out)["record"]["commit"] == other.head()


def test_git_dir_naming_no_repository_is_refused(repo: Repo, tmp_path: Path) -> None:
    before = repo.notes_ref()
    result = repo.run("history", environ={"GIT_DIR": str(tmp_path / "nowhere")})
    assert (result.code, result.out) == (3, "")
    assert result.err == (
        f"majordomus: GIT_DIR names {tmp_path / 'nowhere'}, which is not a git repository; "
        "point GIT_DIR at one, or unset it.\n"
    )
    assert repo.notes_ref() == before


def test_sha256_repositories_are_refused_in_one_sentence(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    path = tmp_path / "sha256"
    git(tmp_path, environ, "init", "-q", "--object-format=sha256", "-b", "main", str(path))
    git(path, environ, "commit", "-q", "--allow-empty", "-m", "first")
    repo = Repo(path, environ, clock)
    expected = (
        f"majordomus: {path}/.git is a SHA-256 repository, which majordomus cannot read "
        "(its git library, libgit2, is built for SHA-1 only); use it from a SHA-1 clone.\n"
    )
    for argv in (("history",), ("checkpoint", "x"), ("doctor", "--json"), ("fetch",)):
        result = repo.run(*argv)
        assert (result.code, result.out, result.err) == (3, "", expected), argv
    assert git(path, environ, "for-each-ref", "refs/notes") == ""
    # And as a real process: the same sentence, never a traceback.
    process = subprocess.run(
        [*MAJORDOMUS, "-C", str(path), "show"],
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (process.returncode, process.stderr) == (3, expected)


def test_git_dir_of_a_linked_work_tree_reads_the_shared_notes(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    here, other = two_repositories(tmp_path, environ, clock)
    other.git("worktree", "add", "-q", "-b", "side", str(tmp_path / "side"))
    linked = other.path / ".git" / "worktrees" / "side"
    env = {**environ, "GIT_DIR": str(linked), "GIT_WORK_TREE": str(tmp_path / "side")}
    result = here.run("history", "--json", environ=env)
    assert result.code == 0, result.err
    assert json.loads(result.out)["rev"] == git_in(here.path, env, "rev-parse", "HEAD")
    assert bodies(result.out) == ["read over there"]
    # GIT_COMMON_DIR naming the repository's own common directory changes nothing...
    same = {**env, "GIT_COMMON_DIR": str(other.path / ".git")}
    assert here.run("history", "--json", environ=same).out == result.out
    # ...and naming another one is refused: majordomus would read refs git does not.
    elsewhere = {**env, "GIT_COMMON_DIR": str(here.path / ".git")}
    before = here.notes_ref(), other.notes_ref()
    refused = here.run("checkpoint", "x", environ=elsewhere)
    assert (refused.code, refused.out) == (3, "")
    assert refused.err == (
        f"majordomus: GIT_COMMON_DIR names {here.path / '.git'}, but the repository at "
        f"{linked} keeps its refs elsewhere and majordomus reads them from there; unset "
        "GIT_COMMON_DIR.\n"
    )
    assert (here.notes_ref(), other.notes_ref()) == before


def test_git_work_tree_alone_keeps_discovery_from_the_directory(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    here, _other = two_repositories(tmp_path, environ, clock)
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / ".majordomus.toml").write_text('[profiles.default]\ninterval = "90s"\n')
    env = {**environ, "GIT_WORK_TREE": str(tree)}
    assert git_in(here.path, env, "rev-parse", "--show-toplevel") == str(tree)
    result = here.run("profile", "--json", environ=env)
    assert result.code == 0, result.err
    assert json.loads(result.out)["interval_s"] == 90
    assert bodies(here.run("show", "--json", environ=env).out) == ["read here"]


def test_git_dir_naming_a_file_git_cannot_use_gives_gits_reason(repo: Repo, tmp_path: Path) -> None:
    (tmp_path / "not-a-gitfile").write_text("hello\n")
    before = repo.notes_ref()
    result = repo.run("show", environ={"GIT_DIR": str(tmp_path / "not-a-gitfile")})
    assert (result.code, result.out) == (3, "")
    assert result.err == (
        "majordomus: git cannot use the repository the environment names (GIT_DIR names "
        f"{tmp_path / 'not-a-gitfile'}): invalid gitfile format: {tmp_path / 'not-a-gitfile'}; "
        "fix that, or unset GIT_DIR.\n"
    )
    assert repo.notes_ref() == before


def test_patch_ids_read_the_repository_git_dir_names(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    # The patch ids come from git subprocesses of their own (diff-tree | patch-id): they
    # must read the repository GIT_DIR names, as every other read does, not the one here.
    here, other = two_repositories(tmp_path, environ, clock)
    env = {**environ, "GIT_DIR": str(other.path / ".git")}
    task = json.loads(here.run("task", "list", "--json", environ=env).out)["tasks"][0]["task"]
    written = here.run("checkpoint", "--task", task, "patched", "--json", environ=env)
    assert written.code == 0, written.err
    record = json.loads(written.out)["record"]
    diff = other.git("diff-tree", "-p", "--root", "HEAD")
    expected = other.git("patch-id", "--stable", input=diff).split()[0]
    assert (record["commit"], record["patch"]) == (other.head(), expected)
