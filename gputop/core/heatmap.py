"""Each GPU of a node as a small integer for the cluster map: a heat step of the chosen metric, or a state.

Computed once per node per tick (by the view stage), so the map only looks codes up. `cell_codes` is the
one definition of a node's codes; `cells_of` gives many nodes' at once (with numpy from a few hundred
nodes, `gputop.core.cell_columns`, which gives the same codes faster).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING

from gputop.core.health import Problem
from gputop.core.metrics import HEAT_STEPS, HeatScale, Metric
from gputop.core.models import NodeSample, Reachability, Severity

if TYPE_CHECKING:
    from gputop.core.summary import NodeRow

# 0..9 are heat steps; CRIT_FLAG + step marks a GPU with a critical problem, IDLE_FLAG + step one that a
# job holds idle; 10..15 and NOT_EXPORTED are the states.
CRIT_FLAG = 16
IDLE_FLAG = 32
DOWN, MISSING, STALE, MIG_NA, NA, EMPTY = 10, 11, 12, 13, 14, 15
NOT_EXPORTED = 48  # the host's exporter does not give this metric at all (a store's source): not a fault

CellCodes = tuple[int, ...]

_INDEX = attrgetter("index")
_TOP_STEP = HEAT_STEPS - 1


def cell_codes(
    node: NodeSample,
    problems: tuple[Problem, ...],
    metric: Metric,
    scale: HeatScale,
    idle_indices: frozenset[int] = frozenset(),
) -> CellCodes:
    """One code per GPU slot, index = GPU index; slots up to the expected count that no GPU fills are
    MISSING. ``idle_indices``: GPUs held idle by a job (`NodeRow.idle_gpu_indices`); a critical problem
    outranks the idle mark. For a metric a rule judges (temperature, memory), the top step is the rule's
    verdict: a flagged GPU takes it whatever its value (hysteresis), an unflagged one stays below it."""
    width = max(node.expected_gpu_count or 0, max(map(_INDEX, node.gpus), default=-1) + 1)
    expected = node.expected_gpu_count if node.expected_gpu_count is not None else width
    if node.reachability is Reachability.DOWN:
        return (DOWN,) * width
    codes = [MISSING if i < expected else EMPTY for i in range(width)]
    crit_gpus: set[int | None] = set()
    if problems and problems[0].severity is Severity.CRIT:
        crit_gpus = {p.gpu_index for p in problems if p.severity is Severity.CRIT}
    if node.reachability is Reachability.STALE:
        for gpu in node.gpus:
            if gpu.index >= 0:
                codes[gpu.index] = STALE
        return tuple(codes)
    value_of = metric.reader
    unread = NA
    if node.not_exported and not node.not_exported.isdisjoint(metric.fields):
        unread = NOT_EXPORTED
    # HeatScale.step inlined, the same arithmetic in the same order (a tick at 10,000 nodes does 80,000)
    low, warn = scale.low, scale.warn
    span = warn - low
    rule_kind = metric.rule_kind
    flagged: set[int | None] | None = None
    if rule_kind is not None:
        flagged = {p.gpu_index for p in problems if p.kind == rule_kind} if problems else set()
    for gpu in node.gpus:
        index = gpu.index
        if index < 0:
            continue
        value = value_of(gpu)
        if value is None:
            codes[index] = MIG_NA if gpu.mig_enabled else unread
            continue
        if value >= warn:
            heat = _TOP_STEP
        elif value <= low:
            heat = 0
        else:
            heat = int((value - low) / span * _TOP_STEP)
            if heat > _TOP_STEP - 1:
                heat = _TOP_STEP - 1
        if flagged is not None:
            heat = _TOP_STEP if index in flagged else min(heat, _TOP_STEP - 1)
        flag = CRIT_FLAG if index in crit_gpus else IDLE_FLAG if index in idle_indices else 0
        codes[index] = heat + flag
    return tuple(codes)


# From this many nodes the codes are worked out with numpy (`cell_columns`), below it node by node: a few
# hundred nodes take a millisecond or two either way, and a small cluster need not load numpy for them.
COLUMNS_FROM_NODES = 256


def cells_of(
    nodes: Sequence[NodeSample], rows: Mapping[str, NodeRow], metric: Metric, scale: HeatScale
) -> dict[str, CellCodes]:
    """`cell_codes` of every node in ``nodes`` that has a row in ``rows``, by name, in ``nodes``' order."""
    if len(nodes) >= COLUMNS_FROM_NODES:
        from gputop.core.cell_columns import all_cell_codes

        return all_cell_codes(nodes, rows, metric, scale)
    return {
        node.name: cell_codes(node, row.problems, metric, scale, row.idle_gpu_indices)
        for node in nodes
        if (row := rows.get(node.name)) is not None
    }
