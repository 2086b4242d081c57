"""Text that looks like a secret is refused before it reaches a permanent, pushed note."""

from __future__ import annotations

import pytest

from majordomus.secret import find_secret
from tests.conftest import Repo

# Built by concatenation so that this file itself holds no token-shaped string.
SAMPLES = {
    "a private key block": "-----BEGIN OPENSSH " + "PRIVATE KEY-----\nb3BlbnNzaC1rZXk=",
    "an AWS access key id": "AKIA" + "IOSFODNN7EXAMPLE",
    "an AWS secret access key": "aws_secret_access_key = "
    + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "a GitHub token": "ghp_" + "a" * 36,
    "a GitLab token": "glpat-" + "x" * 20,
    "a Slack token": "xoxb-" + "1234567890-abcdef",
    "a Stripe live key": "sk_live_" + "0" * 24,
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
