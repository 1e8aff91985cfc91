"""The parsers' typed values as JSON and back, for recordings: a node's slow facts (topology, NVLink, MIG,
InfiniBand, counters, processes) go into a recording when they change and come back in replay as the
same values, so every pane shows what it showed live.

Driven by the types themselves: a dataclass or NamedTuple is written as the list of its fields in order,
a mapping as a list of [key, value] pairs (a topology's keys are pairs), an enum as its value. Reading
walks the declared type of every field, so what comes back is of the declared type or an error: a file
cannot make a reader build any type the declaration does not name, and every string and list is bounded
as the live parsers bound theirs.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Hashable, Mapping
from functools import cache
from typing import Any, Final, TypeVar

MAX_TEXT: Final = 4000  # a kernel line or a note, as long as the live ones may be
MAX_ITEMS: Final = 100_000  # a topology of 64 devices has 4,096 cells
MAX_DEPTH: Final = 12

_T = TypeVar("_T")


class CodecError(ValueError):
    """A recorded value that does not read as its declared type."""


def encode(value: object, depth: int = 0) -> object:
    """``value`` as JSON-ready lists, numbers, strings and None."""
    if depth > MAX_DEPTH:
        raise CodecError("nested too deeply")
    plan = _plan(typing.cast(Hashable, type(value)))
    if plan is _PLAIN:
        return value
    if plan is _TEXT:
        return typing.cast(str, value)[:MAX_TEXT]
    if plan is _ENUM:
        return typing.cast(enum.Enum, value).value
    if plan is _MAPPING:
        mapping = typing.cast(Mapping[object, object], value)
        return [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in mapping.items()]
    if plan is _SEQUENCE:  # a NamedTuple is a tuple: its fields in order
        return [encode(item, depth + 1) for item in typing.cast(tuple[object, ...], value)]
    return [encode(getattr(value, name), depth + 1) for name in plan]


# How a type is written, worked out once per type (a 1,000-node cluster's facts are a few million values).
_PLAIN: Final = ("plain",)
_TEXT: Final = ("text",)
_ENUM: Final = ("enum",)
_MAPPING: Final = ("mapping",)
_SEQUENCE: Final = ("sequence",)


@cache
def _plan(kind: Any) -> tuple[str, ...]:
    if kind in (type(None), bool, int, float):
        return _PLAIN
    if issubclass(kind, enum.Enum):
        return _ENUM
    if issubclass(kind, str):
        return _TEXT
    if dataclasses.is_dataclass(kind):
        return tuple(f.name for f in dataclasses.fields(kind) if f.init)
    if issubclass(kind, Mapping):
        return _MAPPING
    if issubclass(kind, tuple | list | frozenset | set):
        return _SEQUENCE
    raise CodecError(f"cannot record a {kind.__name__}")


def decode(data: object, kind: type[_T]) -> _T:
    """``data`` (as `encode` wrote it) as a ``kind``; CodecError when it does not read as one."""
    return typing.cast(_T, _decode(data, kind, 0))


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _decode(data: object, kind: Any, depth: int) -> object:
    if depth > MAX_DEPTH:
        raise CodecError("nested too deeply")
    origin, args = _shape(kind)
    if origin in (typing.Union, types.UnionType):
        if data is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _decode(data, arg, depth)
            except CodecError as err:
                errors.append(str(err))
        raise CodecError("; ".join(errors) or "no type fits")
    if kind is Any or kind is object:
        raise CodecError("an untyped field cannot be read back")
    if origin is tuple:
        items = _list(data)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_decode(item, args[0], depth + 1) for item in items)
        if len(items) != len(args):
            raise CodecError(f"expected {len(args)} items, got {len(items)}")
        return tuple(_decode(item, arg, depth + 1) for item, arg in zip(items, args, strict=True))
    if origin in (Mapping, dict):
        key_kind, value_kind = args
        pairs = _list(data)
        found = {}
        for pair in pairs:
            entry = _list(pair)
            if len(entry) != 2:
                raise CodecError("a mapping's entry is not a [key, value] pair")
            found[_decode(entry[0], key_kind, depth + 1)] = _decode(entry[1], value_kind, depth + 1)
        return found
    if origin in (frozenset, set):
        return frozenset(_decode(item, args[0], depth + 1) for item in _list(data))
    if origin is list:
        return [_decode(item, args[0], depth + 1) for item in _list(data)]
    if kind is type(None):
        if data is not None:
            raise CodecError("expected nothing")
        return None
    if kind is bool:
        if not isinstance(data, bool):
            raise CodecError("expected true or false")
        return data
    if kind is int:
        if not isinstance(data, int) or isinstance(data, bool):
            raise CodecError("expected a whole number")
        return data
    if kind is float:
        if not isinstance(data, int | float) or isinstance(data, bool):
            raise CodecError("expected a number")
        return float(data)
    if kind is str:
        if not isinstance(data, str):
            raise CodecError("expected text")
        return data[:MAX_TEXT]
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        try:
            return kind(data)
        except ValueError:
            raise CodecError(f"{data!r:.40} is not a {kind.__name__}") from None
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        hints = _hints(kind)
        names = [f.name for f in dataclasses.fields(kind) if f.init]
        return kind(**_fields(data, names, hints, depth))
    if isinstance(kind, type) and issubclass(kind, tuple) and hasattr(kind, "_fields"):  # a NamedTuple
        hints = _hints(kind)
        return kind(**_fields(data, list(kind._fields), hints, depth))
    raise CodecError(f"cannot read a {kind!r:.60}")


@cache
def _shape(kind: Any) -> tuple[Any, tuple[Any, ...]]:
    return typing.get_origin(kind), typing.get_args(kind)


def _fields(data: object, names: list[str], hints: dict[str, Any], depth: int) -> dict[str, object]:
    items = _list(data)
    if len(items) > len(names):
        raise CodecError("more fields than the type has")
    # a recording from before a field was added lacks it: the field's default then, or an error
    return {name: _decode(item, hints[name], depth + 1) for name, item in zip(names, items, strict=False)}


def _list(data: object) -> list[object]:
    if not isinstance(data, list):
        raise CodecError("expected a list")
    if len(data) > MAX_ITEMS:
        raise CodecError("a list too long")
    return data
