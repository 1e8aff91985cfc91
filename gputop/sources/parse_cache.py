"""Parsed slow facts shared across nodes: the same output parses to the same value, once.

Nodes of one model print the same `nvidia-smi topo -m`, `nvlink -s`, `-L`-shaped MIG listings and
often the same ibstat. Parsed per node, a thousand copies of one topology matrix held 40 KB a node
(measured with tracemalloc); parsed once and shared (the values are frozen), they cost one copy and one
parse. Keyed on the exact text, so a node that differs by one character gets its own value.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.registry import registry

# Distinct outputs kept per kind: enough for every kind of node in a large mixed cluster. Per kind, so
# outputs that differ on every node and every run (process lists) cannot push out the topologies.
MAX_ENTRIES_PER_KIND = 256


class ParseCache:
    def __init__(self, max_entries_per_kind: int = MAX_ENTRIES_PER_KIND) -> None:
        self.max_entries_per_kind = max_entries_per_kind
        self._by_kind: dict[str, OrderedDict[str, Any]] = {}
        self.hits = 0
        self.misses = 0

    def parse(self, kind: str, text: str) -> Any:
        """What the ``kind`` parser makes of ``text`` (a value or a ParseFailure); KeyError for an
        unknown kind."""
        parser = registry()[kind]
        values = self._by_kind.setdefault(kind, OrderedDict())
        if text in values:
            values.move_to_end(text)
            self.hits += 1
            return values[text]
        self.misses += 1
        value = parser.parse(text)
        if not isinstance(value, ParseFailure):  # a failure is cheap to find again, and rare
            values[text] = value
            if len(values) > self.max_entries_per_kind:
                values.popitem(last=False)
        return value
