"""The cluster map's lines as strips, one per zoom: a GPU line (each node's cells, the selected node in
brackets), a node line (a character per node, or two rows stacked; the selected node a diamond), a group
line (a group's two cells, its state and its heat). Pure drawing: what is on the line is worked out by
the map."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.segment import Segment
from textual.strip import Strip

from gputop.core.heatmap import CellCodes
from gputop.core.map_zoom import Group, MapLayout
from gputop.core.safe_text import safe_line
from gputop.tui.strips import line_strip
from gputop.tui.widgets.map_cells import CellStyles, selected_cell, stacked_cells, wide_cells

LEFT_BRACKET = "\u2590"  # right half block, hugging the selected node's first cell
RIGHT_BRACKET = "\u258c"  # left half block, hugging its last cell
MAX_GROUP_LABEL = 16  # a group's name in the label column, cut beyond


def gpu_line(
    names: Sequence[str],
    codes_of: Callable[[str], CellCodes],
    dims_of: Callable[[str, int], Sequence[bool]],
    selected: str | None,
    layout: MapLayout,
    styles: CellStyles,
    width: int,
) -> Strip:
    """Each of ``names``' GPUs as a cell (wide, or two GPUs a character where the layout is compact)."""
    palette = styles.palette
    segments: list[Segment] = [Segment((names[0] if names else "").ljust(layout.label_width), palette.dim)]
    after_selected = False
    for name in names:
        is_selected = name == selected
        # The separators either side of the selected node become a bracket in the selection colour.
        if is_selected:
            segments.append(Segment(LEFT_BRACKET, palette.selection))
        elif after_selected:
            segments.append(Segment(RIGHT_BRACKET, palette.selection))
        else:
            segments.append(Segment(" ", palette.empty))
        after_selected = is_selected
        codes = codes_of(name)
        dims = dims_of(name, len(codes))
        if layout.compact:
            columns = (len(codes) + 1) // 2
            # a character holds two GPUs: it stays lit if either is kept
            lit = [
                dims[c] and (dims[c + columns] if c + columns < len(dims) else True) for c in range(columns)
            ]
            stacked_cells(segments, codes[:columns], codes[columns:], styles, lit)
        else:
            wide_cells(segments, codes, styles, dims, layout.cell_width)
    if after_selected:
        segments.append(Segment(RIGHT_BRACKET, palette.selection))
    return line_strip(segments, width, palette.empty)


def node_line(
    label: str,
    codes: Sequence[int],
    items: range,
    dims: Sequence[bool],
    selected_at: int | None,
    layout: MapLayout,
    styles: CellStyles,
    width: int,
) -> Strip:
    """A character per node of ``items`` (indices into ``codes``), or two rows of them stacked; the node
    at ``selected_at`` a diamond."""
    palette = styles.palette
    per_row = layout.nodes_per_row
    segments = [Segment(label.ljust(layout.label_width), palette.dim)]
    top = codes[items.start : min(items.start + per_row, items.stop)]
    bottom = codes[items.start + per_row : items.stop] if layout.compact else []
    lit = [
        dims[c] and (dims[c + per_row] if c + per_row < len(dims) else True) if layout.compact else dims[c]
        for c in range(len(top))
    ]
    at = selected_at
    column = (at - items.start) % per_row if at is not None and at in items else None
    spans = [(0, len(top))] if column is None else [(0, column), (column + 1, len(top))]
    for number, (start, stop) in enumerate(spans):
        if number == 1 and at is not None:
            segments.append(selected_cell(styles, codes[at]))
        if layout.compact:
            stacked_cells(segments, top[start:stop], bottom[start:stop], styles, lit[start:stop])
        else:
            wide_cells(segments, tuple(top[start:stop]), styles, lit[start:stop], 1)
    return line_strip(segments, width, palette.empty)


def group_line(
    groups: Sequence[Group],
    group_codes: Sequence[tuple[int, int]],
    items: range,
    dims: Sequence[bool],
    selected_at: int | None,
    layout: MapLayout,
    styles: CellStyles,
    width: int,
) -> Strip:
    """The groups of ``items`` side by side, each its two cells; the one at ``selected_at`` in brackets."""
    palette = styles.palette
    label = safe_line(groups[items.start].name)[:MAX_GROUP_LABEL] if items else ""
    segments = [Segment(label.ljust(layout.label_width), palette.dim)]
    after_selected = False
    for number, at in enumerate(items):
        if at == selected_at:
            segments.append(Segment(LEFT_BRACKET, palette.selection))
        elif after_selected:
            segments.append(Segment(RIGHT_BRACKET, palette.selection))
        else:
            segments.append(Segment(" ", palette.empty))
        after_selected = at == selected_at
        dimmed = dims[number]
        wide_cells(segments, group_codes[at], styles, (dimmed, dimmed), 1)
    if after_selected:
        segments.append(Segment(RIGHT_BRACKET, palette.selection))
    return line_strip(segments, width, palette.empty)
