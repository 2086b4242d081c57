"""Each command end to end in a real repository: outputs, JSON shapes, exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.env import AUTHOR
from tests.support.repo import Repo


def as_json(repo: Repo, *argv: str, code: int = 0) -> Any:
    result = repo.run(*argv, "--json")
    assert result.code == code, result.err
    return json.loads(result.out)


def test_task_new_prints_the_id_and_makes_it_current(repo: Repo) -> None:
    created = as_json(repo, "task", "new", "  queue drops acks  ")
    assert set(created) == {"task", "title"}
    assert created["title"] == "queue drops acks"
    assert len(created["task"]) == 14 and created["task"].startswith("t-")
    assert (repo.path / ".git" / "majordomus-task").read_text() == created["task"] + "\n"
    assert repo.git("status", "--porcelain", "--untracked-files=all") == ""  # work tree untouched
    plain = repo.run("task", "new", "second")
    assert plain.out.strip() != created["task"]
    assert plain.out == plain.out.strip() + "\n"


def test_checkpoint_json_and_previous_age(repo: Repo) -> None:
    task = repo.task()
    first = as_json(repo, "checkpoint", "reproduced under 50 concurrent enqueues")
    assert first["previous_age_s"] is None
    record = first["record"]
    assert record == {
        "kind": "checkpoint",
        "v": 1,
        "id": record["id"],
        "task": task,
        "head": repo.head(),
        "at": "2026-11-30T03:00:00Z",
        "author": AUTHOR,
        "body": "reproduced under 50 concurrent enqueues",
        "commit": repo.head(),
        "signature": "unsigned",
        "signer": None,
    }
    assert record["id"].startswith("c-") and len(record["id"]) == 18
    repo.clock.advance(754.9)
    second = repo.run("checkpoint", "the retry loop re-enters before the ack")
    second_id = as_json(repo, "history", "--limit", "1")["records"][0]["id"]
    assert second.out == (
        f"2026-11-30T03:12:34Z  checkpoint {second_id}  task {task}  on {repo.head()[:12]}\n"
        f"    by {AUTHOR}\n"
        "    the retry loop re-enters before the ack\n"
        "previous checkpoint of this task: 12m 34s before this one\n"
    )


def test_checkpoint_from_file_and_stdin(repo: Repo) -> None:
    repo.task()
    path = repo.path.parent / "body.txt"
    path.write_text("from a file\r\n")
    assert as_json(repo, "checkpoint", "-F", str(path))["record"]["body"] == "from a file"
    result = repo.run("checkpoint", "-F", "-", "--json", stdin="from stdin ✓\n".encode())
    assert json.loads(result.out)["record"]["body"] == "from stdin ✓"


def test_a_relative_file_is_read_from_where_dash_c_went_as_git_reads_it(repo: Repo) -> None:
    """`majordomus -C DIR checkpoint -F FILE` reads DIR/FILE, as `git -C DIR commit -F FILE`
    does, whatever directory the command was started in (the test run's own, here)."""
    repo.task()
    (repo.path / "sub").mkdir()
    (repo.path / "sub" / "body.txt").write_text("from below\n")
    (repo.path / "handover.toml").write_text('objective = "o"\nstate = "s"\nnext = "n"\n')
    assert not Path("sub/body.txt").exists() and not Path("handover.toml").exists()
    repo.git("-C", "sub", "commit", "-q", "--allow-empty", "-F", "body.txt")
    assert repo.git("log", "-1", "--format=%B").strip() == "from below"
    # Read plainly, and by typer (a joined option is typer's to read).
    for option in (["-F", "body.txt"], ["--file=body.txt"]):
        written = as_json(repo, "-C", "sub", "checkpoint", *option)
        assert written["record"]["body"] == "from below", option
    handed = as_json(repo, "handover", "-F", "handover.toml")
    assert [handed["record"][k] for k in ("objective", "state", "next")] == ["o", "s", "n"]


@pytest.mark.parametrize(
    ("argv", "stdin", "message"),
    [
        ([], b"", "give the checkpoint text as an argument or with -F FILE (- for stdin)."),
        (
            ["x", "-F", "-"],
            b"",
            "give the checkpoint text as an argument or with -F FILE (- for stdin).",
        ),
        (["-F", "-"], b"\xff\xfe bad", "checkpoint body is not UTF-8 text; nothing was recorded."),
        (
            ["-F", "-"],
            b"x" * (70 * 1024),
            "checkpoint body is over 65536 bytes, far over the cap of 2000 characters; "
            "nothing was recorded.",
        ),
        (
            ["-F", "/nonexistent/body"],
            b"",
            "cannot read /nonexistent/body (No such file or directory); nothing was recorded.",
        ),
        (["   "], b"", "checkpoint body is empty; nothing was recorded."),
        (
            ["y" * 401],
            b"",
            "checkpoint body is 401 characters, over the cap of 400; nothing was recorded "
            "(shorten it: it is never truncated).",
        ),
        (
            ["\x1b]8;;http://x\x07link"],
            b"",
            "checkpoint body contains the control character U+001B at character 1; nothing was "
            "recorded (remove it and try again).",
        ),
    ],
)
def test_checkpoint_refusals_record_nothing(
    repo: Repo, argv: list[str], stdin: bytes, message: str
) -> None:
    repo.task()
    before = repo.notes_ref()
    result = repo.run("checkpoint", *argv, stdin=stdin)
    assert (result.code, result.out, result.err) == (2, "", f"majordomus: {message}\n")
    assert repo.notes_ref() == before


def test_checkpoint_at_the_cap_is_accepted(repo: Repo) -> None:
    repo.task()
    body = "é" * 400
    assert as_json(repo, "checkpoint", body)["record"]["body"] == body


def test_no_task_is_refused_with_a_hint(repo: Repo) -> None:
    result = repo.run("checkpoint", "x")
    assert (result.code, result.err) == (
        2,
        "majordomus: no current task: start one with majordomus task new TITLE, pick one with "
        "majordomus task use TASK, or pass --task TASK.\n",
    )
    assert repo.notes_ref() is None


def test_task_prefixes(repo: Repo) -> None:
    a = repo.task("a")
    b = repo.task("b")
    assert as_json(repo, "checkpoint", "--task", a[2:6], "x")["record"]["task"] == a
    assert as_json(repo, "checkpoint", "--task", a, "y")["record"]["task"] == a
    env = {"MAJORDOMUS_TASK": a[:8]}
    assert json.loads(repo.run("checkpoint", "z", "--json", environ=env).out)["record"]["task"] == a
    assert as_json(repo, "checkpoint", "w")["record"]["task"] == b  # the current task
    common = next(n for n in range(1, 12) if a[2 : 2 + n] != b[2 : 2 + n])
    for bad, message in [
        (
            "t-12",
            "'t-12' is not a task id: give t- and at least 4 of its hex digits "
            "(see majordomus task list).",
        ),
        (
            "zzzz",
            "'zzzz' is not a task id: give t- and at least 4 of its hex digits "
            "(see majordomus task list).",
        ),
        ("ffff0000ffff", "no task matches 'ffff0000ffff'; see majordomus task list."),
    ]:
        if a[2:].startswith(bad) or b[2:].startswith(bad):
            continue
        result = repo.run("checkpoint", "--task", bad, "x")
        assert (result.code, result.err) == (2, f"majordomus: {message}\n")
    assert common >= 1
    use = repo.run("task", "use", a[:6])
    assert (use.code, use.out) == (0, f"{a}\n")
    assert as_json(repo, "checkpoint", "v")["record"]["task"] == a


def test_ambiguous_prefix_lists_candidates(repo: Repo) -> None:
    # Make two task ids that share a 4-digit prefix by writing their records by hand.
    head = repo.head()
    note = "".join(
        f'[[task]]\nv = 1\nid = "{t}"\ntask = "{t}"\nhead = "{head}"\n'
        f'at = 2026-11-30T01:00:00Z\nauthor = "{AUTHOR}"\ntitle = "{t}"\n\n'
        for t in ("t-abcd00000001", "t-abcd00000002")
    )
    repo.git("notes", "--ref=majordomus", "add", "-m", note, "HEAD")
    result = repo.run("task", "use", "abcd")
    assert (result.code, result.err) == (
        2,
        "majordomus: 'abcd' is ambiguous: it matches t-abcd00000001, t-abcd00000002; "
        "give more digits.\n",
    )


def test_handover_requires_all_three_fields(repo: Repo) -> None:
    repo.task()
    before = repo.notes_ref()
    result = repo.run("handover", "--objective", "o", "--next", "n")
    assert (result.code, result.err) == (
        2,
        "majordomus: a handover needs --objective, --state and --next; missing --state; "
        "nothing was recorded.\n",
    )
    result = repo.run("handover", "--objective", "o", "--state", " ", "--next", "n")
    assert (result.code, result.err) == (2, "majordomus: state is empty; nothing was recorded.\n")
    result = repo.run("handover", "--objective", "o", "--state", "s" * 801, "--next", "n")
    assert result.code == 2
    assert result.err == (
        "majordomus: state is 801 characters, over the cap of 800; nothing was recorded "
        "(shorten it: it is never truncated).\n"
    )
    assert repo.notes_ref() == before


def test_handover_from_toml_and_dirty_warning(repo: Repo) -> None:
    task = repo.task()
    (repo.path / "tracked.txt").write_text("v1")
    repo.git("add", "tracked.txt")
    repo.git("commit", "-q", "-m", "tracked")
    toml = 'objective = "find the ack bug"\nstate = """two\nlines"""\nnext = "add a \\"test\\""\n'
    result = repo.run("handover", "-F", "-", "--json", stdin=toml.encode())
    assert result.code == 0, result.err
    assert result.err == ""
    out = json.loads(result.out)
    assert out["dirty"] is False
    record = out["record"]
    assert (record["objective"], record["state"], record["next"]) == (
        "find the ack bug",
        "two\nlines",
        'add a "test"',
    )
    assert record["task"] == task and record["id"].startswith("h-")
    (repo.path / "tracked.txt").write_text("v2")
    dirty = repo.run("handover", "-o", "o", "-s", "s", "-n", "n", "--json")
    assert json.loads(dirty.out)["dirty"] is True
    assert dirty.err == (
        "majordomus: warning: the work tree has uncommitted changes; the handover is attached "
        f"to {repo.head()[:12]}, which does not contain them.\n"
    )


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            'objective = "o"\nstate = "s"\n',
            "standard input has no 'next'; all three of objective, "
            "state, next are required; nothing was recorded.",
        ),
        (
            'objective = "o"\nstate = "s"\nnext = 3\n',
            "standard input: 'next' must be a string; nothing was recorded.",
        ),
        (
            'objective = "o"\nstate = "s"\nnext = "n"\nextra = 1\n',
            "standard input has unknown "
            "key 'extra' (expected objective, state, next); nothing was recorded.",
        ),
    ],
)
def test_handover_file_refusals(repo: Repo, toml: str, message: str) -> None:
    repo.task()
    result = repo.run("handover", "-F", "-", stdin=toml.encode())
    assert (result.code, result.err) == (2, f"majordomus: {message}\n")


def test_handover_file_and_flags_together_are_refused(repo: Repo) -> None:
    repo.task()
    result = repo.run("handover", "-F", "-", "--objective", "o", stdin=b"")
    assert (result.code, result.err) == (
        2,
        "majordomus: give the handover either with -F FILE or with the three flags, not both.\n",
    )


def handover(repo: Repo, label: str) -> str:
    out = as_json(repo, "handover", "-o", f"objective {label}", "-s", "state", "-n", "next")
    return str(out["record"]["id"])


def test_resume_records_and_resolves(repo: Repo) -> None:
    task = repo.task()
    first = handover(repo, "one")
    repo.clock.advance(60)
    second = handover(repo, "two")
    repo.commit("moved on")
    repo.clock.advance(3600)
    peek = as_json(repo, "resume", "--peek")
    assert peek["recorded"] is False and peek["handover"]["id"] == second
    resumed = as_json(repo, "resume")
    assert {k: v for k, v in resumed.items() if k != "handover"} == {
        "label": "advanced",
        "ahead": 1,
        "behind": 0,
        "recorded": True,
        "open_handovers": 2,
        "superseded": [first],
        "untrusted": 0,
    }
    assert resumed["handover"]["id"] == second
    note = repo.git("notes", "--ref=majordomus", "show", "HEAD")
    assert f'handover = "{second}"\nlabel = "advanced"\nahead = 1\nbehind = 0\n' in note
    assert f'supersedes = ["{first}"]' in note
    again = repo.run("resume", "--json")
    assert again.code == 1
    assert json.loads(again.out) == {
        "handover": None,
        "label": None,
        "ahead": None,
        "behind": None,
        "recorded": False,
        "open_handovers": 0,
        "superseded": [],
        "untrusted": 0,
        "checkpoints_since": [],
    }
    text = repo.run("resume")
    assert (text.code, text.out, text.err) == (
        1,
        f"no checkpoints of {task} since its last handover or resume; "
        f"majordomus history --task shows what came before\n",
        f"majordomus: no open handover for {task}; nothing to resume.\n",
    )


def test_resume_text_output(repo: Repo) -> None:
    task = repo.task()
    hid = handover(repo, "one")
    commit = repo.head()
    repo.clock.advance(7500)
    result = repo.run("resume", "--peek")
    assert result.out == (
        f"handover {hid}  task {task}  on {commit[:12]}\n"
        f"    by {AUTHOR}, 2h 05m ago\n"
        "code since: current, 0 ahead, 0 behind\n"
        "objective: objective one\n"
        "state: state\n"
        "next: next\n"
        "peek: nothing recorded\n"
    )


def test_history_order_labels_and_hidden(repo: Repo) -> None:
    task = repo.task()
    base = repo.head()
    repo.run("checkpoint", "on main")
    repo.clock.advance(10)
    hid = handover(repo, "one")
    repo.git("checkout", "-q", "-b", "side")
    repo.commit("side work")
    repo.clock.advance(10)
    repo.run("checkpoint", "on side")
    repo.git("checkout", "-q", "main")
    repo.commit("main work")
    out = as_json(repo, "history")
    assert out["rev"] == repo.head()
    assert [(r["kind"], r.get("body")) for r in out["records"]] == [
        ("handover", None),
        ("checkpoint", "on main"),
        ("task", None),
    ]
    assert out["hidden"] == 1 and out["invalid"] == 0
    ho = out["records"][0]
    assert (ho["id"], ho["label"], ho["ahead"], ho["behind"], ho["resolved"]) == (
        hid,
        "advanced",
        1,
        0,
        False,
    )
    assert "label" not in out["records"][1]
    everything = as_json(repo, "history", "--all")
    assert everything["records"][0]["body"] == "on side"
    assert everything["hidden"] == 0
    text = repo.run("history", "--limit", "1")
    assert text.out == (
        f"2026-11-30T03:00:10Z  handover {hid}  task {task}  on {base[:12]}  "
        "[advanced, 1 ahead, 0 behind; open]\n"
        f"    by {AUTHOR}\n"
        "    objective: objective one\n"
        "    state: state\n"
        "    next: next\n"
        f"(1 more on commits not reachable from {repo.head()[:12]}; --all shows them)\n"
    )
    from_side = as_json(repo, "history", "side")
    assert from_side["hidden"] == 0 and from_side["records"][0]["body"] == "on side"
    assert from_side["records"][1]["label"] == "advanced"
    from_base = as_json(repo, "history", base)
    assert [r["kind"] for r in from_base["records"]] == ["handover", "checkpoint", "task"]
    assert from_base["records"][0]["label"] == "current"
    assert from_base["records"][2]["task"] == task


def test_history_filters_only_on_explicit_task(repo: Repo) -> None:
    a = repo.task("a")
    b = repo.task("b")
    repo.run("checkpoint", "for b")
    every = as_json(repo, "history")
    assert {r["task"] for r in every["records"]} == {a, b}
    only_a = as_json(repo, "history", "--task", a[:6])
    assert [r["task"] for r in only_a["records"]] == [a]


def test_history_refusals(repo: Repo) -> None:
    result = repo.run("history", "nope")
    assert (result.code, result.err) == (
        3,
        "majordomus: cannot find a commit named 'nope'; give a branch, tag or commit id.\n",
    )
    result = repo.run("history", "--limit", "0")
    assert (result.code, result.err) == (2, "majordomus: --limit must be 1 or more, not 0.\n")


def test_show_lists_the_commit_records_in_note_order(repo: Repo) -> None:
    task = repo.task()
    repo.run("checkpoint", "one")
    out = as_json(repo, "show")
    assert out["commit"] == repo.head() and out["invalid"] == 0
    assert [r["kind"] for r in out["records"]] == ["task", "checkpoint"]
    assert out["records"][0] == {
        "kind": "task",
        "v": 1,
        "id": task,
        "task": task,
        "head": repo.head(),
        "at": "2026-11-30T03:00:00Z",
        "author": AUTHOR,
        "title": "queue drops acks under load",
        "commit": repo.head(),
        "signature": "unsigned",
        "signer": None,
    }
    repo.commit("empty")
    assert repo.run("show").out == f"no records on {repo.head()[:12]}\n"
    assert as_json(repo, "show", "HEAD~1")["records"][1]["body"] == "one"


def test_check_fresh_stale_and_from_the_task_start(repo: Repo) -> None:
    task = repo.task()
    result = repo.run("check")
    assert (result.code, result.out) == (
        0,
        f"{task}: no checkpoint; task started 0s ago, interval 20m, fresh, no open handover\n",
    )
    repo.clock.advance(1200)
    assert repo.run("check").code == 0  # age == interval is still fresh
    repo.clock.advance(1)
    stale = repo.run("check", "--json")
    assert stale.code == 1
    assert json.loads(stale.out) == {
        "task": task,
        "profile": "default",
        "interval_s": 1200,
        "last_checkpoint": None,
        "age_s": 1201,
        "stale": True,
        "open_handover": None,
    }
    repo.run("checkpoint", "now")
    repo.clock.advance(59.9)
    hid = handover(repo, "x")
    fresh = repo.run("check")
    assert fresh.out == (
        f"{task}: last checkpoint 59s ago, interval 20m, fresh, open handover {hid}\n"
    )
    doc = as_json(repo, "check")
    assert doc["last_checkpoint"]["body"] == "now" and doc["open_handover"]["id"] == hid
    assert repo.run("check", "--profile", "nope").code == 2


def test_check_all_and_task_list(repo: Repo) -> None:
    a = repo.task("alpha")
    repo.run("checkpoint", "a1")
    repo.clock.advance(3000)
    b = repo.task("beta")
    result = repo.run("check", "--all")
    assert result.code == 1
    assert result.out.splitlines() == sorted(
        [
            f"{a}: last checkpoint 50m 00s ago, interval 20m, STALE, no open handover",
            f"{b}: no checkpoint; task started 0s ago, interval 20m, fresh, no open handover",
        ]
    )
    listed = as_json(repo, "task", "list")
    assert listed == {
        "tasks": [
            {
                "task": b,
                "title": "beta",
                "last_at": "2026-11-30T03:50:00Z",
                "checkpoint_age_s": None,
                "open_handover": None,
            },
            {
                "task": a,
                "title": "alpha",
                "last_at": "2026-11-30T03:00:00Z",
                "checkpoint_age_s": 3000,
                "open_handover": None,
            },
        ]
    }
    text = repo.run("task", "list").out
    assert text == (
        f"* {b}  beta  last activity 0s ago  no checkpoint\n"
        f"  {a}  alpha  last activity 50m 00s ago  checkpoint 50m 00s ago\n"
    )


def test_session_is_recorded(repo: Repo) -> None:
    repo.task()
    out = as_json(repo, "checkpoint", "x", "--session", "night shift")
    assert out["record"]["session"] == "night shift"
    result = repo.run("checkpoint", "y", "--json", environ={"MAJORDOMUS_SESSION": "agent-7"})
    assert json.loads(result.out)["record"]["session"] == "agent-7"


def test_version_and_help(repo: Repo) -> None:
    version = repo.run("--version")
    assert (version.code, version.out) == (0, "majordomus 0.1.0\n")
    bad = repo.run("checkpoint", "--nope")
    assert bad.code == 2
    assert bad.err == "majordomus: No such option: --nope (see majordomus checkpoint --help)\n"


def test_a_tasks_line_in_history_names_it_once(repo: Repo) -> None:
    task = repo.task()
    assert repo.run("checkpoint", "seen once").code == 0
    lines = [line for line in repo.run("history").out.splitlines() if not line.startswith(" ")]
    assert [line.split("  ")[1:3] for line in lines] == [
        [f"checkpoint {lines[0].split()[2]}", f"task {task}"],
        [f"task {task}", f"on {repo.head()[:12]}"],
    ]
