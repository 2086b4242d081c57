"""`typing.NamedTuple`'s class syntax, made as `collections.namedtuple` makes the class.

Under `from __future__ import annotations` every field's annotation is a string, and
`typing.NamedTuple` compiles each one into a `ForwardRef` that nothing here ever reads:
about 0.1 ms a class, several milliseconds of a read's imports. Modules import
`NamedTuple` from here (`from majordomus.tuples import NamedTuple`); the type checker
reads it as typing's, which declares the same class.

The class made is the one `typing.NamedTuple` makes (fields, defaults, methods and
properties of the body, docstring, `_make`, `_replace`, `_asdict`), its annotations kept
as written (strings) rather than as `ForwardRef`s.
"""

from __future__ import annotations

import collections
from typing import TYPE_CHECKING, Any

__all__ = ["NamedTuple"]

# As `typing.NamedTuple` treats a class body: what it refuses, what it leaves out.
_PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields",
                         "_field_defaults", "_make", "_replace", "_asdict", "_source"})  # fmt: skip
_namedtuple: Any = collections.namedtuple  # called with names known only as it runs
_SPECIAL = frozenset({"__module__", "__name__", "__annotations__"})


class _Made(type):
    def __new__(cls, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> Any:
        """The namedtuple class (not of this type) of a class body's annotated fields."""
        if bases != (_Base,):
            raise TypeError("a NamedTuple class here derives from NamedTuple alone")
        annotations: dict[str, Any] = namespace.get("__annotations__", {})
        defaults = []
        for field in annotations:
            if field in namespace:
                defaults.append(namespace[field])
            elif defaults:
                raise TypeError(f"non-default field {field} of {name} follows a default one")
        module = namespace["__module__"]
        made = _namedtuple(name, annotations, defaults=defaults, module=module)
        made.__annotations__ = dict(annotations)
        for key, value in namespace.items():
            if key in _PROHIBITED:
                raise AttributeError(f"cannot overwrite NamedTuple attribute {key}")
            if key not in _SPECIAL and key not in made._fields:
                setattr(made, key, value)
        return made


_Base = type.__new__(_Made, "NamedTuple", (), {})


if TYPE_CHECKING:
    from typing import NamedTuple  # what the type checker reads
else:

    def NamedTuple(typename: str, fields: Any = None, /) -> Any:
        """Only the class syntax is supported (`class Point(NamedTuple): x: int`)."""
        raise TypeError("use the class syntax: class Name(NamedTuple): ...")

    NamedTuple.__mro_entries__ = lambda bases: (_Base,)
