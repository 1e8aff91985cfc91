"""A function of one immutable value, remembered by that value's identity.

Slow facts (a node's NVLink status, its IB ports) are parsed once and the same object comes back at every
tick until the node prints something else, while the rules derived from them run at every tick for every
node: 8,000 NVLink GPUs and 8,000 ports a tick on a 1,000-node cluster. Keyed by identity, a lookup costs
one dict access and never compares or hashes the value. Each entry holds its key, so an id cannot be
reused while it is remembered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

_K = TypeVar("_K")
_V = TypeVar("_V")

DEFAULT_MAX_ENTRIES = 4096


class IdentityMemo(Generic[_K, _V]):
    def __init__(self, make: Callable[[_K], _V], max_entries: int = DEFAULT_MAX_ENTRIES) -> None:
        self._make = make
        self._max_entries = max_entries
        self._entries: dict[int, tuple[_K, _V]] = {}

    def __call__(self, key: _K) -> _V:
        hit = self._entries.get(id(key))
        if hit is not None and hit[0] is key:
            return hit[1]
        value = self._make(key)
        if len(self._entries) >= self._max_entries:
            self._entries.clear()  # values that change at every tick must not grow this without end
        self._entries[id(key)] = (key, value)
        return value
