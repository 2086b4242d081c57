"""A note's bytes read as a TOML document: within the size and depth limits, the subset
majordomus writes read fast, anything else by tomllib, a note that is not TOML as a whole
cut into the tables that read on their own. Knows nothing of records or of git."""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, cast

NOTE_MAX_BYTES = 1 << 20  # a note blob larger than this is not parsed at all
NESTING_MAX = 32  # a record needs three levels; a deeper note is not read


class NoteError(ValueError):
    """A note that cannot be read at all: too large, nested too deeply, not TOML."""


class MissingObjectError(NoteError):
    """A note object (blob or tree) that is not in this clone: a partial clone left it out,
    or whoever published the notes never sent it. Never cached: a fetch can bring it."""

    def __init__(self, object_id: str) -> None:
        super().__init__(f"note object {object_id[:12]} is missing; not read")
        self.object_id = object_id


class NotTomlError(NoteError):
    """A note that is not valid TOML (or not UTF-8) as a whole: its tables may still be read."""


class _OnFirstUse:
    """A pattern compiled when a parse first uses it: a read its caches answer parses no
    note, and compiling these a command costs 2.5 ms. Once compiled, each of the
    pattern's methods is this object's own attribute: a call costs what it costs on the
    compiled pattern."""

    def __init__(self, pattern: str) -> None:
        self._source = pattern

    def __getattr__(self, name: str) -> Any:
        compiled = re.compile(self._source)
        for method in ("match", "fullmatch", "search", "sub", "finditer", "findall"):
            setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)


def _pattern(source: str) -> re.Pattern[str]:
    return cast("re.Pattern[str]", _OnFirstUse(source))


def load_document(data: bytes) -> dict[str, Any]:
    """The TOML document of a note blob, or NoteError."""
    if len(data) > NOTE_MAX_BYTES:
        raise NoteError(f"note is {len(data)} bytes, over the 1 MiB limit; not parsed")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise NotTomlError(f"note is not UTF-8 text ({error.reason})") from None
    document = _written_document(text)
    if document is not None:
        return document
    import tomllib  # here: only a note outside the subset majordomus writes pays for it

    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise NotTomlError(f"note is not valid TOML ({error})") from None
    except RecursionError:
        raise NoteError("note is nested too deeply to parse") from None
    except ValueError as error:  # an integer too long for int(), say
        raise NoteError(f"note cannot be read ({error})") from None
    if _too_deep(document, NESTING_MAX):
        # Parsed, but whoever re-serialises or renders it would overflow the stack.
        raise NoteError(f"note is nested more than {NESTING_MAX} levels deep; not read")
    return document


# The TOML that majordomus and `git notes append` of its output write: `[[kind]]` headers,
# `key = value` lines with a basic string, an integer, a UTC date-time or an array of
# strings, and blank lines. Read here about ten times faster than tomllib; anything else
# (comments, other spellings, other value types) goes to tomllib, so every document read
# here is exactly the one tomllib returns.
# A basic string's text, written as plain runs between escapes (the same strings as
# `(?:plain|escape)*`, matched without trying both branches at every character).
_PLAIN = r'[^"\\\x00-\x08\x0a-\x1f\x7f]*'
_INT = r"-?(?:0|[1-9][0-9]{0,17})"  # an integer, under 2**63 whatever its digits
_STR = rf'{_PLAIN}(?:\\(?:["\\bfnrt]|u[0-9A-Fa-f]{{4}}|U[0-9A-Fa-f]{{8}}){_PLAIN})*'
_WRITTEN_LINE = _pattern(
    r"\[\[([A-Za-z0-9_-]+)\]\]"
    r"|([A-Za-z0-9_-]+) = "
    rf'(?:"({_STR})"'
    rf"|({_INT})"
    r"|([0-9]{4})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9])(?:\.([0-9]{1,6})[0-9]*)?Z"
    rf'|\[((?:"{_STR}"(?:, "{_STR}")*)?)\])'
)
_WRITTEN_ITEM = _pattern(f'"({_STR})"')
_WRITTEN_STR = _pattern(_STR)
_WRITTEN_DATE = _pattern(
    r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z"
)  # the date-times of the line pattern without a fraction: what majordomus writes
_WRITTEN_ESCAPE = _pattern(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))")
# No line of the subset holds one of these anywhere (a tab only inside a string).
_OUTSIDE_WRITTEN = _pattern("[\x00-\x08\x0b-\x1f\x7f]")
_ESCAPED = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\"}


class _NotWritten(Exception):
    """A note outside the subset `_written_document` reads: tomllib reads it."""


# Inline values as `notes.dump_tables` writes them, for tables of other tools (`jobs =
# [{ name = "unit", seconds = 31.5 }]`): basic strings, integers, decimal fractions,
# booleans, arrays and inline tables of them, spaced as written. A value is followed by the end,
# or by what may follow it inside an array or table.
_WRITTEN_SCALAR = _pattern(
    rf'"({_STR})"|({_INT})(\.[0-9]+)?(?=$|[,\]}} ])|(true|false)(?=$|[,\]}} ])'
)
_WRITTEN_KEY = _pattern(r"([A-Za-z0-9_-]+) = ")
_INLINE_DEPTH = 4  # deeper inline values go to tomllib (which also says how deep is too deep)


def _written_run(text: str, at: int, closer: str, read: Callable[[int], int]) -> int:
    """Items `read` from `at` on, each followed by `, ` or by `closer`: where they end."""
    while True:
        at = read(at)
        if text[at : at + 2] == ", ":
            at += 2
        elif text.startswith(closer, at):
            return at + len(closer)
        else:
            raise _NotWritten


def _written_value(text: str, at: int, depth: int) -> tuple[Any, int]:
    """The inline value at `at` and where it ends; _NotWritten outside the subset."""
    if depth > _INLINE_DEPTH:
        raise _NotWritten
    first = text[at : at + 1]
    if first == "[":
        items: list[Any] = []
        if text[at + 1 : at + 2] == "]":
            return items, at + 2

        def item(at: int) -> int:
            value, at = _written_value(text, at, depth + 1)
            items.append(value)
            return at

        return items, _written_run(text, at + 1, "]", item)
    if first == "{":
        table: dict[str, Any] = {}
        if text[at : at + 2] == "{}":
            return table, at + 2
        if text[at : at + 2] != "{ ":
            raise _NotWritten

        def pair(at: int) -> int:
            key = _WRITTEN_KEY.match(text, at)
            if key is None or key.group(1) in table:
                raise _NotWritten
            table[key.group(1)], at = _written_value(text, key.end(), depth + 1)
            return at

        return table, _written_run(text, at + 2, " }", pair)
    found = _WRITTEN_SCALAR.match(text, at)
    if found is None:
        raise _NotWritten
    string, integer, fraction, boolean = found.group(1, 2, 3, 4)
    if string is not None:
        value: Any = _written_string(string)
    elif integer is not None:
        value = float(integer + fraction) if fraction else int(integer)
    else:
        value = boolean == "true"
    return value, found.end()


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1) or match.group(2)
    if code is None:
        return _ESCAPED[match.group(3)]
    value = int(code, 16)
    if 0xD800 <= value <= 0xDFFF or value > 0x10FFFF:  # not a Unicode scalar value
        raise _NotWritten
    return chr(value)


def _written_string(raw: str) -> str:
    return _WRITTEN_ESCAPE.sub(_unescape, raw) if "\\" in raw else raw


_BARE_KEY = _pattern(r"[A-Za-z0-9_-]+")


def is_bare(key: str) -> bool:
    """Whether a key or a kind is a TOML bare key."""
    return (key.isascii() and key.isalnum()) or _BARE_KEY.fullmatch(key) is not None


def _written_document(text: str) -> dict[str, Any] | None:
    """The document of a note in the subset majordomus writes, or None for tomllib to read."""
    if _OUTSIDE_WRITTEN.search(text) is not None:
        return None  # a control character (CR included) no line of the subset holds
    document: dict[str, Any] = {}
    table: dict[str, Any] | None = None
    try:
        for line in text.split("\n"):
            if not line:
                continue
            # Nearly every line is a header or `key = ` a basic string, a small integer or
            # a date-time without a fraction: read with string methods and small patterns,
            # giving the answer the line pattern gives (no control character but tab is
            # anywhere, as checked above). Other lines go to `_written_line`.
            key, equals, rest = line.partition(" = ")
            if (
                equals
                and table is not None
                and key not in table
                and ((key.isascii() and key.isalnum()) or is_bare(key))  # no call, mostly
            ):
                if len(rest) > 1 and rest[0] == '"' and rest[-1] == '"':
                    string = rest[1:-1]
                    if '"' not in string and "\\" not in string:
                        table[key] = string
                        continue
                    if _WRITTEN_STR.fullmatch(string) is not None:
                        table[key] = _written_string(string)
                        continue
                elif rest.isascii() and rest.isdigit() and len(rest) < 19 and rest[0] != "0":
                    table[key] = int(rest)
                    continue
                elif len(rest) == 20 and _WRITTEN_DATE.fullmatch(rest) is not None:
                    table[key] = datetime.datetime.fromisoformat(rest)
                    continue
            elif line[:2] == "[[" and line[-2:] == "]]" and is_bare(line[2:-2]):
                table = {}
                document.setdefault(line[2:-2], []).append(table)
                continue
            table = _written_line(line, document, table)
    except (_NotWritten, ValueError):  # a date that does not exist, a lone surrogate
        return None
    return document


def _written_line(
    line: str, document: dict[str, Any], table: dict[str, Any] | None
) -> dict[str, Any]:
    """A line read by the line pattern into `document`: the table the next lines go into."""
    found = _WRITTEN_LINE.fullmatch(line)
    if found is None:
        return _written_quoted_kind_or_inline(line, document, table)
    header, key = found.group(1, 2)
    if header is not None:
        table = {}
        document.setdefault(header, []).append(table)
        return table
    if table is None or key in table:  # a top-level key, or one given twice
        raise _NotWritten
    string, integer, year = found.group(3, 4, 5)
    if string is not None:
        table[key] = _written_string(string)
    elif integer is not None:
        table[key] = int(integer)
    elif year is not None:
        month, day, hour, minute, second, micros = found.group(6, 7, 8, 9, 10, 11)
        table[key] = datetime.datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second),
            int(micros.ljust(6, "0")) if micros else 0,
            tzinfo=datetime.UTC,
        )
    else:
        table[key] = [_written_string(item) for item in _WRITTEN_ITEM.findall(found.group(12))]
    return table


def _written_quoted_kind_or_inline(
    line: str, document: dict[str, Any], table: dict[str, Any] | None
) -> dict[str, Any]:
    """A line outside the line pattern: a header of a kind that is no bare key, quoted as
    `notes.dump_tables` writes it, or another tool's value written inline."""
    if line[:3] == '[["' and line[-3:] == '"]]':
        quoted = line[3:-3]
        if _WRITTEN_STR.fullmatch(quoted) is None:
            raise _NotWritten
        table = {}
        document.setdefault(_written_string(quoted), []).append(table)
        return table
    key, equals, rest = line.partition(" = ")
    if not equals or table is None or key in table or not is_bare(key):
        raise _NotWritten
    inline, end = _written_value(rest, 0, 1)
    if end != len(rest):
        raise _NotWritten
    table[key] = inline
    return table


def _too_deep(document: Mapping[str, Any], limit: int) -> bool:
    stack: list[tuple[object, int]] = [(document, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(value, dict):
            stack.extend((item, depth + 1) for item in value.values())
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
    return False


# A table header that starts a table of its own: `[[kind]]` or `[name]`, one plain or
# quoted key (a dotted header such as `[checkpoint.detail]` continues the table above).
_HEADER = _pattern(
    r"""[ \t]*\[\[?[ \t]*(?:[A-Za-z0-9_-]+|"[^"\\]*"|'[^']*')[ \t]*\]\]?[ \t]*(?:#.*)?\r?"""
)
_KEY_START = _pattern(r"""[ \t]*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')[ \t]*[=.]""")
_ERROR_LINE = _pattern(r"\(at line (\d+), column \d+\)")
_PREFIX_TRIES = 24  # parses spent looking for the readable start of one table


def readable_tables(data: bytes) -> Iterator[tuple[dict[str, Any], bytes]]:
    """Each table of a note that is not TOML as a whole, read on its own: the document of
    its longest start that reads ({} when none does), and the text after that start.

    A table runs from its header to the next header, or to the first line that
    cannot belong to it (text appended by `git notes append`, a line broken by
    `git notes edit`); the text from there to the next header does not read.
    """
    lines: list[str | None] = []
    for raw in data.split(b"\n"):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            lines.append(None)  # a line that is not UTF-8 belongs to no table
    starts = [i for i, line in enumerate(lines) if line is not None and _HEADER.fullmatch(line)]
    raw_lines = data.split(b"\n")
    for start, end in zip([0, *starts], [*starts, len(lines)], strict=True):
        if start == end:
            continue
        document, used = _readable_prefix(lines[start:end])
        yield document, b"\n".join(raw_lines[start + used : end])


def _readable_prefix(lines: Sequence[str | None]) -> tuple[dict[str, Any], int]:
    """The longest start of `lines` (found in a few parses) that is a TOML document on its
    own, and how many lines it takes."""
    import tomllib  # here, as in load_document: only notes edited by hand pay for it

    count = next((i for i, line in enumerate(lines) if line is None), len(lines))
    step = 1
    for _ in range(_PREFIX_TRIES):
        while count and not (lines[count - 1] or "").strip():
            count -= 1
        if not count:
            break
        try:
            document = tomllib.loads("\n".join(line or "" for line in lines[:count]))
        except tomllib.TOMLDecodeError as error:
            found = _ERROR_LINE.search(str(error))
            if found is not None:
                count = min(int(found.group(1)) - 1, count - 1)
                continue
            # Something opened and never closed (a string, an array): cut before the
            # last line that starts a key, else step back further each time.
            opener = next(
                (i for i in range(count - 1, 0, -1) if _KEY_START.match(lines[i] or "")), None
            )
            if opener is not None:
                count = opener
            else:
                count = max(0, count - step)
                step *= 2
            continue
        except (ValueError, RecursionError):
            count = max(0, count - step)
            step *= 2
            continue
        if _too_deep(document, NESTING_MAX):
            break
        return document, count
    return {}, 0
