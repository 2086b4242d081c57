"""No escape codes when stdout is not a terminal: every command's help and refusals, the
coloured and live outputs (check, watch), and `make demo`'s script, each run as a real
process with its output redirected, under a TERM that can show colour."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from majordomus import cli
from tests.support.cli import spawn
from tests.support.repo import Repo

ESC = b"\x1b"
DEMO = Path(__file__).resolve().parents[1] / "scripts" / "demo.sh"


def _demo_environ(environ: dict[str, str]) -> dict[str, str]:
    # The demo runs the majordomus of this interpreter, as `make demo` runs the venv's.
    bin_dir = str(Path(sys.executable).parent)
    return {**environ, "PATH": f"{bin_dir}{os.pathsep}{environ['PATH']}", "TERM": "xterm"}


def test_no_command_writes_escape_codes_into_a_pipe(repo: Repo) -> None:
    repo.task()
    repo.clock.advance(7200)
    environ = {**repo.environ, "TERM": "xterm-256color"}
    lines: list[tuple[str, ...]] = [("--help",), ("nosuch",), ()]
    for name in sorted(cli._command_names()):
        lines += [(name, "--help"), (name, "--no-such-flag")]
    # check is stale (a task with no checkpoint, past the interval of 1 s), watch is live
    # on a terminal: both would colour or redraw there.
    lines += [("check",), ("watch", "--count", "1"), ("history",), ("history", "--graph")]
    lines += [("doctor",), ("grep", "acks")]  # grep marks its matches on a terminal only
    slow = {"MAJORDOMUS_PROFILE": "quick"}
    (repo.path / ".majordomus.toml").write_text('[profiles.quick]\ninterval = "1s"\n')
    processes = [spawn(repo.path, {**environ, **slow}, *line) for line in lines]
    for line, process in zip(lines, processes, strict=True):
        out, err = process.communicate(timeout=60)
        assert out or err, line
        assert ESC not in out and ESC not in err, (line, out, err)


def test_the_demo_writes_no_escape_codes_when_redirected(tmp_path: Path) -> None:
    environ = _demo_environ({"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path)})
    done = subprocess.run(
        ["bash", str(DEMO)], env=environ, capture_output=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert b"\n$ majordomus task new" in done.stdout
    assert ESC not in done.stdout and ESC not in done.stderr


def test_the_demo_shows_its_commands_in_bold_on_a_terminal(tmp_path: Path) -> None:
    # The other side of the same switch: on a terminal the commands are bold.
    environ = _demo_environ({"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path)})
    leader, follower = pty.openpty()
    with subprocess.Popen(
        ["bash", str(DEMO)], env=environ, stdout=follower, stderr=subprocess.DEVNULL
    ) as process:
        os.close(follower)
        shown = b""
        while True:
            try:
                chunk = os.read(leader, 1 << 16)
            except OSError:  # the terminal closed: the demo has ended
                break
            if not chunk:
                break
            shown += chunk
        assert process.wait(timeout=120) == 0
    os.close(leader)
    assert b"\x1b[1m$ majordomus task new" in shown
