"""Writers killed at random instants, and the lock files a killed writer leaves behind."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

from tests.support.cli import run_cli
from tests.support.contracts import store_problems
from tests.support.env import hermetic_environ
from tests.support.git import NOTES_REF, make_clone
from tests.support.locks import AgedLock
from tests.support.notes import stored_records
from tests.support.repo import Repo
from tests.support.trials import crash_round


def test_writers_killed_at_random_instants_leave_a_sound_store(tmp_path: Path) -> None:
    seed = int(os.environ.get("MAJORDOMUS_TEST_SEED") or random.randrange(1 << 32))
    home = tmp_path / "home"
    home.mkdir()
    environ = hermetic_environ(home)
    clone = make_clone(tmp_path / "clone", environ)
    assert run_cli(clone, environ, "task", "new", "crash").code == 0
    outcome = crash_round(clone, environ, random.Random(seed), "k", 4, (0.0, 0.5))
    assert outcome.problems == [], f"seed {seed} (MAJORDOMUS_TEST_SEED={seed} reproduces)"
    assert outcome.kills + outcome.finished == 4
    assert outcome.landed + outcome.unwritten == outcome.kills


def _lock(repo: Repo, name: str, age_s: int) -> AgedLock:
    """The empty lock file a writer killed while holding the ref leaves behind."""
    return AgedLock.make(repo.path / ".git" / name, age_s)


def _write(repo: Repo, body: str, timeout: str = "0.1") -> tuple[int, str]:
    result = run_cli(
        repo.path, {**repo.environ, "MAJORDOMUS_WRITE_TIMEOUT": timeout}, "checkpoint", body
    )
    return result.code, result.err


def test_a_stale_lock_is_reported_never_deleted(repo: Repo) -> None:
    repo.task()
    before = repo.notes_ref()
    aged = _lock(repo, NOTES_REF + ".lock", age_s=3600)
    lock = aged.path
    code, err = _write(repo, "blocked")
    assert code == 3
    assert aged.shown(err) == (
        f"majordomus: {NOTES_REF} stayed locked for 0.1 s ({err.split('(')[1].split(')')[0]}): "
        f"{lock} is 3600 s old; if no git or majordomus process is running, remove it "
        f"(rm '{lock}') and try again; nothing was recorded.\n"
    )
    assert lock.exists() and repo.notes_ref() == before
    doctor = repo.run("doctor", "--json")
    assert doctor.code == 1
    locks = [f for f in json.loads(doctor.out)["findings"] if f["topic"] == "lock"]
    assert [f["healthy"] for f in locks] == [False] and str(lock) in locks[0]["detail"]
    lock.unlink()
    assert _write(repo, "after the lock is gone") == (0, "")
    assert store_problems(repo.path, repo.environ) == []


def test_a_young_lock_that_blocks_a_write_is_named(repo: Repo) -> None:
    # Killed a moment ago: the lock is young, but it is what stopped the write.
    repo.task()
    lock = _lock(repo, NOTES_REF + ".lock", age_s=0).path
    code, err = _write(repo, "blocked")
    assert code == 3
    assert str(lock) in err and " s old" in err and f"rm '{lock}'" in err
    assert lock.exists()


def test_a_stale_lock_is_reported_when_the_write_succeeds(repo: Repo) -> None:
    repo.task()
    aged = _lock(repo, "packed-refs.lock", age_s=3600)
    lock = aged.path
    code, err = _write(repo, "written despite the lock")
    assert code == 0
    assert aged.shown(err) == (
        f"majordomus: warning: {lock} is 3600 s old; if no git or "
        f"majordomus process is running, remove it (rm '{lock}').\n"
    )
    assert lock.exists()
    bodies = [r.table.get("body") for r in stored_records(repo.path, repo.environ)]
    assert "written despite the lock" in bodies
