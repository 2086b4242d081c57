"""Golden transcripts: the exact output of every command in fixed scenarios.

Each scenario runs majordomus in-process in real repositories built with a
fixed clock and identity, and writes a transcript: the command line, its
stdout, its stderr (each line marked `2> `) and its exit code when not 0.
Commit ids are fixed by the clock and identity; the ids majordomus draws at
random (tasks, records) are replaced, in order of first appearance, by fixed
ids of the same shape, and temporary paths by placeholders.

The scenarios are in `golden_scenarios` and `golden_refusals`; `python -m
tests.support.golden` (`make golden`) rewrites fixtures/golden/; the test in
tests/test_golden.py compares every transcript whole and shows a diff.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from tests.support.corpus import GOLDEN
from tests.support.env import Clock, hermetic_environ
from tests.support.repo import Repo

_RANDOM_ID = re.compile(r"\b(t-[0-9a-f]{12}|[chr]-[0-9a-f]{16})\b")
_NOTES_COMMIT = re.compile(r'("(?:remote_commit|notes_commit)": ")([0-9a-f]{40})')


def fixed_id(kind: str, n: int) -> str:
    """The n-th (from 1) fixed id of a kind: looks like a real one, never changes."""
    digits = 12 if kind == "t" else 16
    return f"{kind}-{hashlib.sha256(f'majordomus golden {kind} {n}'.encode()).hexdigest()[:digits]}"


class Normaliser:
    """Replaces random ids by fixed ones (the same id always by the same one) and paths."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}
        self.paths: dict[str, str] = {}
        self.commits: dict[str, str] = {}

    def keep(self, *ids: str) -> None:
        """Ids a scenario wrote by hand: fixed already, shown as they are."""
        self.ids.update({ident: ident for ident in ids})

    def id_of(self, real: str) -> str:
        if real not in self.ids:
            kind = real[0]
            n = 1 + sum(
                1 for known, shown in self.ids.items() if known[0] == kind and known != shown
            )
            self.ids[real] = fixed_id(kind, n)
        return self.ids[real]

    def __call__(self, text: str) -> str:
        # Longest paths first, so a repository inside the temporary root keeps its name.
        for real, shown in sorted(self.paths.items(), key=lambda item: -len(item[0])):
            text = text.replace(real, shown)
        text = _RANDOM_ID.sub(lambda m: self.id_of(m.group()), text)
        # Notes commits hold random ids, so their own ids change from run to run.
        return _NOTES_COMMIT.sub(lambda m: m.group(1) + self.commit_of(m.group(2)), text)

    def commit_of(self, real: str) -> str:
        if real not in self.commits:
            n = len(self.commits) + 1
            self.commits[real] = hashlib.sha256(
                f"majordomus golden notes {n}".encode()
            ).hexdigest()[:40]
        return self.commits[real]


class Transcript:
    """Commands run in a scenario and everything they printed."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.normalise = Normaliser()
        self.normalise.paths[str(tmp)] = "/tmp/golden"
        # The hook line init prints names the Python that runs majordomus.
        self.normalise.paths[sys.executable] = "/usr/bin/python3"
        # So does the hook command agent install writes (the script beside that Python).
        self.normalise.paths[str(Path(sys.executable).parent / "majordomus")] = (
            "/usr/local/bin/majordomus"
        )
        self.blocks: list[str] = []
        self.clock = Clock()

    def repo(self, name: str, commit: bool = True) -> Repo:
        home = self.tmp / f"home-{name}"
        home.mkdir(parents=True, exist_ok=True)
        return Repo.init(self.tmp / name, hermetic_environ(home), self.clock, commit=commit)

    def run(
        self,
        repo: Repo,
        *argv: str,
        shown: str | None = None,
        stdin: bytes = b"",
        environ: Mapping[str, str] | None = None,
    ) -> str:
        """majordomus in `repo`; returns its stdout (not normalised) for later steps."""
        result = repo.run(*argv, stdin=stdin, environ=environ)
        line = shown if shown is not None else shlex.join(["majordomus", *map(self._shown, argv)])
        self.add(line, result.out, result.err, result.code)
        return result.out

    def _shown(self, word: str) -> str:
        """A task prefix as the command line shows it: the prefix of the fixed id."""
        for real in self.normalise.ids:
            if real.startswith("t-") and len(word) >= 4 and real[2:].startswith(word):
                return self.normalise.id_of(real)[2 : 2 + len(word)]
        return word

    def git(self, repo: Repo, *argv: str, shown: str | None = None) -> str:
        """Real git in `repo`, at the clock's time (so commit ids stay fixed)."""
        when = f"{int(self.clock.now.timestamp())} +0000"
        environ = {**repo.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
        saved, repo.environ = repo.environ, environ
        try:
            out = repo.git(*argv)
        finally:
            repo.environ = saved
        self.add(shown if shown is not None else shlex.join(["git", *argv]), out, "", 0)
        return out

    def note(self, text: str) -> None:
        """A comment line in the transcript (what happens between commands)."""
        self.blocks.append(f"# {text}\n")

    def add(self, line: str, out: str, err: str, code: int) -> None:
        block = f"$ {line}\n{out}"
        if out and not out.endswith("\n"):
            block += "\n"
        block += "".join(f"2> {text}\n" for text in err.splitlines())
        if code:
            block += f"[exit {code}]\n"
        self.blocks.append(self.normalise(block))

    def text(self) -> str:
        return "".join(self.blocks)


Scenario = Callable[[Transcript], None]
SCENARIOS: dict[str, Scenario] = {}


def scenario(function: Scenario) -> Scenario:
    SCENARIOS[function.__name__] = function
    return function


def produce(name: str) -> str:
    """The transcript of one scenario, run in a fresh temporary folder."""
    tmp = Path(tempfile.mkdtemp(prefix="majordomus-golden-"))
    try:
        transcript = Transcript(tmp)
        SCENARIOS[name](transcript)
        return transcript.text()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def golden_path(name: str) -> Path:
    return GOLDEN / f"{name.replace('_', '-')}.txt"


def main() -> int:
    # Imported by name: run as `python -m tests.support.golden`, this module is __main__,
    # and the scenarios register themselves with tests.support.golden.
    from tests.support import (  # noqa: F401
        golden,  # noqa: PLW0406
        golden_graph,
        golden_refusals,
        golden_scenarios,
    )
    from tests.support.env import isolate_pygit2

    isolate_pygit2(Path(tempfile.mkdtemp(prefix="majordomus-golden-config-")))
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for name in golden.SCENARIOS:
        path = golden.golden_path(name)
        text = golden.produce(name)
        old = path.read_text("utf-8") if path.exists() else None
        path.write_text(text, "utf-8")
        print(f"{'unchanged' if old == text else 'rewrote'} {path.relative_to(GOLDEN.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
