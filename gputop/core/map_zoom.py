"""The cluster map's zoom: one cell per GPU while that fits, then one per node, then one per group of nodes
(a Slurm partition, or a rack read from the node name), and the geometry of each.

A node's cell is its GPUs' cell codes reduced to one, a group's is its nodes' reduced again: the heat is the
worst (highest step) or the mean of theirs, as the user chooses, while a state (down, critical, missing,
stale) is never averaged away: one down node makes its group's cell "down", whatever the mode.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum, StrEnum

from gputop.core.heatmap import (
    CRIT_FLAG,
    DOWN,
    EMPTY,
    IDLE_FLAG,
    MIG_NA,
    MISSING,
    NA,
    NOT_EXPORTED,
    STALE,
    CellCodes,
)
from gputop.core.metrics import HEAT_STEPS


class Zoom(IntEnum):
    GPU = 0
    NODE = 1
    GROUP = 2

    @property
    def label(self) -> str:
        return ("a GPU", "a node", "a group")[self]


class Reduce(StrEnum):
    WORST = "worst"
    MEAN = "mean"

    def other(self) -> Reduce:
        return Reduce.MEAN if self is Reduce.WORST else Reduce.WORST


class GroupBy(StrEnum):
    PARTITION = "partition"
    RACK = "rack"


def reduce_codes(codes: Iterable[int], how: Reduce) -> int:
    """One code for many: a state first (down, then critical with the heat of the readings, missing,
    stale), else the readings' heat (their highest step, or their mean) with the idle mark where a job
    holds them idle (worst: any; mean: all), else the unread marks."""
    if isinstance(codes, tuple) and codes:
        # the common node: every GPU read, none marked; at 10,000 nodes a tick redoes most of them
        top = max(codes)
        if top < HEAT_STEPS:
            return top if how is Reduce.WORST else round(sum(codes) / len(codes))
    heats: list[int] = []
    crit = False
    idle = 0
    states: set[int] = set()
    for code in codes:
        if code < HEAT_STEPS:
            heats.append(code)
        elif code < CRIT_FLAG:
            states.add(code)
        elif code < IDLE_FLAG:
            crit = True
            heats.append(code - CRIT_FLAG)
        elif code < NOT_EXPORTED:
            idle += 1
            heats.append(code - IDLE_FLAG)
        else:
            states.add(code)
    if DOWN in states:
        return DOWN
    heat = (max(heats) if how is Reduce.WORST else round(sum(heats) / len(heats))) if heats else None
    if crit:
        return CRIT_FLAG + (heat or 0)
    for state in (MISSING, STALE):
        if state in states:
            return state
    if heat is not None:
        idle_mark = idle > 0 if how is Reduce.WORST else idle == len(heats)
        return heat + IDLE_FLAG if idle_mark else heat
    for state in (MIG_NA, NOT_EXPORTED, NA):
        if state in states:
            return state
    return EMPTY


def reduce_group(codes: Sequence[int], how: Reduce) -> tuple[int, int]:
    """A group's cell as two codes: its most urgent state (`reduce_codes`), then the heat of its nodes'
    readings alone, so that one down node among hundreds marks the group without hiding how hot the
    rest run. Both are the heat where no state is set."""
    first = reduce_codes(codes, how)
    heats = [
        code % CRIT_FLAG if code < NOT_EXPORTED and code % CRIT_FLAG < HEAT_STEPS else -1 for code in codes
    ]
    read = [heat for heat in heats if heat >= 0]
    if not read:
        return first, first
    second = max(read) if how is Reduce.WORST else round(sum(read) / len(read))
    return first, second


def node_cells(cells: Mapping[str, CellCodes], names: Sequence[str], how: Reduce) -> list[int]:
    """Each node's one cell, in ``names``' order. Most nodes' GPUs are plain readings, whose worst is
    their highest code: `max` over every node's tuple runs in C, and only a node with a state or a mark (a
    code past the heat steps) goes through `reduce_codes`; at 10,000 nodes that is a millisecond, where a
    memo of each node's last tuple cost more than it saved (a tick brings new tuples for most nodes)."""
    empty: CellCodes = (EMPTY,)
    get = cells.get
    codes = [get(name) or empty for name in names]
    if how is not Reduce.WORST:
        return [reduce_codes(node_codes, how) for node_codes in codes]
    out = list(map(max, codes))
    for at, top in enumerate(out):
        if top >= HEAT_STEPS:
            out[at] = reduce_codes(codes[at], how)
    return out


@dataclass(frozen=True, slots=True)
class Group:
    name: str
    members: tuple[int, ...]  # indices into the map's node order


OTHER_GROUP = "(other)"
NO_PARTITION = "(no partition)"


def groups_by_partition(names: Sequence[str], partitions: Mapping[str, Sequence[str]]) -> list[Group]:
    """Each node in its first partition as Slurm lists them (a node belongs to one group only, so no
    cell counts it twice); nodes Slurm does not list go together last."""
    found: dict[str, list[int]] = {}
    for index, name in enumerate(names):
        listed = partitions.get(name)
        found.setdefault(listed[0] if listed else NO_PARTITION, []).append(index)
    return _ordered(found, last=NO_PARTITION)


def groups_by_pattern(names: Sequence[str], pattern: re.Pattern[str]) -> list[Group]:
    """Nodes grouped by what ``pattern`` finds in their name: its group named ``rack``, else its first
    group, else the whole match (``^(.*)-n\\d+$``, ``r(?P<rack>\\d+)``); names it does not find together
    last."""
    found: dict[str, list[int]] = {}
    named = "rack" in pattern.groupindex
    for index, name in enumerate(names):
        match = pattern.search(name)
        if match is None:
            key = OTHER_GROUP
        else:
            key = match.group("rack") if named else match.group(1) if pattern.groups else match.group(0)
            key = key or OTHER_GROUP
        found.setdefault(key, []).append(index)
    return _ordered(found, last=OTHER_GROUP)


def _ordered(found: Mapping[str, list[int]], last: str) -> list[Group]:
    # in the order of the groups' first nodes (the map's natural order), the leftover group at the end
    groups = [Group(name, tuple(members)) for name, members in found.items() if name != last]
    groups.sort(key=lambda group: group.members[0])
    if last in found:
        groups.append(Group(last, tuple(found[last])))
    return groups


@dataclass(frozen=True, slots=True)
class MapLayout:
    zoom: Zoom
    label_width: int
    group_width: int  # characters per item (a node's GPUs and their separator, a node, a group and its gap)
    nodes_per_row: int  # items per row: nodes at GPU and node zoom, groups at group zoom
    rows: int  # rows of items
    compact: bool  # half blocks: two GPUs a character (GPU zoom), two rows of nodes a line (node zoom)
    cell_width: int  # characters per GPU at GPU zoom
    lines: int  # text lines the rows take
    window: int  # lines shown at once: all of them, or a window that follows the selection

    @property
    def windowed(self) -> bool:
        return self.window < self.lines

    def line_of(self, item: int) -> int:
        row = item // self.nodes_per_row
        return row // 2 if self.compact and self.zoom is Zoom.NODE else row


GROUP_CELL = 2  # characters a group's cell takes, its gap apart


def _gpu_layouts(
    count: int, gpus_per_node: int, label_width: int, usable: int, screen_height: int, budget: int
) -> list[tuple[MapLayout, bool]]:
    """The GPU zoom's densities, roomiest first, each with whether it fits: two characters per GPU within
    a quarter of the screen, one within 40%, half blocks (two GPUs per character) within the budget."""
    layouts = []
    for cell_width, compact, max_rows in (
        (2, False, max(2, screen_height * 0.25 - 1)),
        (1, False, max(2, screen_height * 0.4 - 1)),
        (1, True, budget),
    ):
        gpu_columns = math.ceil(gpus_per_node / 2) if compact else gpus_per_node
        group = gpu_columns * cell_width + 1
        per_row = max(1, usable // group)
        rows = math.ceil(count / per_row)
        layout = MapLayout(Zoom.GPU, label_width, group, per_row, rows, compact, cell_width, rows, rows)
        layouts.append((layout, rows <= max_rows))
    return layouts


def _node_layouts(count: int, label_width: int, usable: int, budget: int) -> list[tuple[MapLayout, bool]]:
    """The node zoom's densities: a character per node, then half blocks (two rows of nodes per line)."""
    per_row = max(1, usable)
    rows = math.ceil(count / per_row)
    layouts = []
    for compact in (False, True):
        lines = math.ceil(rows / 2) if compact else rows
        layouts.append(
            (MapLayout(Zoom.NODE, label_width, 1, per_row, rows, compact, 1, lines, lines), lines <= budget)
        )
    return layouts


def _group_layout(groups: int, label_width: int, usable: int, budget: int) -> tuple[MapLayout, bool]:
    per_row = max(1, usable // (GROUP_CELL + 1))
    rows = math.ceil(max(groups, 1) / per_row)
    layout = MapLayout(Zoom.GROUP, label_width, GROUP_CELL + 1, per_row, rows, False, 1, rows, rows)
    return layout, rows <= budget


def choose_layout(
    *,
    width: int,
    screen_height: int,
    budget: int,
    nodes: int,
    gpus_per_node: int,
    label_width: int,
    group_label_width: int,
    groups: int | None,
    zoom: Zoom | None = None,
) -> MapLayout:
    """The layout at ``zoom`` (None: the finest zoom whose roomiest fitting density fits; group zoom only
    where there are groups). ``budget``: the lines for cells and the zoom line, which the group zoom and a
    window show (`has_zoom_line`). A zoom finer than what fits takes its densest form in a window."""
    full = max(2, budget)
    budget = max(2, budget - 1)
    count = max(1, nodes)
    usable = max(1, width - label_width)
    candidates: list[list[tuple[MapLayout, bool]]] = [
        _gpu_layouts(count, gpus_per_node, label_width, usable, screen_height, full),
        _node_layouts(count, label_width, usable, full),
    ]
    if groups is not None:
        candidates.append(
            [_group_layout(groups, group_label_width, max(1, width - group_label_width), budget)]
        )
    levels = range(len(candidates)) if zoom is None else [min(int(zoom), len(candidates) - 1)]
    for level in levels:
        for layout, fits in candidates[level]:
            if fits:
                return layout
    layout = candidates[levels[-1]][-1][0]  # densest form of the coarsest (or chosen) zoom: windowed
    return MapLayout(
        layout.zoom,
        layout.label_width,
        layout.group_width,
        layout.nodes_per_row,
        layout.rows,
        layout.compact,
        layout.cell_width,
        layout.lines,
        min(layout.lines, budget),
    )


def has_zoom_line(layout: MapLayout) -> bool:
    """Whether the map gives a line to the zoom: what the selected group holds, where the window is."""
    return layout.zoom is Zoom.GROUP or layout.windowed


def window_top(layout: MapLayout, selected_line: int, top: int) -> int:
    """The first line shown: the last one, moved as little as needed to keep the selection in view."""
    if not layout.windowed:
        return 0
    if selected_line < top:
        top = selected_line
    elif selected_line >= top + layout.window:
        top = selected_line - layout.window + 1
    return max(0, min(top, layout.lines - layout.window))
