"""The fast reader of the TOML subset majordomus writes returns exactly what tomllib returns,
and leaves everything else to tomllib."""

from __future__ import annotations

import datetime
import tomllib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from majordomus.notes import dump_tables
from majordomus.notetoml import _written_document, load_document
from tests.support.corpus import corpus

KEYS = st.sampled_from(["v", "id", "task", "head", "at", "body", "supersedes", "x-1", "A_b"])
TEXT = st.text(st.characters(codec="utf-8"), max_size=30)
AT = st.datetimes(
    min_value=datetime.datetime(1, 1, 1),
    max_value=datetime.datetime(9999, 12, 31),
    timezones=st.just(datetime.UTC),
)
NUMBER = st.one_of(
    st.integers(-(10**17), 10**17),
    st.floats(-1e9, 1e9).filter(lambda f: "e" not in repr(f)),  # tomli-w writes repr
    st.booleans(),
)
VALUE = st.one_of(
    TEXT,
    NUMBER,
    AT,
    st.lists(TEXT, max_size=3),
    # Other tools' tables, written inline: arrays of inline tables, tables of arrays.
    st.lists(st.dictionaries(KEYS, st.one_of(TEXT, NUMBER), max_size=3), max_size=3),
    st.dictionaries(KEYS, st.one_of(NUMBER, st.lists(NUMBER, max_size=2)), max_size=3),
)
KINDS = st.one_of(st.sampled_from(["task", "checkpoint", "handover", "resume", "other"]), TEXT)
TABLES = st.lists(
    st.tuples(KINDS,
              st.dictionaries(KEYS, VALUE, max_size=6)),
    max_size=4,
)  # fmt: skip


def tomllib_or_none(text: str) -> dict[str, Any] | None:
    try:
        return tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return None


@settings(max_examples=150, deadline=None)
@given(TABLES)
def test_what_majordomus_writes_is_read_fast_and_as_tomllib_reads_it(
    tables: list[tuple[str, dict[str, Any]]],
) -> None:
    text = dump_tables(tables)
    assert _written_document(text) == tomllib.loads(text)
    assert _written_document(text) is not None


# Lines near the subset's edges: other spellings, escapes, bad dates, comments, duplicates.
EDGE_LINES = (

        "[[checkpoint]]", "[[task]]", "[checkpoint]", "[[ checkpoint ]]", "", " ", "# note",
        'id = "c-1"', 'id = "c-2"', 'body = "a\\tb\\u00e9\\"q\\\\"', 'body = "\\ud800"',
        'body = "\\x41"', 'body = "tab\there"', 'body = "del\x7f"', "body = 'literal'",
        'body = """multi"""', "v = 1", "v = -0", "v = +1", "v = 1_000", "v = 0x1f",
        "v = 01", "v = 1.5", "v = true", "at = 2026-11-30T03:12:09Z",
        "at = 2026-02-30T03:12:09Z", "at = 2026-11-30T03:12:09.1234567Z",
        "at = 2026-11-30t03:12:09z", "at = 2026-11-30 03:12:09Z", "at = 2026-11-30T03:12:09",
        "at = 2026-11-30T03:12:09+01:00", "at = 0000-01-01T00:00:00Z",
        'supersedes = []', 'supersedes = ["a", "b"]', 'supersedes = ["a","b"]',
        'supersedes = ["a", 1]', "k=1", "k  = 1", 'id = "c-1" # trailing', "id = \"c\"\r",
        'a.b = "dotted"', '"quoted" = "key"',
        # The edges of the lines read without the pattern: plain strings, small integers
        # and headers.
        'body = "a = b"', 'body = "tab\tinside"', 'body = ""', 'body = "\\u0085c1\\u202e"',
        'body = "\x85raw c1\u202e"', 'body = "end\\"', 'body = "q"q"', 'body = "open',
        'body = "x" ', ' body = "x"', 'body  = "x"', 'body = "x"\t', '= "x"', 'x-1 = "v"',
        'A_b = "v"', '\u00e9 = "v"', 'k.k = "v"', 'v = 0', 'v = 00', 'v = 007', 'v = 10',
        "v = 123456789012345678", "v = 1234567890123456789", "v = -12", "v = \u0661",
        "v = \u00b2", "v = 1 ", "[[a-b]]", "[[A_1]]", "[[]]", '[["task"]]', "[[task]] ",
        "[[task]]x", "[[t\u00e9]]", "[[task]]]", "[[[task]]",
        # Strings with escapes, and date-times without a fraction.
        'body = "a\\nb"', 'body = "\\u00e9\\t"', 'body = "bad \\q"', 'body = "\\"in\\""',
        'body = "\\\\"', 'body = "x\\"', 'body = "\\u12"', 'body = "\\uD834\\uDD1E"',
        "at = 2024-02-29T23:59:59Z", "at = 2023-02-29T23:59:59Z", "at = 2026-11-30T24:00:00Z",
        "at = 2026-11-30T03:12:60Z", "at = 2026-1-30T03:12:09Z", "at = 9999-12-31T23:59:59Z",
        "at = 0001-01-01T00:00:00Z", "at = 2026-11-30T03:12:09.5Z",
        # Values written inline: decimals, booleans, arrays and inline tables, and the
        # spellings next to them.
        "v = 412.5", "v = -0.0", "v = 0.5", "v = 1.", "v = .5", "v = 01.5", "v = 1.5e3",
        "v = 1e3", "v = +1.5", "v = 1_0.5", "v = inf", "v = false", "v = True",
        "v = truex", 'v = [{ name = "stress", seconds = 412.5 }, { name = "unit", seconds = 31 }]',
        "v = [{}]", "v = []", "v = {}", "v = { }", "v = {a = 1}", "v = { a = 1 }",
        "v = { a = 1, a = 2 }", "v = { a = 1,b = 2 }", "v = { a = 1, }", 'v = { "a" = 1 }',
        "v = { a.b = 1 }", "v = { a = { b = { c = { d = { e = 1 } } } } }", "v = [[1, 2], []]",
        "v = [1,2]", "v = [1, 2,]", "v = [ 1 ]", "v = [true, 1, 1.5, \"x\"]",
        "v = [1, 2] # c", "v = { a = 1 } x", "v = { a = 2026-11-30T03:12:09Z }",
        "v = 1.5 ", "v = [1.5, -2.25]", "v = 12345678901234567890.5",
        # Kinds quoted, with escapes, and the spellings next to them.
        '[["kind\\u001b[2J"]]', '[["task"]]', '[[""]]', '[["a b"]]', '[["a"."b"]]',
        '[[ "a" ]]', '[["a\\"]]', '[["\\ud800"]]', "[['lit']]", '[["x"]] ', '[["tab\tin"]]',
        '[["a]]', '[[a"]]',
)  # fmt: skip
LINES = st.sampled_from(EDGE_LINES)


@settings(max_examples=800, deadline=None)
@given(st.lists(LINES, max_size=8))
def test_any_note_reads_as_tomllib_reads_it(lines: list[str]) -> None:
    text = "\n".join(lines)
    fast = _written_document(text)
    if fast is not None:
        assert fast == tomllib.loads(text)
    expected = tomllib_or_none(text)
    if expected is not None:
        assert load_document(text.encode()) == expected


def test_every_edge_line_under_a_header_reads_as_tomllib_reads_it() -> None:
    for first in EDGE_LINES:
        for second in ("", *EDGE_LINES):
            text = f"[[checkpoint]]\n{first}\n{second}\n"
            fast = _written_document(text)
            assert fast is None or fast == tomllib_or_none(text), text


def test_text_outside_the_subset_goes_to_tomllib() -> None:
    assert _written_document('[[checkpoint]]\nid = "c"\n# a comment\n') is None
    assert _written_document('top = "level"\n[[checkpoint]]\n') is None
    assert _written_document('[[checkpoint]]\nid = "a"\nid = "b"\n') is None
    assert _written_document('[[checkpoint]]\nbody = "\\udfff"\n') is None
    assert _written_document("[[checkpoint]]\nat = 2026-02-29T00:00:00Z\n") is None


def test_every_note_of_the_corpus_reads_as_tomllib_reads_it() -> None:
    """The hand-written and hostile notes (other tools' tables, quoted kinds with escapes,
    notes that are not TOML): read fast only as tomllib reads them, and most of them fast."""
    fast_read = 0
    for note in corpus():
        try:
            text = note.data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        fast = _written_document(text)
        if fast is not None:
            fast_read += 1
            assert fast == tomllib.loads(text), note.name
    assert fast_read >= len(corpus()) // 2
