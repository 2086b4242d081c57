"""A text field as given, made the text a record keeps: normalised, refused whole (with the
reason) when it is empty, not UTF-8, holds a refused character or is over its cap."""

from __future__ import annotations

import unicodedata

from majordomus.errors import RefusedError
from majordomus.records import is_refused_char


def _is_control(char: str) -> bool:
    """The refused characters that steer a terminal: Cc, and the bidi overrides and isolates."""
    code = ord(char)
    return code < 0xA0 or 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069


def _is_edge_space(char: str) -> bool:
    # White space to strip at the edges; a control character that Python also
    # calls white space (\x1c..\x1f, \x85) is not stripped, it is refused.
    return char.isspace() and (char in "\t\n\r\x0b\x0c" or not is_refused_char(char))


def normalise_text(raw: str) -> str:
    """CRLF -> LF, NFC, edge white space stripped: the text as it is counted and stored."""
    text = unicodedata.normalize("NFC", raw.replace("\r\n", "\n"))
    start, end = 0, len(text)
    while start < end and _is_edge_space(text[start]):
        start += 1
    while end > start and _is_edge_space(text[end - 1]):
        end -= 1
    return text[start:end]


def clean_text(field: str, raw: str, cap: int) -> str:
    """Validate one text field against its cap; refuse, never truncate."""
    text = normalise_text(raw)
    if not text:
        raise RefusedError(f"{field} is empty; nothing was recorded.")
    for index, char in enumerate(text):
        if 0xD800 <= ord(char) <= 0xDFFF:
            # How Python hands over argv or environment bytes that are not UTF-8.
            raise RefusedError(
                f"{field} is not UTF-8 text (an undecodable byte at character {index + 1}); "
                "nothing was recorded."
            )
        if is_refused_char(char):
            what = "control" if _is_control(char) else "invisible"
            raise RefusedError(
                f"{field} contains the {what} character U+{ord(char):04X} at character "
                f"{index + 1}; nothing was recorded (remove it and try again)."
            )
    if len(text) > cap:
        raise RefusedError(
            f"{field} is {len(text)} characters, over the cap of {cap}; nothing was recorded "
            f"(shorten it: it is never truncated)."
        )
    return text
