"""The run-time class of every typed command: a tuple subclass whose fields are read by name.

`broker.protocol.commands` declares its classes as NamedTuples for mypy, which checks every field
name, but builds them on `Command` at run time, because `typing.NamedTuple` makes ~8 KiB of
functions and code objects per class and every idle broker loads all ~40 of them (the idle RSS
budget). Positional construction, equality, hashing, pickling, `_fields`, pattern matching and
the repr behave as a NamedTuple's; defaults and keyword construction are not offered.
"""

from __future__ import annotations

from typing import Any

try:
    from _collections import _tuplegetter
except ImportError:  # not CPython: what `collections.namedtuple` falls back to
    from operator import itemgetter

    def _tuplegetter(index: int, doc: str) -> property:
        return property(itemgetter(index), doc=doc)


class _CommandType(type):
    """Gives each command class empty `__slots__` (instances stay plain tuples) and one
    accessor per annotated field, in order (names starting with an underscore are not fields). A
    class that annotates none takes its base's fields (methods whose fields are the same share a
    base that declares them)."""

    def __new__(mcs, name: str, bases: tuple[type, ...], ns: dict[str, Any]) -> _CommandType:
        fields = tuple(f for f in ns.get("__annotations__", ()) if not f.startswith("_"))
        if not fields and bases:
            fields = getattr(bases[0], "_fields", ())
        ns["__slots__"] = ()
        ns["_fields"] = ns["__match_args__"] = fields
        for index, field in enumerate(fields):
            ns[field] = _tuplegetter(index, field)
        return super().__new__(mcs, name, bases, ns)


class Command(tuple, metaclass=_CommandType):
    """A command's fields as a tuple, read by name (see the module docstring)."""

    _fields: tuple[str, ...]

    def __new__(cls, *values: Any) -> Command:
        if len(values) != len(cls._fields):
            raise TypeError(f"{cls.__name__} takes {len(cls._fields)} fields, got {len(values)}")
        return tuple.__new__(cls, values)

    def __getnewargs__(self) -> tuple[Any, ...]:
        return tuple(self)

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in zip(self._fields, self, strict=True))
        return f"{type(self).__name__}({fields})"


__all__ = ["Command"]
