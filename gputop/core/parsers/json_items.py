"""A large JSON document read one list element at a time.

``squeue --json`` on a queue of 50,000 jobs prints about 180 MB. ``json.loads`` turns that into a tree of
some 5 million objects (over a gigabyte) in one C call that holds the interpreter's lock for seconds, so
a thread doing it stops the event loop all the same. Here the standard library's own decoder decodes the
top-level object key by key, and the elements of the named lists one by one, each handed to a callback
that keeps what it needs (a `SlurmJob`) and drops the rest: the lock is free between elements, and memory
holds the text plus the results, not the tree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


class JsonError(ValueError):
    """Not a JSON object of the expected shape; the message says where."""


@dataclass(frozen=True, slots=True)
class Counted:
    """What a handled list leaves in the decoded object: how many elements went to its callback."""

    count: int


def decode_object(text: str, start: int, lists: Mapping[str, Callable[[object], None]]) -> dict[str, Any]:
    """The JSON object at ``text[start:]`` (whitespace before it allowed). The value of each key in
    ``lists`` that is a list is not kept: each element goes to its callback, and the key maps to a
    `Counted`. Other values are decoded whole. Raises `JsonError`."""
    decode = _DECODER.raw_decode
    pos = _skip(text, start)
    if text[pos : pos + 1] != "{":
        raise JsonError(f"expected a JSON object at character {pos}")
    pos = _skip(text, pos + 1)
    found: dict[str, Any] = {}
    if text[pos : pos + 1] == "}":
        return found
    while True:
        if text[pos : pos + 1] != '"':
            raise JsonError(f"expected a key at character {pos}")
        key, pos = _decoded(decode, text, pos)
        pos = _skip(text, pos)
        if text[pos : pos + 1] != ":":
            raise JsonError(f"expected ':' after key {str(key)[:40]!r} at character {pos}")
        pos = _skip(text, pos + 1)
        handler = lists.get(key) if isinstance(key, str) else None
        if handler is not None and text[pos : pos + 1] == "[":
            count, pos = _each(decode, text, pos, handler)
            found[key] = Counted(count)
        else:
            found[str(key)], pos = _decoded(decode, text, pos)
        pos = _skip(text, pos)
        if text[pos : pos + 1] == ",":
            pos = _skip(text, pos + 1)
            continue
        if text[pos : pos + 1] == "}":
            return found
        raise JsonError(f"expected ',' or '}}' at character {pos}")


def _each(decode: Any, text: str, pos: int, handler: Callable[[object], None]) -> tuple[int, int]:
    count = 0
    pos = _skip(text, pos + 1)
    if text[pos : pos + 1] == "]":
        return 0, pos + 1
    while True:
        value, pos = _decoded(decode, text, pos)
        handler(value)
        count += 1
        pos = _skip(text, pos)
        if text[pos : pos + 1] == ",":
            pos = _skip(text, pos + 1)
            continue
        if text[pos : pos + 1] == "]":
            return count, pos + 1
        raise JsonError(f"expected ',' or ']' at character {pos}")


def _decoded(decode: Any, text: str, pos: int) -> tuple[Any, int]:
    try:
        value, end = decode(text, pos)
    except json.JSONDecodeError as err:
        raise JsonError(f"{err.msg} at line {err.lineno} column {err.colno}") from None
    except RecursionError:
        raise JsonError(f"nested too deeply at character {pos}") from None
    return value, end


def _skip(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos
