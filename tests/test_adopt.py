"""adopt: records a host's squash or rebase merge orphaned land where their change landed.

Hosts are stood in for by a second clone that merges as a host does (`git merge
--squash`, `git rebase` + fast-forward, cherry-picks) and pushes to a bare remote;
answers are compared with git's own (patch-id, notes show, cat-file).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from majordomus.index import Index
from majordomus.notes import parse_note
from majordomus.tasks import open_jobs
from tests.support.env import START, Clock, hermetic_environ
from tests.support.git import lose_object
from tests.support.repo import Repo, clone, seeded, writer_of


def git_at(repo: Repo, *args: str) -> str:
    """git in `repo` with commit dates from the test clock (as a host would date them)."""
    stamp = f"{int(repo.clock.now.timestamp())} +0000"
    result = subprocess.run(
        ["git", *args],
        cwd=repo.path,
        env={**repo.environ, "GIT_AUTHOR_DATE": stamp, "GIT_COMMITTER_DATE": stamp},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
    return result.stdout


def as_json(repo: Repo, *argv: str, code: int = 0) -> Any:
    result = repo.run(*argv, "--json")
    assert (result.code, result.err) == (code, ""), result.err
    return json.loads(result.out)


def git_patch_id(repo: Repo, *diff_args: str) -> str:
    diff = repo.git("diff-tree", "-p", "--root", *diff_args)
    return repo.git("patch-id", "--stable", input=diff).split()[0]


def note_ids(repo: Repo, commit: str) -> list[str]:
    """Record ids in the note git itself shows on `commit`."""
    text = repo.git("notes", "--ref=majordomus", "show", commit)
    return [record.id for record in parse_note(text.encode()).records]


def has_object(repo: Repo, commit: str) -> bool:
    return repo.git("cat-file", "-e", commit, check=False) == "" and bool(
        repo.git("rev-parse", "--verify", "-q", f"{commit}^{{commit}}", check=False)
    )


def record_id(result: Any) -> str:
    ident: str = result["record"]["id"]
    return ident


class Feature:
    """A feature branch in clone `dev`: a task, checkpoints on two commits, a handover."""

    def __init__(self, tmp_path: Path, environ: dict[str, str], clock: Clock) -> None:
        self.remote, self.dev = seeded(tmp_path, environ, clock)
        self.tmp_path, self.environ, self.clock = tmp_path, environ, clock
        dev = self.dev
        self.task = dev.task("queue drops acks")  # on main's first commit: stays reachable
        dev.git("checkout", "-q", "-b", "feature")
        clock.advance(60)
        self.c1 = dev.commit("retry once", {"queue.py": "retry = 1\n"})
        self.cp1 = record_id(as_json(dev, "checkpoint", "one retry halves the drops"))
        clock.advance(60)
        self.c2 = dev.commit("ack before retry", {"queue.py": "retry = 1\nack = True\n"})
        self.cp2 = record_id(as_json(dev, "checkpoint", "ack first: no drops in 50 runs"))
        self.ho = record_id(
            as_json(dev, "handover", "-o", "stop dropping acks", "-s", "fixed", "-n", "merge it")
        )
        dev.git("push", "-q", "origin", "feature")
        assert dev.run("push").code == 0
        self.host = clone(str(self.remote), tmp_path / "host", environ, clock)
        clock.advance(3600)
        self.meanwhile = self.host.commit("docs meanwhile", {"README": "queue\n"})

    @classmethod
    def copied(
        cls, template: Feature, tmp_path: Path, environ: dict[str, str], clock: Clock
    ) -> Feature:
        """The feature `template` built, copied into `tmp_path` (its clones' remote made the
        copy's), with `clock` where the template's clock stood: as `Feature(...)` builds it,
        without a clone, two pushes and a dozen commands per test."""
        assert clock.now == START, "a feature is built on a clock that has not moved"
        for name in ("remote.git", "a", "host"):
            shutil.copytree(template.tmp_path / name, tmp_path / name, symlinks=True)
        for name in ("a", "host"):
            config = tmp_path / name / ".git" / "config"
            text = config.read_text()
            assert str(template.remote) in text
            config.write_text(text.replace(str(template.remote), str(tmp_path / "remote.git")))
        clock.advance((template.clock.now - START).total_seconds())
        feature = cls.__new__(cls)
        feature.__dict__.update(template.__dict__)
        feature.tmp_path, feature.environ, feature.clock = tmp_path, environ, clock
        feature.remote = tmp_path / "remote.git"
        feature.dev = Repo(tmp_path / "a", environ, clock)
        feature.host = Repo(tmp_path / "host", environ, clock)
        return feature

    @property
    def ids(self) -> set[str]:
        return {self.cp1, self.cp2, self.ho}

    def squash_merge(self) -> str:
        host = self.host
        host.clock.advance(60)
        host.git("fetch", "-q", "origin")
        git_at(host, "merge", "-q", "--squash", "origin/feature")
        git_at(host, "commit", "-q", "-m", "Stop dropping acks (#1)")
        self.publish()
        return host.head()

    def rebase_merge(self) -> list[str]:
        host = self.host
        host.clock.advance(60)
        git_at(host, "checkout", "-q", "-b", "rebased", "origin/feature")
        git_at(host, "rebase", "-q", "main")
        git_at(host, "checkout", "-q", "main")
        git_at(host, "merge", "-q", "--ff-only", "rebased")
        self.publish()
        return host.git("rev-list", "-2", "main").split()[::-1]

    def cherry_pick(self, *commits: str) -> None:
        self.host.git("fetch", "-q", "origin")
        for commit in commits:
            self.host.clock.advance(60)
            git_at(self.host, "cherry-pick", commit)

    def publish(self) -> None:
        self.host.git("push", "-q", "origin", "main")
        self.host.git("push", "-q", "origin", "--delete", "feature")

    def partial_clone(self) -> Repo:
        """A blobless clone of the remote (file://, so that the filter is honoured)."""
        setting = ["config", "uploadpack.allowFilter", "true"]
        subprocess.run(["git", f"--git-dir={self.remote}", *setting], env=self.environ, check=True)
        url, path = f"file://{self.remote}", self.tmp_path / "partial"
        return clone(url, path, self.environ, self.clock, "--filter=blob:none")

    def teammate(self, name: str = "teammate", branch_gone: bool = True) -> Repo:
        """A fresh clone of the remote, records fetched: the branch's commits never were here."""
        mate = clone(f"file://{self.remote}", self.tmp_path / name, self.environ, self.clock)
        assert mate.run("fetch").code == 0
        for commit in (self.c1, self.c2) if branch_gone else ():
            assert not has_object(mate, commit)
        return mate

    def drop_branch(self) -> None:
        """In dev: back on main, the branch deleted and garbage-collected."""
        dev = self.dev
        dev.git("checkout", "-q", "main")
        dev.git("pull", "-q", "--ff-only", "origin", "main")
        dev.git("branch", "-q", "-D", "feature")
        dev.git("fetch", "-q", "--prune", "origin")
        dev.git("reflog", "expire", "--expire=now", "--all")
        dev.git("gc", "-q", "--prune=now")
        for commit in (self.c1, self.c2):
            assert not has_object(dev, commit)


@pytest.fixture(scope="module")
def feature_template(tmp_path_factory: pytest.TempPathFactory) -> Feature:
    """One feature built per module; each test works on a copy (`Feature.copied`)."""
    root = tmp_path_factory.mktemp("feature")
    (root / "home").mkdir()
    return Feature(root, hermetic_environ(root / "home"), Clock())


def adopted_map(result: Any) -> list[tuple[str, str, list[str], list[str]]]:
    return [
        (a["commit"], a["how"], a["from"], sorted(r["id"] for r in a["records"]))
        for a in result["adopted"]
    ]


# ---- the facts stored at write time ------------------------------------------------------


def test_every_record_stores_its_commits_patch_id_as_git_computes_it(repo: Repo) -> None:
    repo.task()
    (repo.path / "blob.bin").write_bytes(b"\x00\x01binary")
    repo.git("add", "blob.bin")
    repo.commit("text and binary", {"a.txt": "one\ntwo\n"})
    (repo.path / "blob.bin").write_bytes(b"\x00\x02binary, changed")
    repo.git("add", "blob.bin")
    repo.commit("both change", {"a.txt": "one\n  two\nthree\n"})
    for change in ("text", "mode", "delete", "empty file", "empty file deleted"):
        if change == "empty file":  # libgit2's diff text differs from git's here
            repo.commit("an empty __init__", {"pkg/__init__.py": ""})
        elif change == "empty file deleted":
            repo.git("rm", "-q", "pkg/__init__.py")
            repo.commit("gone")
        elif change == "mode":
            repo.git("update-index", "--chmod=+x", "a.txt")
            repo.commit("mode")
        elif change == "delete":
            repo.git("rm", "-q", "blob.bin")
            repo.commit("delete")
        record = as_json(repo, "checkpoint", f"after {change}")["record"]
        assert record["patch"] == git_patch_id(repo, "HEAD"), change
        again = as_json(repo, "checkpoint", f"again after {change}")["record"]  # kept, not rerun
        assert again["patch"] == record["patch"], change
        repo.commit("next", {"a.txt": f"one\n{change}\n"})
    # A commit that changes nothing (and the empty root) states no patch, the second time too.
    repo.git("commit", "-q", "--allow-empty", "-m", "empty")
    assert "patch" not in as_json(repo, "checkpoint", "on an empty commit")["record"]
    assert "patch" not in as_json(repo, "checkpoint", "again on it")["record"]


def test_a_records_patch_is_its_commits_own_under_a_graft_and_none_past_a_shallow_cut(
    repo: Repo, tmp_path: Path
) -> None:
    """The patch id a record states is a fact of its commit as stored, the same in every
    clone: a graft in force here (a replace ref, a grafts file) changes what git shows
    as the commit's diff, not the patch stated. A shallow clone's boundary commit lacks
    its parents, so no patch is stated there, rather than the whole tree as added; on a
    commit above the boundary, git's own."""
    root = repo.head()
    repo.task()
    repo.commit("one", {"a.txt": "one\n"})
    repo.commit("two", {"a.txt": "one\ntwo\n"})
    own = git_patch_id(repo, "HEAD")
    assert as_json(repo, "checkpoint", "before the graft")["record"]["patch"] == own
    repo.git("replace", "--graft", "HEAD", root)
    assert git_patch_id(repo, "HEAD") != own  # git shows another diff through the graft
    repo.drop_caches()  # computed anew, not the one kept from before
    assert as_json(repo, "checkpoint", "under the graft")["record"]["patch"] == own
    repo.git("replace", "-d", repo.head())
    (repo.path / ".git" / "info" / "grafts").write_text(f"{repo.head()} {root}\n")
    repo.drop_caches()
    assert as_json(repo, "checkpoint", "under a grafts file")["record"]["patch"] == own
    (repo.path / ".git" / "info" / "grafts").unlink()
    shallow = Repo(tmp_path / "shallow", repo.environ, repo.clock)
    repo.git("clone", "-q", "--depth", "1", f"file://{repo.path}", str(shallow.path))
    shallow.git("fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus")
    cut = shallow.git("rev-parse", "HEAD").strip()
    assert (shallow.path / ".git" / "shallow").read_text().split() == [cut]
    task = shallow.task("in CI")
    assert "patch" not in as_json(shallow, "checkpoint", "on the cut")["record"]
    shallow.commit("three", {"a.txt": "one\ntwo\nthree\n"})
    above = as_json(shallow, "checkpoint", "above it", "--task", task)["record"]["patch"]
    assert above == git_patch_id(shallow, "HEAD")


def test_a_handover_stores_the_branch_it_closes(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    dev = feature.dev
    record = json.loads(dev.run("show", "--json").out)["records"][-1]
    assert record["id"] == feature.ho
    base = dev.git("merge-base", "HEAD", "origin/main").strip()
    assert record["branch_base"] == base
    assert record["branch_commits"] == dev.git("rev-list", f"{base}..HEAD").split()
    assert record["branch_commits"] == [feature.c2, feature.c1]
    assert record["branch_patch"] == git_patch_id(dev, base, "HEAD")
    assert record["patch"] == git_patch_id(dev, "HEAD")
    # On the branch it would land on, a handover closes no branch.
    dev.git("checkout", "-q", "main")
    dev.commit("on main", {"main.py": "x = 1\n"})
    on_main = as_json(dev, "handover", "-o", "o", "-s", "s", "-n", "n")["record"]
    assert "branch_base" not in on_main and "patch" in on_main


def branch_facts(record: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(record.get(key) for key in ("branch_base", "branch_commits", "branch_patch"))


def git_branch_facts(repo: Repo, tip: str, landing: str) -> tuple[str, list[str], str]:
    """The facts git gives for the branch at `tip` landing on `landing`, in `repo`."""
    base = repo.git("merge-base", tip, landing).strip()
    return base, repo.git("rev-list", f"{base}..{tip}").split(), git_patch_id(repo, base, tip)


def test_a_handovers_branch_facts_are_the_stored_historys_whatever_graft_is_in_force(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    """Facts travel to every clone: under a graft that moves where the branch seems to
    fork (here onto main's newest commit), a handover states the branch as stored, as a
    teammate without the graft computes it."""
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    dev = feature.dev
    feature.host.commit("main moves on", {"docs.txt": "queue\n"})
    feature.host.git("push", "-q", "origin", "main")
    dev.git("fetch", "-q", "origin")
    stored = git_branch_facts(dev, "HEAD", "origin/main")
    dev.git("replace", "--graft", feature.c1, dev.git("rev-parse", "origin/main").strip())
    assert git_branch_facts(dev, "HEAD", "origin/main")[0] != stored[0]  # git follows it
    dev.commit("under the graft", {"queue.py": "retry = 3\n"})
    record = as_json(dev, "handover", "-o", "acks", "-s", "grafted", "-n", "merge")["record"]
    assert dev.run("push").code == 0
    dev.git("push", "-q", "origin", "feature")
    mate = feature.teammate(branch_gone=False)
    mate.git("checkout", "-q", "feature")
    assert branch_facts(record) == git_branch_facts(mate, "HEAD", "origin/main")
    assert branch_facts(record)[0] == stored[0]
    (shown,) = [r for r in json.loads(mate.run("show", "--json").out)["records"]]
    assert branch_facts(shown) == branch_facts(record)


def test_a_shallow_clone_states_branch_facts_only_where_its_cut_is_not_between(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    """A CI-like shallow clone of a branch that merged main midway: with the cut below
    the merge base, the handover states what a full clone computes; with a boundary commit
    between the branch and its base (its history there is unknown), it states none, never
    a guess, and keeps its commit's own patch."""
    remote, full = seeded(tmp_path, environ, clock)
    for n in range(3):
        full.commit(f"early {n}", {"early.txt": f"{n}\n"})
    full.commit("m1", {"main.txt": "1\n"})
    full.git("checkout", "-q", "-b", "feature")
    f1 = full.commit("f1", {"queue.py": "retry = 1\n"})
    full.git("checkout", "-q", "main")
    full.commit("m2", {"main.txt": "2\n"})
    full.git("checkout", "-q", "feature")
    git_at(full, "merge", "-q", "--no-ff", "-m", "merge main", "main")
    full.commit("f2", {"queue.py": "retry = 2\n"})
    full.git("push", "-q", "origin", "main", "feature")
    wanted = git_branch_facts(full, "feature", "main")
    assert wanted[1][-1] == f1
    for depth, cut_between in (("4", False), ("3", True)):
        where = tmp_path / f"depth{depth}"
        url = f"file://{remote}"
        ci = clone(url, where, environ, clock, "--depth", depth, "--no-single-branch")
        ci.git("checkout", "-q", "feature")
        boundary = set((where / ".git" / "shallow").read_text().split())
        assert (f1 in boundary) is cut_between, boundary
        ci.task("in CI")
        record = as_json(ci, "handover", "-o", "acks", "-s", "s", "-n", "n")["record"]
        assert record["patch"] == git_patch_id(full, "feature")
        if cut_between:
            assert branch_facts(record) == (None, None, None)
        else:
            assert branch_facts(record) == wanted


def test_a_shallow_clone_cut_at_the_merge_base_states_no_branch_facts(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    """`git clone --shallow-since` the merge base's date: the base is a boundary commit
    (its parents unknown here), and nothing else between lies past the cut; the handover
    states no branch facts, and its commit's own patch."""
    remote, full = seeded(tmp_path, environ, clock)
    for n in range(2):
        clock.advance(3600)
        full.commit(f"early {n}", {"early.txt": f"{n}\n"})
    clock.advance(3600)
    base = full.commit("m1", {"main.txt": "1\n"})
    full.git("checkout", "-q", "-b", "feature")
    for n in (1, 2):
        clock.advance(3600)
        full.commit(f"f{n}", {"queue.py": f"retry = {n}\n"})
    full.git("checkout", "-q", "main")
    clock.advance(3600)
    full.commit("m2", {"main.txt": "2\n"})
    full.git("push", "-q", "origin", "main", "feature")
    assert git_branch_facts(full, "feature", "main")[0] == base
    since = full.git("log", "-1", "--format=%cI", base).strip()
    ci = clone(
        f"file://{remote}",
        tmp_path / "ci",
        environ,
        clock,
        "--shallow-since",
        since,
        "--no-single-branch",
    )
    ci.git("checkout", "-q", "feature")
    assert (tmp_path / "ci" / ".git" / "shallow").read_text().split() == [base]
    ci.task("in CI")
    record = as_json(ci, "handover", "-o", "acks", "-s", "s", "-n", "n")["record"]
    assert branch_facts(record) == (None, None, None)
    assert record["patch"] == git_patch_id(full, "feature")


# ---- squash merges ----------------------------------------------------------------------------


def test_squash_merge_adopted_from_stored_facts_in_a_clone_that_never_had_the_branch(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    squash = feature.squash_merge()
    mate = feature.teammate()
    before = json.loads(mate.run("history", "--json").out)
    assert before["hidden"] == 3
    peek = as_json(mate, "resume", "--peek", "--task", feature.task)
    assert peek["label"] == "missing"
    ref = mate.notes_ref()

    dry = mate.run("adopt", "--dry-run")
    assert (dry.code, dry.err) == (0, "")
    assert dry.out.splitlines()[0] == (
        f"would adopt 3 records onto {squash[:12]} (squash merge of "
        f"{feature.c1[:12]}, {feature.c2[:12]})"
    )
    assert dry.out.splitlines()[-1] == "dry run: nothing was written"
    assert mate.notes_ref() == ref

    result = as_json(mate, "adopt")
    assert adopted_map(result) == [
        (squash, "squash", [feature.c1, feature.c2], sorted(feature.ids))
    ]
    assert (result["ambiguous"], result["orphaned"], result["dry_run"]) == ([], 3, False)
    assert result["invalid"] == 0
    heads = {r["id"]: r["head"] for r in result["adopted"][0]["records"]}
    assert heads == {feature.cp1: feature.c1, feature.cp2: feature.c2, feature.ho: feature.c2}
    assert sorted(note_ids(mate, squash)) == sorted(feature.ids)

    peek = as_json(mate, "resume", "--peek", "--task", feature.task)
    assert (peek["label"], peek["ahead"], peek["behind"]) == ("current", 0, 0)
    assert (peek["handover"]["commit"], peek["handover"]["head"]) == (squash, feature.c2)
    mate.commit("later", {"later.py": "y = 2\n"})
    peek = as_json(mate, "resume", "--peek", "--task", feature.task)
    assert (peek["label"], peek["ahead"], peek["behind"]) == ("advanced", 1, 0)
    history = as_json(mate, "history")
    assert history["hidden"] == 0
    assert {r["id"]: r["commit"] for r in history["records"] if r["id"] in feature.ids} == (
        dict.fromkeys(feature.ids, squash)
    )
    mate.drop_caches()
    assert as_json(mate, "history") == history  # read afresh

    # Idempotent: nothing left to adopt, the notes ref does not move.
    ref = mate.notes_ref()
    again = mate.run("adopt")
    assert again.out == (
        f"nothing to adopt: every record is on a commit reachable from {mate.head()[:12]}\n"
    )
    assert mate.notes_ref() == ref


def test_squash_merge_adopted_where_the_branch_was_written_then_gc(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    squash = feature.squash_merge()
    feature.drop_branch()
    dev = feature.dev
    result = as_json(dev, "adopt")
    assert adopted_map(result) == [
        (squash, "squash", [feature.c1, feature.c2], sorted(feature.ids))
    ]
    peek = as_json(dev, "resume", "--peek", "--task", feature.task)
    assert (peek["label"], peek["ahead"], peek["behind"]) == ("current", 0, 0)


def test_squash_merge_of_records_without_facts_is_recomputed_from_the_commits(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    """Records written by hand (or by an older majordomus) state no patch: while the branch's
    commits exist, the branch is found and compared all the same."""
    remote, dev = seeded(tmp_path, environ, clock)
    dev.git("checkout", "-q", "-b", "feature")
    commits = []
    for n in (1, 2):
        clock.advance(60)
        commits.append(dev.commit(f"step {n}", {"queue.py": "x = 1\n" * n}))
        dev.git(
            "notes",
            "--ref=majordomus",
            "add",
            "-m",
            f'[[checkpoint]]\nv = 1\nid = "c-{n:016x}"\ntask = "t-0123456789ab"\n'
            f'head = "{commits[-1]}"\nat = 2026-11-30T03:0{n}:00Z\n'
            f'author = "A <a@example.com>"\nbody = "step {n}"\n',
        )
    dev.git("push", "-q", "origin", "feature")
    host = clone(str(remote), tmp_path / "host", environ, clock)
    host.commit("meanwhile", {"README": "x\n"})
    git_at(host, "merge", "-q", "--squash", "origin/feature")
    git_at(host, "commit", "-q", "-m", "squashed")
    host.git("push", "-q", "origin", "main")
    dev.git("checkout", "-q", "main")
    dev.git("pull", "-q", "--ff-only", "origin", "main")
    result = as_json(dev, "adopt")
    assert adopted_map(result) == [
        (host.head(), "squash", commits, ["c-0000000000000001", "c-0000000000000002"])
    ]
    assert note_ids(dev, host.head()) == ["c-0000000000000001", "c-0000000000000002"]


# ---- rebase merges -----------------------------------------------------------------------------


@pytest.mark.parametrize("gone", [False, True], ids=["commits-kept", "commits-gone"])
def test_rebase_merge_copies_each_commits_records_onto_its_rebased_commit(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature, gone: bool
) -> None:
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    r1, r2 = feature.rebase_merge()
    assert git_patch_id(feature.host, r1) == git_patch_id(feature.dev, feature.c1)
    if gone:
        feature.drop_branch()
        where = feature.teammate()
    else:
        where = feature.dev
        where.git("fetch", "-q", "origin")
        where.git("checkout", "-q", "-B", "main", "origin/main")
    result = as_json(where, "adopt")
    assert adopted_map(result) == sorted(
        [
            (r1, "rebase", [feature.c1], [feature.cp1]),
            (r2, "rebase", [feature.c2], sorted([feature.cp2, feature.ho])),
        ]
    )
    assert note_ids(where, r1) == [feature.cp1]
    assert note_ids(where, r2) == [feature.cp2, feature.ho]
    peek = as_json(where, "resume", "--peek", "--task", feature.task)
    assert (peek["label"], peek["ahead"], peek["behind"]) == ("current", 0, 0)
    assert as_json(where, "history")["hidden"] == 0


def test_cherry_picked_commits_are_adopted_too(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    feature.cherry_pick(feature.c1, feature.c2)
    feature.publish()
    p1, p2 = feature.host.git("rev-list", "-2", "HEAD").split()[::-1]
    mate = feature.teammate()
    assert adopted_map(as_json(mate, "adopt")) == sorted(
        [
            (p1, "rebase", [feature.c1], [feature.cp1]),
            (p2, "rebase", [feature.c2], sorted([feature.cp2, feature.ho])),
        ]
    )


# ---- never on a guess; nothing to do -------------------------------------------------------------


def test_two_candidates_adopt_neither_and_say_so(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    host = feature.host
    feature.cherry_pick(feature.c1)
    first = host.head()
    host.clock.advance(60)
    git_at(host, "revert", "--no-edit", "HEAD")
    feature.cherry_pick(feature.c1)
    again = host.head()
    feature.publish()
    mate = feature.teammate()
    ref = mate.notes_ref()
    result = mate.run("adopt")
    assert (result.code, result.err) == (0, "")
    candidates = sorted([first, again])
    assert result.out == (
        f"not adopted: {feature.cp1}: their change matches 2 commits "
        f"({candidates[0][:12]}, {candidates[1][:12]}), so nothing was guessed; copy them by "
        "hand with git notes --ref=majordomus copy if you know where they belong\n"
    )
    assert mate.notes_ref() == ref
    shown = as_json(mate, "adopt", "--dry-run")
    assert shown["adopted"] == []
    assert shown["ambiguous"] == [{"records": [feature.cp1], "candidates": candidates}]


def test_a_merge_commit_needs_nothing(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    host = feature.host
    host.clock.advance(60)
    git_at(host, "merge", "-q", "--no-ff", "-m", "Merge feature", "origin/feature")
    feature.publish()
    mate = feature.teammate("merged", branch_gone=False)
    ref = mate.notes_ref()
    result = as_json(mate, "adopt")
    assert (result["adopted"], result["ambiguous"], result["orphaned"]) == ([], [], 0)
    assert mate.run("adopt").out == (
        f"nothing to adopt: every record is on a commit reachable from {mate.head()[:12]}\n"
    )
    assert mate.notes_ref() == ref
    assert as_json(mate, "history")["hidden"] == 0


def test_an_abandoned_branch_is_not_adopted(repo: Repo) -> None:
    repo.task()
    repo.git("checkout", "-q", "-b", "abandoned")
    repo.commit("dead end", {"a.py": "x = 1\n"})
    repo.run("checkpoint", "did not work")
    repo.git("checkout", "-q", "main")
    repo.commit("other work", {"b.py": "y = 1\n"})
    ref = repo.notes_ref()
    result = as_json(repo, "adopt")
    assert (result["adopted"], result["orphaned"], result["considered"]) == ([], 1, 1)
    assert result["compared"] == 2
    assert repo.notes_ref() == ref


def test_refusals_leave_the_notes_ref_alone(repo: Repo) -> None:
    repo.task()
    ref = repo.notes_ref()
    result = repo.run("adopt", "no-such-branch")
    assert (result.code, result.out) == (3, "")
    assert result.err == (
        "majordomus: cannot find a commit named 'no-such-branch'; give a branch, tag or "
        "commit id.\n"
    )
    result = repo.run("adopt", "--days", "0")
    assert (result.code, result.out, result.err) == (
        2,
        "",
        "majordomus: --days must be 1 or more, not 0.\n",
    )
    assert repo.notes_ref() == ref


def test_adopt_outside_a_repository(tmp_path: Path, environ: dict[str, str], clock: Clock) -> None:
    outside = Repo(tmp_path / "nowhere", environ, clock)
    outside.path.mkdir()
    result = outside.run("adopt")
    assert result.code == 3 and result.err.count("\n") == 1
    assert result.err.startswith("majordomus: not a git repository")


def test_the_landing_commits_own_note_is_kept_and_united(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    squash = feature.squash_merge()
    mate = feature.teammate()
    mate.run("task", "use", feature.task)
    already = record_id(as_json(mate, "checkpoint", "written on main before adopt"))
    as_json(mate, "adopt")
    assert note_ids(mate, squash)[0] == already
    assert sorted(note_ids(mate, squash)) == sorted({already, *feature.ids})


# ---- the CI recipe ---------------------------------------------------------------------------

CI_DOC = Path(__file__).resolve().parent.parent / "docs" / "ci.md"


def ci_recipe() -> str:
    """The shell block of docs/ci.md's adopt section, exactly as documented."""
    text = CI_DOC.read_text()
    section = text.split("## After a squash or rebase merge: adopt", 1)[1]
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


def test_the_ci_recipe_adopts_for_everyone(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    squash = feature.squash_merge()
    ci = clone(f"file://{feature.remote}", tmp_path / "ci", environ, clock)
    # A CI job: majordomus on PATH, no git identity of its own.
    job_env = {
        k: v for k, v in environ.items() if not k.startswith(("GIT_AUTHOR", "GIT_COMMITTER"))
    }
    job_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{environ['PATH']}"
    job = subprocess.run(
        ["bash", "-euc", ci_recipe()],
        cwd=ci.path,
        env=job_env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert job.returncode == 0, job.stderr
    assert f"adopted 3 records onto {squash[:12]} (squash merge of" in job.stdout
    remote_note = subprocess.run(
        ["git", f"--git-dir={feature.remote}", "notes", "--ref=majordomus", "show", squash],
        env=environ,
        capture_output=True,
        check=True,
    ).stdout
    assert {r.id for r in parse_note(remote_note).records} == feature.ids
    # A teammate who clones main afterwards finds the investigation on it.
    mate = feature.teammate("after-ci")
    peek = as_json(mate, "resume", "--peek", "--task", feature.task)
    assert (peek["handover"]["id"], peek["label"], peek["ahead"]) == (feature.ho, "current", 0)
    history = as_json(mate, "history")
    assert history["hidden"] == 0
    assert {r["id"] for r in history["records"] if r["commit"] == squash} == feature.ids
    assert as_json(mate, "adopt")["orphaned"] == 0
    # The writer's own clone, after git pull and a fetch of the records, agrees.
    dev = feature.dev
    dev.git("checkout", "-q", "main")
    dev.git("pull", "-q", "--ff-only", "origin", "main")
    assert dev.run("fetch").code == 0
    peek = as_json(dev, "resume", "--peek", "--task", feature.task)
    assert (peek["handover"]["commit"], peek["label"]) == (squash, "current")


# ---- histories with merges, shallow clones, the window ---------------------------------------


@pytest.mark.parametrize("where", ["dev", "teammate"])
def test_squash_of_a_branch_that_merged_main_midway(
    tmp_path: Path, environ: dict[str, str], clock: Clock, where: str
) -> None:
    """The branch meets main twice (its fork point and the merge of main into it): the
    change compared is the one since the newer merge base, as git merge-base says."""
    remote, dev = seeded(tmp_path, environ, clock)
    task = dev.task("queue drops acks")
    dev.git("checkout", "-q", "-b", "feature")
    clock.advance(60)
    c1 = dev.commit("retry once", {"queue.py": "retry = 1\n"})
    cp1 = record_id(as_json(dev, "checkpoint", "before main moved"))
    host = clone(str(remote), tmp_path / "host", environ, clock)
    host.commit("docs meanwhile", {"README": "queue\n"})
    host.git("push", "-q", "origin", "main")
    dev.git("fetch", "-q", "origin")
    clock.advance(60)
    git_at(dev, "merge", "-q", "--no-ff", "-m", "merge main into feature", "origin/main")
    clock.advance(60)
    c2 = dev.commit("ack before retry", {"queue.py": "retry = 1\nack = True\n"})
    ho = record_id(as_json(dev, "handover", "-o", "acks", "-s", "fixed", "-n", "merge"))
    record = json.loads(dev.run("show", "--json").out)["records"][-1]
    assert record["branch_base"] == dev.git("merge-base", "HEAD", "origin/main").strip()
    dev.git("push", "-q", "origin", "feature")
    assert dev.run("push").code == 0
    host.git("fetch", "-q", "origin")
    git_at(host, "merge", "-q", "--squash", "origin/feature")
    git_at(host, "commit", "-q", "-m", "Stop dropping acks (#2)")
    squash = host.head()
    host.git("push", "-q", "origin", "main")
    host.git("push", "-q", "origin", "--delete", "feature")
    if where == "dev":
        reader = dev
        dev.git("checkout", "-q", "main")
        dev.git("pull", "-q", "--ff-only", "origin", "main")
    else:
        reader = clone(f"file://{remote}", tmp_path / "mate", environ, clock)
        assert reader.run("fetch").code == 0
        assert not has_object(reader, c1)
    result = as_json(reader, "adopt")
    assert [(a["commit"], a["how"]) for a in result["adopted"]] == [(squash, "squash")]
    assert sorted(r["id"] for r in result["adopted"][0]["records"]) == sorted([cp1, ho])
    if where == "dev":
        assert set(result["adopted"][0]["from"]) == {c1, c2}
    peek = as_json(reader, "resume", "--peek", "--task", task)
    assert (peek["label"], peek["ahead"], peek["behind"]) == ("current", 0, 0)


def test_adopt_in_a_shallow_ci_clone_uses_the_stored_facts(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    """A shallow clone cannot diff a commit at its boundary (its parent is cut off): such a
    commit is never compared, so depth 1 adopts nothing, and depth 2 is enough."""
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    squash = feature.squash_merge()
    ci = clone(f"file://{feature.remote}", tmp_path / "shallow", environ, clock, "--depth", "1")
    assert ci.git("rev-parse", "--is-shallow-repository").strip() == "true"
    assert ci.run("fetch").code == 0
    ref = ci.notes_ref()
    result = as_json(ci, "adopt")
    # Four orphaned: the task record's commit lies past the boundary too.
    assert (result["adopted"], result["orphaned"], result["compared"]) == ([], 4, 0)
    assert ci.notes_ref() == ref
    ci.git("fetch", "-q", "--deepen", "1", "origin", "main")
    result = as_json(ci, "adopt")
    assert adopted_map(result) == [
        (squash, "squash", [feature.c1, feature.c2], sorted(feature.ids))
    ]
    assert sorted(note_ids(ci, squash)) == sorted(feature.ids)


def test_records_older_than_the_window_are_not_considered(repo: Repo) -> None:
    repo.task()
    repo.git("checkout", "-q", "-b", "old")
    change = repo.commit("old change", {"a.py": "x = 1\n"})
    repo.run("checkpoint", "long ago")
    repo.git("checkout", "-q", "main")
    repo.clock.advance(3 * 86400)
    git_at(repo, "cherry-pick", change)
    landed = repo.head()
    assert as_json(repo, "adopt", "--days", "2", "--dry-run")["considered"] == 0
    assert repo.run("adopt", "--days", "2").out == (
        f"nothing to adopt: 1 record on commits not reachable from {landed[:12]}, none whose "
        "change landed in the 0 commits compared\n"
        "(1 written more than 2 days before it were not considered; --days N widens the "
        "search)\n"
    )
    result = as_json(repo, "adopt", "--days", "4", "--dry-run")
    assert [(a["commit"], a["how"]) for a in result["adopted"]] == [(landed, "rebase")]


SHARING_PAGE = Path(__file__).resolve().parent.parent / "docs" / "sharing.md"


def test_the_documented_post_merge_hook_adopts_on_git_pull(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    squash = feature.squash_merge()
    dev = feature.dev
    (script,) = [
        block.split("```", 1)[0]
        for block in SHARING_PAGE.read_text().split("```sh\n")[1:]
        if "# .git/hooks/post-merge" in block.split("```", 1)[0]
    ]
    hook = dev.path / ".git" / "hooks" / "post-merge"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(script)
    hook.chmod(0o755)
    dev.git("checkout", "-q", "main")
    pulled = subprocess.run(
        ["git", "pull", "-q", "--ff-only", "origin", "main"],
        cwd=dev.path,
        env={**environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{environ['PATH']}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert pulled.returncode == 0, pulled.stderr
    # git shows what a hook prints on its standard error.
    assert pulled.stderr.startswith(f"adopted 3 records onto {squash[:12]} (squash merge of")
    assert sorted(note_ids(dev, squash)) == sorted(feature.ids)


def test_a_landing_commit_whose_note_is_not_toml_takes_the_copies_after_its_bytes(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    squash = feature.squash_merge()
    mate = feature.teammate()
    mate.git("notes", "--ref=majordomus", "add", "-m", "edited by hand = [", squash)
    result = mate.run("adopt")
    assert result.code == 0, result.err
    after = mate.git("notes", "--ref=majordomus", "show", squash)
    assert after.startswith("edited by hand = [\n\n[[")
    assert sorted(note_ids(mate, squash)) == sorted(feature.ids)


def test_a_landing_commit_whose_note_cannot_be_read_is_refused_whole(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    squash = feature.squash_merge()
    mate = feature.teammate()
    nested = "x = " + "[" * 100 + "]" * 100
    mate.git("notes", "--ref=majordomus", "add", "-m", nested, squash)
    ref = mate.notes_ref()
    result = mate.run("adopt")
    assert (result.code, result.out) == (3, "")
    assert result.err.startswith(f"majordomus: the note on {squash[:12]} cannot be read")
    assert result.err.endswith(
        f"majordomus will not overwrite it: inspect it with git notes --ref=majordomus "
        f"show {squash[:12]}.\n"
    )
    assert result.err.count("\n") == 1
    assert mate.notes_ref() == ref


def test_copies_already_written_by_another_adopt_are_not_written_twice(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    squash = feature.squash_merge()
    mate = feature.teammate()
    jobs = open_jobs(str(mate.path), mate.environ)
    index = Index(jobs.reader.read_notes(), jobs.reader, jobs.history)
    mine = [item for item in index.records if item.summary.id in feature.ids]
    records = [index.locate(item).record for item in mine]
    writer = writer_of(jobs)
    first = writer.append_many({squash: records}, "adopt", sleep=mate.sleeps.append)
    assert sorted(note_ids(mate, squash)) == sorted(feature.ids)
    again = writer.append_many({squash: records}, "adopt", sleep=mate.sleeps.append)
    assert again.target == first.target == mate.notes_ref()
    assert len(note_ids(mate, squash)) == 3


def test_the_branch_a_handover_closes_follows_the_upstream(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    dev = feature.dev

    def closes() -> str:
        record = as_json(dev, "handover", "-o", "o", "-s", "s", "-n", "n")["record"]
        return str(record["branch_base"])

    # Pushed with -u: its upstream is itself on the remote, so it lands on the remote's
    # default branch: origin/HEAD when the clone knows it, else origin/main.
    dev.git("branch", "-q", "--set-upstream-to", "origin/feature")
    assert closes() == dev.git("merge-base", "HEAD", "origin/main").strip()
    dev.git("update-ref", "refs/remotes/origin/trunk", feature.c1)
    dev.git("symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/trunk")
    assert closes() == feature.c1
    # Branched from another branch that it will land on: that one.
    dev.git("checkout", "-q", "-b", "fix", "--track", "feature")
    clock.advance(60)
    dev.commit("fix on top", {"fix.py": "z = 1\n"})
    assert closes() == feature.c2


def test_adopt_in_a_partial_clone(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    """A blob:none clone lacks the blobs of the squash commit (main changed the file since):
    git fetches what the compared diffs need; the answer is the one a full clone gives."""
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    squash = feature.squash_merge()
    feature.host.commit("later", {"queue.py": "retry = 2\nack = True\n"})
    feature.host.git("push", "-q", "origin", "main")
    partial = feature.partial_clone()
    missing = partial.git("rev-list", "--objects", "--missing=print", "HEAD")
    assert f"?{partial.git('rev-parse', f'{squash}:queue.py').strip()}" in missing.split()
    # The records' objects, fetched without the clone's filter (git's own way).
    notes = "refs/notes/majordomus:refs/notes/majordomus"
    partial.git("fetch", "-q", "--no-filter", "origin", notes)
    result = as_json(partial, "adopt")
    assert adopted_map(result) == [
        (squash, "squash", [feature.c1, feature.c2], sorted(feature.ids))
    ]
    assert result["invalid"] == 0


def test_a_branch_that_moved_on_after_its_handover_is_only_adopted_while_it_exists(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    dev = feature.dev
    clock.advance(60)
    late = dev.commit("one more", {"late.py": "z = 3\n"})
    late_cp = record_id(as_json(dev, "checkpoint", "after the handover"))
    dev.git("push", "-q", "origin", "feature")
    assert dev.run("push").code == 0
    squash = feature.squash_merge()
    mate = feature.teammate()  # the commits are gone: the handover's facts do not match
    ref = mate.notes_ref()
    result = as_json(mate, "adopt")
    assert (result["adopted"], result["ambiguous"], result["orphaned"]) == ([], [], 4)
    assert mate.notes_ref() == ref
    dev.git("fetch", "-q", "origin")  # where they exist, the branch is recomputed
    dev.git("checkout", "-q", "-B", "main", "origin/main")
    assert adopted_map(as_json(dev, "adopt")) == [
        (squash, "squash", [feature.c1, feature.c2, late], sorted({*feature.ids, late_cp}))
    ]


def test_patch_ids_of_thousands_of_commits_do_not_wait_on_full_pipes(repo: Repo) -> None:
    # Written all at once, 3,000 commit ids filled diff-tree's and patch-id's pipes: the
    # three processes waited on each other forever. 4,000 commits, each changing a file.
    import threading

    from majordomus import patches
    from majordomus.tasks import open_jobs

    lines = []
    for i in range(4000):
        body = f"line {i}\n" * 3
        lines.append(
            f"commit refs/heads/many\nmark :{i + 1}\n"
            f"committer A <a@b> {1_700_000_000 + i} +0000\ndata 2\nc\n"
            + (f"from {repo.head()}\n" if i == 0 else "")
            + f"M 100644 inline f.txt\ndata {len(body)}\n{body}\n"
        )
    subprocess.run(
        ["git", "fast-import", "--quiet"],
        cwd=repo.path,
        env=repo.environ,
        input="".join(lines).encode(),
        check=True,
    )
    commits = repo.git("rev-list", "-n", "4000", "many").split()
    found: dict[str, str] = {}
    worker = threading.Thread(
        target=lambda: found.update(
            patches.ids_of_commits(open_jobs(str(repo.path), repo.environ).history, commits)
        ),
        daemon=True,
    )
    worker.start()
    worker.join(120)
    assert not worker.is_alive(), "diff-tree | patch-id never finished"
    assert len(found) == 4000


def test_a_record_with_copies_is_orphaned_only_when_rev_reaches_none_of_them(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    """A record amended on its branch (notes.rewriteRef: a copy on each commit) is one
    orphan after a squash merge, with both commits as its sources; a record whose note a
    person appended with plain git to the note of a commit of main is not orphaned at all.
    In a second clone behind a bare remote."""
    clock.advance(0)
    remote, alice = seeded(tmp_path, environ, clock)
    alice.git("config", "notes.rewriteRef", "refs/notes/majordomus")
    alice.task("squashed later")
    alice.git("checkout", "-q", "-b", "feature")
    alice.commit("change", {"a.py": "x = 1\n"})
    first = json.loads(alice.run("checkpoint", "amended later", "--json").out)["record"]
    clock.advance(60)
    alice.git("commit", "-q", "--amend", "-m", "change, amended")  # the note is copied
    amended = alice.head()
    clock.advance(60)
    alice.git("checkout", "-q", "-b", "other", "main")
    alice.commit("kept", {"b.py": "y = 1\n"})
    kept = json.loads(alice.run("checkpoint", "copied onto main", "--json").out)["record"]
    alice.git("checkout", "-q", "main")
    alice.git("merge", "-q", "--squash", "feature")
    alice.git("commit", "-q", "-m", "feature (squashed)")
    squash = alice.head()
    copied = alice.git("notes", "--ref=majordomus", "show", kept["commit"])
    alice.git("notes", "--ref=majordomus", "append", "-m", copied, "HEAD~1")  # by hand
    alice.git("branch", "-q", "-D", "feature", "other")
    assert alice.run("push").code == 0
    alice.git("push", "-q", "origin", "main")
    bob = clone(str(remote), tmp_path / "bob", environ, clock)
    assert bob.run("fetch").code == 0
    both = {first["commit"], amended}
    assert all(first["id"] in note_ids(bob, c) for c in both)
    result = as_json(bob, "adopt", "--dry-run")
    assert result["orphaned"] == 1  # the amended record once; the copied one not at all
    (adoption,) = result["adopted"]
    assert adoption["commit"] == squash and set(adoption["from"]) == both
    assert [r["id"] for r in adoption["records"]] == [first["id"]]
    assert adoption["records"][0]["commit"] == squash


def test_adopt_reads_only_the_notes_rev_does_not_reach_and_answers_as_a_fresh_read(
    feature_template: Feature,
    tmp_path: Path,
    environ: dict[str, str],
    clock: Clock,
    monkeypatch: Any,
) -> None:
    """Once a read has listed the notes trees, adopt reads the notes on commits REV does not
    reach and none of the others: in a teammate's clone (its records on two refs, local and
    remote-tracking) after a squash merge, with records on main and on a merged side branch,
    a line a person appended to a note with plain git, an amended commit whose note was
    copied (so which copy a read lists depends on the revision), and another branch checked
    out while REV is main. Its answers, from REV and from HEAD, are those it gives after
    `doctor --drop-cache`, and the orphans are what git's own listing says."""
    from majordomus.blobs import NoteBlobs
    from majordomus.readcache import blob_entry

    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    squash = feature.squash_merge()
    mate = feature.teammate()
    mate.git("config", "notes.rewriteRef", "refs/notes/majordomus")
    for n in range(6):
        mate.commit(f"main {n}", {"main.txt": f"{n}\n"})
        assert mate.run("checkpoint", "--task", feature.task, f"on main {n}").code == 0
    mate.git("checkout", "-q", "-b", "side", "HEAD~3")
    mate.commit("side work", {"side.txt": "s\n"})
    assert mate.run("checkpoint", "--task", feature.task, "on the side").code == 0
    mate.git("checkout", "-q", "main")
    mate.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    mate.git("notes", "--ref=majordomus", "append", "-m", "a line by hand", "HEAD~1")
    mate.git("checkout", "-q", "-b", "elsewhere", "HEAD~2")
    mate.commit("to be amended", {"e.txt": "e\n"})
    assert mate.run("checkpoint", "--task", feature.task, "amended next").code == 0
    mate.git("commit", "-q", "--amend", "-m", "amended")  # the note is copied
    assert mate.run("history", "--all").code == 0  # the trees are listed: a warm clone

    parsed: set[str] = set()
    parse = NoteBlobs.parse

    def counted(self: NoteBlobs, blob_id: str, *, keep: bool = True) -> Any:
        parsed.add(blob_id)
        return parse(self, blob_id, keep=keep)

    monkeypatch.setattr(NoteBlobs, "parse", counted)
    summarised: list[object] = []  # summaries made from the read cache

    def from_cache(value: object) -> Any:
        summarised.append(value)
        return blob_entry(value)

    monkeypatch.setattr("majordomus.readcache.blob_entry", from_cache)
    listed = [line.split() for line in mate.git("notes", "--ref=majordomus", "list").splitlines()]
    answers = []
    for rev in ("main", "HEAD"):
        parsed.clear()
        answers.append(as_json(mate, "adopt", "--dry-run", *(["main"] if rev == "main" else [])))
        reached = set(mate.git("rev-list", rev).split())
        unreached = {blob for blob, commit in listed if commit not in reached}
        # None of the notes REV reaches (from main: 9, the one edited by hand included).
        assert parsed and parsed <= unreached, rev
        # Which copy of the amended record a read from main lists is not what the views
        # (made for HEAD) hold: that one read is of every note; from HEAD, of none.
        assert bool(summarised) == (rev == "main")
        summarised.clear()
        assert len(unreached) < len(listed) - 4
    monkeypatch.setattr(NoteBlobs, "parse", parse)
    from_main, from_head = answers
    # From main, the amended commit's records and the original's are one orphan, which
    # lands nowhere; the feature's three land on the squash.
    ((onto, how, sources, ids),) = adopted_map(from_main)
    assert (onto, how, set(sources), set(ids)) == (
        squash,
        "squash",
        {feature.c1, feature.c2},
        feature.ids,
    )
    # From HEAD: the feature's, main's newest and the side branch's (merged after HEAD).
    assert from_main["orphaned"] == 4 and from_head["orphaned"] == 5
    assert mate.run("doctor", "--drop-cache").code in (0, 1)
    assert as_json(mate, "adopt", "--dry-run", "main") == from_main
    assert mate.run("doctor", "--drop-cache").code in (0, 1)
    assert as_json(mate, "adopt", "--dry-run") == from_head


def test_adopt_in_a_partial_clone_reads_again_an_orphaned_note_that_went_missing(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    """The views `adopt` reads are of a state whose every note object was here; when one
    of the few notes it then reads alone is not (an object lost since), it reads every
    note as any read does: the promisor remote sends the object and the answer is the one
    it gave before, never a record silently left out as not orphaned."""
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    squash = feature.squash_merge()
    partial = feature.partial_clone()
    assert partial.run("fetch").code == 0
    before = as_json(partial, "adopt", "--dry-run")
    assert adopted_map(before) == [
        (squash, "squash", [feature.c1, feature.c2], sorted(feature.ids))
    ]
    # The object of the note on c1 lost since (the promisor remote still has it).
    blob = partial.git("notes", "--ref=majordomus", "list", feature.c1).strip()
    lose_object(partial.path, environ, blob)
    assert not partial.pygit.odb.exists(blob)
    result = as_json(partial, "adopt", "--dry-run")
    assert adopted_map(result) == adopted_map(before)
    assert result["invalid"] == 0


def test_fetch_push_and_doctor_count_records_once_and_copies_apart(
    tmp_path: Path, environ: dict[str, str], clock: Clock, feature_template: Feature
) -> None:
    # The squash's teammate adopts (three records copied onto the squash) and publishes.
    feature = Feature.copied(feature_template, tmp_path, environ, clock)
    squash = feature.squash_merge()
    mate = feature.teammate()
    assert mate.run("adopt").code == 0
    assert mate.run("push").code == 0
    # A clone that had nothing: the task, two checkpoints and a handover, four records;
    # three of them also on the squash.
    third = clone(f"file://{feature.remote}", tmp_path / "third", environ, clock)
    fetched = third.run("fetch")
    assert (fetched.code, fetched.err) == (0, "")
    assert fetched.out == (
        "origin: 4 new records and 3 more copies on other commits (first fetch)\n"
    )
    fetched_json = as_json(third, "fetch")  # up to date now: nothing new
    assert (fetched_json["records_added"], fetched_json["copies_added"]) == (0, 0)
    doctor = third.run("doctor")
    notes = [line for line in doctor.out.splitlines() if line.split()[1:2] == ["notes"]]
    assert notes == [
        "ok    notes     4 notes, 4 records (and 3 more copies on other commits), 0 invalid"
    ]
    # The writer, who has the four records, pushes a fifth: the remote moved (the
    # adopt), so the push merges the copies first: no record new to it, three copies.
    feature.dev.clock.advance(60)
    assert feature.dev.run("checkpoint", "squashed upstream").code == 0
    pushed = feature.dev.run("push")
    assert (pushed.code, pushed.err) == (0, "")
    assert pushed.out == (
        "published records to origin (origin had moved: merged 0 new records and 3 more "
        "copies on other commits from it, 2 attempts)\n"
    )
    assert sorted(note_ids(feature.dev, squash)) == sorted(feature.ids)
