"""Hypothesis strategies for records, notes, TOML documents and profile files.

The properties that use them live in `properties.py`, so the fast tests and the
soak run the same checks with different budgets.
"""

from __future__ import annotations

import datetime
from typing import Any

import tomli_w
from hypothesis import strategies as st

from majordomus.fieldtext import normalise_text
from majordomus.notes import Entry, Note, note_from_document
from majordomus.records import KINDS, LABELS, Record, new_record
from tests.support.corpus import PROFILES, corpus

BIDI = "".join(chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A)))
HEX = "0123456789abcdef"

# Any text Python can hold as UTF-8: every code point but the lone surrogates.
any_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=60)

# Text a writer may store: what `clean_text` accepts (no controls but newline and
# tab, no invisible characters but the two joiners), normalised as it is stored.
storable_text = (
    st.text(
        st.characters(exclude_categories=["Cs", "Cc", "Cf", "Zl", "Zp", "Co"])
        | st.sampled_from("\n\t\r\n  \u200c\u200d"),
        min_size=1,
        max_size=80,
    )
    .map(lambda raw: normalise_text(raw.replace("\r", "")))
    .filter(bool)
)

ids = st.text(HEX, min_size=4, max_size=16)
# Task ids as the format has them, from a small pool so that records share tasks.
task_ids = st.text(HEX, min_size=1, max_size=2).map(lambda digits: "t-" + digits.rjust(12, "0"))
heads = st.text(HEX, min_size=40, max_size=40)
whole_seconds = st.datetimes(
    min_value=datetime.datetime(1970, 1, 2), max_value=datetime.datetime(2200, 1, 1)
).map(lambda d: d.replace(microsecond=0, tzinfo=datetime.UTC))

offsets = st.integers(-23 * 60 - 59, 23 * 60 + 59).map(
    lambda minutes: datetime.timezone(datetime.timedelta(minutes=minutes))
)
# Date-times at the edges: out of range once moved to UTC, or before year 1000.
edge_datetimes = st.sampled_from(
    [
        datetime.datetime(1, 1, 1, tzinfo=datetime.timezone(datetime.timedelta(hours=1))),
        datetime.datetime(
            9999, 12, 31, 23, 59, 59, tzinfo=datetime.timezone(-datetime.timedelta(hours=1))
        ),
        datetime.datetime(999, 12, 31, 23, 59, 59, 5, tzinfo=datetime.UTC),
        datetime.datetime(1, 1, 1),
    ]
)
toml_scalars = st.one_of(
    edge_datetimes,
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    any_text,
    st.datetimes(timezones=st.none() | st.just(datetime.UTC) | offsets),
    st.dates(),
    st.times(),
)
toml_keys = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
toml_values = st.recursive(
    toml_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(toml_keys, inner, max_size=4),
    max_leaves=6,
)


@st.composite
def records(draw: st.DrawFn, kind: str | None = None) -> Record:
    """A valid record, with text from anywhere in Unicode a writer may store."""
    kind = kind or draw(st.sampled_from(["task", "checkpoint", "handover", "resume"]))
    fields: dict[str, Any]
    if kind == "task":
        fields = {"title": draw(storable_text)}
    elif kind == "checkpoint":
        fields = {"body": draw(storable_text)}
    elif kind == "handover":
        fields = {key: draw(storable_text) for key in ("objective", "state", "next")}
    else:
        fields = {"handover": "h-" + draw(ids), "label": draw(st.sampled_from(LABELS))}
        for key in ("ahead", "behind"):
            if draw(st.booleans()):
                fields[key] = draw(st.integers(0, 10**6))
        fields["supersedes"] = draw(st.lists(ids.map(lambda i: "h-" + i), max_size=3))
    if draw(st.integers(0, 3)) == 0:
        fields["x-" + draw(st.text("abc", min_size=1, max_size=3))] = draw(toml_values)
    return new_record(
        kind,
        record_id=f"{kind[0]}-{draw(ids)}",
        task=draw(task_ids),
        head=draw(heads),
        at=draw(whole_seconds),
        author=draw(storable_text),
        session=draw(st.none() | storable_text),
        fields=fields,
    )


def entry_of(kind: str, table: dict[str, Any]) -> Entry:
    return note_from_document({kind: [table]}).entries[0]


@st.composite
def foreign_entries(draw: st.DrawFn) -> Entry:
    """What other writers leave: unknown kinds, with or without an id, and invalid records."""
    table = draw(st.dictionaries(toml_keys, toml_values, max_size=4))
    if draw(st.booleans()):
        table["id"] = draw(st.sampled_from("chrtx")) + "-" + draw(ids)  # may clash with a record
        return entry_of(draw(st.sampled_from(["flag", "review", "x"])), table)
    broken = dict(draw(records()).table)
    broken.pop(draw(st.sampled_from(sorted(broken))))
    return entry_of(draw(st.sampled_from(["checkpoint", "task"])), broken)


entries = st.one_of(records().map(lambda r: entry_of(r.kind, dict(r.table))), foreign_entries())


@st.composite
def notes(draw: st.DrawFn, pool: list[Entry] | None = None) -> Note:
    """A note: entries drawn from `pool` (ids then name one content) or made fresh."""
    source = st.sampled_from(pool) if pool else entries
    chosen = draw(st.lists(source, max_size=5))
    other: dict[str, Any] = {}
    if draw(st.integers(0, 4)) == 0:
        key = draw(st.sampled_from(["flag", "checkpoint", "zz"]))
        other[key] = draw(toml_scalars | st.just([]))
    return Note(tuple(chosen), other, sum(1 for key in other if key in KINDS))


@st.composite
def note_families(draw: st.DrawFn) -> tuple[Note, Note, Note]:
    """Three notes over one pool of entries, as copies of one ref held by three clones."""
    pool = draw(st.lists(entries, min_size=1, max_size=6, unique_by=lambda e: e.key))
    return draw(notes(pool)), draw(notes(pool)), draw(notes(pool))


# ---- raw documents for the fuzzers --------------------------------------------------------


def _toml(document: dict[str, Any]) -> bytes:
    try:
        return tomli_w.dumps(document).encode("utf-8")
    except (TypeError, ValueError):
        return b"# not representable\n"


# Lines a fuzzer would take long to find by itself: the limits of TOML readers and
# of what is done with the values they return.
HOSTILE_LINES = [
    b"n = " + b"9" * 5000,
    b"n = -" + b"1" * 4400,
    b"deep = " + b"[" * 700 + b"]" * 700,
    b"deep = " + b"[" * 400 + b"1" + b"]" * 400,
    b"deep = " + b"{a=" * 300 + b"1" + b"}" * 300,
    b"at = 0001-01-01T00:00:00+01:00",
    b"at = 9999-12-31T23:59:59-01:00",
    b"at = 0999-12-31T23:59:59Z",
    b"at = 1979-05-27",
    b"at = 07:32:00",
    rb'body = "\u001b]8;;https://example.com\u0007link\u001b]8;;\u0007"',
    rb'body = "\u009b31m \u202e \u2066 \u200b"',
    b"body = '''\n[[checkpoint]]\n'''",
    b"v = 1.0",
    b"v = true",
    b"f = nan",
    b"f = -inf",
]


def _with_hostile_line(draw: st.DrawFn, data: bytes, lines: list[bytes]) -> bytes:
    """`data` with one of `lines` at the top (a plain key) or the end (in the last table)."""
    line = draw(st.sampled_from(lines))
    return line + b"\n" + data if draw(st.booleans()) else data + b"\n" + line + b"\n"


@st.composite
def note_documents(draw: st.DrawFn) -> bytes:
    """TOML shaped like a note, every field sometimes right and sometimes anything."""
    document: dict[str, Any] = {}
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["task", "checkpoint", "handover", "resume", "flag"]))
        tables = document.setdefault(kind, [])
        table = dict(draw(records()).table) if draw(st.integers(0, 3)) else {}
        change = draw(st.sampled_from(["none", "none", "edge date-time", "replace"]))
        if change == "edge date-time":
            table["at"] = draw(edge_datetimes)
        elif change == "replace":
            choices = st.sampled_from([*table, "id", "at", "v", "label"])
            for key in draw(st.lists(choices, min_size=1, max_size=2)):
                table[key] = draw(toml_values)
        tables.append(table)
    if draw(st.integers(0, 3)) == 0:
        document[draw(toml_keys)] = draw(toml_values)
    data = _toml(document)
    if draw(st.booleans()):
        data = _with_hostile_line(draw, data, HOSTILE_LINES)
    return data


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[bytes]) -> bytes:
    """A document with a few bytes flipped, cut or spliced in."""
    data = bytearray(draw(base))
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(data)))
        action = draw(st.sampled_from(["insert", "delete", "flip"]))
        if action == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=4) | st.sampled_from(SPLICES))
        elif data and at < len(data):
            if action == "delete":
                del data[at : at + draw(st.integers(1, 8))]
            else:
                data[at] ^= 1 << draw(st.integers(0, 7))
    return bytes(data)


# Fragments that stress a TOML reader when spliced in anywhere.
SPLICES = [
    b"[[checkpoint]]\n",
    b'"""',
    b"'''",
    b"\\u0000",
    b"\\U0010FFFF",
    b"\x1b[31m",
    b"\xc2\x9b",
    b"\xe2\x80\xae",
    b"\r\n",
    b"\x00",
    b"\xef\xbb\xbf",
]

# The seeds: every note of the corpus in fixtures/notes/, whole and mutated.
corpus_notes = st.sampled_from([note.data for note in corpus()])

raw_notes = st.one_of(
    st.binary(max_size=200),
    note_documents(),
    mutated(note_documents()),
    corpus_notes,
    mutated(corpus_notes),
)

PROFILE_VALUES: list[Any] = [
    "90s",
    "20m",
    "1h30m",
    "0",
    "-5",
    "\u00b2",  # a digit to str.isdigit, not to int()
    "\u0661\u0662",  # Arabic-Indic digits
    "1h1h",
    " 20m ",
    "9" * 5000,
    0,
    -1,
    2001,
    2**63 - 1,
    True,
    1.5,
]


@st.composite
def profile_documents(draw: st.DrawFn) -> bytes:
    """A sound profile file with one or two things wrong, or a hostile line added."""
    profiles: dict[str, Any] = {
        "default": {"interval": "20m", "checkpoint_max": 400, "handover_max": 800},
        "incident": {"interval": 300, "checkpoint_max": 280},
    }
    document: dict[str, Any] = {"profile": "default", "profiles": profiles}
    for _ in range(draw(st.integers(0, 2))):
        where = draw(st.sampled_from(["value", "profile", "stray", "table"]))
        value = draw(st.sampled_from(PROFILE_VALUES) | toml_values)
        if where == "value":
            name = draw(st.sampled_from(["default", "incident"]))
            key = draw(st.sampled_from(["interval", "checkpoint_max", "handover_max", "x"]))
            profiles[name][key] = value
        elif where == "profile":
            document["profile"] = draw(st.sampled_from(["incident", "nope", "bad name"]) | any_text)
        elif where == "stray":
            document[draw(toml_keys)] = value
        else:
            profiles[draw(toml_keys)] = value
    data = _toml(document)
    if draw(st.integers(0, 3)) == 0:
        data = _with_hostile_line(draw, data, HOSTILE_LINES[:5])
    return data


# The seeds: every profile file in fixtures/profiles/, whole and mutated.
profile_files = st.sampled_from([path.read_bytes() for path in sorted(PROFILES.glob("*/*.toml"))])

raw_profiles = st.one_of(
    st.binary(max_size=200),
    profile_documents(),
    mutated(profile_documents()),
    profile_files,
    mutated(profile_files),
)
