"""Hostile input at the command line: bytes that are not text, floods, controls,
TOML's own syntax, broken profile files and remote names that try to reach a shell."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from majordomus.fieldtext import normalise_text
from tests.support.cli import spawn, wait_measured
from tests.support.contracts import terminal_problems
from tests.support.git import git
from tests.support.notes import stored_records
from tests.support.repo import Repo

# Bodies made of TOML's own syntax: each must come back exactly as given.
VERBATIM = [
    'a "quoted" word',
    "back\\slash and \\\\ two",
    "triple \"\"\" quotes \"\"\" and ''' single '''",
    "[[checkpoint]]\nv = 1\nid = 'c-forged'\nbody = \"injected\"",
    '"""\n[[handover]]\n"""',
    "\\u0000 \\x1b \\n \\t \\U0001F600 all literal",
    "key = value # not a comment\n# nor this",
    "{ inline = 'table' } [array] = end",
    "ünïcödé, 漢字, emoji 🙂, joiners \u200d\u200c here",
    "tab\tinside\tand\nnewlines\nkept",
    "a" * 400,
]
# Each must be refused: nothing recorded, and not echoed raw in the refusal.
REFUSED = [
    "esc \x1b[31m red",
    "osc 8 \x1b]8;;https://evil.example/\x07link\x1b]8;;\x07",
    "c1 csi \x9b31m",
    "bell \x07",
    "backspace \x08",
    "carriage return \r alone",
    "delete \x7f",
    "nul \x00",
    "bidi \u202e reversed",
    "isolate \u2066 x \u2069",
    "zero width \u200b space",
    "word \u2060 joiner",
    "line separator \u2028 here",
    "paragraph \u2029 separator",
    "tags \U000e0049\U000e0047\U000e004e\U000e004f\U000e0052\U000e0045 hidden",
    "private \ue000 use",
    "soft \xad hyphen",
    "bom \ufeff inside",
    "",
    "   \n\t  ",
    "x" * 401,
]


def _notes(repo: Repo) -> str | None:
    return repo.notes_ref()


def test_toml_syntax_in_a_body_round_trips_verbatim(repo: Repo) -> None:
    repo.task()
    for body in VERBATIM:
        result = repo.run("checkpoint", body, "--json")
        assert result.code == 0, result.err
        assert json.loads(result.out)["record"]["body"] == body
    shown = json.loads(repo.run("show", "--json").out)["records"]
    assert [r["body"] for r in shown if r["kind"] == "checkpoint"] == VERBATIM
    stored = [r.table["body"] for r in stored_records(repo.path, repo.environ) if r.kind != "task"]
    assert stored == VERBATIM


def test_handover_title_and_session_round_trip_verbatim(repo: Repo) -> None:
    title, session = VERBATIM[3], VERBATIM[2]
    created = repo.run("task", "new", title, "--session", session, "--json")
    assert json.loads(created.out)["title"] == title
    fields = {"objective": VERBATIM[4], "state": VERBATIM[5], "next": VERBATIM[0]}
    source = "".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items())
    result = repo.run("handover", "-F", "-", "--json", stdin=source.encode())
    assert result.code == 0, result.err
    stored = {r.kind: r.table for r in stored_records(repo.path, repo.environ)}
    assert stored["task"]["title"] == title and stored["task"]["session"] == session
    assert {key: stored["handover"][key] for key in fields} == fields


def test_controls_and_empty_text_are_refused_and_not_echoed(repo: Repo) -> None:
    repo.task()
    before = _notes(repo)
    for body in REFUSED:
        result = repo.run("checkpoint", body)
        assert result.code == 2, body
        assert result.out == ""
        assert result.err.startswith("majordomus: checkpoint body "), result.err
        assert "nothing was recorded" in result.err and result.err.count("\n") == 1
        assert terminal_problems(result.err) == [], result.err
    assert _notes(repo) == before


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=st.text(st.characters(exclude_categories=["Cs"]), max_size=40))
def test_any_text_is_stored_exactly_or_refused_whole(repo: Repo, text: str) -> None:
    if not (repo.path / ".git" / "majordomus-task").exists():
        repo.task()
    before = _notes(repo)
    result = repo.run("checkpoint", "--json", "--", text)  # after --, even "-x" is text
    if result.code != 0:
        assert result.code == 2 and _notes(repo) == before, result.err
        assert terminal_problems(result.err) == []
        return
    record = json.loads(result.out)["record"]
    assert record["body"] == normalise_text(text)
    stored = [r for r in stored_records(repo.path, repo.environ) if r.table["id"] == record["id"]]
    assert [r.table["body"] for r in stored] == [normalise_text(text)]


def test_non_utf8_input_is_refused(repo: Repo) -> None:
    repo.task()
    before = _notes(repo)
    cases = [
        repo.run("checkpoint", "-F", "-", stdin=b"caf\xe9 latin-1"),
        repo.run("handover", "-F", "-", stdin=b'objective = "\xff"\n'),
        # What Python makes of undecodable argv and environment bytes: lone surrogates.
        repo.run("checkpoint", "caf\udce9"),
        repo.run("task", "new", "caf\udce9"),
        repo.run("checkpoint", "ok", environ={"MAJORDOMUS_SESSION": "\udcff"}),
    ]
    for result in cases:
        assert result.code == 2, result.err
        assert "Traceback" not in result.err and result.err.count("\n") == 1, result.err
    assert _notes(repo) == before


def test_undecodable_argv_from_a_real_process_is_refused(repo: Repo) -> None:
    repo.task()
    before = _notes(repo)
    proc = spawn(repo.path, repo.environ, b"checkpoint", b"caf\xe9 \xff\xfe")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert out == b"" and b"Traceback" not in err
    assert _notes(repo) == before


def _flood(proc: subprocess.Popen[bytes], total: int) -> None:
    """Write `total` bytes into the child's stdin until it stops reading."""
    assert proc.stdin is not None
    chunk = b"x" * (1 << 20)
    try:
        for _ in range(total // len(chunk)):
            proc.stdin.write(chunk)
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass


def _rss_of(repo: Repo, *argv: str, flood: int) -> tuple[int, float, bytes]:
    proc = spawn(repo.path, repo.environ, *argv, stdin=True)
    started = time.monotonic()
    writer = threading.Thread(target=_flood, args=(proc, flood))
    writer.start()
    finished = wait_measured(proc, started)
    writer.join(timeout=30)
    return finished.max_rss_kib, finished.seconds, finished.err


def test_a_50_mb_stdin_is_refused_without_reading_it(repo: Repo) -> None:
    repo.task()
    before = _notes(repo)
    small, _, _ = _rss_of(repo, "checkpoint", "-F", "-", flood=1 << 20)  # refused too: 1 MiB
    huge, seconds, err = _rss_of(repo, "checkpoint", "-F", "-", flood=50 << 20)
    assert b"is over 65536 bytes" in err, err
    assert huge < small + 16 * 1024, f"peak RSS {huge} KiB against {small} KiB for 1 MiB"
    assert seconds < 20, seconds
    handover, _, err = _rss_of(repo, "handover", "-F", "-", flood=50 << 20)
    assert b"is over 65536 bytes" in err and handover < small + 16 * 1024, err
    assert _notes(repo) == before


def test_an_endless_file_is_refused(repo: Repo) -> None:
    repo.task()
    result = repo.run("checkpoint", "-F", "/dev/zero")
    assert (result.code, result.err) == (
        2,
        "majordomus: checkpoint body is over 65536 bytes, far over the cap of 2000 characters; "
        "nothing was recorded.\n",
    )


# ---- profile files ---------------------------------------------------------------------------

PROFILES = {
    "not TOML": b"[profiles.default\ninterval = 1\n",
    "not UTF-8": b'profile = "caf\xe9"\n',
    "unknown key": b"[profiles.default]\ncolour = true\n",
    "wrong type": b'[profiles.default]\ncheckpoint_max = "400"\n',
    "cap out of range": b"[profiles.default]\ncheckpoint_max = 2001\n",
    "digit that int() refuses": '[profiles.default]\ninterval = "\u00b2"\n'.encode(),
    "integer past int()": b"[profiles.default]\ninterval = " + b"9" * 5000 + b"\n",
    "digits past int()": b'[profiles.default]\ninterval = "' + b"9" * 5000 + b'"\n',
    "deep nesting": b"x = " + b"[" * 5000 + b"]" * 5000 + b"\n",
    "over 1 MiB": b"# " + b"x" * (1 << 20) + b"\n",
}


def test_hostile_profile_files_are_refused_with_their_path(repo: Repo) -> None:
    repo.task()
    path = repo.path / ".majordomus.toml"
    for name, content in PROFILES.items():
        path.write_bytes(content)
        _refused_everywhere(repo, path, name)
    path.unlink()
    for kind in ("directory", "endless", "fifo"):
        if kind == "directory":
            path.mkdir()
        elif kind == "endless":
            path.symlink_to("/dev/zero")  # a committed symlink can point anywhere
        else:
            os.mkfifo(path)  # opening it would wait for a writer forever
        _refused_everywhere(repo, path, kind)
        if kind == "directory":
            path.rmdir()
        else:
            path.unlink()


def _refused_everywhere(repo: Repo, path: Path, name: str) -> None:
    before = _notes(repo)
    for argv in (("checkpoint", "x"), ("profile", "--json")):
        result = repo.run(*argv)
        assert result.code == 2, (name, argv, result.err)
        assert result.err.startswith(f"majordomus: {path}"), (name, result.err)
        assert result.err.count("\n") == 1 and terminal_problems(result.err) == [], result.err
    doctor = repo.run("doctor", "--json")
    assert doctor.code == 1, name
    finding = json.loads(doctor.out)["findings"][0]
    assert finding["topic"] == "profile" and not finding["healthy"], name
    assert _notes(repo) == before


# ---- remote names ------------------------------------------------------------------------------


def test_hostile_remote_names_never_reach_a_shell(repo: Repo, tmp_path: Path) -> None:
    bare = tmp_path / "origin.git"
    git(tmp_path, repo.environ, "init", "-q", "--bare", str(bare))
    repo.git("remote", "add", "origin", str(bare))
    repo.task()
    canary = tmp_path / "pwned"
    names = [
        f"--upload-pack=touch {canary}",
        f"--receive-pack=touch {canary}",
        f"-oProxyCommand=touch {canary}",
        f"; touch {canary}",
        f"$(touch {canary})",
        f"`touch {canary}`",
        f"origin; touch {canary}",
        f"origin && touch {canary} #",
        f"ext::sh -c touch% {canary}",
        f"|touch {canary}",
        f"x\ntouch {canary}",
        "x\x1b]8;;http://evil.example\x07",
    ]
    before = _notes(repo)
    for name in names:
        for argv in (("fetch", name), ("push", "--", name), ("init", "--remote", name)):
            result = repo.run(*argv)
            assert result.code in (2, 4), (argv, result.err)
            assert "Traceback" not in result.err and result.err.count("\n") == 1, result.err
            assert terminal_problems(result.err) == [], result.err
        hook = repo.run("push", "--hook", "--", name)
        assert hook.code == 0, hook.err  # the pre-push hook never fails a push
        assert terminal_problems(hook.err) == []
    assert not canary.exists()
    assert not list(repo.path.glob("*pwned*")) and not list(Path.cwd().glob("*pwned*"))
    assert repo.git("status", "--porcelain", "--ignored") == ""
    assert _notes(repo) == before
    assert repo.git("ls-remote", str(bare)) == ""


@pytest.mark.parametrize(
    ("every", "shown"), [("nan", "nan"), ("inf", "inf"), ("1e309", "inf"), ("1e12", "1e+12")]
)
def test_watch_refuses_an_interval_it_cannot_sleep(repo: Repo, every: str, shown: str) -> None:
    # time.sleep raises on NaN and overflows on huge values: refused before any sleep.
    repo.task()
    result = repo.run("watch", "--every", every, "--count", "2")
    assert result.code == 2, result.err
    assert result.err == (
        f"majordomus: --every must be at most 86400 seconds (a day), not {shown}.\n"
    )
