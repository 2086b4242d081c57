"""The scenario behind fixtures/golden/refusals.txt: every refusal and error majordomus
gives, in the fixed clock and identity of the other scenarios (`golden_scenarios`)."""

from __future__ import annotations

from tests.support.golden import Transcript, scenario
from tests.support.golden_scenarios import OBJECTIVE, TITLE
from tests.support.repo import Repo


@scenario
def refusals(t: Transcript) -> None:
    """Every refusal and error: one sentence on stderr, its exit code, nothing written."""
    repo = t.repo("queue")
    t.note("no task yet")
    t.run(repo, "checkpoint", "no task to attach this to")
    t.run(repo, "check")
    t.run(repo, "resume")
    t.run(repo, "task", "list")
    t.clock.advance(60)
    t.run(repo, "task", "new", TITLE)
    t.note("text: over the cap, empty, control and bidi characters, a secret")
    t.run(
        repo,
        "checkpoint",
        "x" * 401,
        shown="majordomus checkpoint \"$(printf 'x%.0s' $(seq 401))\"",
    )
    t.run(repo, "checkpoint", "   ")
    t.run(
        repo, "checkpoint", "red \x1b[31malert", shown="majordomus checkpoint $'red \\e[31malert'"
    )
    t.run(
        repo, "checkpoint", "a \u202e reversed", shown="majordomus checkpoint $'a \\u202e reversed'"
    )
    t.run(repo, "checkpoint", "key AKIAIOSFODNN7EXAMPLE in the log")
    t.run(
        repo, "task", "new", "t" * 201, shown="majordomus task new \"$(printf 't%.0s' $(seq 201))\""
    )
    t.run(repo, "handover", "-o", OBJECTIVE, "-s", "half done")
    t.run(repo, "handover", "-o", OBJECTIVE, "-s", "half done", "-n", "")
    t.run(
        repo,
        "handover",
        "-F",
        "-",
        stdin=b'objective = "o"\nstate = "s"\n',
        shown='printf \'objective = "o"\\nstate = "s"\\n\' | majordomus handover -F -',
    )
    t.run(
        repo,
        "handover",
        "-F",
        "-",
        stdin=b'objective = "o\nstate',
        shown="printf 'objective = \"o\\nstate' | majordomus handover -F -",
    )
    t.run(
        repo,
        "checkpoint",
        "-F",
        "-",
        stdin=b"\xff\xfe",
        shown="printf '\\xff\\xfe' | majordomus checkpoint -F -",
    )
    t.run(
        repo,
        "checkpoint",
        "-F",
        "-",
        stdin=b"x" * (64 * 1024 + 1),
        shown="head -c 65537 /dev/zero | tr '\\0' x | majordomus checkpoint -F -",
    )
    t.run(repo, "checkpoint", "-F", "missing.txt")
    t.note("flags and names")
    t.run(repo, "checkpoint", "--bogus", "x")
    t.run(repo, "check", "--task", "abc")
    t.run(repo, "check", "--task", "ffff")
    t.run(repo, "watch", "--every", "0")
    t.run(repo, "history", "--limit", "0")
    t.run(repo, "fetch", "--upload-pack=touch /tmp/pwned")
    t.run(repo, "--profile", "nope", "check")
    head = repo.head()
    forged = "".join(
        f'[[task]]\nv = 1\nid = "{task}"\ntask = "{task}"\nhead = "{head}"\n'
        f'at = 2026-11-30T01:00:00Z\nauthor = "Ada Lovelace <ada@example.com>"\ntitle = "twin"\n\n'
        for task in ("t-abcd00000001", "t-abcd00000002")
    )
    t.clock.advance(60)
    repo.commit("two tasks sharing a prefix, written by hand")
    repo.git("notes", "--ref=majordomus", "add", "-m", forged, "HEAD")
    t.note("two task records whose ids share the prefix abcd, written with git notes add")
    t.normalise.keep("t-abcd00000001", "t-abcd00000002")
    t.run(repo, "task", "use", "abcd")
    t.note("a profile file with an unknown key")
    (repo.path / ".majordomus.toml").write_text('[profiles.default]\ncolour = "always"\n')
    t.run(repo, "checkpoint", "with a broken profile")
    (repo.path / ".majordomus.toml").unlink()
    t.note("negative answers")
    t.clock.advance(30 * 60)
    t.run(repo, "check")
    t.run(repo, "resume", "--peek")
    t.note("repository state")
    t.run(repo, "show", "deadbeef")
    t.run(repo, "history", "no-such-branch")
    empty = t.repo("empty", commit=False)
    t.run(empty, "task", "new", TITLE)
    plain = t.tmp / "plain"
    plain.mkdir()
    t.run(Repo(plain, repo.environ, t.clock), "check")
    t.run(Repo(t.tmp / "nowhere", repo.environ, t.clock), "check")
    (t.tmp / "sha256").mkdir()
    sha256 = Repo(t.tmp / "sha256", repo.environ, t.clock)
    t.git(sha256, "init", "-q", "--object-format=sha256", ".")
    t.git(sha256, "commit", "-q", "--allow-empty", "-m", "a SHA-256 repository")
    t.run(sha256, "check")
    t.run(
        repo,
        "checkpoint",
        "nobody wrote this",
        environ={"GIT_COMMITTER_NAME": "", "GIT_AUTHOR_NAME": ""},
    )
    t.note("a notes ref that points at a tree, not a commit")
    saved = repo.notes_ref()
    repo.git("update-ref", "refs/notes/majordomus", repo.head() + "^{tree}")
    t.run(repo, "checkpoint", "on a broken ref")
    t.run(repo, "history")
    assert saved is not None
    repo.git("update-ref", "refs/notes/majordomus", saved)
    t.note("an existing pre-push hook is never overwritten: init says what to add")
    hook = repo.path / ".git" / "hooks" / "pre-push"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/bin/sh\nexec ./ci/lint.sh\n")
    t.run(repo, "init")
    t.note("remotes")
    t.run(repo, "fetch", "nowhere")
    t.run(repo, "push", "nowhere")
    t.run(repo, "fetch", "-origin")
