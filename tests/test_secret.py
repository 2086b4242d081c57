"""Text that looks like a secret is refused before it reaches a permanent, pushed note."""

from __future__ import annotations

import json
import random
import re
import string
import tomllib
import uuid
from pathlib import Path
from typing import NamedTuple

import pytest

from majordomus.secret import find_secret
from tests.support.notes import stored_records
from tests.support.repo import Repo

# Built by concatenation so that this file itself holds no token-shaped string.
SAMPLES = {
    "a private key block": "-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3BlbnNzaC1rZXk=",
    "an AWS access key id": "AKIA" + "IOSFODNN7EXAMPLE",
    "an AWS secret access key": "aws_secret_access_key = "
    + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "a GitHub token": "ghp_" + "a" * 36,
    "a GitLab token": "glpat-" + "x" * 20,
    "a Slack token": "xoxb-" + "1234567890-abcdef",
    "a Stripe key": "sk_live_" + "0" * 24,
    "a Google API key": "AIza" + "B" * 35,
    "an Anthropic API key": "sk-ant-" + "api03-" + "z" * 30,
    "an OpenAI API key": "sk-proj-" + "q" * 40,
    "an npm token": "npm_" + "n" * 36,
    "a PyPI token": "pypi-AgEIcHlwaS5vcmc" + "p" * 50,
    "a JSON web token": "eyJhbGciOiJIUzI1NiJ9"
    + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0"
    + ".dozjgNryP4J3jVmNHl0w5N",
}


@pytest.mark.parametrize(("name", "secret"), SAMPLES.items())
def test_known_formats_are_found(name: str, secret: str) -> None:
    assert find_secret(f"token is {secret} here") == (name, 10)


@pytest.mark.parametrize(
    "text",
    [
        "the retry loop re-enters before the ack",
        "sha 8c31f0e2d4b7a9c1e0f3b5d7a2c4e6f8091a2b3c and AKIA in prose",
        "sk-1234 is a ticket number",
        "BEGIN PUBLIC KEY is fine",
    ],
)
def test_ordinary_text_passes(text: str) -> None:
    assert find_secret(text) is None


def test_a_secret_is_refused_and_never_printed_back(repo: Repo) -> None:
    repo.task()
    before = repo.notes_ref()
    token = SAMPLES["a GitHub token"]
    result = repo.run("checkpoint", f"used {token} to reproduce")
    assert (result.code, result.out) == (2, "")
    assert result.err == (
        "majordomus: checkpoint body looks like it contains a GitHub token (at character 6); "
        "notes are pushed and their history is permanent, so nothing was recorded: remove it, "
        "or pass --allow-secret if it is not a secret.\n"
    )
    assert token not in result.err
    assert repo.notes_ref() == before
    handover = repo.run("handover", "-o", "o", "-s", SAMPLES["an AWS access key id"], "-n", "n")
    assert (handover.code, handover.err) == (
        2,
        "majordomus: state looks like it contains an AWS access key id (at character 1); "
        "notes are pushed and their history is permanent, so nothing was recorded: remove it, "
        "or pass --allow-secret if it is not a secret.\n",
    )
    allowed = repo.run("checkpoint", "--allow-secret", f"used {token} to reproduce")
    assert allowed.code == 0, allowed.err


# ---- the corpus: realistic secrets and near misses (fixtures/secrets/) ----------------------

CORPUS = Path(__file__).parent.parent / "fixtures" / "secrets" / "corpus.toml"
_ALPHABETS = {
    "hex": "0123456789abcdef",
    "HEX": "0123456789ABCDEF",
    "alnum": string.ascii_letters + string.digits,
    "ALNUM": string.ascii_uppercase + string.digits,
    "alpha": string.ascii_letters,
    "lower": string.ascii_lowercase,
    "digits": string.digits,
    "b64": string.ascii_letters + string.digits + "+/",
    "b64url": string.ascii_letters + string.digits + "-_",
    "punct": string.ascii_letters + string.digits + "!@#%^&*(-_=+)",
}
_KINDS = "|".join(_ALPHABETS)
_PLACEHOLDER = re.compile(r"\{(?:(" + _KINDS + r"):(\d+)|uuid|PRIVATE)\}")


class CorpusItem(NamedTuple):
    label: str  # the secret's class, or why a near miss looks like one
    text: str


def filled(template: str) -> str:
    """The template with its placeholders filled from a generator seeded with its text."""
    rng = random.Random(template)

    def fill(match: re.Match[str]) -> str:
        kind, count = match.group(1), match.group(2)
        if kind is not None:
            return "".join(rng.choice(_ALPHABETS[kind]) for _ in range(int(count)))
        if match.group(0) == "{uuid}":
            return str(uuid.UUID(int=rng.getrandbits(128), version=4))
        return "PRIVATE"

    return _PLACEHOLDER.sub(fill, template)


def corpus(part: str) -> list[CorpusItem]:
    items = tomllib.loads(CORPUS.read_text("utf-8"))[part]
    label = "class" if part == "secret" else "why"
    return [CorpusItem(item[label], filled(item["text"])) for item in items]


def test_the_corpus_holds_only_shapes() -> None:
    """Every secret in the file is made by its placeholders: with them cut out, the
    scanner finds none, so the repository itself trips no secret scanner."""
    raw = _PLACEHOLDER.sub("", CORPUS.read_text("utf-8"))
    assert [line for line in raw.splitlines() if find_secret(line)] == []


def test_the_corpus_is_refused_and_its_near_misses_pass() -> None:
    secrets, near = corpus("secret"), corpus("near_miss")
    assert (len(secrets) >= 60, len(near) >= 40) == (True, True)
    missed = [item for item in secrets if find_secret(item.text) is None]
    flagged = [item for item in near if find_secret(item.text) is not None]
    refused = len(secrets) - len(missed)
    print(
        f"\nsecrets refused: {refused}/{len(secrets)} ({100 * refused / len(secrets):.1f}%); "
        f"near misses refused: {len(flagged)}/{len(near)}"
    )
    for item in missed:
        print(f"  missed ({item.label}): {item.text!r}")
    for item in flagged:
        print(f"  near miss refused ({item.label}): {item.text!r} -> {find_secret(item.text)}")
    assert refused >= 0.95 * len(secrets)
    assert len(flagged) <= 1


# ---- every field written, through the real command line -------------------------------------

REFUSAL_END = (
    "; notes are pushed and their history is permanent, so nothing was recorded: remove it, "
    "or pass --allow-secret if it is not a secret.\n"
)


def _sample(label: str) -> str:
    """The shortest corpus secret of that class (a session or title holds 200 characters)."""
    return min((item.text.strip() for item in corpus("secret") if item.label == label), key=len)


class Channel(NamedTuple):
    field: str  # as the refusal names it
    key: str  # as the record holds it
    argv: tuple[str, ...]  # {} stands for the secret
    via_environ: bool = False  # the secret goes in MAJORDOMUS_SESSION
    via_stdin: bool = False  # the secret goes to standard input (-F -)


CHANNELS = {
    "URL credentials": Channel("title", "title", ("task", "new", "{}")),
    "assignment": Channel("session", "session", ("task", "new", "a title", "--session", "{}")),
    "Slack webhook": Channel("session", "session", ("checkpoint", "--session", "{}", "probe")),
    "connection string": Channel("session", "session", ("checkpoint", "probe"), via_environ=True),
    "SendGrid key": Channel("next", "next", ("handover", "-o", "o", "-s", "s", "-n", "{}")),
    "Azure client secret": Channel(
        "checkpoint body", "body", ("checkpoint", "-F", "-"), via_stdin=True
    ),
    "Teams webhook": Channel("state", "state", ("handover", "-F", "-"), via_stdin=True),
}


def _invocation(
    channel: Channel, secret: str, allow: bool
) -> tuple[list[str], bytes, dict[str, str]]:
    argv = [arg.replace("{}", secret) for arg in channel.argv]
    if allow:
        argv.insert(2 if argv[0] == "task" else 1, "--allow-secret")
    text = secret
    if argv[0] == "handover":  # -F reads a TOML table: objective, state, next
        fields = {"objective": "find it", "state": secret, "next": "bisect"}
        text = "".join(f"{key} = {json.dumps(value)}\n" for key, value in fields.items())
    stdin = text.encode("utf-8") if channel.via_stdin else b""
    environ = {"MAJORDOMUS_SESSION": secret} if channel.via_environ else {}
    return argv, stdin, environ


@pytest.mark.parametrize("label", CHANNELS)
def test_every_field_written_is_scanned(repo: Repo, label: str) -> None:
    """A secret from the corpus in a title, a session (--session, MAJORDOMUS_SESSION), a
    handover field or text read with -F - is refused in one sentence that names the
    field and never the secret, with the notes ref untouched; --allow-secret records it."""
    channel, secret = CHANNELS[label], _sample(label)
    if channel.argv[:2] != ("task", "new"):
        repo.task()
    before = repo.notes_ref()
    argv, stdin, environ = _invocation(channel, secret, allow=False)
    refused = repo.run(*argv, stdin=stdin, environ=environ)
    assert (refused.code, refused.out) == (2, ""), refused.err
    head, _, tail = refused.err.partition(" (at character ")
    assert head.startswith(f"majordomus: {channel.field} looks like it contains "), head
    assert re.fullmatch(r"\d+\)" + re.escape(REFUSAL_END), tail), refused.err
    assert [word for word in secret.split() if len(word) > 6 and word in refused.err] == []
    assert repo.notes_ref() == before

    argv, stdin, environ = _invocation(channel, secret, allow=True)
    allowed = repo.run(*argv, stdin=stdin, environ=environ)
    assert allowed.code == 0, allowed.err
    tables = [stored.table for stored in stored_records(repo.path, repo.environ)]
    assert [key for table in tables for key, value in table.items() if value == secret] == [
        channel.key
    ]


@pytest.mark.parametrize("via_environ", [False, True])
def test_resume_refuses_a_secret_session_without_offering_a_flag_it_lacks(
    repo: Repo, via_environ: bool
) -> None:
    repo.task()
    assert repo.run("handover", "-o", "o", "-s", "s", "-n", "n").code == 0
    before = repo.notes_ref()
    secret = _sample("assignment")
    argv = ["resume"] if via_environ else ["resume", "--session", secret]
    environ = {"MAJORDOMUS_SESSION": secret} if via_environ else {}
    refused = repo.run(*argv, environ=environ)
    assert refused.code == 2 and refused.err.count("\n") == 1, refused.err
    assert refused.err.startswith("majordomus: session looks like it contains "), refused.err
    assert refused.err.endswith(": name the session otherwise.\n"), refused.err
    assert "--allow-secret" not in refused.err and repo.notes_ref() == before
    assert repo.run(*argv, "--peek", environ=environ).code == 0  # a peek writes nothing


def test_the_mcp_tools_refuse_what_the_commands_refuse(repo: Repo) -> None:
    """The MCP tools run the same commands: a corpus secret in a title, a checkpoint, a
    handover field or the server's MAJORDOMUS_SESSION is a tool error (exit 2) whose
    message never holds the secret, and the notes ref does not move."""
    import asyncio

    from mcp import Client
    from mcp.types import TextContent

    from majordomus import mcp_server
    from majordomus.__main__ import run

    repo.task()
    before = repo.notes_ref()
    webhook, assignment = _sample("Discord webhook"), _sample("assignment")
    calls = [
        ("task_new", {"title": _sample("Mailgun key")}, repo.environ, "title"),
        ("checkpoint", {"text": f"posted to {webhook}"}, repo.environ, "checkpoint body"),
        ("handover", {"objective": "o", "state": assignment, "next": "n"}, repo.environ, "state"),
        (
            "checkpoint",
            {"text": "probe"},
            {**repo.environ, "MAJORDOMUS_SESSION": _sample("Twilio key")},
            "session",
        ),
    ]

    async def call(tool: str, arguments: dict[str, str], environ: dict[str, str]) -> str:
        async with Client(mcp_server.server(str(repo.path), environ, run)) as client:
            result = await client.call_tool(tool, arguments)
        assert result.is_error is True
        (block,) = result.content
        assert isinstance(block, TextContent)
        return block.text

    for tool, arguments, environ, field in calls:
        first, detail = asyncio.run(call(tool, arguments, environ)).split("\n")
        message = json.loads(detail)
        assert message["exit"] == 2
        assert message["message"].startswith(f"{field} looks like it contains "), message
        assert message["message"].endswith(REFUSAL_END.strip()), message
        secrets = [*arguments.values(), environ.get("MAJORDOMUS_SESSION", "")]
        assert [s for s in secrets if len(s) > 6 and s in first + detail] == []
    assert repo.notes_ref() == before
