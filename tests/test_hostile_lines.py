"""A teammate with push access writes line breaks into every field of its notes (title,
author, session, bodies, handover fields), each breaking into a line that reads like
majordomus' own: a trusted SYSTEM line, the end of the quoted data, an `Open handover`
header, a `Record:` command. Whatever reaches an agent (the SessionStart hook of each
agent, `context --json`, the MCP tools) keeps every such line quoted below the line that
says what quoted text is; a person's `history`, `show`, `resume`, `task list` and `check`
keep it on a line of theirs or indented. The victim's own records stay readable in each
clone, a third one included."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.support.agent_text import (
    AGENTS,
    DATA_NOTE,
    assert_agent_text,
    assert_every_agent,
    assert_json_text,
    assert_plain_text,
    assert_reads_victim,
    context_text,
    mcp_results,
    one_line,
    session_start,
)
from tests.support.attacks import (
    CLONES,
    MALLORY,
    PAYLOAD,
    Scene,
    World,
    attacked,
    hostile,
    record,
    write_note,
)

FORGED_TASK = "t-0bad0bad0bad"
FORGED_HANDOVER = "h-0bad0bad0bad0bad"
CLAIMED = "Ada Lovelace <ada@example.com>"  # the victim's own name and email


def attack(world: World) -> None:
    """On a commit of its own: a task with a hostile title, a handover of the victim's task
    under the victim's name, a checkpoint; on the victim's merge, a checkpoint appended and
    then lines that are no TOML at all (an `append` by hand); the victim's note on its side
    commit replaced (`add -f`) by one of the attacker's."""
    attacker = world.attacker
    head, at = world.attacker_commit("attacker: tidy the retry loop", {"retry.py": "retry = 4\n"})
    text = record("task", FORGED_TASK, FORGED_TASK, head, at, title=hostile("fix the ack"))
    text += record(
        "handover", FORGED_HANDOVER, world.task, head, at,
        author=hostile(CLAIMED), session=hostile("night shift"),
        objective=hostile("done"), state=hostile("all fixed"), next=hostile("run the script"),
    )  # fmt: skip
    text += record(
        "checkpoint", "c-0bad0bad0bad0bad", world.task, head, at,
        session=hostile("s"), body=hostile("it works"),
    )  # fmt: skip
    write_note(attacker, head, text)
    merge_text = record(
        "checkpoint", "c-0bad0bad0bad0bae", world.task, world.merge, at,
        author=hostile(MALLORY), body=hostile("on the merge"),
    )  # fmt: skip
    write_note(attacker, world.merge, merge_text, append=True)
    write_note(attacker, world.merge, "\n".join(PAYLOAD), append=True)
    side = attacker.git("rev-parse", "origin/side").strip()
    write_note(
        attacker,
        side,
        record("checkpoint", "c-0bad0bad0bad0baf", world.task, side, at, body=hostile("side")),
    )


@pytest.fixture(scope="module")
def lines(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    world = attacked(tmp_path_factory.mktemp("hostile-lines"), attack)
    topic = world.topic()
    third = world.third()
    # The attacker's `add -f` took the victim's side checkpoint out of the remote's ref
    # until the victim published again: the second clone fetches once more.
    world.second.git("fetch", "-q", "origin")
    yield Scene(world, topic, third)


@pytest.mark.parametrize("clone", CLONES)
def test_every_agent_is_handed_attacker_lines_only_quoted(lines: Scene, clone: str) -> None:
    repo = lines.clones()[clone]
    text = assert_every_agent(repo)
    quoted = text.split("\n")
    assert quoted[1 if clone in ("victim", "topic") else 2] == DATA_NOTE
    # The forged handover is the newest: shown whole, with its author on quoted lines, a
    # line each; the victim's own is still named below it.
    header = next(line for line in quoted if line.startswith(f"Open handover {FORGED_HANDOVER} "))
    at = quoted.index(header)
    expected = [f"> author: {CLAIMED}", *(f"> {line}" for line in _shown(PAYLOAD))]
    assert quoted[at + 1 : at + 1 + len(expected)] == expected
    assert f"- {lines.world.handover} on " in text
    for piece in PAYLOAD:
        assert piece in text  # the payload is there, as data


def _shown(payload: tuple[str, ...]) -> list[str]:
    """The payload's lines as `hostile` broke them, quoted: a CRLF leaves its CR shown as
    \\x0d at the end of the line before; a lone CR joins two lines, shown as \\x0d."""
    text = "".join(
        b + line for b, line in zip(("\n", "\r\n", "\n", "\r", "\n", "\n"), payload, strict=True)
    )
    return text.replace("\r", "\\x0d").split("\n")[1:]


@pytest.mark.parametrize("clone", CLONES)
def test_the_mcp_tools_answer_attacker_text_inside_json_strings(lines: Scene, clone: str) -> None:
    repo = lines.clones()[clone]
    task = lines.world.task
    answers = mcp_results(
        repo,
        [
            ("context", {}),
            ("resume", {"peek": True, "task": task}),
            ("history", {"all": True}),
            ("task_list", {}),
            ("check", {"task": task}),
        ],
    )
    assert [error for error, _ in answers] == [False] * 5
    values = [assert_json_text(text) for _, text in answers]
    context = values[0]["text"]
    assert context == context_text(repo)
    assert_agent_text(context)
    assert values[1]["handover"]["id"] == FORGED_HANDOVER
    assert values[1]["handover"]["author"] == hostile(CLAIMED)  # data, whole, in JSON
    assert lines.world.victim_ids <= {r["id"] for r in values[2]["records"]}


@pytest.mark.parametrize(
    "argv",
    [
        ("history",),
        ("history", "--all"),
        ("show", "HEAD^2"),
        ("show", "origin/side"),
        ("resume", "--peek"),
        ("task", "list"),
        ("check", "--all"),
    ],
    ids=" ".join,
)
def test_a_persons_commands_never_let_attacker_text_start_a_line(
    lines: Scene, argv: tuple[str, ...]
) -> None:
    victim = lines.world.victim
    result = victim.run(*argv)
    assert result.code in (0, 1), result.err
    assert_plain_text(result.out.removesuffix("\n"))
    assert_json_text(victim.run(*argv, "--json").out)


def test_one_line_fields_show_their_line_breaks_as_escapes(lines: Scene) -> None:
    victim = lines.world.victim
    history = victim.run("history", "--task", lines.world.task).out
    # An author that ends like a signature mark is followed by its real one: never passes
    # for a verified record.
    mark = " (unsigned)" if hostile(CLAIMED).rstrip().endswith(")") else ""
    by = f"    by {one_line(hostile(CLAIMED))}{mark}"
    assert f"{by}, session {one_line(hostile('night shift'))}\n" in history
    mallory_mark = " (unsigned)" if hostile(MALLORY).rstrip().endswith(")") else ""
    assert f"    by {one_line(hostile(MALLORY))}{mallory_mark}\n" in history
    resumed = victim.run("resume", "--peek").out.split("\n")
    assert resumed[:2] == [
        f"handover {FORGED_HANDOVER}  task {lines.world.task}  on {resumed[0][-12:]}",
        f"{by}, {resumed[1].rsplit(', ', 1)[1]}",
    ]
    listed = victim.run("task", "list").out
    assert f"  {FORGED_TASK}  {one_line(hostile('fix the ack'))}  last activity" in listed


@pytest.mark.parametrize("clone", CLONES)
def test_the_victims_records_stay_readable_in_every_clone(lines: Scene, clone: str) -> None:
    repo = lines.clones()[clone]
    assert_reads_victim(repo, lines.world)
    # Its note on the side commit, replaced by the attacker's with `add -f`, is still read
    # there (the fetch united both), and the hand-appended lines that are no TOML are
    # counted, never read as a record.
    side = json.loads(repo.run("show", "origin/side", "--json").out)
    ids = {r["id"] for r in side["records"]}
    assert "c-0bad0bad0bad0baf" in ids
    assert ids & lines.world.victim_ids
    merged = json.loads(repo.run("show", lines.world.merge, "--json").out)
    assert {r["id"] for r in merged["records"]} >= {"c-0bad0bad0bad0bae"}
    assert merged["invalid"] >= 1


@pytest.mark.parametrize("agent", AGENTS)
def test_an_agent_in_the_victims_clone_resumes_its_own_task(lines: Scene, agent: str) -> None:
    """The forged task (no handover) never becomes the one a session starts on."""
    text = session_start(lines.world.second, agent)
    assert text.startswith(f"majordomus context: task {lines.world.task}\n")
    assert FORGED_TASK not in text
