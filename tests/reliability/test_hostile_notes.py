"""Notes from someone with push access: every read command stays up, counts what it
skipped, and sends nothing a terminal would obey; writes never destroy what they find."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import run_cli, spawn
from tests.support.contracts import strict_json, terminal_problems
from tests.support.env import hermetic_environ
from tests.support.git import NOTES_REF, commit, git, make_clone
from tests.support.hostile_notes import (
    ALLOWED,
    READS,
    Planted,
    cases,
    plant,
    plant_remote_refs,
    record,
)
from tests.support.notes import note_blobs


class Hostile:
    def __init__(self, path: Path, environ: dict[str, str]) -> None:
        self.path, self.environ = path, environ
        self.task = run_cli(path, environ, "task", "new", "under attack").out.strip()
        handover = ("handover", "-o", "keep going", "-s", "attacked", "-n", "read on")
        assert run_cli(path, environ, *handover).code == 0
        self.planted: list[Planted] = plant(path, environ, cases(self.task))
        self.remote_invalid = plant_remote_refs(path, environ, self.task)
        self.invalid = self.remote_invalid + sum(p.case.invalid for p in self.planted)
        self.hidden = sum(p.case.hidden for p in self.planted)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    root = tmp_path_factory.mktemp("hostile")
    (root / "home").mkdir()
    environ = hermetic_environ(root / "home")
    yield Hostile(make_clone(root / "clone", environ), environ)


@pytest.mark.parametrize("argv", READS, ids=" ".join)
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_read_commands_stay_up_and_print_nothing_raw(
    hostile: Hostile, argv: tuple[str, ...], as_json: bool
) -> None:
    result = run_cli(hostile.path, hostile.environ, *argv, *(["--json"] if as_json else []))
    if as_json and "--graph" in argv:  # a drawing has no JSON: refused, as documented
        assert (result.code, result.out) == (2, ""), result.err
        assert result.err == "majordomus: give --graph or --json, not both.\n"
        return
    assert result.code in ALLOWED[argv[0]], result.err
    assert "Traceback" not in result.err
    assert terminal_problems(result.out) == []
    assert terminal_problems(result.err) == []
    if as_json:
        strict_json(result.out)


def test_a_warm_grep_json_shows_hostile_records_as_a_search_from_no_cache(
    hostile: Hostile,
) -> None:
    """The JSON texts a search cache keeps of hostile records (invisible characters,
    escapes, forged members) come back from the mapped file byte for byte as they were
    encoded: the third search, which reads them there, answers as the first and as one
    from no cache, escaped."""
    argv = ("grep", "--json", "-i", "--all", "E")
    answers = [run_cli(hostile.path, hostile.environ, *argv) for _ in range(3)]
    assert run_cli(hostile.path, hostile.environ, "doctor", "--drop-cache").code in (0, 1)
    cold = run_cli(hostile.path, hostile.environ, *argv)
    assert cold.code == 0 and json.loads(cold.out)["records"], cold.err
    assert [a.out for a in answers] == [cold.out] * 3
    assert terminal_problems(cold.out) == []
    strict_json(cold.out)


def test_history_counts_what_it_skipped_and_lists_the_rest(hostile: Hostile) -> None:
    shown = json.loads(run_cli(hostile.path, hostile.environ, "history", "--json").out)
    assert (shown["invalid"], shown["hidden"]) == (hostile.invalid, hostile.hidden)
    text = run_cli(hostile.path, hostile.environ, "history").out
    assert text.endswith(
        f"({hostile.invalid} invalid notes or records skipped; majordomus doctor lists them)\n"
    )
    every = json.loads(run_cli(hostile.path, hostile.environ, "history", "--all", "--json").out)
    ids = [record["id"] for record in every["records"]]
    assert len(ids) == len(set(ids)), "a record listed twice"
    wanted = {ident for p in hostile.planted for ident in p.case.listed}
    assert wanted <= set(ids)
    dup = [r["body"] for r in every["records"] if r["id"] == "c-dup"]
    assert dup == ["third, elsewhere"]  # the copy on the newest reachable commit


def test_show_counts_each_note(hostile: Hostile) -> None:
    for planted in hostile.planted:
        if planted.case.on in ("tree", "blob"):
            continue
        result = run_cli(hostile.path, hostile.environ, "show", planted.target, "--json")
        assert result.code == 0, (planted.case.name, result.err)
        shown = json.loads(result.out)
        assert shown["invalid"] == planted.case.invalid, planted.case.name
        listed = {record["id"] for record in shown["records"]}
        assert set(planted.case.listed) - {"c-dup"} <= listed, planted.case.name


def _fences_hold(markdown: str) -> bool:
    """Whether every `~~~text` block ends at its own fence, with no line inside closing it."""
    lines = markdown.split("\n")
    index = 0
    while index < len(lines):
        opening = re.fullmatch(r"(~{3,})text", lines[index])
        index += 1
        if opening is None:
            continue
        fence = opening.group(1)
        while lines[index] != fence:
            if re.fullmatch(rf" {{0,3}}~{{{len(fence)},}}\s*", lines[index]):
                return False
            index += 1
        index += 1
    return True


def test_markdown_for_ci_keeps_note_text_in_its_code_blocks(hostile: Hostile) -> None:
    for planted in hostile.planted:
        if planted.case.on != "commit":
            continue
        result = run_cli(hostile.path, hostile.environ, "show", planted.target, "--markdown")
        assert result.code == 0, (planted.case.name, result.err)
        assert terminal_problems(result.out) == [], planted.case.name
        assert _fences_hold(result.out), result.out


def test_a_forged_task_id_cannot_make_the_real_task_ambiguous(hostile: Hostile) -> None:
    # A forged task id sharing the real task's first digits, then escapes: not a task id,
    # so its record is invalid and the real task's prefix still names the real task alone.
    # The forged id shares exactly the real task's first four digits; a valid corpus task
    # may too, by chance (1 in 65,536): then the prefix is ambiguous between real tasks only.
    for argv in (("check", "--task", hostile.task[2:6]), ("task", "use", hostile.task[:6])):
        result = run_cli(hostile.path, hostile.environ, *argv)
        assert terminal_problems(result.out) == [] and terminal_problems(result.err) == []
        if result.code == 2:
            listed = re.findall(r"t-\S+?(?=[,;]| and |$)", result.err.split("matches ", 1)[1])
            assert "ambiguous" in result.err and hostile.task in listed, result.err
            assert all(re.fullmatch("t-[0-9a-f]{12}", ident) for ident in listed), listed
        else:
            assert result.code in (0, 1) and hostile.task in result.out, (result.out, result.err)


def test_doctor_lists_the_invalid_notes(hostile: Hostile) -> None:
    result = run_cli(hostile.path, hostile.environ, "doctor", "--json")
    assert result.code == 1
    findings = json.loads(result.out)["findings"]
    assert any(f"{hostile.invalid} invalid" in f["detail"] for f in findings), findings


def test_a_real_terminal_gets_no_escape_bytes(hostile: Hostile) -> None:
    # The same bytes a terminal would receive, from a real process.
    for argv in (("history", "--all"), ("task", "list")):
        out, err = spawn(hostile.path, hostile.environ, *argv).communicate(timeout=60)
        assert terminal_problems(out) == [] and terminal_problems(err) == [], argv


def test_writes_never_destroy_what_they_find(hostile: Hostile) -> None:
    """A write on each planted commit in turn; every note is read before the first and
    after the last (each write touches its own commit's note only, so each note as it
    stands at the end is the one its write left, and no later write may have undone it)."""
    env = hostile.environ
    written = [p for p in hostile.planted if p.case.on in ("commit", "gitlink")]
    assert len({p.target for p in written}) == len(written)  # each on a commit of its own
    notes_before = note_blobs(hostile.path, env)
    results = []
    for planted in written:
        git(hostile.path, env, "checkout", "-q", "--detach", planted.target)
        results.append(run_cli(hostile.path, env, "checkpoint", "--task", hostile.task, "on top"))
    git(hostile.path, env, "checkout", "-q", "main")
    notes_after = note_blobs(hostile.path, env)
    for planted, result in zip(written, results, strict=True):
        before = notes_before.get(planted.target, b"")
        after = notes_after.get(planted.target, b"")
        name = planted.case.name
        assert "Traceback" not in result.err, name
        if planted.case.writable:
            assert result.code == 0, (name, result.err)
            assert after.startswith(before.rstrip(b"\n")), name
            assert after.endswith(b'body = "on top"\n'), name
        else:
            assert result.code == 3, (name, result.err)
            assert result.err.count("\n") == 1 and "will not overwrite" in result.err, name
            assert after == before, name


def test_a_notes_ref_that_is_not_a_commit(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    env = hermetic_environ(tmp_path / "home")
    clone = make_clone(tmp_path / "clone", env)
    task = run_cli(clone, env, "task", "new", "t").out.strip()
    tree = git(clone, env, "rev-parse", "HEAD^{tree}").strip()
    blob = git(clone, env, "hash-object", "-w", "--stdin", stdin=b"not a commit").strip()
    for ref, target in ((NOTES_REF, tree), ("refs/notes/remotes/evil/majordomus", blob)):
        git(clone, env, "update-ref", ref, target)
        for argv in [*READS, ("checkpoint", "--task", task, "x")]:
            result = run_cli(clone, env, *argv, *(() if "--graph" in argv else ("--json",)))
            assert "Traceback" not in result.err
            said = result.err.count("\n") == 1 and "not a commit" in result.err
            if ref == NOTES_REF and argv[0] == "context":  # a session starts: told, exit 0
                assert (result.code, result.err) == (0, ""), result.err
                assert "not a commit" in json.loads(result.out)["text"]
            elif ref == NOTES_REF:  # the local ref stops every command (doctor: a finding)
                assert result.code == (1 if argv[0] == "doctor" else 3), (argv, result.err)
                assert said or (argv[0], result.err) == ("doctor", "")
            else:  # a remote-tracking one is left out, with one warning line first
                warning = result.err.splitlines()[0]
                assert warning.startswith("majordomus: warning: ") and "not a commit" in warning
                assert result.err.count("not a commit") == 1, (argv, result.err)
                # (the local ref is gone with the task: a command that names it exits 2)
                assert result.code in {*ALLOWED.get(argv[0], {0}), 2}, (argv, result.err)
                if result.out and "--graph" not in argv:
                    strict_json(result.out)
        assert git(clone, env, "rev-parse", ref).strip() == target
        git(clone, env, "update-ref", "-d", ref)


# ---- hostile notes that arrive by fetch ------------------------------------------------------


def _victim_and_mallory(tmp_path: Path) -> tuple[Path, Path, dict[str, str], str]:
    """A victim clone with records on HEAD, and Mallory's clone of the same remote."""
    (tmp_path / "home").mkdir()
    env = hermetic_environ(tmp_path / "home")
    remote = tmp_path / "remote.git"
    git(tmp_path, env, "init", "-q", "--bare", "-b", "main", str(remote))
    victim = make_clone(tmp_path / "victim", env)
    git(victim, env, "remote", "add", "origin", str(remote))
    git(victim, env, "push", "-q", "origin", "main")
    task = run_cli(victim, env, "task", "new", "mine").out.strip()
    assert run_cli(victim, env, "checkpoint", "my own words").code == 0
    mallory = tmp_path / "mallory"
    git(tmp_path, env, "clone", "-q", str(remote), str(mallory))
    return victim, mallory, env, task


def _publish(mallory: Path, env: dict[str, str], note: bytes) -> None:
    blob = git(mallory, env, "hash-object", "-w", "--stdin", stdin=note).strip()
    git(mallory, env, "notes", "--ref=majordomus", "add", "-f", "-C", blob, "HEAD")
    git(mallory, env, "push", "-q", "origin", f"{NOTES_REF}:{NOTES_REF}")


def _my_records(victim: Path, env: dict[str, str]) -> list[str]:
    shown = json.loads(run_cli(victim, env, "show", "--json").out)
    return sorted(r.get("body") or r.get("title") for r in shown["records"])


def test_a_fetched_note_with_a_kind_as_a_plain_key_keeps_mine_readable(tmp_path: Path) -> None:
    victim, mallory, env, _ = _victim_and_mallory(tmp_path)
    _publish(mallory, env, b'checkpoint = "not a table"\n')
    result = run_cli(victim, env, "fetch", "origin")
    assert result.code == 0, result.err
    assert _my_records(victim, env) == ["mine", "my own words"]


def test_a_fetched_note_that_is_not_toml_keeps_mine_readable(tmp_path: Path) -> None:
    victim, mallory, env, _ = _victim_and_mallory(tmp_path)
    _publish(mallory, env, b"[[checkpoint]\nnot toml\n")
    result = run_cli(victim, env, "fetch", "origin")
    assert result.code == 0, result.err
    assert _my_records(victim, env) == ["mine", "my own words"]
    head = git(victim, env, "rev-parse", "HEAD").strip()
    assert b"not toml" in note_blobs(victim, env)[head]  # kept, not dropped


def test_a_record_of_another_kind_with_my_id_does_not_hide_mine(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    env = hermetic_environ(tmp_path / "home")
    clone = make_clone(tmp_path / "clone", env)
    task = run_cli(clone, env, "task", "new", "mine").out.strip()
    handover = run_cli(clone, env, "handover", "-o", "o", "-s", "s", "-n", "n", "--json")
    mine = json.loads(handover.out)["record"]["id"]
    commit(clone, env, "newer")
    forged = record("checkpoint", mine, task, body='"a checkpoint wearing your handover id"')
    blob = git(clone, env, "hash-object", "-w", "--stdin", stdin=forged.encode()).strip()
    git(clone, env, "notes", "--ref=majordomus", "add", "-f", "-C", blob, "HEAD")
    peek = run_cli(clone, env, "resume", "--peek", "--json")
    assert peek.code == 0, peek.err
    assert json.loads(peek.out)["handover"]["id"] == mine
    listed = json.loads(run_cli(clone, env, "history", "--json").out)["records"]
    assert sorted(r["kind"] for r in listed if r["id"] == mine) == ["checkpoint", "handover"]
