"""The signing rows (`bench/run.py --only signing`): what signed records cost, in ratios
measured in one run, on scratch clones of the cached repository of 100,000 commits.

- warm `history --task` of a task of 100 records, every one signed with an ssh key and
  verified against an allowed-signers file, against `git log --notes=majordomus`; the
  same task unsigned is shown for the record.
- the first `context` after fetching 20 new checkpoints of the task, signed, against the
  same with the 20 unsigned: a clone restored from a copy made before the fetch, the
  fetch itself untimed, then `context` timed (its 20 signatures checked: none is cached).
- `checkpoint` with ssh signing against the floor any Python CLI using pygit2 pays plus
  one `ssh-keygen -Y sign` of a record's size: `python -c "import pygit2"`, then the sign.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from probe import Outcome, run_chain
from repo_cache import Fixture, run_git, scratch_clone
from report import results_table
from suite import (
    Command,
    Row,
    Series,
    Setup,
    Target,
    answer_lines,
    git_log,
    interleave,
    mj,
    replace_section,
)

Log = Callable[[str], None]
HISTORY = Target(limit=0.5)  # as unsigned records are today
CONTEXT = Target(limit=2.0)  # against the same read of unsigned records
CHECKPOINT = Target(limit=1.5)  # against the floor plus one ssh-keygen -Y sign
TASK_RECORDS = 100
FETCHED = 20
BEGIN = "<!-- signing rows: begin -->"
END = "<!-- signing rows: end -->"
EMAIL = "bench@example.com"


@dataclasses.dataclass(frozen=True, slots=True)
class Keys:
    private: Path
    public: Path
    allowed: Path


def make_keys(folder: Path) -> Keys:
    folder.mkdir(parents=True, exist_ok=True)
    private = folder / "id_ed25519"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(private)],
        check=True,
        capture_output=True,
    )
    public = folder / "id_ed25519.pub"
    line = " ".join(public.read_text().split()[:2])
    allowed = folder / "allowed_signers"
    allowed.write_text(f"{EMAIL} {line}\n")
    return Keys(private, public, allowed)


def configure(repo: Path, env: Mapping[str, str], keys: Keys, sign: bool) -> None:
    settings = {
        "user.email": EMAIL,
        "user.name": "Bench",
        "gpg.format": "ssh",
        "user.signingKey": str(keys.public),
        "gpg.ssh.allowedSignersFile": str(keys.allowed),
        "majordomus.sign": "true" if sign else "false",
    }
    for key, value in settings.items():
        run_git(["config", key, value], env, repo)


def _mj(setup: Setup, repo: Path, *args: str) -> str:
    result = subprocess.run(
        mj(setup, repo, *args),
        env=dict(setup.env),
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"majordomus {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def _identity_env(env: Mapping[str, str]) -> dict[str, str]:
    """The bench's environment fixes an identity: the records must carry the key's email."""
    return {
        **env,
        "GIT_AUTHOR_EMAIL": EMAIL,
        "GIT_COMMITTER_EMAIL": EMAIL,
        "GIT_AUTHOR_NAME": "Bench",
        "GIT_COMMITTER_NAME": "Bench",
    }


def task_of_records(setup: Setup, repo: Path, count: int) -> str:
    """A new task with `count` records in all (its task record, then checkpoints), each on
    a commit of its own."""
    task = _mj(setup, repo, "task", "new", "a signed investigation").strip()
    for n in range(count - 1):
        run_git(["commit", "-q", "--allow-empty", "-m", f"step {n}"], setup.env, repo)
        _mj(setup, repo, "checkpoint", f"step {n}: what was true then", "--task", task)
    return task


def _statuses(out: bytes, key: str) -> set[str]:
    document = json.loads(out)
    records = document.get(key, [])
    return {record["signature"] for record in records}


def history_rows(setup: Setup, fixture: Fixture, workdir: Path, keys: Keys, log: Log) -> list[Row]:
    rows = []
    for sign in (True, False):
        repo = scratch_clone(fixture, workdir / f"history-{sign}", setup.env)
        configure(repo, setup.env, keys, sign)
        log(f"history: a task of {TASK_RECORDS} records, {'signed' if sign else 'unsigned'}")
        task = task_of_records(setup, repo, TASK_RECORDS)
        mine = Command("history", (mj(setup, repo, "history", "--task", task, "--json"),))
        ours, base = interleave((mine, Command("git log", (git_log(repo),))), setup, repo)
        found = _statuses(ours.outcomes[-1].stdout, "records") if not ours.failure else set()
        want = {"verified"} if sign else {"unsigned"}
        count = len(json.loads(ours.outcomes[-1].stdout)["records"]) if not ours.failure else 0
        answer = "" if (found, count) == (want, TASK_RECORDS) else f"{count} records, {found}"
        name = f"history --task, {TASK_RECORDS} {'signed' if sign else 'unsigned'}"
        rows.append(Row(name, "warm", ours, base, HISTORY, answer=answer))
    return rows


def context_row(setup: Setup, fixture: Fixture, workdir: Path, keys: Keys, log: Log) -> Row:
    """The first context after a fetch of FETCHED checkpoints, signed against unsigned."""
    series: dict[bool, Series] = {}
    for sign in (True, False):
        where = workdir / f"context-{sign}"
        where.mkdir(parents=True)
        remote = scratch_clone(fixture, where / "remote", setup.env)
        configure(remote, setup.env, keys, sign)
        task = fixture.expectation.task
        reader = where / "reader"
        run_git(["clone", "-q", str(remote), str(reader)], setup.env, where)
        configure(reader, setup.env, keys, False)
        _mj(setup, reader, "init")
        _mj(setup, reader, "fetch")
        _mj(setup, reader, "context", "--task", task)  # a clone in use: its caches warm
        template = where / "template"
        shutil.copytree(reader, template, symlinks=True)
        log(f"context: {FETCHED} new checkpoints, {'signed' if sign else 'unsigned'}")
        for n in range(FETCHED):
            run_git(["commit", "-q", "--allow-empty", "-m", f"new {n}"], setup.env, remote)
            _mj(setup, remote, "checkpoint", f"new {n}: fetched next", "--task", task)
        context = Command("context", (mj(setup, reader, "context", "--task", task, "--json"),))
        outcomes: list[Outcome] = []
        for round_no in range(setup.warmup + setup.runs):
            shutil.rmtree(reader)
            shutil.copytree(template, reader, symlinks=True)
            _mj(setup, reader, "fetch")
            outcome = run_chain(context.argvs, setup.env, reader, context.ok)
            if round_no >= setup.warmup:
                outcomes.append(outcome)
        series[sign] = Series(
            dataclasses.replace(
                context, name=f"context, {FETCHED} {'signed' if sign else 'unsigned'}"
            ),
            tuple(outcomes),
        )
        if sign:
            last = json.loads(outcomes[-1].stdout) if outcomes[-1].exit_code == 0 else {}
            signed_text = last.get("text", "")
    shown = signed_text.count(", signature verified:")
    answer = "" if shown >= FETCHED else f"{shown} verified checkpoints shown"
    return Row(
        f"first context after fetching {FETCHED} signed records",
        "cold",
        series[True],
        series[False],
        CONTEXT,
        answer=answer,
    )


def checkpoint_row(setup: Setup, fixture: Fixture, workdir: Path, keys: Keys, log: Log) -> Row:
    repo = scratch_clone(fixture, workdir / "checkpoint", setup.env)
    configure(repo, setup.env, keys, True)
    task = fixture.expectation.task
    record = workdir / "record.toml"
    record.write_text(
        '[[checkpoint]]\nv = 1\nid = "c-0123456789abcdef"\n'
        + "body = "
        + json.dumps("reproduced under 50 concurrent enqueues")
        + "\n"
    )
    floor = Command(
        "import pygit2 + ssh-keygen -Y sign",
        (
            (str(setup.python), "-c", "import pygit2"),
            ("ssh-keygen", "-Y", "sign", "-n", "majordomus", "-f", str(keys.private), str(record)),
        ),
    )
    mine = Command(
        "checkpoint (ssh-signed)",
        (mj(setup, repo, "checkpoint", "reproduced under load", "--task", task, "--json"),),
    )
    log("checkpoint, signed with ssh")
    sig = Path(str(record) + ".sig")

    def cleanup() -> None:
        sig.unlink(missing_ok=True)

    ours_out: list[Outcome] = []
    base_out: list[Outcome] = []
    for round_no in range(setup.warmup + setup.runs):
        cleanup()
        ours = run_chain(mine.argvs, setup.env, repo, mine.ok)
        base = run_chain(floor.argvs, setup.env, workdir, floor.ok)
        if round_no >= setup.warmup:
            ours_out.append(ours)
            base_out.append(base)
    cleanup()
    last = ours_out[-1]
    status = json.loads(last.stdout)["record"]["signature"] if last.exit_code == 0 else "failed"
    answer = "" if status == "verified" else f"the record written is {status}"
    return Row(
        "checkpoint, ssh-signed",
        "write",
        Series(mine, tuple(ours_out)),
        Series(floor, tuple(base_out)),
        CHECKPOINT,
        answer=answer,
    )


def signing_rows(setup: Setup, fixture: Fixture, workdir: Path, log: Log) -> list[Row]:
    workdir.mkdir(parents=True, exist_ok=True)
    keys = make_keys(workdir / "keys")
    setup = dataclasses.replace(setup, env=_identity_env(setup.env))
    return [
        *history_rows(setup, fixture, workdir, keys, log),
        context_row(setup, fixture, workdir, keys, log),
        checkpoint_row(setup, fixture, workdir, keys, log),
    ]


def section(rows: list[Row], fixture: Fixture, command: str) -> str:
    answers = [f"- {row.name}: {row.answer}" for row in rows if row.answer]
    return "\n".join(
        [
            BEGIN,
            "## Signed records",
            "",
            f"Generated by `{command}`, on scratch clones of the repository of "
            f"{fixture.shape.commits:,} commits; an ed25519 key signs (`ssh-keygen -Y sign`) "
            "and an allowed-signers file verifies. Targets: a warm history of signed records "
            "at most 0.5 x `git log --notes` (as unsigned records are), the first context "
            "after fetching 20 signed records at most 2 x the same with unsigned ones, a "
            "signed checkpoint at most 1.5 x the floor plus one signature.",
            "",
            results_table(rows),
            "",
            *answer_lines(
                answers,
                "Answers checked: every record of the signed task verified, of the unsigned "
                "one unsigned; the context showed the fetched checkpoints verified; the "
                "checkpoint written read back verified.",
            ),
            END,
        ]
    )


def write_section(path: Path, text: str) -> None:
    replace_section(path, text, BEGIN, END)
