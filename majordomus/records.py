"""The record model: what a valid record holds (kinds, ids, text, the characters refused),
records validated and made, the summaries reads index them by. Knows nothing of git or TOML."""

from __future__ import annotations

import datetime
import re
import sys
from collections.abc import Mapping
from typing import Any, NamedTuple

FORMAT_VERSION = 1
KINDS = ("task", "checkpoint", "handover", "resume")
TEXT_CEILING = 2000  # no text field of any record may exceed this, whatever the profile
LABELS = ("current", "advanced", "behind", "diverged", "unrelated", "missing", "unknown")
HANDOVER_FIELDS = ("objective", "state", "next")

# Fields each kind must carry beside the common ones, all of them text.
KIND_TEXT: Mapping[str, tuple[str, ...]] = {
    "task": ("title",),
    "checkpoint": ("body",),
    "handover": HANDOVER_FIELDS,
    "resume": (),
}

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


class Divergence(NamedTuple):
    """How the code moved between a handover's commit and a revision: one of LABELS, and
    the commits each side has that the other has not (None where it cannot be known)."""

    label: str
    ahead: int | None
    behind: int | None


SIGNATURE_STATUSES = ("verified", "unsigned", "bad", "unknown-key")
SIGNATURE_KEY = "sig"  # a record's detached signature over its canonical bytes
SIGNATURE_NAMESPACE = "majordomus"  # what an ssh signature of a record is made for


class Signature(NamedTuple):
    """Who provably wrote a record: one of SIGNATURE_STATUSES, and the identity the trust
    configuration gives the key that signed it (None where none is known). `strict`: read
    under `trust = "signed"`, where an unsigned record is marked too."""

    status: str
    signer: str | None = None
    strict: bool = False

    @property
    def marked(self) -> bool:
        """Whether text shows the status: always, but for an unsigned record read under
        `trust = "any"`."""
        return self.status != "unsigned" or self.strict

    @property
    def verified(self) -> bool:
        return self.status == "verified"


UNSIGNED = Signature("unsigned")


def unsigned(strict: bool = False) -> Signature:
    """The status of a record that holds no signature."""
    return Signature("unsigned", None, strict)


def is_refused_char(char: str) -> bool:
    """Control characters other than newline and tab, and bidi overrides/isolates."""
    return REFUSED.match(char) is not None


_SET = object.__setattr__


class Record:
    """One valid record of a known kind; `table` holds every stored key, unknown ones too.
    Immutable; equal (and hashed) by its six fields, not by `table`. A plain class, not a
    dataclass: `dataclasses` imports `inspect`, which every command would pay for."""

    __slots__ = ("at", "author", "head", "id", "kind", "table", "task")
    kind: str
    id: str
    task: str
    head: str
    at: datetime.datetime
    author: str
    table: Mapping[str, Any]

    def __init__(
        self,
        kind: str,
        id: str,
        task: str,
        head: str,
        at: datetime.datetime,
        author: str,
        table: Mapping[str, Any],
    ) -> None:
        put = _SET  # as a frozen dataclass sets its fields: one call each, no loop
        put(self, "kind", kind)
        put(self, "id", id)
        put(self, "task", task)
        put(self, "head", head)
        put(self, "at", at)
        put(self, "author", author)
        put(self, "table", table)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"a record is immutable: cannot assign {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"a record is immutable: cannot delete {name!r}")

    def _key(self) -> tuple[str, str, str, str, datetime.datetime, str]:
        return (self.kind, self.id, self.task, self.head, self.at, self.author)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return (
            self.id == other.id
            and self.kind == other.kind
            and self.task == other.task
            and self.head == other.head
            and self.at == other.at
            and self.author == other.author
        )

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"Record(kind={self.kind!r}, id={self.id!r}, task={self.task!r}, "
            f"head={self.head!r}, at={self.at!r}, author={self.author!r})"
        )

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
    record = validate(kind, table)
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


def validate(kind: str, table: Mapping[str, Any]) -> Record | None:
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


Summarised = tuple[tuple[Summary, ...], int]  # a note's summaries, its invalid records


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


SKEW_TOLERANCE_S = 60  # clocks a minute apart are ordinary; further ahead is skew


def age_s(now: datetime.datetime, then: datetime.datetime) -> int:
    return max(0, int((now - then).total_seconds()))


def skew_s(now: datetime.datetime, then: datetime.datetime) -> int | None:
    """How far `then` lies ahead of `now`, when that is more than clocks normally drift:
    a record from a clock that runs fast, whose age cannot be known."""
    ahead = int((then - now).total_seconds())
    return ahead if ahead > SKEW_TOLERANCE_S else None
