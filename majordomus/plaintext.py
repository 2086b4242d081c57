"""Plain text as majordomus writes it, in every output: text from a note fit for a terminal
(the refused set shown as escapes, no line of its own), ages, intervals, counted nouns."""

from __future__ import annotations

import re

from majordomus.records import REFUSED, Signature


def _escape_text(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def safe(text: str) -> str:
    """Text from a note, fit for a terminal: the refused set shown as escapes."""
    if text.isprintable():
        return text  # the set is all control and format characters: none is printable
    return REFUSED.sub(_escape_text, text)


def one_line(text: str) -> str:
    """Text from a note shown inside a line of ours (an author, a session, a title): `safe`,
    with a line break shown as `\\n`, so that no note can start a line of its own."""
    return safe(text).replace("\n", "\\n")


_MARKS = {
    "verified": " (verified)",
    "bad": " (BAD SIGNATURE)",
    "unknown-key": " (unknown key)",
    "unsigned": " (unsigned)",
}


def signature_mark(signature: Signature | None, author: str = "") -> str:
    """What follows a record's author in text: its signature status. An unsigned record is
    marked under `trust = "signed"`, and wherever its author ends like a mark would (an
    author of "Ada (verified)" must not pass for a verified one)."""
    if signature is None:
        return ""
    if signature.marked or author.rstrip().endswith(")"):
        return _MARKS[signature.status]
    return ""


def age(seconds: int | None) -> str:
    """A short human age: 45s, 12m 03s, 3h 05m, 2d 04h."""
    if seconds is None:
        return "never"
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours:02d}h"


def ago(seconds: int | None, skew: int | None = None) -> str:
    """An age as a sentence says it, or the flag for a record dated in the future."""
    if skew is not None:
        return f"in the future by {age(skew)} (clock skew?)"
    return f"{age(seconds)} ago"


def interval(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [
        f"{hours}h" if hours else "",
        f"{minutes}m" if minutes else "",
        f"{secs}s" if secs else "",
    ]
    return "".join(parts) or "0s"


def counted(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def skipped(invalid: int) -> list[str]:
    """The line counting the notes or records a read skipped as invalid, if it skipped any."""
    if not invalid:
        return []
    return [f"({invalid} invalid notes or records skipped; majordomus doctor lists them)"]
