"""How much a YAML file may hold once its aliases are expanded.

An alias is the same node again, so ten lines can stand for a billion values (``a: &a [x, x]``,
``b: &b [*a, *a]``, ...): PyYAML builds them as shared objects at once, and whatever walks the result
afterwards (validating a theme, printing a config) runs out of memory. The node graph is measured before
anything is built from it: each node counts once per path that reaches it.
"""

from __future__ import annotations

import yaml

MAX_VALUES = 100_000  # a config for 5,000 nodes or a theme is a few thousand values


class TooLarge(ValueError):
    """The document expands to more values than `MAX_VALUES`."""


def check_expansion(node: yaml.Node, limit: int = MAX_VALUES) -> None:
    """Raises `TooLarge` when ``node`` expands to more than ``limit`` values."""
    sizes: dict[int, int] = {}
    in_progress: set[int] = set()

    def size(current: yaml.Node) -> int:
        key = id(current)
        known = sizes.get(key)
        if known is not None:
            return known
        if key in in_progress:  # a node that contains itself (``&a [*a]``) expands without end
            raise TooLarge("a value refers to itself (a recursive YAML alias)")
        in_progress.add(key)
        total = 1
        if isinstance(current, yaml.MappingNode):
            for key_node, value_node in current.value:
                total += size(key_node) + size(value_node)
                if total > limit:
                    break
        elif isinstance(current, yaml.SequenceNode):
            for item in current.value:
                total += size(item)
                if total > limit:
                    break
        in_progress.discard(key)
        if total > limit:
            raise TooLarge(f"it expands to more than {limit:,} values (YAML aliases: &name and *name)")
        sizes[key] = total
        return total

    size(node)
