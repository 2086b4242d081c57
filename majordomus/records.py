"""The record model: text validation, records as TOML tables, notes parsed and written.

Knows nothing of git: a note is bytes in, text out.
"""

from __future__ import annotations

import dataclasses
import datetime
import re
import sys
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from majordomus.errors import RefusedError

FORMAT_VERSION = 1
KINDS = ("task", "checkpoint", "handover", "resume")
TEXT_CEILING = 2000  # no text field of any record may exceed this, whatever the profile
NOTE_MAX_BYTES = 1 << 20  # a note blob larger than this is not parsed at all
NESTING_MAX = 32  # a record needs three levels; a deeper note is not read
LABELS = ("current", "advanced", "behind", "diverged", "unrelated", "missing", "unknown")
HANDOVER_FIELDS = ("objective", "state", "next")

# Fields each kind must carry beside the common ones, all of them text.
KIND_TEXT: Mapping[str, tuple[str, ...]] = {
    "task": ("title",),
    "checkpoint": ("body",),
    "handover": HANDOVER_FIELDS,
    "resume": (),
}
COMMON_ORDER = ("v", "id", "task", "head", "at", "author", "session")

_HEX40 = re.compile(r"[0-9a-f]{40}")
# Ids are plain or the record is invalid: a note's ids reach commands and agents'
# context, so nothing but these forms is ever taken for one.
TASK_ID = re.compile(r"t-[0-9a-f]{12}")
RECORD_ID = re.compile(r"[a-z]-[0-9a-z]{1,64}")
# The refused set, as a regex character range: control characters (category Cc, C1
# included) other than newline and tab; the invisible ones: format characters (category
# Cf: bidi overrides and isolates, zero-width spaces, word joiners, soft hyphen, U+FEFF,
# the tag characters U+E0000-U+E007F) but the zero-width non-joiner and joiner (U+200C,
# U+200D, which emoji sequences and several scripts need), the line and paragraph
# separators, and private-use characters. Input holding one is refused; display escapes
# every one; the TOML writer escapes them too. Cf as listed by Unicode 14 (Python 3.11's
# unicodedata); a test holds the list to unicodedata's.
REFUSED_RANGE = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f\xad"
    "\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e"
    "\u200b\u200e\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f"
    "\ue000-\uf8ff\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e007f"
    "\U000f0000-\U000ffffd\U00100000-\U0010fffd"
)
REFUSED = re.compile(f"[{REFUSED_RANGE}]")
# What this release takes for a valid record, named: part of every cache file's version,
# so that a summary cached under other rules is never served.
RULES = "ids:task=t-hex12,id=a-z0-9{1,64} refused:cc,cf-zwnj-zwj,zl,zp,co"


def is_refused_char(char: str) -> bool:
    """Control characters other than newline and tab, and bidi overrides/isolates."""
    return REFUSED.match(char) is not None


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


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """One valid record of a known kind; `table` holds every stored key, unknown ones too."""

    kind: str
    id: str
    task: str
    head: str
    at: datetime.datetime
    author: str
    table: Mapping[str, Any] = dataclasses.field(compare=False, repr=False)

    @property
    def session(self) -> str | None:
        value = self.table.get("session")
        return value if isinstance(value, str) else None

    def text(self, key: str) -> str:
        value = self.table[key]
        assert isinstance(value, str)
        return value

    def optional_int(self, key: str) -> int | None:
        value = self.table.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def supersedes(self) -> tuple[str, ...]:
        value = self.table.get("supersedes", ())
        return tuple(v for v in value if isinstance(v, str))

    # Optional facts stored at write time for `adopt` (a malformed one is ignored, never
    # fatal: the record stays valid, the fact is simply not known).

    @property
    def patch(self) -> str | None:
        """The stable patch id of the commit the record was written on."""
        return _hex40_or_none(self.table.get("patch"))

    @property
    def branch_patch(self) -> str | None:
        """A handover's: the patch id of the whole branch it closes."""
        return _hex40_or_none(self.table.get("branch_patch"))

    @property
    def branch_commits(self) -> tuple[str, ...]:
        """A handover's: the commits of the branch it closes, since its merge base."""
        value = self.table.get("branch_commits", ())
        if not isinstance(value, list):
            return ()
        return tuple(v for v in value if _hex40_or_none(v) is not None)


def _hex40_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and _HEX40.fullmatch(value) else None


def new_record(
    kind: str,
    *,
    record_id: str,
    task: str,
    head: str,
    at: datetime.datetime,
    author: str,
    session: str | None,
    fields: Mapping[str, Any],
) -> Record:
    """A new record with its table in canonical key order; `at` kept to whole seconds, UTC."""
    at = at.astimezone(datetime.UTC).replace(microsecond=0)
    table: dict[str, Any] = {
        "v": FORMAT_VERSION,
        "id": record_id,
        "task": task,
        "head": head,
        "at": at,
        "author": author,
    }
    if session is not None:
        table["session"] = session
    table.update(fields)
    record = _validate(kind, table)
    assert record is not None, f"new {kind} record does not validate: {table}"
    return record


def _is_task_id(value: object) -> bool:
    return isinstance(value, str) and TASK_ID.fullmatch(value) is not None


def _is_record_id(value: object) -> bool:
    return isinstance(value, str) and RECORD_ID.fullmatch(value) is not None


def _is_text(value: object) -> bool:
    return isinstance(value, str) and 0 < len(value) <= TEXT_CEILING


def _in_utc_range(at: datetime.datetime) -> bool:
    """Whether `at` can be shown in UTC: 0001-01-01T00:00+01:00 cannot."""
    if at.tzinfo is datetime.UTC:
        return True  # already is (what every note majordomus writes holds)
    try:
        at.astimezone(datetime.UTC)
    except OverflowError:
        return False
    return True


def _validate(kind: str, table: Mapping[str, Any]) -> Record | None:
    """The record a table of a known kind describes, or None when it is invalid."""
    get = table.get
    version, head, at = get("v"), get("head"), get("at")
    common_ok = (
        type(version) is int
        and version == FORMAT_VERSION
        and _is_record_id(get("id"))
        and _is_task_id(get("task"))
        and isinstance(head, str)
        and len(head) == 40
        and not head.strip("0123456789abcdef")  # 40 lowercase hex digits
        and isinstance(at, datetime.datetime)
        and at.tzinfo is not None
        and _in_utc_range(at)
        and _is_text(get("author"))
        and ("session" not in table or _is_text(table["session"]))
    )
    if not common_ok:
        return None
    for key in KIND_TEXT[kind]:
        if not _is_text(get(key)):
            return None
    if kind == "resume" and not _valid_resume(table):
        return None
    return validated_record(kind, table)


def validated_record(kind: str, table: Mapping[str, Any]) -> Record:
    """The record of a table known to be valid (checked here, or by this release before
    it kept the table in a cache)."""
    return Record(
        kind=kind,
        id=table["id"],
        task=table["task"],
        head=table["head"],
        at=table["at"],
        author=table["author"],
        table=table,
    )


def _valid_resume(table: Mapping[str, Any]) -> bool:
    counts_ok = all(
        key not in table or (type(table[key]) is int and table[key] >= 0)
        for key in ("ahead", "behind")
    )
    supersedes = table.get("supersedes", [])
    return (
        _is_record_id(table.get("handover"))
        and table.get("label") in LABELS
        and counts_ok
        and isinstance(supersedes, list)
        and all(_is_record_id(item) for item in supersedes)
    )


class Entry(NamedTuple):
    """One table of an array of tables in a note: a record, an invalid one, or an unknown kind."""

    kind: str
    table: Mapping[str, Any]
    record: Record | None  # set for a valid record of a known kind

    @property
    def key(self) -> tuple[str, str]:
        """Identity for de-duplication: the id where one can be trusted, else exact content."""
        ident = self.table.get("id")
        if isinstance(ident, str) and (self.record is not None or self.kind not in KINDS):
            # The kind too: a foreign table that reuses a record's id must not replace it.
            return (f"{self.kind} id", ident)
        return ("content", dump_tables([(self.kind, self.table)]))

    @property
    def invalid(self) -> bool:
        return self.kind in KINDS and self.record is None


class Note(NamedTuple):
    """A parsed note: its entries in order, and any plain top-level keys a foreign writer left.

    A note that is not valid TOML as a whole (edited by hand) is `salvaged`: its
    tables that parse on their own are its entries, and the text that does not
    parse is kept, part by part, in `unreadable`.
    """

    entries: tuple[Entry, ...]
    other: Mapping[str, Any]
    invalid_plain: int  # known kinds stored as something other than an array of tables
    unreadable: tuple[bytes, ...] = ()  # the parts of a salvaged note that do not parse
    salvaged: bool = False

    @property
    def records(self) -> tuple[Record, ...]:
        if len(self.entries) == 1:  # most notes: asked once per record shown
            record = self.entries[0].record
            return () if record is None else (record,)
        return tuple(entry.record for entry in self.entries if entry.record is not None)

    @property
    def invalid(self) -> int:
        return (
            self.invalid_plain
            + len(self.unreadable)
            + sum(1 for entry in self.entries if entry.invalid)
        )


class Summary(NamedTuple):
    """What reads need to index one record without its text: small, and cheap to cache.

    A NamedTuple rather than a dataclass: tens of thousands are rebuilt from the
    read cache on every command, and a tuple is four times cheaper to make.
    """

    kind: str
    id: str
    task: str
    at: float  # POSIX seconds
    position: int  # among the note's valid records
    handover: str  # the handover a resume resolves; "" for other kinds
    supersedes: tuple[str, ...]


def summary_of(record: Record, position: int) -> Summary:
    # Kinds and task ids repeat across every note (100,000 summaries share a few dozen):
    # interned, they are one object each, and marshal writes each once per cache file.
    return Summary(
        kind=sys.intern(record.kind),
        id=record.id,
        task=sys.intern(record.task),
        at=record.at.timestamp(),
        position=position,
        handover=record.text("handover") if record.kind == "resume" else "",
        supersedes=record.supersedes,
    )


Shown = Callable[[Note], bool]  # the notes a command shows whole after a read of every note


def every_note(note: Note) -> bool:
    return True


def notes_of_tasks(prefix: str) -> Shown:
    """The notes holding a record of a task whose id starts with `prefix`."""

    def holds(note: Note) -> bool:
        for entry in note.entries:
            task = entry.table.get("task")
            if isinstance(task, str) and task.startswith(prefix):
                return True
        return False

    return holds


def summarise(note: Note) -> tuple[Summary, ...]:
    return tuple(summary_of(record, position) for position, record in enumerate(note.records))


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


def parse_note(data: bytes) -> Note:
    """The note a blob holds; a note that is not TOML as a whole is salvaged table by table."""
    try:
        return note_from_document(load_document(data))
    except NotTomlError:
        return salvage(data)


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
_WRITTEN_LINE = re.compile(
    r"\[\[([A-Za-z0-9_-]+)\]\]"
    r"|([A-Za-z0-9_-]+) = "
    rf'(?:"({_STR})"'
    rf"|({_INT})"
    r"|([0-9]{4})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
    r"T([01][0-9]|2[0-3]):([0-5][0-9]):([0-5][0-9])(?:\.([0-9]{1,6})[0-9]*)?Z"
    rf'|\[((?:"{_STR}"(?:, "{_STR}")*)?)\])'
)
_WRITTEN_ITEM = re.compile(f'"({_STR})"')
_WRITTEN_STR = re.compile(_STR)
_WRITTEN_DATE = re.compile(
    r"[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])"
    r"T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z"
)  # the date-times of the line pattern without a fraction: what majordomus writes
_WRITTEN_ESCAPE = re.compile(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))")
# No line of the subset holds one of these anywhere (a tab only inside a string).
_OUTSIDE_WRITTEN = re.compile("[\x00-\x08\x0b-\x1f\x7f]")
_ESCAPED = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\"}


class _NotWritten(Exception):
    """A note outside the subset `_written_document` reads: tomllib reads it."""


# Inline values as `_literal` writes them, for tables of other tools (`jobs = [{ name =
# "unit", seconds = 31.5 }]`): basic strings, integers, decimal fractions, booleans,
# arrays and inline tables of them, spaced as written. A value is followed by the end,
# or by what may follow it inside an array or table.
_WRITTEN_SCALAR = re.compile(
    rf'"({_STR})"|({_INT})(\.[0-9]+)?(?=$|[,\]}} ])|(true|false)(?=$|[,\]}} ])'
)
_WRITTEN_KEY = re.compile(r"([A-Za-z0-9_-]+) = ")
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


def _is_bare(key: str) -> bool:
    """Whether a key or a kind is a TOML bare key."""
    return (key.isascii() and key.isalnum()) or _BARE_KEY.fullmatch(key) is not None


def _written_document(text: str) -> dict[str, Any] | None:
    """The document of a note in the subset majordomus writes, or None for tomllib to read."""
    if _OUTSIDE_WRITTEN.search(text) is not None:
        return None  # a control character (CR included) no line of the subset holds
    document: dict[str, Any] = {}
    table: dict[str, Any] | None = None
    match_line = _WRITTEN_LINE.fullmatch
    try:
        for line in text.split("\n"):
            if not line:
                continue
            # Nearly every line is a header or `key = ` a basic string, a small integer or
            # a date-time without a fraction: read with string methods and small patterns,
            # giving the answer the line pattern gives (no control character but tab is
            # anywhere, as checked above). Other lines go to the line pattern.
            key, equals, rest = line.partition(" = ")
            if (
                equals
                and table is not None
                and key not in table
                and ((key.isascii() and key.isalnum()) or _is_bare(key))  # no call, mostly
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
            elif line[:2] == "[[" and line[-2:] == "]]" and _is_bare(line[2:-2]):
                table = {}
                document.setdefault(line[2:-2], []).append(table)
                continue
            found = match_line(line)
            if found is None:
                if line[:3] == '[["' and line[-3:] == '"]]':
                    # A kind that is no bare key, quoted as `_key` writes it.
                    quoted = line[3:-3]
                    if _WRITTEN_STR.fullmatch(quoted) is None:
                        return None
                    table = {}
                    document.setdefault(_written_string(quoted), []).append(table)
                    continue
                # Another tool's value written inline (`_literal`): arrays and tables.
                if not equals or table is None or key in table or not _is_bare(key):
                    return None
                inline, end = _written_value(rest, 0, 1)
                if end != len(rest):
                    return None
                table[key] = inline
                continue
            header, key, string, integer, year = found.group(1, 2, 3, 4, 5)
            if header is not None:
                table = {}
                document.setdefault(header, []).append(table)
                continue
            if table is None or key in table:  # a top-level key, or one given twice
                return None
            value: Any
            if string is not None:
                value = _written_string(string)
            elif integer is not None:
                value = int(integer)
            elif year is not None:
                month, day, hour, minute, second, micros = found.group(6, 7, 8, 9, 10, 11)
                value = datetime.datetime(
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
                items = found.group(12)
                value = [_written_string(item) for item in _WRITTEN_ITEM.findall(items)]
            table[key] = value
    except (_NotWritten, ValueError):  # a date that does not exist, a lone surrogate
        return None
    return document


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
_HEADER = re.compile(
    r"""[ \t]*\[\[?[ \t]*(?:[A-Za-z0-9_-]+|"[^"\\]*"|'[^']*')[ \t]*\]\]?[ \t]*(?:#.*)?\r?"""
)
_KEY_START = re.compile(r"""[ \t]*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')[ \t]*[=.]""")
_ERROR_LINE = re.compile(r"\(at line (\d+), column \d+\)")
_PREFIX_TRIES = 24  # parses spent looking for the readable start of one table


def salvage(data: bytes) -> Note:
    """Every table of a note that is not TOML as a whole, read on its own.

    A table runs from its header to the next header, or to the first line that
    cannot belong to it (text appended by `git notes append`, a line broken by
    `git notes edit`); the text from there to the next header is one unreadable
    part. A table cut short that is no longer a valid record counts once, as that
    unreadable part.
    """
    lines: list[str | None] = []
    for raw in data.split(b"\n"):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            lines.append(None)  # a line that is not UTF-8 belongs to no table
    starts = [i for i, line in enumerate(lines) if line is not None and _HEADER.fullmatch(line)]
    bounds = list(zip([0, *starts], [*starts, len(lines)], strict=True))
    entries: list[Entry] = []
    other: dict[str, Any] = {}
    invalid_plain = 0
    unreadable: list[bytes] = []
    raw_lines = data.split(b"\n")
    for start, end in bounds:
        if start == end:
            continue
        document, used = _readable_prefix(lines[start:end])
        rest = b"\n".join(raw_lines[start + used : end])
        broken = bool(rest.strip())
        note = note_from_document(document) if document else Note((), {}, 0)
        if broken and note.entries and all(entry.invalid for entry in note.entries):
            note = Note((), note.other, note.invalid_plain)  # counted once, as the part below
        entries.extend(note.entries)
        for key, value in note.other.items():
            if key not in other:
                other[key] = value
                invalid_plain += key in KINDS
        if broken:
            unreadable.append(rest.strip(b"\n"))
    return Note(tuple(entries), other, invalid_plain, tuple(unreadable), salvaged=True)


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


def note_from_document(document: Mapping[str, Any]) -> Note:
    entries: list[Entry] = []
    other: dict[str, Any] = {}
    invalid_plain = 0
    for kind, value in document.items():
        if isinstance(value, list) and value and all(isinstance(t, dict) for t in value):
            for table in value:
                record = _validate(kind, table) if kind in KINDS else None
                entries.append(Entry(kind, table, record))
        else:
            other[kind] = value
            invalid_plain += kind in KINDS
    return Note(tuple(entries), other, invalid_plain)


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
    '"': '\\"',
    "\\": "\\\\",
}
# Escaped in every string majordomus writes: what TOML requires, plus C1 controls
# and bidi overrides, so that `git log --notes` never prints them raw.
_STRING_ESCAPE = re.compile(f'["\\\\\t\n{REFUSED_RANGE}]')


def _string(text: str) -> str:
    def escape(match: re.Match[str]) -> str:
        char = match.group()
        code = ord(char)
        return _ESCAPES.get(char) or (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")

    return '"' + _STRING_ESCAPE.sub(escape, text) + '"'


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _literal(value: Any) -> str:
    """One TOML value, inline: nested tables become inline tables, so every
    record stays a single `[[kind]]` table that can be concatenated safely."""
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, datetime.datetime) and value.utcoffset() == datetime.timedelta(0):
        fraction = f".{value.microsecond:06d}".rstrip("0") if value.microsecond else ""
        # isoformat, not strftime: %Y drops leading zeros (year 999 -> "999", not TOML).
        return value.replace(microsecond=0, tzinfo=None).isoformat() + fraction + "Z"
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, Mapping):
        items = ", ".join(f"{_key(k)} = {_literal(v)}" for k, v in value.items())
        return "{ " + items + " }" if items else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_literal(item) for item in value) + "]"
    # Numbers, booleans, local dates and times: tomli-w knows their TOML spelling. (Loaded
    # here, by a write: a read never needs it.)
    import tomli_w

    return tomli_w.dumps({"v": value}).partition(" = ")[2].rstrip("\n")


def dump_tables(tables: Iterable[tuple[str, Mapping[str, Any]]]) -> str:
    """Each table as its own `[[kind]]` block, keys in their stored order."""
    blocks = []
    for kind, table in tables:
        lines = [f"[[{_key(kind)}]]"]
        lines += [f"{_key(key)} = {_literal(value)}" for key, value in table.items()]
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def dump_note(note: Note) -> str:
    body = dump_tables((entry.kind, entry.table) for entry in note.entries)
    if not note.other:
        return body
    # Plain keys must come before any table header to stay top-level.
    plain = "".join(f"{_key(key)} = {_literal(value)}\n" for key, value in note.other.items())
    return plain + "\n" + body


def union(notes: Sequence[Note]) -> Note:
    """Union by record identity: every entry of every note, each once, first copy kept."""
    if len(notes) == 1 and not notes[0].salvaged:
        note = notes[0]  # the common case: one note, each record once
        first = note.entries
        if len(first) < 2 or len({entry.key for entry in first}) == len(first):
            return note
    seen: set[tuple[str, str]] = set()
    entries: list[Entry] = []
    other: dict[str, Any] = {}
    invalid_plain = 0
    unreadable: dict[bytes, None] = {}  # one part in two copies of a note is one part
    for note in notes:
        for entry in note.entries:
            if entry.key not in seen:
                seen.add(entry.key)
                entries.append(entry)
        for key, value in note.other.items():
            if key not in other:
                other[key] = value
                invalid_plain += key in KINDS
        unreadable.update(dict.fromkeys(note.unreadable))
    salvaged = any(note.salvaged for note in notes)
    return Note(tuple(entries), other, invalid_plain, tuple(unreadable), salvaged)


def append_note(existing: bytes | None, records: Sequence[Record]) -> bytes:
    """The note with `records` appended after the existing bytes, which are kept byte for byte.

    A note that is not valid TOML as a whole takes them too: every table in it
    stays as readable as it was. Raises NoteError when the result would not read
    back every record the note held plus the new ones (a note too large or too
    deep to parse): a write never destroys what it cannot read.
    """
    return appended(existing, records)[0]


def appended(
    existing: bytes | None, records: Sequence[Record], before: Note | None = None
) -> tuple[bytes, Note]:
    """`append_note`, and the note it makes as read back; `before`: the existing note as
    parsed already (each parse of a note of many records costs)."""
    addition = dump_tables((record.kind, record.table) for record in records).encode("utf-8")
    if not existing:
        return addition, parse_note(addition)
    if before is None:
        before = parse_note(existing)
    data = existing + (b"\n" if existing.endswith(b"\n") else b"\n\n") + addition
    try:
        after = parse_note(data)
    except NoteError as error:
        raise NoteError(f"the existing note cannot take more records ({error})") from None
    kept = {entry.key for entry in after.entries}
    lost = [entry for entry in before.entries if entry.record and entry.key not in kept]
    written = {(record.kind, record.id) for record in after.records}
    if lost or not all((record.kind, record.id) in written for record in records):
        raise NoteError("the existing note cannot take more records and stay readable")
    return data, after


SKEW_TOLERANCE_S = 60  # clocks a minute apart are ordinary; further ahead is skew


def age_s(now: datetime.datetime, then: datetime.datetime) -> int:
    return max(0, int((now - then).total_seconds()))


def skew_s(now: datetime.datetime, then: datetime.datetime) -> int | None:
    """How far `then` lies ahead of `now`, when that is more than clocks normally drift:
    a record from a clock that runs fast, whose age cannot be known."""
    ahead = int((then - now).total_seconds())
    return ahead if ahead > SKEW_TOLERANCE_S else None
