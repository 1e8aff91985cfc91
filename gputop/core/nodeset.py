"""Node sets in the Slurm/ClusterShell syntax ("gpu[001-128],dgx-a[01-04]") and natural name order.

A thin wrapper over ``ClusterShell.NodeSet`` so the rest of gputop gets plain tuples and ``ValueError``.
Group resolution (``@name``) is switched off: ClusterShell would read groups.conf and may run external
commands to resolve a group, which a pure module must not do and a config file should not depend on.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ClusterShell.NodeSet import NodeSet

# Far beyond any real cluster, low enough that a typo such as gpu[1-10000000] fails at once instead of
# spending a minute and a few GiB building ten million names.
MAX_NODES = 100_000

# What ssh and Slurm accept as a host name or alias; rules out spaces, quotes, '@' and stray operators.
_HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
# A numeric range inside brackets, checked before ClusterShell builds it (building is linear in its size).
_RANGE = re.compile(r"(\d+)\s*-\s*(\d+)")
_DIGITS = re.compile(r"(\d+)")


@functools.cache
def _clustershell() -> Any:
    # Imported on first use: ClusterShell reads /etc/clustershell/defaults.conf when it is imported, and
    # importing the core must do no I/O (and start-up stays faster without it).
    from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException
    from ClusterShell.RangeSet import RangeSet, RangeSetException

    return SimpleNamespace(
        RangeSet=RangeSet,
        NodeSet=NodeSet,
        RESOLVER_NOGROUP=RESOLVER_NOGROUP,
        NodeSetException=NodeSetException,
        RangeSetException=RangeSetException,
    )


def _parse(text: str) -> NodeSet:
    if not text.strip():
        raise ValueError("empty nodeset")
    if "@" in text:
        raise ValueError(f"{text!r}: node groups (@name) are not supported; list the nodes: gpu[001-128]")
    for low, high in _RANGE.findall(text):
        if int(high) - int(low) >= MAX_NODES:
            raise ValueError(f"{text!r}: range {low}-{high} is larger than {MAX_NODES:,} nodes")
    cs = _clustershell()
    try:
        nodes = cs.NodeSet(text, resolver=cs.RESOLVER_NOGROUP)
    except (cs.NodeSetException, cs.RangeSetException) as err:
        raise ValueError(f"{text!r} is not a valid nodeset ({err})") from None
    if len(nodes) > MAX_NODES:
        raise ValueError(f"{text!r} names {len(nodes):,} nodes, more than the {MAX_NODES:,} gputop allows")
    return nodes


def _checked_names(text: str, nodes: NodeSet) -> tuple[str, ...]:
    names = tuple(sorted(nodes, key=natural_key))
    if not names:
        raise ValueError(f"{text!r} names no nodes")
    for name in names:
        if not _HOST_NAME.fullmatch(name):
            raise ValueError(f"{text!r}: {name!r} is not a valid host name")
    return names


def expand_nodeset(text: str) -> tuple[str, ...]:
    """Every node name in ``text``, in natural order; ``ValueError`` with a readable reason on bad syntax."""
    return _checked_names(text, _parse(text))


def expand_and_fold(text: str) -> tuple[tuple[str, ...], str]:
    """Both the names and ClusterShell's canonical folded text, parsing ``text`` once."""
    nodes = _parse(text)
    return _checked_names(text, nodes), str(nodes)


def fold_nodes(names: Iterable[str]) -> str:
    """The shortest nodeset text for ``names``: ["gpu001", "gpu002", "gpu004"] -> "gpu[001-002,004]"."""
    cs = _clustershell()
    nodes = cs.NodeSet(resolver=cs.RESOLVER_NOGROUP)
    for name in names:
        # Names go in one by one as literal nodes; a name containing nodeset syntax is not a host name.
        if not _HOST_NAME.fullmatch(name):
            raise ValueError(f"{name!r} is not a valid host name")
        nodes.update(name)
    return str(nodes)


def fold_indices(indices: Iterable[int]) -> str:
    """GPU indices as Slurm writes them: [0, 1, 2, 3, 6] -> "0-3,6"."""
    return str(_clustershell().RangeSet.fromlist([str(i) for i in indices]))


@functools.lru_cache(maxsize=1 << 16)  # node names repeat every tick; the split is the costly part
# Every tick sorts every node by it (10,000 names took some 30 ms): the same names come back each tick, so
# their keys are kept, as many as the largest fleet gputop holds has names.
@functools.lru_cache(maxsize=1 << 16)
def natural_key(name: str) -> tuple[tuple[str | int, ...], str]:
    """Sort key that orders digit runs by value: gpu2 < gpu10, rack2-node9 < rack10-node1.

    re.split with a capturing group alternates text and digits starting with text, so tuples from two
    names compare text with text and int with int. The name itself breaks ties such as gpu01 vs gpu1.
    """
    parts = _DIGITS.split(name)
    return tuple(int(p) if i % 2 else p.casefold() for i, p in enumerate(parts)), name
