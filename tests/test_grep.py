"""`majordomus grep`: every record's text (bodies, handover fields, titles, sessions) matched
line by line, newest first, in every kind of clone of a history with merges: the victim's
(which fetched with majordomus and merged), a second one (a plain `git fetch`: the records
on its remote-tracking ref), another branch in a linked work tree, a new clone, a shallow
one and a partial one (blobs left on the remote). The answer is held to `history`'s own
(the same records, order, copies, reachability and invalid count) filtered by Python's
`re` on each line; hostile notes (line breaks and invisible characters in every field,
forged ids, an oversized field, a forged member named as grep's own) never forge a line,
and the MCP tool `search` answers what `grep --json` does, withholding under
`trust = "signed"` what is not verified (unsigned, or signed and then edited with plain
git), never matching on it."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from majordomus.cachefile import SEARCH_FILE_NAME
from majordomus.documentcache import DocumentCache
from majordomus.errors import RefusedError
from majordomus.jsontext import ITEM, dumps, items
from majordomus.matching import candidates, compile_pattern, folded, matched_fields, needle_of
from majordomus.searchcache import SEARCHED as KEPT
from majordomus.searchcache import SearchCache, searched, searched_text
from tests.support.agent_text import assert_json_text, invisible, mcp_results
from tests.support.attacks import (
    CLONES,
    PAYLOAD,
    Scene,
    World,
    attacked,
    hostile,
    record,
    write_note,
)
from tests.support.env import EMAIL
from tests.support.keys import HAVE_SSH, allowed_signers, sign_with_ssh, ssh_key
from tests.support.repo import Repo, clone

FORGED_TASK = "t-0bad0bad0bad"
SEARCHED = {
    "task": ("title", "session"),
    "checkpoint": ("body", "session"),
    "handover": ("objective", "state", "next", "session"),
    "resume": ("session",),
}
LABELS = ("label", "ahead", "behind", "resolved")
INVISIBLE = "\u202e\u200b\x1b[31m\u2066"  # bidi override, zero width space, CSI, isolate


def attack(world: World) -> None:
    """On a commit of its own: a task and a handover with line breaks and invisible
    characters in every field, each holding `needle`; a checkpoint with a forged member
    named as grep's own; two invalid records that say `needle` (a forged id, a body over
    the ceiling); on the victim's merge, a checkpoint appended."""
    attacker = world.attacker
    head, at = world.attacker_commit("attacker: tidy the retry loop", {"retry.py": "retry = 4\n"})
    laced = f"needle{INVISIBLE}here"
    text = record(
        "task", FORGED_TASK, FORGED_TASK, head, at,
        title=hostile(laced), author=hostile(laced), session=hostile(laced),
    )  # fmt: skip
    text += record(
        "handover", "h-0bad0bad0bad0bad", world.task, head, at,
        author=hostile(laced), session=hostile(laced),
        objective=hostile(laced), state=hostile("needle in the state"), next=hostile(laced),
    )  # fmt: skip
    text += record(
        "checkpoint", "c-0bad0bad0bad0bad", world.task, head, at,
        body="needle with a forged member", matched="forged",
    )  # fmt: skip
    text += record("checkpoint", "c-../../etc/passwd", world.task, head, at, body="needle id")
    text += record(
        "checkpoint", "c-0bad0bad0bad0bb0", world.task, head, at, body="needle " + "x" * 2001
    )
    write_note(attacker, head, text)
    merge_text = record(
        "checkpoint", "c-0bad0bad0bad0bae", world.task, world.merge, at,
        body="on the merge\nneedle on its second line",
    )  # fmt: skip
    write_note(attacker, world.merge, merge_text, append=True)


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    world = attacked(tmp_path_factory.mktemp("grep"), attack)
    topic = world.topic()
    # The victim types a checkpoint into HEAD's note by hand, with plain git, then publishes.
    victim = world.victim
    hand = (
        f'[[checkpoint]]\nv = 1\nid = "c-0000000000000001"\ntask = "{world.task}"\n'
        f'head = "{victim.head()}"\nat = 2026-12-01T00:00:00Z\nauthor = "Grace <g@example.com>"\n'
        'body = """typed by hand\nthe needle, by hand"""\n'
    )
    write_note(victim, victim.head(), hand, append=True)
    third = world.third()
    yield Scene(world, topic, third)


def _clones(scene: Scene) -> dict[str, Repo]:
    return scene.clones()


def matched(pattern: re.Pattern[str], value: dict[str, Any]) -> dict[str, list[int]]:
    """What grep must find in a record of `history --json`, by Python's `re`, line by line."""
    found = {}
    for key in SEARCHED[value["kind"]]:
        text = value.get(key)
        if isinstance(text, str):
            lines = [n for n, line in enumerate(text.split("\n"), 1) if pattern.search(line)]
            if lines:
                found[key] = lines
    return found


def expected(repo: Repo, pattern: str, *argv: str, flags: int = 0) -> tuple[list[Any], int]:
    """The records `grep PATTERN ARGV --json` must list, from `history ARGV --json`, and
    how many it must count hidden (matching, only in `history --all`)."""
    compiled = re.compile(pattern, flags)
    wanted = []
    for value in json.loads(repo.run("history", *argv, "--json").out)["records"]:
        found = matched(compiled, value)
        if found:  # a handover without its label against HEAD: grep does not compute it
            plain = {k: v for k, v in value.items() if k not in LABELS}
            wanted.append({**plain, "matched": found})
    everything = json.loads(repo.run("history", "--all", "--json").out)["records"]
    hidden = 0
    if "--all" not in argv:
        listed = {(r["kind"], r["id"]) for r in wanted}
        for value in everything:
            if matched(compiled, value) and (value["kind"], value["id"]) not in listed:
                hidden += 1
    return wanted, hidden


def grep_json(repo: Repo, *argv: str) -> tuple[int, Any]:
    result = repo.run("grep", "--json", *argv)
    assert result.err == "", result.err
    return result.code, assert_json_text(result.out, PAYLOAD)


@pytest.mark.parametrize("name", CLONES)
@pytest.mark.parametrize(
    ("pattern", "argv", "flags"),
    [
        ("needle", (), 0),
        ("needle", ("--all",), 0),
        ("(?i)system|^bisect", (), 0),
        ("ACK", ("-i",), re.IGNORECASE),
        ("", (), 0),
        ("drop.*ack$", ("--all",), 0),
    ],
    ids=["needle", "needle-all", "flags", "ignore-case", "empty", "anchored-all"],
)
def test_grep_lists_what_history_lists_filtered_line_by_line(
    scene: Scene, name: str, pattern: str, argv: tuple[str, ...], flags: int
) -> None:
    repo = _clones(scene)[name]
    code, answer = grep_json(repo, *argv, "--", pattern)
    history_argv = tuple(a for a in argv if a == "--all")
    wanted, hidden = expected(repo, pattern, *history_argv, flags=flags)
    assert answer["records"] == wanted
    assert (answer["hidden"], answer["pattern"], answer["task"]) == (hidden, pattern, None)
    assert answer["invalid"] == json.loads(repo.run("history", "--json").out)["invalid"]
    assert answer["rev"] == repo.head()
    assert code == (0 if wanted else 1)
    assert dumps(answer) + "\n" == repo.run("grep", "--json", *argv, "--", pattern).out


def test_hostile_records_are_found_once_each_and_invalid_ones_never(scene: Scene) -> None:
    _, answer = grep_json(scene.world.victim, "needle")
    ids = [r["id"] for r in answer["records"]]
    assert len(ids) == len(set(ids))
    assert {FORGED_TASK, "h-0bad0bad0bad0bad", "c-0bad0bad0bad0bad", "c-0bad0bad0bad0bae"} <= set(
        ids
    )
    assert "c-0000000000000001" in ids  # the checkpoint typed by hand
    assert "c-0bad0bad0bad0bb0" not in ids and not any("passwd" in i for i in ids)
    assert answer["invalid"] >= 2
    forged = next(r for r in answer["records"] if r["id"] == "c-0bad0bad0bad0bad")
    assert forged["matched"] == {"body": [1]}  # grep's member, not the forged one
    merge = next(r for r in answer["records"] if r["id"] == "c-0bad0bad0bad0bae")
    assert merge["matched"] == {"body": [2]}


_HEADER = re.compile(
    r"(?:task|checkpoint|handover|resume) [a-z]-[0-9a-z]{1,64}(?:  task t-[0-9a-f]{12})?  "
    r"on [0-9a-f]{12}  by .+, (?:\d+[smhd](?: \d+[smh])? ago|in the future by .+)"
)
_LINE = re.compile(r"    (?:title|body|objective|state|next|session):\d+: .*")
_TAIL = re.compile(r"\(\d+ (?:more matching records? on commits not reachable .*|invalid .*)\)")


@pytest.mark.parametrize("name", CLONES)
def test_text_output_never_lets_note_text_start_a_line(scene: Scene, name: str) -> None:
    repo = _clones(scene)[name]
    result = repo.run("grep", "needle|SYSTEM|Record:|end of quoted")
    assert result.code == 0, result.err
    out = result.out.removesuffix("\n")
    assert invisible(out) == [] and "\x1b" not in out and "\r" not in out
    lines = out.split("\n")
    for line in lines:
        assert _HEADER.fullmatch(line) or _LINE.fullmatch(line) or _TAIL.fullmatch(line), line
        assert not any(line.startswith(piece) for piece in PAYLOAD), line
    headers = [line for line in lines if _HEADER.fullmatch(line)]
    _, answer = grep_json(repo, "needle|SYSTEM|Record:|end of quoted")
    assert len(headers) == len(answer["records"])
    shown = [line.split()[1] for line in headers]
    assert shown == [r["id"] for r in answer["records"]]
    # The laced field: its invisible characters shown as escapes, on the field's line.
    assert "    title:1: needle\\u202e\\u200b\\x1b[31m\\u2066here" in lines


def test_a_terminal_marks_each_match_and_nothing_else(scene: Scene) -> None:
    victim = scene.world.victim
    plain = victim.run("grep", "needle", "--task", scene.world.task).out
    marked = victim.run("grep", "needle", "--task", scene.world.task, tty=True).out
    assert "\x1b" not in plain
    assert marked.replace("\x1b[1;31m", "").replace("\x1b[0m", "") == plain
    assert marked.count("\x1b[1;31mneedle\x1b[0m") == marked.count("\x1b[") // 2
    no_colour = victim.run(
        "grep", "needle", "--task", scene.world.task, tty=True, environ={"NO_COLOR": "1"}
    )
    assert no_colour.out == plain
    # The attacker's own escape sequence is shown as text even where it is matched.
    laced = victim.run("grep", "-F", "\x1b[31m", tty=True).out
    assert "\x1b[1;31m\\x1b[31m\x1b[0m" in laced
    assert "\x1b[31m" not in laced.replace("\x1b[1;31m", "")


def test_fixed_strings_case_and_the_limit(scene: Scene) -> None:
    victim = scene.world.victim
    assert victim.run("grep", "-F", "n.edle").code == 1
    assert victim.run("grep", "n.edle").code == 0
    assert victim.run("grep", "-F", "NEEDLE").code == 1
    assert victim.run("grep", "-F", "-i", "NEEDLE").code == 0
    _, whole = grep_json(victim, "needle")
    _, first = grep_json(victim, "needle", "--limit", "2")
    assert first["records"] == whole["records"][:2] and first["hidden"] == whole["hidden"]
    _, task = grep_json(victim, "needle", "--task", scene.world.task[2:8])
    assert task["task"] == scene.world.task
    assert task["records"] == [r for r in whole["records"] if r["task"] == scene.world.task]
    # A match never spans two lines of a field.
    assert victim.run("grep", "typed by hand.the needle").code == 1
    assert victim.run("grep", r"typed by hand\nthe needle").code == 1


@pytest.mark.parametrize(
    ("argv", "sentence"),
    [
        (["grep", "flush("], "the pattern is not a valid Python regular expression"),
        (["grep", "*"], "(nothing to repeat at position 0)"),
        (["grep", "a{4294967296}"], "(it is too large)"),
        (["grep", "-F", "-E", "x"], "give -F (a fixed string) or -E"),
        (["grep", "x", "--limit", "0"], "--limit must be 1 or more, not 0."),
        (["grep"], "give a PATTERN to search for"),
        (["grep", "x", "--task", "ffff"], "no task matches 'ffff'; see majordomus task list."),
    ],
)
def test_refusals_are_one_sentence_exit_2_and_touch_nothing(
    scene: Scene, argv: list[str], sentence: str
) -> None:
    victim = scene.world.victim
    before = victim.git("for-each-ref")
    result = victim.run(*argv)
    assert (result.code, result.out) == (2, "")
    assert len(result.err.splitlines()) == 1 and sentence in result.err
    assert result.err.startswith("majordomus: ")
    assert victim.git("for-each-ref") == before


def test_a_record_off_heads_history_is_counted_and_shown_with_all(scene: Scene) -> None:
    """A checkpoint on a branch that is checked out no more: hidden, then shown by --all,
    whose order is history --all's."""
    topic = scene.topic
    topic.git("switch", "-q", "-c", "spike")
    topic.commit("spike: bigger batches")
    assert topic.run("checkpoint", "a spike says needle too").code == 0
    topic.git("switch", "-q", "topic")
    code, answer = grep_json(topic, "spike says")
    assert (code, answer["records"], answer["hidden"]) == (1, [], 1)
    text = topic.run("grep", "spike says").out
    assert "(1 more matching record on commits not reachable from HEAD" in text
    _, every = grep_json(topic, "needle", "--all")
    wanted, _ = expected(topic, "needle", "--all")
    assert every["records"] == wanted
    assert "a spike says needle too" in [r.get("body") for r in every["records"]]


@pytest.mark.parametrize("shape", [("--depth", "1"), ("--filter=blob:none",)])
def test_shallow_and_partial_clones_answer_as_their_history_does(
    scene: Scene, tmp_path_factory: pytest.TempPathFactory, shape: tuple[str, ...]
) -> None:
    world = scene.world
    path = tmp_path_factory.mktemp("shallow") / "ci"
    world.victim.git("--git-dir", str(world.remote), "config", "uploadpack.allowFilter", "true")
    shallow = clone(f"file://{world.remote}", path, world.environ, world.clock, *shape)
    if "--filter=blob:none" in shape:  # partial indeed: the blobs are left on the remote
        missing = shallow.git("rev-list", "--objects", "--all", "--missing=print")
        assert "\n?" in "\n" + missing
    assert shallow.run("init").code == 0 and shallow.run("fetch").code == 0
    for argv in ((), ("--all",)):
        _, answer = grep_json(shallow, "needle|drop", *argv)
        wanted, hidden = expected(shallow, "needle|drop", *argv)
        assert (answer["records"], answer["hidden"]) == (wanted, hidden)
    assert answer["records"]


def test_cached_answers_equal_fresh_ones_across_writes_and_hand_edits(scene: Scene) -> None:
    second = scene.world.second
    argv = ("needle|drop", "--all")
    warm = second.run("grep", *argv, "--json").out
    second.drop_caches()
    assert second.run("grep", *argv, "--json").out == warm
    assert second.run("grep", *argv, "--json").out == warm  # from the caches just written
    second.clock.advance(60)
    assert second.run("task", "use", scene.world.task[:6]).code == 0
    assert second.run("checkpoint", "a needle after the caches").code == 0
    second.git("notes", "--ref=majordomus", "append", "-m", "not = [toml", "HEAD~1")
    after = second.run("grep", *argv, "--json").out
    second.drop_caches()
    assert second.run("grep", *argv, "--json").out == after != warm
    assert "a needle after the caches" in after
    # A note only a plain `git fetch` brought, searched and kept, then changed on the
    # remote-tracking ref (as a fetch of a teammate's edit changes it): the search of every
    # task keeps only the records of the notes there are now.
    remote = "refs/notes/remotes/origin/majordomus"
    notes = dict(
        line.split() for line in second.git("notes", f"--ref={remote}", "list").split("\n") if line
    )
    edited = sorted(cached_blobs(second) & set(notes))[0]
    second.git("notes", f"--ref={remote}", "append", "-m", "# typed by hand", notes[edited])
    assert second.run("grep", *argv, "--json").out == after
    assert edited not in cached_blobs(second) <= note_blobs(second)


def cached_blobs(repo: Repo) -> set[str]:
    """The note blobs whose records the search cache keeps."""
    common = repo.path / repo.git("rev-parse", "--git-common-dir").strip()
    return {key.split()[0] for key in SearchCache(common / SEARCH_FILE_NAME).records}


def note_blobs(repo: Repo) -> set[str]:
    """The blob of every note on every notes ref (local and remote-tracking)."""
    refs = repo.git("for-each-ref", "--format=%(refname)", "refs/notes").split()
    return {line.split()[2] for ref in refs for line in repo.git("ls-tree", "-r", ref).splitlines()}


def test_the_mcp_tool_answers_what_grep_json_answers(scene: Scene) -> None:
    victim = scene.world.victim
    calls: list[tuple[str, dict[str, Any]]] = [
        ("search", {"pattern": "needle"}),
        ("search", {"pattern": "NEEDLE", "ignore_case": True, "all": True, "limit": 3}),
        ("search", {"pattern": "--all", "fixed": True}),
        ("search", {"pattern": "flush("}),
    ]
    answers = mcp_results(victim, calls)
    assert answers[0] == (False, victim.run("grep", "needle", "--json").out.strip())
    assert answers[1] == (
        False,
        victim.run("grep", "-i", "--all", "--limit", "3", "--json", "NEEDLE").out.strip(),
    )
    assert answers[2] == (False, victim.run("grep", "-F", "--json", "--", "--all").out.strip())
    assert answers[3][0] is True and '"exit": 2' in answers[3][1]


def test_under_trust_signed_the_mcp_tool_neither_shows_nor_matches_unverified_text(
    scene: Scene,
) -> None:
    third = scene.third
    (third.path / ".majordomus.toml").write_text('[profiles.default]\ntrust = "signed"\n')
    try:
        ((error, text),) = mcp_results(third, [("search", {"pattern": "needle"})])
        answer = json.loads(text)
        # Not a record here is signed: none is searched, each is counted, none is named.
        total = len(json.loads(third.run("history", "--all", "--json").out)["records"])
        assert (error, answer["records"], answer["untrusted"]) == (False, [], total)
        assert "needle" not in text.replace('"pattern": "needle"', "")
        # A person's grep lists everything, each record's status marked.
        shown = third.run("grep", "needle", "--task", scene.world.task).out
        assert "(unsigned)" in shown
        plain = third.run("grep", "needle", "--trusted").out.split("\n")
        assert plain == [
            f'({total} records not verified, so not searched (trust = "signed"))',
            f"({answer['invalid']} invalid notes or records skipped; majordomus doctor lists them)",
            "",
        ]
    finally:
        (third.path / ".majordomus.toml").unlink()


@pytest.mark.skipif(not HAVE_SSH, reason="needs ssh-keygen")
def test_under_trust_signed_a_verified_record_is_searched_and_an_unsigned_one_is_not(
    repo: Repo, tmp_path: Path
) -> None:
    key = ssh_key(tmp_path / "keys", "ada")
    allowed = allowed_signers(tmp_path / "allowed", [f"{EMAIL} {key.line}"])
    sign_with_ssh(repo, key, allowed)
    task = repo.task()
    assert repo.run("checkpoint", "needle, signed").code == 0
    # A signed checkpoint whose body a teammate then edits with plain git: its signature
    # holds no more, so it is neither searched nor shown.
    repo.commit("edited")
    assert repo.run("checkpoint", "a signed haystack").code == 0
    note = repo.git("notes", "--ref=majordomus", "show", "HEAD")
    edited = note.replace("a signed haystack", "needle, edited")
    assert edited != note
    repo.git("notes", "--ref=majordomus", "add", "-f", "-F", "-", "HEAD", input=edited)
    repo.git("config", "majordomus.sign", "false")
    repo.commit("later")
    assert repo.run("checkpoint", "needle, unsigned").code == 0
    (repo.path / ".majordomus.toml").write_text('[profiles.default]\ntrust = "signed"\n')
    ((error, text),) = mcp_results(repo, [("search", {"pattern": "needle"})])
    answer = json.loads(text)
    assert error is False and "unsigned" not in text.replace('"signature": "verified"', "")
    assert "edited" not in text
    assert [(r["body"], r["signature"]) for r in answer["records"]] == [
        ("needle, signed", "verified")
    ]
    assert answer["untrusted"] == 2
    assert text == repo.run("grep", "--json", "--trusted", "needle").out.strip()
    # A person's grep lists both, each marked.
    shown = repo.run("grep", "needle", "--task", task).out
    assert "(verified)" in shown and "(unsigned)" in shown and "(BAD SIGNATURE)" in shown


_TOKENS = st.sampled_from(
    ["a", "b", "\\n", ".", "^", "$", "*", "+", "?", "|", "[^b]", "\\s", "\\b", "(?=a)",
     "(?<!a)", "(?!b)", "(?<!\\n)", "(?!\\n)", "(?s:.)", "\\Z", "\\A", "(?:a|b)", "(a)",
     "\\1", "x{0,2}", "(?i)", "A", "\\W?+", "\\s*+", "[^a]{1,2}+", "s", "K", "i", "I",
     "\u0131", "\u00e9", "\\(", "\\."]
)  # fmt: skip
# Beside plain letters, those `re.IGNORECASE` folds onto ASCII ones (the long s, the Kelvin
# sign, dotted and dotless i) and others it does not (e, e acute, a dot).
_FIELDS = st.one_of(
    st.none(),
    st.text(st.sampled_from("abxA \nsKiI.(\u017f\u212a\u0130\u0131\u00e9\u00c9"), max_size=12),
)


@settings(max_examples=300, deadline=None)
@example("^(?<!\\n)a", [("b\na", None)], False)  # a lookbehind sees the line before
@example("a(?!\\n)", [("a\nb", None)], False)  # a lookahead sees the line after
@example("\\Ab", [("a", None), ("b", None)], False)  # \A sees the records before
@example("a\\W?+$", [("a\nb", None)], False)  # a possessive ? keeps the line feed it took
@given(
    st.lists(_TOKENS, max_size=6).map("".join),
    st.lists(st.tuples(_FIELDS, _FIELDS), max_size=8),
    st.booleans(),
)
def test_the_records_tried_are_every_record_a_line_of_which_matches(
    source: str, fields: list[tuple[str | None, str | None]], ignore_case: bool
) -> None:
    """What the search cache keeps of a record gives back each field's lines, and one
    search over every record's lines joined never misses a record a line of which matches
    alone, whatever the pattern (lookarounds, anchors, groups that cross lines)."""
    try:
        pattern = compile_pattern(source, ignore_case, fixed=False)
    except RefusedError:
        return
    values = [
        searched("checkpoint", {"author": "A", "body": body, "session": session})
        for body, session in fields
    ]
    tried = set(candidates(pattern, values))
    for n, ((body, session), value) in enumerate(zip(fields, values, strict=True)):
        lines = {
            key: [n for n, line in enumerate(text.split("\n"), 1) if pattern.search(line)]
            for key, text in (("body", body), ("session", session))
            if text is not None
        }
        found = matched_fields(pattern, "checkpoint", value)
        assert {f.field: [line.number for line in f.lines] for f in found} == {
            key: numbers for key, numbers in lines.items() if numbers
        }
        marked = matched_fields(pattern, "checkpoint", value, marks=True)
        for field in marked:  # where each match lies, as `finditer` finds them
            for line in field.lines:
                spans = [m.span() for m in pattern.finditer(line.text) if m.end() > m.start()]
                assert list(line.spans) == spans, (source, line.text)
        if found:
            assert n in tried, (source, value)


def test_no_records_yet_and_no_repository(repo: Repo, tmp_path: Path) -> None:
    assert (repo.run("grep", "x").code, repo.run("grep", "x").out) == (1, "")
    empty = json.loads(repo.run("grep", "--json", "x").out)
    assert empty == {
        "pattern": "x", "rev": repo.head(), "task": None, "records": [], "invalid": 0, "hidden": 0
    }  # fmt: skip
    repo.task()
    assert repo.run("grep", "acks under").code == 0
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    result = repo.run("-C", str(outside), "grep", "x")
    assert (result.code, result.out, len(result.err.splitlines())) == (3, "", 1)


def test_a_fixed_string_folded_matches_where_ignore_case_does() -> None:
    """`-i` with an ASCII pattern that names one fixed string is matched with `str.find`
    on text `folded`: for every code point, a character matches an ASCII one under
    `re.IGNORECASE` exactly when its fold is that character's fold, and folds to one
    character (a match is at the same place in a line and in its fold)."""
    everything = "".join(chr(c) for c in range(0x80, 0x110000) if not 0xD800 <= c < 0xE000)
    folds = folded(everything)
    assert len(folds) == len(everything)
    for code in range(0x80):
        letter = chr(code)
        pattern = re.compile(re.escape(letter), re.IGNORECASE)
        by_re = [m.start() for m in pattern.finditer(everything)]
        by_find = [m.start() for m in re.finditer(re.escape(letter.lower()), folds)]
        assert by_find == by_re, letter
    assert needle_of(compile_pattern("Ack\\(\\)", True, False)) == ("ack()", True)
    assert needle_of(compile_pattern("\u00c9t\u00e9", True, False)) is None  # not ASCII: `re`
    assert needle_of(compile_pattern("a.c", False, False)) is None
    assert needle_of(compile_pattern("a.c", False, True)) == ("a.c", False)
    assert needle_of(compile_pattern("\\d", False, False)) is None


def test_a_search_cache_of_another_layout_or_cut_short_is_read_afresh(
    repo: Repo, tmp_path: Path
) -> None:
    """A search cache file another release wrote, one cut anywhere, garbage (a length
    larger than the file), or JSON texts that are not UTF-8: ignored, the answer as from
    no cache, the file rewritten."""
    repo.task()
    assert repo.run("checkpoint", "a needle in the body\nand a Needle again").code == 0
    assert repo.run("checkpoint", "no such thing").code == 0
    want = {argv: repo.run("grep", *argv).out for argv in (("needle",), ("--json", "-i", "NEEDLE"))}
    common = repo.path / repo.git("rev-parse", "--git-common-dir").strip()
    path = common / SEARCH_FILE_NAME
    whole = path.read_bytes()
    spoiled = [
        b"",
        b"\xff" * 64,
        whole[:7],
        whole[:100],
        whole[: len(whole) // 2],
        whole[:-1],
        b"\x00" * 8 + whole[8:],
        (2**62).to_bytes(8, "little") + whole[8:],
        whole[:-1] + b"\xff",  # the last JSON text's last byte
    ]
    for n, data in enumerate(spoiled):
        for argv, out in want.items():
            path.write_bytes(data)
            result = repo.run("grep", *argv)
            assert (result.out, result.err, result.code) == (out, "", 0), (n, argv)
            assert repo.run("grep", *argv).out == out  # from the file written again


_HOSTILE = st.text(st.sampled_from('ab"\\\n\t\x7f\u202e\u00e9 {}[],:'), max_size=8)
_KEYS = st.sampled_from(["body", "session", "title", "author", "state", "next", "objective",
                         "id", "v", 'body": ', "author\n"])  # fmt: skip
_VALUES = st.recursive(
    st.one_of(_HOSTILE, st.integers(), st.booleans(), st.floats(allow_nan=False)),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(_KEYS | _HOSTILE, inner, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(KEPT)), st.dictionaries(_KEYS, _VALUES, max_size=6))
def test_what_is_searched_of_a_json_text_is_what_its_decoding_gives(
    kind: str, table: dict[str, Any]
) -> None:
    """A first search reads each record's searched members from its JSON text alone: the
    same as the record decoded whole, whatever its strings hold (quotes, escapes, line
    feeds, a member's name), and nested values never taken for the record's own."""
    text = items([{"kind": kind, **table}], ITEM).removesuffix(ITEM + "}")
    assert searched_text(kind, text) == searched(kind, json.loads(text + "}"))


def test_the_json_texts_kept_outlive_a_record_added(repo: Repo) -> None:
    """Every record the search cache keeps has its JSON text kept too, after a record is
    added and searched: a warm `grep --json` reads no other cache, and answers what a
    search from no cache at all does."""
    repo.task()
    for n in range(3):
        assert repo.run("checkpoint", f"needle {n}").code == 0
    first = repo.run("grep", "--json", "needle").out
    assert repo.run("checkpoint", "needle 3").code == 0
    repo.commit("later")
    assert repo.run("checkpoint", "needle 4").code == 0
    for argv in (("needle",), ("--json", "needle")):
        repo.run("grep", *argv)
        common = repo.path / repo.git("rev-parse", "--git-common-dir").strip()
        cache = SearchCache(common / SEARCH_FILE_NAME)
        texts = cache.texts(DocumentCache.version())
        assert all(texts[key] is not None for key in cache.records)
        cache.close()
    warm = repo.run("grep", "--json", "needle").out
    assert warm != first and "needle 4" in warm
    repo.drop_caches()
    assert repo.run("grep", "--json", "needle").out == warm


def test_json_texts_of_many_bytes_a_character_are_cut_where_each_record_ends(repo: Repo) -> None:
    """The search cache keeps the JSON texts as UTF-8, end to end: a warm `grep --json`
    of records holding two-, three- and four-byte characters answers as a search from no
    cache does, record by record."""
    repo.task("d\u00e9j\u00e0 vu \u65e5\u672c")
    bodies = ["needle \u00e9t\u00e9", "needle \U0001f600 then \u65e5", "needle plain", "none"]
    for body in bodies:
        assert repo.run("checkpoint", body).code == 0
    repo.commit("later")
    assert repo.run("checkpoint", "needle \U0001f9ea last").code == 0
    first = repo.run("grep", "--json", "needle")
    warm = [repo.run("grep", "--json", "needle") for _ in range(2)]
    repo.drop_caches()
    cold = repo.run("grep", "--json", "needle")
    assert (cold.code, cold.err) == (0, "")
    assert first.out == warm[0].out == warm[1].out == cold.out
    shown = json.loads(cold.out)["records"]
    assert [r["body"] for r in shown] == [
        "needle \U0001f9ea last", "needle plain", "needle \U0001f600 then \u65e5",
        "needle \u00e9t\u00e9",
    ]  # fmt: skip
