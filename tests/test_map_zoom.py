"""The map's zoom: GPUs reduced to a node's cell and nodes to a group's, the groups, and which zoom and
density fit a screen."""

from __future__ import annotations

import re

from gputop.core.heatmap import CRIT_FLAG, DOWN, EMPTY, IDLE_FLAG, MIG_NA, MISSING, NOT_EXPORTED, STALE
from gputop.core.map_zoom import (
    NO_PARTITION,
    OTHER_GROUP,
    MapLayout,
    Reduce,
    Zoom,
    choose_layout,
    groups_by_partition,
    groups_by_pattern,
    has_zoom_line,
    node_cells,
    reduce_codes,
    reduce_group,
    window_top,
)

W, M = Reduce.WORST, Reduce.MEAN


def test_a_node_cell_is_the_worst_or_mean_heat_and_states_are_never_averaged_away() -> None:
    assert reduce_codes((1, 2, 9, 0), W) == 9
    assert reduce_codes((1, 2, 9, 0), M) == 3
    # a critical GPU keeps its mark in both modes, with the heat of the readings
    assert reduce_codes((1, CRIT_FLAG + 4, 1, 1), M) == CRIT_FLAG + 2
    assert reduce_codes((1, CRIT_FLAG + 4, 1, 1), W) == CRIT_FLAG + 4
    # down outranks everything; missing and stale outrank the heat
    assert reduce_codes((DOWN,) * 8, M) == DOWN
    assert reduce_codes((CRIT_FLAG + 9, DOWN), W) == DOWN
    assert reduce_codes((5, MISSING, 5), M) == MISSING
    assert reduce_codes((5, STALE), W) == STALE
    # idle in a job: any GPU marks the worst, all of them the mean
    assert reduce_codes((IDLE_FLAG + 0, 7), W) == IDLE_FLAG + 7
    assert reduce_codes((IDLE_FLAG + 0, 7), M) == 4
    assert reduce_codes((IDLE_FLAG + 0, IDLE_FLAG + 2), M) == IDLE_FLAG + 1
    # no reading at all: the unread mark, not a colour
    assert reduce_codes((MIG_NA, NOT_EXPORTED), W) == MIG_NA
    assert reduce_codes((NOT_EXPORTED, NOT_EXPORTED), M) == NOT_EXPORTED
    assert reduce_codes((), W) == EMPTY


def test_a_group_cell_shows_its_state_beside_the_heat_of_the_rest() -> None:
    nodes = [2] * 99 + [DOWN]
    assert reduce_group(nodes, M) == (DOWN, 2)
    assert reduce_group([1, 3, 8], W) == (8, 8)
    assert reduce_group([1, 3, 8], M) == (4, 4)
    assert reduce_group([CRIT_FLAG + 9, 1], M) == (CRIT_FLAG + 5, 5)
    assert reduce_group([DOWN, DOWN], W) == (DOWN, DOWN)


def test_node_cells_are_each_nodes_reduced_codes_plain_or_not() -> None:
    cells = {
        "plain": (1, 2, 9, 0),
        "down": (DOWN, DOWN),
        "crit": (3, CRIT_FLAG + 1, 2),
        "idle": (IDLE_FLAG + 2, 4),
        "stale": (STALE, 5),
        "missing": (7, MISSING),
        "mig": (MIG_NA, 2),
        "unexported": (NOT_EXPORTED, NOT_EXPORTED),
    }
    names = [*cells, "absent"]
    for how in (W, M):
        expected = [reduce_codes(cells[name], how) for name in cells] + [EMPTY]
        assert node_cells(cells, names, how) == expected
    assert node_cells(cells, ["plain", "crit", "idle"], W) == [9, CRIT_FLAG + 3, IDLE_FLAG + 4]


def test_groups_by_partition_and_by_rack_pattern() -> None:
    names = ["a01", "a02", "b01", "x9"]
    parts = {"a01": ("gpu", "all"), "a02": ("gpu",), "b01": ("debug",)}
    groups = groups_by_partition(names, parts)
    assert [(g.name, g.members) for g in groups] == [("gpu", (0, 1)), ("debug", (2,)), (NO_PARTITION, (3,))]
    racks = groups_by_pattern(["r01-n01", "r01-n02", "r02-n01", "login"], re.compile(r"^(r\d+)-"))
    assert [(g.name, g.members) for g in racks] == [("r01", (0, 1)), ("r02", (2,)), (OTHER_GROUP, (3,))]
    named = groups_by_pattern(["rack7-a", "rack7-b"], re.compile(r"(?P<pre>x)?rack(?P<rack>\d+)"))
    assert [g.name for g in named] == ["7"]
    whole = groups_by_pattern(["dgx-a1", "dgx-b1"], re.compile(r"dgx-\w"))
    assert [g.name for g in whole] == ["dgx-a", "dgx-b"]


def layout(
    nodes: int, *, width: int = 200, height: int = 50, groups: int | None = None, zoom: Zoom | None = None
) -> MapLayout:
    budget = int((height - 3) * 0.6) - 1
    return choose_layout(
        width=width,
        screen_height=height,
        budget=budget,
        nodes=nodes,
        gpus_per_node=8,
        label_width=9,
        group_label_width=7,
        groups=groups,
        zoom=zoom,
    )


def test_the_finest_zoom_that_fits_is_chosen() -> None:
    small = layout(32)
    assert small.zoom is Zoom.GPU and not small.compact and small.cell_width == 2
    thousand = layout(1000)
    assert thousand.zoom is Zoom.GPU and thousand.compact and not thousand.windowed
    assert thousand.nodes_per_row * thousand.rows >= 1000 and not has_zoom_line(thousand)
    # 80,000 GPUs on 200x50: a cell per node, two rows of nodes stacked in each line, no window
    ten_k = layout(10_000, groups=1000)
    assert ten_k.zoom is Zoom.NODE and ten_k.compact and not ten_k.windowed
    assert ten_k.nodes_per_row * ten_k.rows >= 10_000 and ten_k.lines <= 27
    # a smaller terminal: a cell per group
    small_screen = layout(10_000, width=120, height=40, groups=300)
    assert small_screen.zoom is Zoom.GROUP and not small_screen.windowed and has_zoom_line(small_screen)
    # without groups, the node zoom in a window
    no_groups = layout(10_000, width=120, height=40)
    assert no_groups.zoom is Zoom.NODE and no_groups.windowed and no_groups.window < no_groups.lines


def test_a_zoom_finer_than_fits_is_a_window_that_follows_the_selection() -> None:
    gpus = layout(10_000, zoom=Zoom.GPU)
    assert gpus.zoom is Zoom.GPU and gpus.compact and gpus.windowed and has_zoom_line(gpus)
    assert gpus.window == int((50 - 3) * 0.6) - 2
    top = window_top(gpus, gpus.line_of(0), 0)
    assert top == 0
    far = gpus.line_of(5000)
    top = window_top(gpus, far, top)
    assert top <= far < top + gpus.window and top == far - gpus.window + 1
    # moving within the window does not move it; moving above it brings its top to the selection
    assert window_top(gpus, far - 1, top) == top
    assert window_top(gpus, 3, top) == 3
    assert window_top(gpus, 10**6, 0) == gpus.lines - gpus.window
    # a coarser zoom than needed is shown whole
    coarse = layout(32, zoom=Zoom.NODE)
    assert coarse.zoom is Zoom.NODE and not coarse.windowed and coarse.lines == 1
    # group zoom asked for where there are no groups: the node zoom
    assert layout(32, zoom=Zoom.GROUP).zoom is Zoom.NODE
