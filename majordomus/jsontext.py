"""JSON text as majordomus writes it: `json.dumps(..., ensure_ascii=False, indent=2)` byte for
byte, with every character of the refused set escaped, written without the json module's
slow indenting encoder; and a record's JSON object, which the document cache keeps as text
(content in, text out) so that a long `history --json` splices it rather than encode it.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from majordomus.records import REFUSED, SIGNATURE_KEY, Record

ITEM = "\n    "  # the newline and indentation of a history's or a show's records


def dumps(value: Any) -> str:
    """JSON with every character of the refused set as a \\uXXXX escape, never raw."""
    out: list[str] = []
    try:
        _indented(value, "\n", out)
        text = "".join(out)
    except _NotPlain:
        import json

        text = json.dumps(finite(value), ensure_ascii=False, indent=2, default=json_default)
    return escaped(text)


def escaped(text: str) -> str:
    """JSON text with every character of the refused set as a \\uXXXX escape."""
    if text.isascii() and "\x7f" not in text:
        return text  # the encoder escaped every other character of the set (all below 0x20)
    return REFUSED.sub(_json_escape, text)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON has no escape past the BMP: a surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def items(values: Sequence[Any], inner: str) -> str:
    """The items of a non-empty list as `dumps` writes them inside it, `inner` being the
    newline and indentation of its items (one after another, without the brackets)."""
    out: list[str] = []
    try:
        _list_items(values, inner, out, "")
        return "".join(out)
    except _NotPlain:  # as json.dumps writes each, indented as the list's items are
        import json

        return ("," + inner).join(
            json.dumps(finite(v), ensure_ascii=False, indent=2, default=json_default).replace(
                "\n", inner
            )
            for v in values
        )


class _NotPlain(Exception):
    """A value `_indented` leaves to the json module (a key that is not a string)."""


# What json.dumps uses with ensure_ascii=False, from the json module's C part: the module
# itself (a millisecond to import) is loaded only by output that is JSON.
try:
    from _json import encode_basestring as encode_string
except ImportError:  # a Python without it
    from json.encoder import encode_basestring as encode_string

__all__ = [
    "AFTER",
    "AFTER_HANDOVER",
    "ITEM",
    "dumps",
    "encode_string",
    "escaped",
    "finite",
    "items",
    "json_default",
    "record_members",
    "record_text",
    "rfc3339",
    "with_members",
]


def _indented(value: Any, newline: str, out: list[str]) -> None:
    """`json.dumps(finite(value), ensure_ascii=False, indent=2, default=json_default)`,
    written into `out`: the json module indents only with its pure-Python encoder, which
    costs more than the rest of a large `history --json`."""
    if isinstance(value, str):
        out.append(encode_string(value))
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        flat = _flat_object(value, newline)
        if flat is not None:
            out.append(flat)
            return
        inner = newline + "  "
        separator = "{" + inner
        for key, item in value.items():
            if not isinstance(key, str):
                raise _NotPlain
            out.append(separator)
            out.append(encode_string(key))
            out.append(": ")
            _indented(item, inner, out)
            separator = "," + inner
        out.append(newline + "}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        out.append("[")
        _list_items(value, newline + "  ", out, newline + "  ")
        out.append(newline + "]")
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        spelt = finite(value)
        out.append(float.__repr__(value) if spelt is value else encode_string(spelt))
    else:
        _indented(json_default(value), newline, out)


def _list_items(value: Sequence[Any], inner: str, out: list[str], first: str) -> None:
    """The items of a non-empty list into `out`, after `first` (the newline before the
    first item, or nothing), `inner` before each of the others."""
    separator = first
    run: list[dict[str, Any]] = []  # consecutive flat objects (records): one encoding
    for item in value:
        if type(item) is dict and item and _is_flat(item):
            run.append(item)
            continue
        if run:
            out.append(separator)
            out.append(_flat_objects(run, inner))
            separator = "," + inner
            run = []
        out.append(separator)
        _indented(item, inner, out)
        separator = "," + inner
    if run:
        out.append(separator)
        out.append(_flat_objects(run, inner))


_PLAIN = frozenset({str, int, bool, type(None)})  # scalars whose JSON needs no check
_TEXT = frozenset({str})
_flat_encoders: dict[str, Callable[[Any], str]] = {}


def _is_flat(value: dict[Any, Any]) -> bool:
    """Whether an object has only plain keys and scalar values (most records; an empty
    list counts as one): the json module's C encoder writes it as `_indented` does, its
    item separator carrying the newline and the indentation (nothing inside needs
    another)."""
    items = value.values()
    return _TEXT.issuperset(map(type, value)) and (
        _PLAIN.issuperset(map(type, items))
        or all(
            type(item) in _PLAIN
            or (type(item) is list and not item)
            or (type(item) is float and math.isfinite(item))
            for item in items
        )
    )


def _flat_object(value: dict[Any, Any], newline: str) -> str | None:
    """A flat object as `_indented` writes it; None for any other object."""
    if not _is_flat(value):
        return None
    inner = newline + "  "
    encode = _flat_encoders.get(inner) or _flat_encoder(inner)
    return "{" + inner + encode(value)[1:-1] + newline + "}"


def _flat_objects(run: list[dict[str, Any]], newline: str) -> str:
    """Non-empty flat objects, items of one list, as `_indented` writes them, in one call
    to the C encoder: a newline appears in its output only in separators (a string's
    newline is escaped), so where one object ends and the next begins, `}` separator
    `{`, is rewritten to the separators an indented list of them has."""
    inner = newline + "  "
    encode = _flat_encoders.get(inner) or _flat_encoder(inner)
    body = encode(run)[2:-2]  # without the list's `[{` and `}]`
    between = "}," + inner + "{"
    return (
        "{" + inner + body.replace(between, newline + "}," + newline + "{" + inner) + newline + "}"
    )


_SAMPLE = [{"a": "x\n}", "b": 1, "c": None, "d": True, "e": 1.5, "f": []}, {"g": ""}]


def _flat_encoder(inner: str) -> Callable[[Any], str]:
    """`JSONEncoder(ensure_ascii=False, separators=...).encode` for flat objects, without
    the set-up that method repeats on every call (made once per indentation). The C
    encoder is private to the json module: where it is missing, or takes other arguments,
    or answers otherwise, that method is used."""
    import json

    encoder = json.JSONEncoder(ensure_ascii=False, separators=("," + inner, ": "))
    encode: Callable[[Any], str] = encoder.encode
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    try:
        # (markers, default, encoder, indent, key and item separators, sort_keys,
        # skipkeys, allow_nan): what `encode` passes it
        chunks = make(
            None, encoder.default, encode_string, None, ": ", "," + inner, False, False, True
        )
        if "".join(chunks(_SAMPLE, 0)) == encoder.encode(_SAMPLE):
            encode = lambda value: "".join(chunks(value, 0))  # noqa: E731
    except TypeError:  # missing (None), or made with other arguments
        pass
    _flat_encoders[inner] = encode
    return encode


def finite(value: Any) -> Any:
    """NaN and infinities (TOML has them, JSON does not: jq refuses `NaN`) as TOML spells them."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite(item) for item in value]
    return value


def json_default(value: object) -> object:
    if isinstance(value, datetime.datetime | datetime.date | datetime.time):
        return value.isoformat()
    raise TypeError(f"cannot encode {type(value).__name__}")


def rfc3339(when: datetime.datetime) -> str:
    text = (when if when.tzinfo is datetime.UTC else when.astimezone(datetime.UTC)).isoformat()
    return text.removesuffix("+00:00") + "Z"


def record_members(record: Record) -> dict[str, Any]:
    """Every stored field, `at` as RFC 3339, after `kind`: a record's JSON object but for
    the `commit` that follows them."""
    out: dict[str, Any] = {"kind": record.kind}
    out.update(record.table)
    out["at"] = rfc3339(record.at)  # in its stored place: a valid record has one
    return out


# The members a history writes after a record's own (a handover's label after a handover's
# only): a record that holds one of them (only a hand-written one can) has it replaced in
# its place, which a splice cannot do.
AFTER = frozenset({"commit", "signature", "signer"})
AFTER_HANDOVER = AFTER | {"label", "ahead", "behind", "resolved"}


def record_text(record: Record) -> str | None:
    """The record's JSON object as a list item at ITEM writes it, without its end (the
    newline and `}`), before any escaping: `with_members` completes it. What the document
    cache keeps of each record, made from its content alone; None for a record that holds
    a member a history writes after it (it is encoded whole when shown)."""
    after = AFTER_HANDOVER if record.kind == "handover" else AFTER
    if SIGNATURE_KEY in record.table or not after.isdisjoint(record.table):
        return None  # a signed record's status depends on the trust configuration
    return items([record_members(record)], ITEM).removesuffix(ITEM + "}")


_UNSIGNED_MEMBERS = f',{ITEM}  "signature": "unsigned",{ITEM}  "signer": null'


def with_members(text: str, commit: str, members: dict[str, Any]) -> str:
    """A record's object from `record_text` (an unsigned record's), with its `commit`, its
    signature status and, for a handover, its label after its own: the text `items`
    writes for the whole object."""
    inner = ITEM + "  "
    if not members:  # most records
        return f'{text},{inner}"commit": {encode_string(commit)}{_UNSIGNED_MEMBERS}{ITEM}}}'
    out = [text, f',{inner}"commit": {encode_string(commit)}', _UNSIGNED_MEMBERS]
    for key, value in members.items():
        out.append("," + inner + encode_string(key) + ": ")
        _indented(value, inner, out)
    out.append(ITEM + "}")
    return "".join(out)
