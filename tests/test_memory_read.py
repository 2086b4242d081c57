"""What a first read keeps in memory is smaller, never different: the ids of the current
notes held as one string answer as a set does, and a read cache written in frames that
is cut short (a full disk, a crash mid-write) is read afresh, never half."""

from __future__ import annotations

import json
import random

from majordomus.cachefile import READ_FILE_NAME, VIEWS_FILE_NAME, VIEWS_FOLDER_NAME
from majordomus.objectids import BlobIds, run
from majordomus.readcache import ReadCache
from tests.support.repo import Repo


def test_blob_ids_held_as_one_string_answer_as_a_set_does() -> None:
    rng = random.Random(9)
    ids = [f"{rng.getrandbits(160):040x}" for _ in range(500)]
    held = BlobIds(ids + ids[:50])  # repeated ids are held once
    assert len(held) == 500
    assert list(held) == sorted(ids)
    assert all(blob in held for blob in ids)
    others = [f"{rng.getrandbits(160):040x}" for _ in range(500)]
    assert not any(blob in held for blob in others if blob not in ids)
    assert "abc" not in held and ids[0][:39] not in held and not held.__contains__(7)
    assert not BlobIds([]) and list(BlobIds([])) == []


def test_a_read_cache_cut_short_is_read_afresh(repo: Repo) -> None:
    task = repo.task()
    for i in range(12):
        repo.commit(f"c{i}")
        assert repo.run("checkpoint", f"checkpoint {i}").code == 0
    repo.run("handover", "-o", "o", "-s", "s", "-n", "n")
    git_dir = repo.path / ".git"
    (git_dir / VIEWS_FILE_NAME).unlink(missing_ok=True)
    expected = repo.run("history", "--all", "--json").out
    loaded = ReadCache(git_dir / READ_FILE_NAME).load_frames()
    assert loaded is not None
    (trees, odd), frames = loaded
    assert trees and odd == {} and sum(len(frame) for frame in frames) == 13  # one per commit
    data = (git_dir / READ_FILE_NAME).read_bytes()
    for cut in (len(data) - 1, len(data) // 2, 9):
        (git_dir / READ_FILE_NAME).write_bytes(data[:cut])
        assert ReadCache(git_dir / READ_FILE_NAME).blobs == {}  # a frame cut short: none of it
        (git_dir / VIEWS_FILE_NAME).unlink(missing_ok=True)  # so that the notes are read
        for part in (git_dir / VIEWS_FOLDER_NAME).iterdir():
            part.unlink()
        assert repo.run("history", "--all", "--json").out == expected
        history = json.loads(repo.run("history", "--task", task, "--json").out)
        assert len(history["records"]) == 14


def test_each_helper_gets_a_run_of_ids_in_order_and_together_every_id_once() -> None:
    rng = random.Random(3)
    for total in (0, 1, 7, 2000, 2001):
        ids = sorted(f"{rng.getrandbits(160):040x}" for _ in range(total))
        joined = "".join(ids)
        for count in (1, 2, 3, 8):
            runs = [run(joined, count, k) for k in range(count)]
            assert [blob for run in runs for blob in run] == ids
            assert max(map(len, runs)) - min(map(len, runs)) <= 1
