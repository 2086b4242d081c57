"""`majordomus.tuples.NamedTuple` makes the class `typing.NamedTuple` makes, without
compiling each annotation; and the package's classes are made by it."""

from __future__ import annotations

import ast
import pickle
import typing
from pathlib import Path
from typing import Any

import pytest

from majordomus import tuples, values

_OURS: Any = tuples.NamedTuple


def _made(name: str, base: Any) -> Any:
    """One class body, made by `base`; the class put at this module's top level, where
    pickle finds it."""

    class Seen(base):  # type: ignore[misc]
        """A line that matched."""

        number: int
        text: str
        spans: tuple[tuple[int, int], ...] = ()
        tag: str | None = None

        @property
        def width(self) -> int:
            return len(self.text)

        def shown(self, prefix: str = "") -> str:
            return f"{prefix}{self.number}: {self.text}"

    Seen.__name__ = Seen.__qualname__ = name
    globals()[name] = Seen
    return Seen


Ours = _made("Ours", _OURS)
Theirs = _made("Theirs", typing.NamedTuple)


def test_the_class_made_behaves_as_typing_makes_it() -> None:
    ours: Any = Ours
    theirs: Any = Theirs
    for cls in (ours, theirs):
        item: Any = cls(2, "a\u202eb", ((0, 1),))
        assert tuple.__subclasscheck__(type(item)) and tuple(item) == (
            2,
            "a\u202eb",
            ((0, 1),),
            None,
        )
        assert item == (2, "a\u202eb", ((0, 1),), None) and hash(item) == hash(tuple(item))
        assert (item.number, item.width, item.shown("> ")) == (2, 3, "> 2: a\u202eb")
        assert item._replace(tag="x").tag == "x" and cls._make([1, "", (), "t"]).tag == "t"
        assert item._asdict() == {"number": 2, "text": "a\u202eb", "spans": ((0, 1),), "tag": None}
        assert pickle.loads(pickle.dumps(item)) == item
        with pytest.raises(TypeError):
            cls(1)  # a field without a default left out
        with pytest.raises(AttributeError):
            item.number = 3
    for name in ("_fields", "_field_defaults", "__doc__", "__module__"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert repr(ours(1, "x")).replace("Ours", "Theirs") == repr(theirs(1, "x"))
    assert (ours.__qualname__, theirs.__qualname__) == ("Ours", "Theirs")
    assert ours.__annotations__ == {
        "number": "int",
        "text": "str",
        "spans": "tuple[tuple[int, int], ...]",
        "tag": "str | None",
    }


def test_what_typing_refuses_is_refused() -> None:
    with pytest.raises(TypeError):

        class Late(_OURS):  # type: ignore[misc]
            first: int = 0
            second: int

    with pytest.raises(AttributeError):

        class Clash(_OURS):  # type: ignore[misc]
            x: int

            def _replace(self) -> None: ...

    with pytest.raises(TypeError):
        tuples.NamedTuple("Point", [("x", int)])


def test_every_named_tuple_above_the_ground_floor_is_made_by_it() -> None:
    """A module that imports others of the package makes its NamedTuples with `tuples`.
    One that imports none keeps typing's: importing `tuples` would lift it, and every
    floor above it, by one."""
    for path in sorted(Path(values.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        ours = {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and (node.module or "").startswith("majordomus.")
            and node.module != "majordomus.tuples"
        }
        runtime = [
            node
            for node in tree.body
            if isinstance(node, ast.ImportFrom)
            and node.module == "typing"
            and any(alias.name == "NamedTuple" for alias in node.names)
        ]
        assert not (ours and runtime), path.name
    assert values.MatchedLine.__annotations__["number"] == "int"  # a string: never compiled
