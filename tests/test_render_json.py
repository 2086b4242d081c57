"""`jsontext.dumps` writes exactly what `json.dumps(..., indent=2)` writes, escapes included."""

from __future__ import annotations

import datetime
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from majordomus import jsontext, render
from majordomus.documentcache import DocumentCache
from majordomus.jsontext import dumps, finite, json_default
from majordomus.plaintext import safe
from majordomus.records import REFUSED
from majordomus.render import _indent
from tests.support.env import Clock
from tests.support.repo import Repo, clone, seeded, worked

LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=12),
    st.datetimes(timezones=st.sampled_from([None, datetime.UTC])),
    st.dates(),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=6), inner, max_size=4),
    ),
    max_leaves=20,
)


def reference(value: Any) -> str:
    text = json.dumps(finite(value), ensure_ascii=False, indent=2, default=json_default)
    return REFUSED.sub(_json_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    """The refused character as the json module escapes it (a surrogate pair past the BMP)."""
    char = match.group()
    return f"\\u{ord(char):04x}" if char.isascii() else json.dumps(char)[1:-1]


@settings(max_examples=300, deadline=None)
@given(VALUES)
def test_dumps_writes_what_the_json_module_writes(value: Any) -> None:
    assert dumps(value) == reference(value)


def test_keys_that_are_not_strings_are_written_as_the_json_module_writes_them() -> None:
    value = {"records": [{1: "one", None: [], 2.5: {}}], "\x1b": "\x9b"}
    assert dumps(value) == reference(value)
    assert json.loads(dumps(value)) == {
        "records": [{"1": "one", "null": [], "2.5": {}}],
        "\x1b": "\x9b",
    }


ANY_TEXT = st.text(st.characters(codec="utf-8"), max_size=40) | st.text(
    st.sampled_from("a\n\t\x00\x1b\x7f\x85\x9f\xa0\u200b\u202a\u202e\u2066\u2069\u2028é"),
    max_size=12,
)


@settings(max_examples=400, deadline=None)
@given(ANY_TEXT)
def test_safe_escapes_every_character_of_the_refused_set_and_nothing_else(text: str) -> None:
    def escape(code: int) -> str:
        if code < 0x100:
            return f"\\x{code:02x}"
        return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"

    expected = "".join(escape(ord(c)) if REFUSED.match(c) else c for c in text)
    assert safe(text) == expected
    assert _indent(text, "  ") == "\n".join("  " + line for line in expected.split("\n"))


def test_delete_is_escaped_in_plain_ascii_output_as_in_any_other() -> None:
    for value in ({"body": "rm\x7f"}, ["\x7f"], {"\x7f": 1}, {"a": "\x7f\u202e"}, "\x1b\x7f"):
        assert dumps(value) == reference(value)
        assert "\x7f" not in dumps(value)


TRICKY = st.text(st.sampled_from('{}[],:\n "\\ab\x7f'), max_size=8)
FLAT = st.dictionaries(
    TRICKY,
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        TRICKY,
        st.just([]),
        st.lists(TRICKY, max_size=1),
    ),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(FLAT, FLAT, st.lists(FLAT, max_size=2), TRICKY), max_size=6))
def test_lists_of_flat_objects_are_written_as_the_json_module_writes_them(
    value: list[Any],
) -> None:
    """Records are written many at a time; braces, commas and newlines in their text and
    keys never look like the boundary between two of them."""
    assert dumps({"records": value}) == reference({"records": value})
    assert dumps(value) == reference(value)


def test_without_the_json_module_s_c_encoder_the_output_is_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Flat objects go through the json module's private C encoder when it is there and
    answers as its public `encode` does; without it, through `encode`: the same text."""
    value = {"records": [{"id": "c-1", "n": 1, "x": []}, {"id": "c-2\\n}", "ok": None}, [{}]]}
    with_c = dumps(value)
    monkeypatch.setattr(jsontext, "_flat_encoders", {})
    monkeypatch.setattr(json.encoder, "c_make_encoder", None)
    assert dumps(value) == with_c == reference(value)


@settings(max_examples=200, deadline=None)
@given(st.lists(VALUES, min_size=1, max_size=6), st.integers(0, 6))
def test_a_list_written_in_parts_is_the_list_dumps_writes(values: list[Any], cut: int) -> None:
    """`history` writes its records a part at a time (`_items`): the parts, joined as it
    joins them, are the list `dumps` writes, wherever the cut falls."""
    inner = "\n    "
    whole = dumps({"records": values})
    parts = [values[:cut], values[cut:]]
    joined = ("," + inner).join(jsontext.escaped(jsontext.items(p, inner)) for p in parts if p)
    assert whole == '{\n  "records": [' + inner + joined + "\n  ]\n}"


def test_a_list_with_keys_that_are_not_strings_written_in_parts_is_dumps_list() -> None:
    values: list[Any] = [{"a": 1}, {1: "one", None: [1, {"b": "\x1b"}]}, [1.5, "x"]]
    inner = "\n    "
    expected = dumps({"records": values})
    assert (
        expected
        == '{\n  "records": ['
        + inner
        + jsontext.escaped(jsontext.items(values, inner))
        + "\n  ]\n}"
    )


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "text"])
def test_history_written_in_parts_is_the_history_written_whole(
    repo: Repo, monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    """`history` with parts of two records (a part boundary between every other record,
    and after a handover's label) writes what it writes in one part, and its JSON is what
    `dumps` writes for the whole document."""
    worked(repo, [f'step {n}: é, ü, 漢字, "quoted"' for n in range(4)])
    argv = ("history", "--json") if as_json else ("history",)
    whole = repo.run(*argv)
    earlier = repo.run(*argv, "HEAD~2")  # records on later commits: the hidden ones said
    monkeypatch.setattr(render, "HISTORY_PART", 2)
    parted = repo.run(*argv)
    assert parted.code == whole.code == 0 and parted.out == whole.out
    assert repo.run(*argv, "HEAD~2").out == earlier.out
    if as_json:
        assert earlier.out == dumps(json.loads(earlier.out)) + "\n"
        assert json.loads(earlier.out)["hidden"] == 2
    else:  # the last record, then what is not shown, on a line of its own
        assert "\n(2 more on commits not reachable from" in earlier.out
    if as_json:
        document = json.loads(whole.out)
        assert len(document["records"]) == 6 and document["records"][0]["label"] == "advanced"
        assert whole.out == dumps(document) + "\n"
    monkeypatch.setattr(render, "HISTORY_PART", 1000)
    tree = repo.git("hash-object", "-t", "tree", "/dev/null").strip()
    alone = repo.git("commit-tree", tree, "-m", "unrelated").strip()
    empty = repo.run("history", alone, *argv[1:])  # nothing reachable from it
    assert empty.code == 0 and ("[]" in empty.out if as_json else "no records" in empty.out)


def test_history_holds_the_notes_of_one_part_at_a_time(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`history` makes its records a part at a time and lets each part's notes go once
    it is made: with parts of four, never more than a part's notes are held, on a history
    with a merge and another branch checked out, and the answer is the one written whole
    (and the one read afresh). As JSON, the records' texts the document cache keeps are
    spliced: no note is parsed or decoded at all."""
    from majordomus.blobs import NoteBlobs

    worked(repo, [f"step {n}" for n in range(30)])
    repo.git("checkout", "-q", "-b", "side", "HEAD~10")
    repo.commit("on the side", {"side.txt": "s\n"})
    assert repo.run("checkpoint", "on the side").code == 0
    repo.git("checkout", "-q", "main")
    repo.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    whole = repo.run("history", "--json").out
    assert len(json.loads(whole)["records"]) == 33
    text = repo.run("history").out
    held: list[int] = []
    parse = NoteBlobs.parse

    def counted(self: NoteBlobs, blob_id: str, *, keep: bool = True) -> Any:
        found = parse(self, blob_id, keep=keep)
        held.append(len(self._parsed))
        return found

    monkeypatch.setattr(NoteBlobs, "parse", counted)
    monkeypatch.setattr(render, "HISTORY_PART", 4)
    assert repo.run("history").out == text
    assert len(held) >= 30 and max(held) <= 4
    held.clear()
    assert repo.run("history", "--json").out == whole
    assert held == []  # spliced from the texts kept
    repo.drop_caches()
    for argv in (("history",), ("history", "--json")):
        held.clear()
        assert repo.run(*argv).out == (text if len(argv) == 1 else whole)  # a first read
        assert max(held) > 4  # the first read's own parses (kept for a second look)
        repo.drop_caches()


def test_made_items_are_made_a_part_at_a_time_however_they_are_asked_for() -> None:
    """`Made` (history's records): a slice is made in one call, iteration a part of
    MADE_PART at a time, an index alone; every way gives the same items."""
    from majordomus.values import MADE_PART, Made

    calls: list[int] = []

    def make(part: Sequence[int]) -> list[str]:
        calls.append(len(part))
        return [f"item {n}" for n in part]

    made = Made(range(2 * MADE_PART + 5), make)
    assert list(made) == [f"item {n}" for n in range(2 * MADE_PART + 5)]
    assert calls == [MADE_PART, MADE_PART, 5]
    calls.clear()
    assert made[3:6] == ["item 3", "item 4", "item 5"] and made[7] == "item 7"
    assert calls == [3, 1] and len(made) == 2 * MADE_PART + 5


RECORD_KEYS = {"v", "id", "task", "head", "at", "author", "body", "session", "kind"}
HOSTILE = ["é ü 漢字", 'a "quoted" \\ path', "two\nlines", "tab\there", "—"]


def test_history_json_spliced_from_kept_texts_is_the_json_of_the_records(
    tmp_path: Path, environ: dict[str, str], clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`history --json` splices each record's text the document cache keeps: byte for byte
    what encoding the records gives, in a second clone behind a bare remote, on another
    branch off an older commit, with a merge, hostile text, a record written by hand with
    plain git (a nested table, a date, a NaN; appended twice, then another) and a note a
    person appended a line to (not
    kept: encoded among the spliced ones), every record shown or only those reachable; and
    the same in a shallow clone and in a partial clone (`--filter=blob:none`)."""
    remote, first = seeded(tmp_path, environ, clock)
    first.task()
    for n in range(30):
        first.commit(f"work {n}")
        assert first.run("checkpoint", f"step {n}: {HOSTILE[n % len(HOSTILE)]}").code == 0
    first.git("checkout", "-q", "-b", "side", "HEAD~10")
    first.commit("on the side", {"side.txt": "s\n"})
    assert first.run("checkpoint", "on the side").code == 0
    first.git("checkout", "-q", "main")
    first.git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    assert first.run("handover", "-o", "find it", "-s", "half", "-n", "bisect").code == 0
    task = json.loads(first.run("history", "--json").out)["records"][0]["task"]
    by_hand = (
        '[[checkpoint]]\nv = 1\nid = "c-00000000000000aa"\n'
        f'task = "{task}"\nhead = "{first.head()}"\nat = 2026-01-02T03:04:05+01:00\n'
        'author = "A Person <a@example.com>"\n'
        'body = "by hand \\u0007 \\u001b[31m \\u202e \\u007f \\u2028"\n'
        "weight = nan\nwhen = 2026-01-02\n[checkpoint.extra]\nlist = [1, 2.5, true]\n"
    )
    # Twice (one record: a read numbers it once), then another: numbered after it.
    for text in (by_hand, by_hand, by_hand.replace("00aa", "00ab").replace("by hand", "later")):
        first.git("notes", "--ref=majordomus", "append", "-m", text, "HEAD~3")
    first.git("notes", "--ref=majordomus", "append", "-m", "a line by hand", "HEAD~5")
    first.git("push", "-q", "origin", "main", "refs/notes/majordomus")
    here = clone(str(remote), tmp_path / "here", environ, clock)
    here.git("checkout", "-q", "-b", "fix", "HEAD~2")
    here.commit("on fix")
    first.git("-C", str(remote), "config", "uploadpack.allowFilter", "true")
    url = f"file://{remote}"
    shallow = clone(url, tmp_path / "shallow", environ, clock, "--depth", "12")
    partial = clone(url, tmp_path / "partial", environ, clock, "--filter=blob:none")
    for each in (here, shallow, partial):
        each.git("fetch", "-q", "origin", "refs/notes/majordomus:refs/notes/majordomus")
    assert (shallow.path / ".git" / "shallow").is_file()
    assert partial.git("config", "remote.origin.promisor").strip() == "true"

    spliced: list[str] = []
    with_members = jsontext.with_members

    def counted(text: str, commit: str, members: dict[str, Any]) -> str:
        spliced.append(commit)
        return with_members(text, commit, members)

    monkeypatch.setattr(render, "with_members", counted)
    runs = [
        (each, argv)
        for each in (here, shallow, partial)
        for argv in (("--json",), ("--json", "--all"))
    ]
    for each, argv in runs:
        each.run("history", *argv)  # the document cache made
        spliced.clear()
        kept = each.run("history", *argv)
        # Every record with --all; from a shallow clone's cut history, those it reaches.
        assert kept.code == 0 and len(spliced) >= (30 if "--all" in argv else 10)
        with monkeypatch.context() as without:
            without.setattr(DocumentCache, "texts_many", lambda self, blobs: iter(()))
            spliced.clear()
            encoded = each.run("history", *argv)
            assert spliced == []
        assert kept.out == encoded.out
        document = json.loads(kept.out)
        assert kept.out == dumps(document) + "\n"
        ids = [record["id"] for record in document["records"]]
        assert ids.count("c-00000000000000aa") == ids.count("c-00000000000000ab") == 1
        assert document["invalid"] == 1
        by_hand_json = document["records"][ids.index("c-00000000000000aa")]
        assert (by_hand_json["weight"], by_hand_json["at"]) == ("nan", "2026-01-02T02:04:05Z")


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([*sorted(jsontext.AFTER_HANDOVER), "sig"]) | st.text(max_size=6),
        VALUES,
        max_size=3,
    ).map(lambda extra: {k: v for k, v in extra.items() if k not in RECORD_KEYS}),
    st.one_of(st.none(), st.tuples(st.text(max_size=8), st.none() | st.integers(0, 9))),
)
def test_a_record_s_kept_text_with_its_commit_is_the_object_items_writes(
    extra: dict[str, Any], label: tuple[str, int | None] | None
) -> None:
    """`record_text` then `with_members` (the splice `history --json` makes) write what
    `items` writes for the record's whole object, whatever else a hand-written record
    holds, a checkpoint, or a handover with or without its label; a record holding a
    member the history writes after its own (replaced in its place) is kept without a
    text."""
    from majordomus.records import validated_record

    kind = "checkpoint" if label is None else "handover"
    fields = {"body": "é \x1b \u202e"}
    if kind == "handover":
        fields = {"objective": "find it", "state": "half \u2028", "next": "bisect"}
    table = {
        "v": 1,
        "id": "c-0123456789abcdef",
        "task": "t-0123456789ab",
        "head": "0" * 40,
        "at": datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
        "author": "A <a@example.com>",
        **fields,
        **extra,
    }
    record = validated_record(kind, table)
    assert record is not None
    more: dict[str, Any] = {}
    if label is not None:
        more = {"label": label[0], "ahead": label[1], "behind": 0, "resolved": False}
    signature = {"signature": "unsigned", "signer": None}
    whole = {**jsontext.record_members(record), "commit": "f" * 40, **signature, **more}
    text = jsontext.record_text(record)
    after = jsontext.AFTER_HANDOVER if kind == "handover" else jsontext.AFTER
    # A signed record is kept without a text too: its status depends on the trust set-up.
    assert (text is None) == (not after.isdisjoint(extra) or "sig" in extra)
    if text is not None:
        assert jsontext.with_members(text, "f" * 40, more) == jsontext.items([whole], jsontext.ITEM)
