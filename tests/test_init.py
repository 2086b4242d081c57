"""`init`: git's own commands carry records after it (log, amend, rebase, fetch, push)."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path

import pytest

from majordomus.clonesetup import HOOK_LINE, hook_script
from tests.support.env import AUTHOR, Clock
from tests.support.notes import ref_ids
from tests.support.repo import Repo, clone, git_push, seeded

SETTINGS = [
    ("notes.displayRef", "refs/notes/majordomus"),
    ("notes.displayRef", "refs/notes/remotes/*/majordomus"),
    ("notes.rewriteRef", "refs/notes/majordomus"),
    ("notes.rewrite.amend", "true"),
    ("notes.rewrite.rebase", "true"),
    ("notes.rewriteMode", "concatenate"),
    ("notes.majordomus.mergeStrategy", "union"),
    ("remote.origin.fetch", "+refs/notes/majordomus*:refs/notes/remotes/origin/majordomus*"),
]


def init(repo: Repo, *argv: str) -> dict[str, object]:
    result = repo.run("init", "--json", *argv)
    assert (result.code, result.err) == (0, ""), result.err
    parsed: dict[str, object] = json.loads(result.out)
    return parsed


def write(repo: Repo, body: str, task: str | None = None) -> dict[str, str]:
    result = repo.run("checkpoint", body, "--json", *(["--task", task] if task else []))
    assert result.code == 0, result.err
    record: dict[str, str] = json.loads(result.out)["record"]
    return record


def hook_path(repo: Repo) -> str:
    return str(repo.path / ".git" / "hooks" / "pre-push")


def test_init_configures_the_clone_once(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    _, a = seeded(tmp_path, environ, clock)
    first = init(a)
    assert first == {
        "remote": "origin",
        "settings": [
            {"key": key, "value": value, "state": "added", "note": None} for key, value in SETTINGS
        ],
        "hook": {"path": hook_path(a), "state": "installed", "reason": None, "line": None},
        "no_remote": None,
    }
    assert Path(hook_path(a)).read_text() == hook_script()
    assert os.access(hook_path(a), os.X_OK)
    again = a.run("init")
    assert (again.code, again.err) == (0, "")
    assert again.out == (
        "notes.displayRef                already   refs/notes/majordomus\n"
        "notes.displayRef                already   refs/notes/remotes/*/majordomus\n"
        "notes.rewriteRef                already   refs/notes/majordomus\n"
        "notes.rewrite.amend             already   true\n"
        "notes.rewrite.rebase            already   true\n"
        "notes.rewriteMode               already   concatenate\n"
        "notes.majordomus.mergeStrategy  already   union\n"
        "remote.origin.fetch             already   "
        "+refs/notes/majordomus*:refs/notes/remotes/origin/majordomus*\n"
        f"pre-push hook                   already   {hook_path(a)}\n"
    )
    for key in {key for key, _ in SETTINGS}:
        values = a.git("config", "--get-all", key).splitlines()
        assert len(values) == len(set(values)), (key, values)


def test_init_keeps_what_the_user_has(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    _, a = seeded(tmp_path, environ, clock)
    a.git("config", "notes.rewriteRef", "refs/notes/commits")
    a.git("config", "notes.rewriteMode", "overwrite")
    a.git("config", "--add", "remote.origin.fetch", "+refs/notes/*:refs/notes/*")
    result = a.run("init")
    assert (result.code, result.err) == (0, "")
    assert result.out == (
        "notes.displayRef                added     refs/notes/majordomus\n"
        "notes.displayRef                added     refs/notes/remotes/*/majordomus\n"
        "notes.rewriteRef                added     refs/notes/majordomus\n"
        "notes.rewrite.amend             added     true\n"
        "notes.rewrite.rebase            added     true\n"
        "notes.rewriteMode               kept      overwrite\n"
        "notes.majordomus.mergeStrategy  added     union\n"
        "remote.origin.fetch             added     "
        "+refs/notes/majordomus*:refs/notes/remotes/origin/majordomus*\n"
        "remote.origin.fetch             kept      +refs/notes/*:refs/notes/*\n"
        f"pre-push hook                   installed {hook_path(a)}\n"
        "note: notes.rewriteMode is overwrite, not concatenate: a rewrite that lands on a "
        "commit with a note may drop or garble records; change it if you want that\n"
        "note: remote.origin.fetch has +refs/notes/*:refs/notes/*, which lets git fetch "
        "overwrite records not yet pushed; remove it with git config --unset "
        "remote.origin.fetch '+refs/notes/*:refs/notes/*'\n"
    )
    assert a.git("config", "--get-all", "notes.rewriteRef").split() == [
        "refs/notes/commits",
        "refs/notes/majordomus",
    ]
    assert a.git("config", "notes.rewriteMode").strip() == "overwrite"


def test_init_without_a_remote_configures_the_rest(repo: Repo) -> None:
    report = init(repo)
    assert report["remote"] is None
    assert report["no_remote"] == (
        "no remote named origin yet: after git remote add origin URL, run majordomus init"
    )
    settings = report["settings"]
    assert isinstance(settings, list)
    assert [(s["key"], s["state"]) for s in settings] == [
        (key, "added") for key, _ in SETTINGS[:-1]
    ]


def test_init_with_an_unknown_remote_is_refused(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    _, a = seeded(tmp_path, environ, clock)
    config = (a.path / ".git" / "config").read_text()
    result = a.run("init", "--remote", "upstream")
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        "majordomus: there is no remote named upstream (this clone has: origin); add it with "
        "git remote add upstream URL, then run majordomus init --remote upstream again.\n"
    )
    assert (a.path / ".git" / "config").read_text() == config


def test_init_follows_the_branch_upstream(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    a.git("remote", "add", "upstream", str(remote))
    a.git("fetch", "-q", "upstream")
    a.git("branch", "-q", "--set-upstream-to=upstream/main")
    assert init(a)["remote"] == "upstream"
    assert a.git("config", "--get-all", "remote.upstream.fetch").splitlines() == [
        "+refs/heads/*:refs/remotes/upstream/*",
        "+refs/notes/majordomus*:refs/notes/remotes/upstream/majordomus*",
    ]


# ---- git's own commands after init --------------------------------------------------------------


def test_git_log_shows_records_without_flags(repo: Repo) -> None:
    init(repo)
    repo.task("queue drops acks")
    write(repo, "reproduced with 50 enqueues")
    note = repo.git("notes", "--ref=majordomus", "show", "HEAD")
    indented = "".join(f"    {line}\n" if line else "    \n" for line in note.splitlines())
    assert repo.git("log", "-1") == (
        f"commit {repo.head()}\n"
        f"Author: {AUTHOR}\n"
        "Date:   Mon Nov 30 03:00:00 2026 +0000\n"
        "\n"
        "    initial\n"
        "\n"
        "Notes (majordomus):\n"
        f"{indented}"
    )


def test_amend_carries_records_to_the_new_commit(repo: Repo) -> None:
    init(repo)
    task = repo.task("queue drops acks")
    old = repo.head()
    record = write(repo, "reproduced")
    repo.git("commit", "-q", "--amend", "--allow-empty", "-m", "initial, amended")
    new = repo.head()
    assert new != old
    shown = json.loads(repo.run("show", "--json").out)
    assert [(r["id"], r["head"], r["commit"]) for r in shown["records"]] == [
        (task, old, new),
        (record["id"], old, new),
    ]


@pytest.mark.parametrize("backend", ["--merge", "--apply"])
def test_rebase_carries_records_to_the_new_commits(repo: Repo, backend: str) -> None:
    init(repo)
    repo.git("checkout", "-q", "-b", "feature")
    task = repo.task("queue drops acks")
    first = repo.commit("first fix", {"fix.txt": "one\n"})
    one = write(repo, "first fix half works", task)
    second = repo.commit("second fix", {"fix.txt": "two\n"})
    two = write(repo, "second fix works", task)
    repo.git("checkout", "-q", "main")
    repo.commit("meanwhile on main", {"main.txt": "main\n"})
    repo.git("checkout", "-q", "feature")
    repo.git("rebase", "-q", backend, "main")
    new_second, new_first = repo.git("rev-list", "-2", "HEAD").split()
    assert {new_first, new_second}.isdisjoint({first, second})
    for rev, record, old in (("HEAD~1", one, first), ("HEAD", two, second)):
        shown = json.loads(repo.run("show", rev, "--json").out)
        assert [(r["id"], r["head"], r["commit"]) for r in shown["records"]] == [
            (record["id"], old, repo.git("rev-parse", rev).strip())
        ]
    history = json.loads(repo.run("history", "--json").out)
    assert [(r["id"], r["commit"]) for r in history["records"]] == [
        (two["id"], new_second),
        (one["id"], new_first),
        (task, repo.git("rev-parse", "main~1").strip()),
    ]


def test_plain_git_fetch_never_fails_and_brings_records(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    b = clone(str(remote), tmp_path / "b", environ, clock)
    init(b)
    b.git("fetch")  # the remote has no records yet: not an error
    assert b.git("for-each-ref", "refs/notes") == ""
    task = a.task("queue drops acks")
    record = write(a, "reproduced")
    assert a.run("push").code == 0
    b.git("fetch")
    assert b.git("for-each-ref", "--format=%(refname)", "refs/notes") == (
        "refs/notes/remotes/origin/majordomus\n"
    )
    history = json.loads(b.run("history", "--json").out)
    assert [r["id"] for r in history["records"]] == [record["id"], task]
    assert "Notes (remotes/origin/majordomus):\n    [[task]]\n" in b.git("log", "-1")


def test_git_push_of_a_branch_publishes_records(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    b = clone(str(remote), tmp_path / "b", environ, clock)
    init(a)
    theirs = {b.task("flaky login"), write(b, "cold cache")["id"]}
    assert b.run("push").code == 0  # the remote's records move first
    mine = {a.task("queue drops acks"), write(a, "reproduced")["id"]}
    a.commit("fix", {"fix.txt": "fixed\n"})
    code, err = git_push(a, "-q", "origin", "main")
    assert code == 0, err
    assert err == (
        "majordomus: published records to origin (origin had moved: merged 2 new records "
        "from it, 2 attempts)\n"
    )
    assert ref_ids(remote) == theirs | mine
    assert a.git("rev-parse", "main").strip() == b.git("ls-remote", "origin", "main").split()[0]


def test_the_hook_never_fails_the_push(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    refuse = remote / "hooks" / "update"
    refuse.write_text('#!/bin/sh\ncase "$1" in refs/notes/*) exit 1;; esac\nexit 0\n')
    refuse.chmod(0o755)
    init(a)
    write(a, "reproduced", a.task("queue drops acks"))
    a.commit("fix", {"fix.txt": "fixed\n"})
    code, err = git_push(a, "-q", "origin", "main")
    assert code == 0
    assert err.splitlines()[-1] == (
        "majordomus: warning: records were not published (origin refused the records: "
        "[remote rejected] (hook declined); your records are intact in refs/notes/majordomus; "
        "ask the remote's owner to accept refs/notes/majordomus); the push goes on."
    )
    assert a.git("ls-remote", "origin").splitlines() == [
        f"{a.head()}\tHEAD",
        f"{a.head()}\trefs/heads/main",
    ]


def test_the_hook_never_hangs_the_push(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    stall = remote / "hooks" / "update"
    stall.write_text('#!/bin/sh\ncase "$1" in refs/notes/*) sleep 60;; esac\nexit 0\n')
    stall.chmod(0o755)
    init(a)
    write(a, "reproduced", a.task("queue drops acks"))
    a.commit("fix", {"fix.txt": "fixed\n"})
    start = time.monotonic()
    code, err = git_push(
        a, "-q", "origin", "main", env={**a.environ, "MAJORDOMUS_HOOK_TIMEOUT": "3"}
    )
    elapsed = time.monotonic() - start
    assert code == 0
    assert elapsed < 15
    assert err.splitlines()[-1] == (
        "majordomus: warning: records were not published (git push did not finish within "
        "3 s (MAJORDOMUS_HOOK_TIMEOUT sets the budget)); the push goes on."
    )
    assert a.git("ls-remote", "origin", "main").split()[0] == a.head()
    assert "refs/notes/majordomus" not in a.git("ls-remote", "origin")


def test_an_existing_hook_is_never_overwritten(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    hook = Path(hook_path(a))
    mine = '#!/bin/sh\necho "my own checks ran" >&2\n'
    hook.write_text(mine)
    hook.chmod(0o755)
    result = a.run("init")
    assert (result.code, result.err) == (0, "")
    line = f'{shlex.quote(sys.executable)} -m majordomus push --hook "$1" </dev/null || true'
    assert result.out.splitlines()[-3:] == [
        f"pre-push hook                   NOT SET   {hook}",
        "note: a pre-push hook is already there; so that git push publishes records, add this "
        f"line to {hook}, before any exit:",
        f"    {line}",
    ]
    assert hook.read_text() == mine
    # With majordomus on PATH, the line says so, without a path of this machine.
    path = f"{Path(sys.executable).parent}{os.pathsep}{environ['PATH']}"
    on_path = json.loads(a.run("init", "--json", environ={"PATH": path}).out)
    assert on_path["hook"]["line"] == HOOK_LINE
    # Either line does the job.
    for added, env in ((line, a.environ), (HOOK_LINE, {**a.environ, "PATH": path})):
        hook.write_text(mine + added + "\n")
        record = write(a, f"reproduced with {added[:10]}", a.task("queue drops acks"))
        code, err = git_push(a, "-q", "origin", "main", env=env)
        assert code == 0, err
        assert err == "my own checks ran\nmajordomus: published records to origin\n"
        assert record["id"] in ref_ids(remote)
    assert init(a)["hook"] == {
        "path": str(hook),
        "state": "already",
        "reason": None,
        "line": None,
    }


def test_core_hooks_path_is_left_alone(repo: Repo) -> None:
    repo.git("config", "core.hooksPath", "team-hooks")
    report = init(repo)
    hooks = repo.path / "team-hooks"
    assert report["hook"] == {
        "path": str(hooks / "pre-push"),
        "state": "manual",
        "reason": "core.hooksPath is set to team-hooks, which majordomus does not write to",
        "line": HOOK_LINE,
    }
    assert not hooks.exists()
    assert not (repo.path / ".git" / "hooks" / "pre-push").exists()


def test_an_outdated_hook_of_majordomus_is_refreshed(repo: Repo) -> None:
    hook = Path(hook_path(repo))
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(hook_script("/gone/python"))
    assert init(repo)["hook"] == {
        "path": str(hook),
        "state": "updated",
        "reason": None,
        "line": None,
    }
    assert hook.read_text() == hook_script()


def test_pushing_the_notes_ref_by_hand_does_not_recurse(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    init(a)
    record = write(a, "reproduced", a.task("queue drops acks"))
    code, err = git_push(a, "-q", "origin", "refs/notes/majordomus")
    assert (code, err) == (0, "")
    assert record["id"] in ref_ids(remote)


def test_the_hook_does_nothing_inside_majordomus_itself(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a = seeded(tmp_path, environ, clock)
    write(a, "reproduced", a.task("queue drops acks"))
    result = a.run("push", "--hook", "origin", environ={"MAJORDOMUS_HOOK_ACTIVE": "1"})
    assert (result.code, result.out, result.err) == (0, "", "")
    assert ref_ids(remote) == set()


def test_the_hook_warns_when_majordomus_is_gone(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    _, a = seeded(tmp_path, environ, clock)
    hook = Path(hook_path(a))
    hook.write_text(hook_script("/gone/python"))
    hook.chmod(0o755)
    a.commit("fix", {"fix.txt": "fixed\n"})
    code, err = git_push(a, "-q", "origin", "main")
    assert code == 0
    assert err == "majordomus: warning: majordomus is not on PATH; records were not published.\n"


def test_the_hook_with_nothing_to_publish_says_nothing(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    _, a = seeded(tmp_path, environ, clock)
    init(a)
    a.commit("fix", {"fix.txt": "fixed\n"})
    assert git_push(a, "-q", "origin", "main") == (0, "")
