"""The teams campaign: several clones of one remote working as a team would.

Each round builds a bare "host" repository (partial clones allowed) and a few
clones that take turns at random: checkpoint, handover, resume, commit, branch,
rebase, a squash merge "on the host" with the branch deleted, `gc --prune=now`,
`git notes prune`, a line appended by hand with `git notes append`, a
`git replace --graft` of HEAD and the replacements' removal, a spike branch
deleted and collected after a read, and fetch / push / sync. Fresh full,
partial (blob:none, tree:0) and shallow clones read along the way. Right after
a graft, a spike or a gc, and at the end before its replacements are deleted,
each clone's reads at its HEAD through what its commands kept equal a fresh read
of that clone. At the end every clone syncs, and then:

- every record ever written is present in every clone (read with git's own
  plumbing, not with majordomus);
- every read in every clone and in fresh partial clones equals the same read in
  a fresh full clone; a fresh shallow clone's labels are the full clone's or
  `unknown`;
- no command printed a traceback.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import random
import re
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.support.cli import MAJORDOMUS
from tests.support.env import hermetic_environ

NOTES_REF = "refs/notes/majordomus"
_ID_LINE = re.compile(rb'^id = "([^"\\]+)"$', re.MULTILINE)
_WORDS = ("ack", "retry", "flush", "lock", "queue", "race", "timeout", "replay", "drain")


@dataclasses.dataclass
class Tally:
    """What one or more rounds did and found."""

    rounds: int = 0
    clones: int = 0
    operations: int = 0
    processes: int = 0
    written: int = 0
    read_back: int = 0
    fresh_reads: int = 0
    failures: list[str] = dataclasses.field(default_factory=list)
    counts: dict[str, int] = dataclasses.field(default_factory=dict)

    def count(self, op: str) -> None:
        self.counts[op] = self.counts.get(op, 0) + 1
        self.operations += 1


class Failure(Exception):
    """An invariant that did not hold."""


def _git(cwd: Path, environ: Mapping[str, str], *args: str, check: bool = True) -> str:
    result = subprocess.run(
        ["git", *args], cwd=cwd, env=dict(environ), capture_output=True, text=True, check=False
    )
    if check and result.returncode != 0:
        raise Failure(f"git {' '.join(args)} in {cwd.name} failed: {result.stderr.strip()}")
    return result.stdout


class Team:
    """One round: a host, its clones, and the records they wrote."""

    def __init__(self, root: Path, rng: random.Random, tally: Tally, clones: int) -> None:
        self.root = root
        self.rng = rng
        self.tally = tally
        (root / "home").mkdir(parents=True, exist_ok=True)
        self.environ = hermetic_environ(root / "home")
        self.host = root / "host.git"
        _git(root, self.environ, "init", "-q", "--bare", "-b", "main", str(self.host))
        for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
            _git(self.host, self.environ, "config", key, "true")
        self.url = f"file://{self.host}"
        seed = root / "seed"
        _git(root, self.environ, "clone", "-q", self.url, str(seed))
        _git(seed, self.environ, "commit", "-q", "--allow-empty", "-m", "initial")
        _git(seed, self.environ, "push", "-q", "origin", "main")
        self.clones: list[Path] = []
        self.written: set[str] = set()
        self.branches = 0
        self.fresh = 0
        for i in range(clones):
            path = root / f"clone{i}"
            _git(root, self.environ, "clone", "-q", self.url, str(path))
            self.mj(path, "init")
            self.clones.append(path)
        tally.clones += clones
        # The task record sits on the first commit, which every clone always has.
        data = self.record(self.clones[0], "task", "new", "acks drop under load")
        assert data is not None
        self.task: str = str(data["task"])
        self.mj(self.clones[0], "push")
        for clone in self.clones[1:]:
            self.mj(clone, "fetch")

    # ---- running majordomus ---------------------------------------------------------------

    def mj(
        self, cwd: Path, *argv: str, ok: Sequence[int] = (0,), stdin: str = ""
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*MAJORDOMUS, "-C", str(cwd), *argv],
            env=self.environ,
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        self.tally.processes += 1
        shown = f"majordomus {' '.join(argv)} in {cwd.name}"
        if "Traceback" in result.stderr or "Traceback" in result.stdout:
            raise Failure(f"{shown} printed a traceback: {result.stderr[-800:]}")
        if result.returncode not in ok:
            raise Failure(f"{shown} exited {result.returncode}: {result.stderr.strip()}")
        return result

    def record(self, cwd: Path, *argv: str, ok: Sequence[int] = (0,)) -> dict[str, Any] | None:
        """A write through majordomus; its id joins the set that must never be lost."""
        result = self.mj(cwd, *argv, "--json", ok=ok)
        if result.returncode != 0:
            return None
        data: dict[str, Any] = json.loads(result.stdout)
        ident = data.get("task") if argv[:2] == ("task", "new") else data["record"]["id"]
        self.written.add(str(ident))
        self.tally.written += 1
        return data

    def text(self) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(self.rng.randint(2, 8)))

    # ---- the operations -------------------------------------------------------------------

    def step(self) -> None:
        clone = self.rng.choice(self.clones)
        ops = [
            ("checkpoint", 6),
            ("commit", 5),
            ("handover", 2),
            ("resume", 2),
            ("branch", 2),
            ("switch", 2),
            ("rebase", 1),
            ("squash", 1),
            ("gc", 1),
            ("prune", 1),
            ("append", 1),
            ("fetch", 2),
            ("push", 2),
            ("sync", 2),
            ("git-push", 1),
            ("fresh-read", 1),
            ("graft", 1),
            ("ungraft", 1),
            ("spike", 1),
        ]
        op = self.rng.choices([name for name, _ in ops], [w for _, w in ops])[0]
        self.tally.count(op)
        getattr(self, "op_" + op.replace("-", "_"))(clone)

    def op_checkpoint(self, clone: Path) -> None:
        self.record(clone, "checkpoint", "--task", self.task, self.text())

    def op_handover(self, clone: Path) -> None:
        self.record(
            clone,
            "handover",
            "--task",
            self.task,
            "--objective",
            self.text(),
            "--state",
            self.text(),
            "--next",
            self.text(),
        )

    def op_resume(self, clone: Path) -> None:
        result = self.mj(clone, "resume", "--task", self.task, "--json", ok=(0, 1))
        if result.returncode == 0:
            data = json.loads(result.stdout)
            if data.get("recorded"):
                self.tally.written += 1
                # the resume record's id is not in the JSON shape: read it from the ref below
                self.written.update(self.new_resume_ids(clone))

    def new_resume_ids(self, clone: Path) -> set[str]:
        return {i for i in self.ids_in(clone) if i.startswith("r-")} - self.written

    def op_commit(self, clone: Path) -> None:
        name = f"f{self.rng.randrange(5)}.txt"
        (clone / name).write_text(self.text() + "\n")
        _git(clone, self.environ, "add", name)
        _git(clone, self.environ, "commit", "-q", "--allow-empty", "-m", self.text())

    def op_branch(self, clone: Path) -> None:
        self.branches += 1
        back = self.rng.randrange(3)
        base = f"HEAD~{back}" if back and self.has(clone, f"HEAD~{back}") else "HEAD"
        _git(clone, self.environ, "checkout", "-q", "-b", f"feat{self.branches}", base)
        self.op_commit(clone)

    def op_switch(self, clone: Path) -> None:
        branches = _git(
            clone, self.environ, "for-each-ref", "--format=%(refname:short)", "refs/heads"
        )
        _git(clone, self.environ, "checkout", "-q", self.rng.choice(branches.split()))

    def op_rebase(self, clone: Path) -> None:
        _git(clone, self.environ, "fetch", "-q", "origin")
        if self.branch(clone) in ("main", None):
            return
        result = subprocess.run(
            ["git", "rebase", "-q", "origin/main"],
            cwd=clone,
            env=self.environ,
            capture_output=True,
            check=False,
        )
        if result.returncode != 0:
            _git(clone, self.environ, "rebase", "--abort", check=False)

    def op_squash(self, clone: Path) -> None:
        """The host squash-merges this clone's branch into main and deletes it."""
        branch = self.branch(clone)
        if branch in ("main", None):
            return
        _git(clone, self.environ, "push", "-q", "origin", f"HEAD:refs/heads/{branch}")
        host_work = self.root / "host-work"
        if not host_work.exists():
            _git(self.root, self.environ, "clone", "-q", self.url, str(host_work))
        _git(host_work, self.environ, "fetch", "-q", "origin")
        _git(host_work, self.environ, "checkout", "-q", "-B", "main", "origin/main")
        merged = subprocess.run(
            ["git", "merge", "-q", "--squash", f"origin/{branch}"],
            cwd=host_work,
            env=self.environ,
            capture_output=True,
            check=False,
        )
        if merged.returncode != 0:
            _git(host_work, self.environ, "reset", "-q", "--hard", "origin/main")
            return
        _git(host_work, self.environ, "commit", "-q", "--allow-empty", "-m", f"{branch} (#1)")
        _git(host_work, self.environ, "push", "-q", "origin", "main", f":refs/heads/{branch}")
        _git(clone, self.environ, "checkout", "-q", "main")
        pulled = subprocess.run(
            ["git", "pull", "-q", "--no-rebase", "origin", "main"],
            cwd=clone,
            env=self.environ,
            capture_output=True,
            check=False,
        )
        if pulled.returncode != 0:  # main here and on the host conflict: left diverged
            _git(clone, self.environ, "merge", "--abort", check=False)

    def op_gc(self, clone: Path) -> None:
        """Delete a branch other than the checked-out one and collect what it held; what
        the clone kept about its commits (read just before) meets a clone without them."""
        self.read_here(clone)
        current = self.branch(clone)
        branches = [
            b
            for b in _git(
                clone, self.environ, "for-each-ref", "--format=%(refname:short)", "refs/heads"
            ).split()
            if b not in (current, "main")
        ]
        if branches:
            _git(clone, self.environ, "branch", "-q", "-D", self.rng.choice(branches))
        _git(clone, self.environ, "reflog", "expire", "--expire=now", "--all")
        _git(clone, self.environ, "gc", "-q", "--prune=now")
        self.cached_equals_fresh(clone)

    def op_spike(self, clone: Path) -> None:
        """A spike: a branch with a commit and a handover, never pushed; back where it
        started, a read keeps the handover's label; then the spike is deleted and its
        commit collected (the record stays, in the notes): the label read through what was
        kept is a fresh read's (`missing`)."""
        back = self.branch(clone) or _git(clone, self.environ, "rev-parse", "HEAD").strip()
        self.branches += 1
        spike = f"spike{self.branches}"
        _git(clone, self.environ, "checkout", "-q", "-b", spike)
        self.op_commit(clone)
        self.op_handover(clone)
        _git(clone, self.environ, "checkout", "-q", back)
        self.read_here(clone)
        _git(clone, self.environ, "branch", "-q", "-D", spike)
        _git(clone, self.environ, "reflog", "expire", "--expire=now", "--all")
        _git(clone, self.environ, "gc", "-q", "--prune=now")
        self.cached_equals_fresh(clone)

    def op_prune(self, clone: Path) -> None:
        """A teammate publishes, then prunes notes of commits they lack (in that clone only)."""
        self.mj(clone, "sync")
        _git(clone, self.environ, "notes", "--ref=majordomus", "prune", check=False)

    def op_append(self, clone: Path) -> None:
        _git(clone, self.environ, "notes", "--ref=majordomus", "append", "-m", self.text(), "HEAD")

    def op_fetch(self, clone: Path) -> None:
        self.mj(clone, "fetch")

    def op_push(self, clone: Path) -> None:
        self.mj(clone, "push")

    def op_sync(self, clone: Path) -> None:
        self.mj(clone, "sync")

    def op_git_push(self, clone: Path) -> None:
        branch = self.branch(clone)
        if branch is None:
            return
        subprocess.run(
            ["git", "push", "-q", "origin", f"HEAD:refs/heads/{branch}"],
            cwd=clone,
            env=self.environ,
            capture_output=True,
            check=False,
        )

    def op_graft(self, clone: Path) -> None:
        """`git replace --graft`: a session hands over and works on, then HEAD's history
        is cut down to an older ancestor's (as a stitched repository's is), cutting off a
        handover HEAD reached (in this clone only); answers follow git through it at once,
        whatever was kept about the history before."""
        self.op_handover(clone)
        self.op_commit(clone)
        read = json.loads(self.read_here(clone))
        head = _git(clone, self.environ, "rev-parse", "HEAD").strip()
        reached = [
            r["commit"]
            for r in read["records"]
            if r["kind"] == "handover" and r.get("label") == "advanced"
        ]
        older = [f"{c}^" for c in reached if self.has(clone, f"{c}^")]
        if older:
            self.tally.count("graft cutting off a handover")
            _git(clone, self.environ, "replace", "-f", "--graft", head, self.rng.choice(older))
            self.cached_equals_fresh(clone)

    def op_ungraft(self, clone: Path) -> None:
        """Every replacement of this clone deleted: the history as stored again."""
        refs = _git(clone, self.environ, "for-each-ref", "--format=%(refname)", "refs/replace")
        for ref in refs.split():
            _git(clone, self.environ, "update-ref", "-d", ref)
        self.read_here(clone)

    def read_here(self, clone: Path) -> str:
        """A read at HEAD, as a session would make one: what it keeps meets the next ops."""
        self.tally.fresh_reads += 1
        return self.mj(clone, "history", "--all", "--json").stdout

    def op_fresh_read(self, clone: Path) -> None:
        kind = self.rng.choice(["full", "blob:none", "tree:0", "shallow"])
        self.fresh_clone(kind)

    # ---- reading ---------------------------------------------------------------------------

    def branch(self, clone: Path) -> str | None:
        out = _git(clone, self.environ, "symbolic-ref", "-q", "--short", "HEAD", check=False)
        return out.strip() or None

    def has(self, clone: Path, rev: str) -> bool:
        result = subprocess.run(
            ["git", "rev-parse", "-q", "--verify", rev + "^{commit}"],
            cwd=clone,
            env=self.environ,
            capture_output=True,
            check=False,
        )
        return result.returncode == 0

    def ids_in(self, clone: Path) -> set[str]:
        """Every record id in the clone's notes refs, read with git's plumbing alone."""
        refs = _git(clone, self.environ, "for-each-ref", "--format=%(refname)", "refs/notes")
        ids: set[str] = set()
        for ref in refs.split():
            if not (ref == NOTES_REF or ref.endswith("/majordomus")):
                continue
            listing = _git(clone, self.environ, "ls-tree", "-r", ref)
            blobs = [line.split()[2] for line in listing.splitlines() if line.split()[1] == "blob"]
            if not blobs:
                continue
            batch = subprocess.run(
                ["git", "cat-file", "--batch"],
                cwd=clone,
                env=self.environ,
                input="\n".join(blobs).encode() + b"\n",
                capture_output=True,
                check=True,
            ).stdout
            ids.update(m.decode() for m in _ID_LINE.findall(batch))
        return ids

    def fresh_clone(self, kind: str) -> Path:
        self.fresh += 1
        path = self.root / f"fresh{self.fresh}-{kind.replace(':', '')}"
        options = ["--no-single-branch"]
        if kind == "shallow":
            options += ["--depth", str(self.rng.randint(1, 4))]
        elif kind != "full":
            options += [f"--filter={kind}"]
        _git(self.root, self.environ, "clone", "-q", *options, self.url, str(path))
        self.mj(path, "fetch")
        for argv in (
            ("history", "--all", "--json"),
            ("task", "list", "--json"),
            ("show", "--json"),
        ):
            self.mj(path, *argv)
        self.tally.fresh_reads += 3
        return path

    def reads(self, clone: Path, rev: str) -> dict[str, Any]:
        history = json.loads(self.mj(clone, "history", rev, "--all", "--json").stdout)
        shown = json.loads(self.mj(clone, "show", rev, "--json").stdout)
        self.tally.fresh_reads += 2
        return {"history": history, "show": shown}

    # ---- the end of a round ----------------------------------------------------------------

    def cached_equals_fresh(self, clone: Path) -> None:
        """The clone's reads at HEAD through what its commands kept equal a fresh read of
        the same clone (every cache dropped), after whatever the round did to it."""
        argvs = (("history", "--all", "--json"), ("task", "list", "--json"))
        kept = [self.mj(clone, *argv).stdout for argv in argvs]
        self.mj(clone, "doctor", "--drop-cache", ok=(0, 1))
        fresh = [self.mj(clone, *argv).stdout for argv in argvs]
        self.tally.fresh_reads += 4
        for argv, a, b in zip(argvs, kept, fresh, strict=True):
            cached, afresh = _ageless(json.loads(a)), _ageless(json.loads(b))
            if cached != afresh:
                shown = " ".join(argv)
                diff = _diff(afresh, cached)
                raise Failure(
                    f"{clone.name}: {shown} through its caches is not a fresh read: {diff}"
                )

    def settle(self) -> None:
        """Every clone's cached reads are checked against fresh ones and its replacements
        deleted; every clone syncs (twice round), then every invariant is checked."""
        for clone in self.clones:
            self.cached_equals_fresh(clone)
            self.op_ungraft(clone)
        for _ in range(2):
            for clone in self.clones:
                self.mj(clone, "sync")
        for i, clone in enumerate(self.clones):
            # Publish every branch, then keep only what the host has: after this each clone
            # holds exactly the host's commits, so its reads must equal a fresh clone's.
            _git(
                clone,
                self.environ,
                "push",
                "-q",
                "--no-verify",
                "origin",
                f"refs/heads/*:refs/heads/c{i}/*",
            )
        for clone in self.clones:
            self.mj(clone, "fetch")
            _git(clone, self.environ, "fetch", "-q", "--prune", "origin")
            _git(clone, self.environ, "reflog", "expire", "--expire=now", "--all")
            _git(clone, self.environ, "gc", "-q", "--prune=now")
        for clone in self.clones:
            have = self.ids_in(clone)
            lost = self.written - have
            self.tally.read_back += len(self.written & have)
            if lost:
                raise Failure(f"{clone.name} lacks {len(lost)} records after sync: {sorted(lost)}")
        full = self.fresh_clone("full")
        rev = _git(full, self.environ, "rev-parse", "origin/main").strip()
        expected = self.reads(full, rev)
        if {r["id"] for r in expected["history"]["records"]} < self.written:
            missing = self.written - {r["id"] for r in expected["history"]["records"]}
            raise Failure(f"a fresh full clone's history --all lacks {sorted(missing)}")
        for kind in ("blob:none", "tree:0"):
            got = self.reads(self.fresh_clone(kind), rev)
            if got != expected:
                raise Failure(f"a fresh {kind} clone reads differently: {_diff(expected, got)}")
        shallow = self.fresh_clone("shallow")
        if self.has(shallow, rev):
            compare_shallow(expected, self.reads(shallow, rev))
        for clone in self.clones:
            if self.has(clone, rev):
                got = self.reads(clone, rev)
                if got["history"] != expected["history"]:
                    raise Failure(f"{clone.name} reads differently: {_diff(expected, got)}")


def compare_shallow(full: Mapping[str, Any], shallow: Mapping[str, Any]) -> None:
    """Same records; each label the full clone's or `unknown` (with no counts)."""
    a = {r["id"]: r for r in full["history"]["records"]}
    b = {r["id"]: r for r in shallow["history"]["records"]}
    if set(a) != set(b):
        raise Failure(f"a shallow clone lists other records: {sorted(set(a) ^ set(b))}")
    for ident, record in b.items():
        if "label" not in record:
            continue
        want = (a[ident].get("label"), a[ident].get("ahead"), a[ident].get("behind"))
        got = (record["label"], record.get("ahead"), record.get("behind"))
        if got not in (want, ("unknown", None, None)):
            raise Failure(f"a shallow clone labels {ident} {got}; the full clone says {want}")


def _ageless(value: Any) -> Any:
    """A read's JSON without the ages it states: the clock moves between two reads."""
    if isinstance(value, dict):
        return {k: _ageless(v) for k, v in value.items() if not k.endswith("age_s")}
    if isinstance(value, list):
        return [_ageless(v) for v in value]
    return value


def _diff(a: Any, b: Any) -> str:
    left = json.dumps(a, indent=1, sort_keys=True).splitlines()
    right = json.dumps(b, indent=1, sort_keys=True).splitlines()

    return "\n".join(list(difflib.unified_diff(left, right, lineterm="", n=1))[:40])


def run_round(root: Path, seed: int, tally: Tally, clones: int = 3, steps: int = 40) -> None:
    rng = random.Random(seed)
    team = Team(root, rng, tally, clones)
    try:
        for _ in range(steps):
            team.step()
        team.settle()
    except Failure as failure:
        tally.failures.append(f"round seed {seed}: {failure}")
    tally.rounds += 1
