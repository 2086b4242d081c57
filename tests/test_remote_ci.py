"""What CI sees: a fresh clone, the notes ref fetched alone, shallow clones, pull-request merges."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.env import AUTHOR, Clock
from tests.support.repo import Repo, clone, seeded


def handover(repo: Repo, objective: str = "stop the queue dropping acks") -> dict[str, str]:
    result = repo.run(
        "handover",
        "--objective",
        objective,
        "--state",
        "the retry loop re-enters before the ack",
        "--next",
        "add a test with 50 concurrent enqueues",
        "--json",
    )
    assert result.code == 0, result.err
    record: dict[str, str] = json.loads(result.out)["record"]
    return record


def published(tmp_path: Path, environ: dict[str, str], clock: Clock) -> tuple[Path, Repo, str]:
    """A remote where a handover sits on main~1 and main moved on by one commit."""
    remote, a = seeded(tmp_path, environ, clock)
    task = a.task("queue drops acks")
    a.commit("try a fix", {"queue.py": "retry = 1\n"})
    handover(a)
    a.commit("later work", {"queue.py": "retry = 2\n"})
    assert a.run("push").code == 0
    a.git("push", "-q", "origin", "main")
    return remote, a, task


def test_a_fresh_clone_reads_the_handover_like_ci(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a, _ = published(tmp_path, environ, clock)
    expected = a.run("show", "--json", "HEAD~1")
    assert json.loads(expected.out)["records"][0]["kind"] == "handover"
    by_git = clone(str(remote), tmp_path / "ci-git", environ, clock)
    by_git.git("fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus")
    assert by_git.run("show", "--json", "HEAD~1").out == expected.out
    by_majordomus = clone(str(remote), tmp_path / "ci-majordomus", environ, clock)
    assert by_majordomus.run("fetch").out == "origin: 2 new records (first fetch)\n"
    assert by_majordomus.run("show", "--json", "HEAD~1").out == expected.out


def test_a_shallow_clone_answers_unknown(
    tmp_path: Path, environ: dict[str, str], clock: Clock
) -> None:
    remote, a, task = published(tmp_path, environ, clock)
    full = json.loads(a.run("resume", "--peek", "--json").out)
    assert (full["label"], full["ahead"], full["behind"]) == ("advanced", 1, 0)
    ci = clone(f"file://{remote}", tmp_path / "ci", environ, clock, "--depth", "1")
    ci.git("fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus")
    peek = json.loads(ci.run("resume", "--peek", "--task", task, "--json").out)
    assert (peek["label"], peek["ahead"], peek["behind"]) == ("unknown", None, None)
    history = json.loads(ci.run("history", "--all", "--json").out)
    assert [(r["kind"], r.get("label"), r.get("ahead")) for r in history["records"]] == [
        ("handover", "unknown", None),
        ("task", None, None),
    ]
    assert history["hidden"] == 0
    # Deepen enough to reach the handover's commit and the answer is exact again.
    ci.git("fetch", "-q", "--deepen", "1", "origin", "main")
    peek = json.loads(ci.run("resume", "--peek", "--task", task, "--json").out)
    assert (peek["label"], peek["ahead"], peek["behind"]) == ("advanced", 1, 0)


def test_a_pull_request_merge_commit(tmp_path: Path, environ: dict[str, str], clock: Clock) -> None:
    _, a = seeded(tmp_path, environ, clock)
    a.git("checkout", "-q", "-b", "feature")
    task = a.task("queue drops acks")
    a.commit("fix", {"queue.py": "retry = 1\n"})
    record = handover(a)
    pr_head = a.head()
    a.git("checkout", "-q", "main")
    a.commit("meanwhile", {"other.py": "x = 1\n"})
    # What CI checks out for a pull request: a merge of its head into the base.
    a.git("checkout", "-q", "--detach", "main")
    a.git("merge", "-q", "--no-ff", "-m", "Merge pull request", "feature")
    shown = json.loads(a.run("show", "--json").out)
    assert shown == {"commit": a.head(), "records": [], "invalid": 0}
    shown = json.loads(a.run("show", "--json", "HEAD^2").out)
    assert [(r["id"], r["commit"]) for r in shown["records"]] == [(record["id"], pr_head)]
    peek = json.loads(a.run("resume", "--peek", "--task", task, "--json").out)
    assert (peek["label"], peek["ahead"], peek["behind"]) == ("advanced", 2, 0)


def test_show_markdown_is_safe_to_post(repo: Repo) -> None:
    task = repo.task("queue drops acks")
    checkpoint = json.loads(
        repo.run("checkpoint", "see <img src=x onerror=alert(1)> and ``` fences", "--json").out
    )["record"]
    record = handover(repo, objective="~~~ close the fence early\n@everyone [a](http://x)")
    result = repo.run("show", "--markdown")
    assert (result.code, result.err) == (0, "")
    assert result.out == "\n".join(
        [
            f"### majordomus: 3 records on `{repo.head()[:12]}`",
            "",
            f"#### task `{task}`",
            "",
            f"task `{task}` · by `{AUTHOR}` · 2026-11-30T03:00:00Z",
            "",
            "~~~text",
            "queue drops acks",
            "~~~",
            "",
            f"#### checkpoint `{checkpoint['id']}`",
            "",
            f"task `{task}` · by `{AUTHOR}` · 2026-11-30T03:00:00Z",
            "",
            "~~~text",
            "see <img src=x onerror=alert(1)> and ``` fences",
            "~~~",
            "",
            f"#### handover `{record['id']}`",
            "",
            f"task `{task}` · by `{AUTHOR}` · 2026-11-30T03:00:00Z",
            "",
            "**objective**",
            "",
            "~~~~text",
            "~~~ close the fence early\n@everyone [a](http://x)",
            "~~~~",
            "",
            "**state**",
            "",
            "~~~text",
            "the retry loop re-enters before the ack",
            "~~~",
            "",
            "**next**",
            "",
            "~~~text",
            "add a test with 50 concurrent enqueues",
            "~~~",
            "",
        ]
    )


def test_show_markdown_without_records_and_with_json_refused(repo: Repo) -> None:
    result = repo.run("show", "--markdown")
    assert (result.code, result.out, result.err) == (
        0,
        f"### majordomus: no records on `{repo.head()[:12]}`\n",
        "",
    )
    result = repo.run("show", "--markdown", "--json")
    assert (result.code, result.out) == (2, "")
    assert result.err == "majordomus: give --json or --markdown, not both.\n"
