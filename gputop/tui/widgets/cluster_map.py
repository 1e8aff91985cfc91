"""The cluster map: one cell per GPU, grouped by node, coloured by the selected metric.

A Line-API widget: each screen line is built as a Strip from the view and cached until the next view, so a
1,000-node cluster repaints in a few milliseconds. Two densities: one character per GPU, or, when that
would not fit, half-block characters that stack two GPUs in one cell (GPUs 0-3 on top, 4-7 below).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

from gputop.core.metrics import HeatScale, Metric
from gputop.core.models import GpuSample, NodeSample, Reachability, Severity
from gputop.core.summary import ClusterView
from gputop.tui.messages import NodeOpened, NodeSelected
from gputop.tui.palette import Palette, PaletteCache

UPPER_HALF = "\u2580"  # upper half block: foreground paints the top GPU, background the bottom one


@dataclass(frozen=True, slots=True)
class MapLayout:
    label_width: int
    group_width: int  # characters per node, separator included
    nodes_per_row: int
    rows: int
    compact: bool
    cell_width: int  # characters per GPU (1 or 2; 1 in compact mode)


class ClusterMap(Widget, can_focus=True):
    """Heat map of every GPU. Arrow keys move between nodes; Enter opens the selected node."""

    BINDINGS = [
        Binding("left", "move(-1, 0)", "Previous node", show=False),
        Binding("right", "move(1, 0)", "Next node", show=False),
        Binding("up", "move(0, -1)", "Node above", show=False),
        Binding("down", "move(0, 1)", "Node below", show=False),
        Binding("enter", "open", "Open node"),
    ]

    DEFAULT_CSS = """
    ClusterMap { height: auto; max-height: 60%; }
    """

    selected: reactive[str | None] = reactive(None, layout=False)

    def __init__(self, *, metric: Metric, scales: dict[Metric, HeatScale], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.metric = metric
        self.scales = scales
        self.highlighted: frozenset[str] = frozenset()  # nodes kept by the table's filter
        self._view: ClusterView | None = None
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._gpus_per_node = 8
        self._layout: MapLayout | None = None
        self._lines: dict[int, Strip] = {}
        self._palettes = PaletteCache()
        self._filtered = False

    # -- data in ----------------------------------------------------------------------------------------
    def apply_view(self, view: ClusterView) -> None:
        nodes = view.snapshot.nodes
        names = [n.name for n in nodes]
        if names != self._names:
            self._names = names
            self._index = {name: i for i, name in enumerate(names)}
            self._layout = None
            self.refresh(layout=True)
        self._gpus_per_node = (
            max(
                [max(n.expected_gpu_count or 0, (n.gpus[-1].index + 1) if n.gpus else 0) for n in nodes]
                or [8]
            )
            or 8
        )
        self._view = view
        if self.selected is None and names:
            self.selected = names[0]
        self._lines.clear()
        self.refresh()

    def set_metric(self, metric: Metric) -> None:
        self.metric = metric
        self._lines.clear()
        self.refresh()

    def set_filter(self, kept: frozenset[str] | None) -> None:
        """Dim the nodes a table filter leaves out (None: no filter)."""
        self._filtered = kept is not None
        self.highlighted = kept or frozenset()
        self._lines.clear()
        self.refresh()

    def watch_selected(self, _old: str | None, _new: str | None) -> None:
        self._lines.clear()
        self.refresh()

    # -- geometry ---------------------------------------------------------------------------------------
    def layout_for(self, width: int, screen_height: int) -> MapLayout:
        """The roomiest density that fits: two characters per GPU while the map stays within a quarter of
        the screen, one character within 40%, else half blocks (two GPUs per character)."""
        count = max(1, len(self._names))
        label_width = max((len(n) for n in self._names), default=6) + 1
        usable = max(1, width - label_width)
        modes = (
            (2, False, screen_height * 0.25),
            (1, False, screen_height * 0.4),
            (1, True, float("inf")),
        )
        for cell_width, compact, max_rows in modes:
            gpu_columns = math.ceil(self._gpus_per_node / 2) if compact else self._gpus_per_node
            group = gpu_columns * cell_width + 1
            per_row = max(1, usable // group)
            rows = math.ceil(count / per_row)
            if rows <= max(2, max_rows - 1):
                return MapLayout(label_width, group, per_row, rows, compact, cell_width)
        raise AssertionError("the last mode always fits")

    def _current_layout(self) -> MapLayout:
        width = self.size.width or 80
        if self._layout is None or self._layout_width != width:
            screen_height = self.screen.size.height if self.is_mounted else 50
            self._layout = self.layout_for(width, screen_height)
            self._layout_width = width
        return self._layout

    _layout_width = 0

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        screen_height = self.screen.size.height if self.is_mounted else 50
        layout = self.layout_for(width, screen_height)
        return layout.rows + 1  # + legend

    def node_at(self, x: int, y: int) -> str | None:
        layout = self._current_layout()
        if y >= layout.rows or x < layout.label_width:
            return None
        column = (x - layout.label_width) // layout.group_width
        if column >= layout.nodes_per_row:
            return None
        index = y * layout.nodes_per_row + column
        return self._names[index] if index < len(self._names) else None

    # -- rendering --------------------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_y = 0
        line = y + scroll_y
        strip = self._lines.get(line)
        if strip is None:
            strip = self._build_line(line)
            self._lines[line] = strip
        return strip

    def _build_line(self, line: int) -> Strip:
        palette = self._palettes.get(self.app)
        layout = self._current_layout()
        width = self.size.width
        if line == layout.rows:
            return Strip(self._legend(palette, layout), width).crop_extend(0, width, palette.empty)
        if self._view is None or line > layout.rows:
            return Strip.blank(width, palette.empty)
        first = line * layout.nodes_per_row
        names = self._names[first : first + layout.nodes_per_row]
        segments: list[Segment] = []
        label = names[0] if names else ""
        segments.append(Segment(label.ljust(layout.label_width), palette.dim))
        by_name = self._view.snapshot.by_name
        rows = self._view.rows
        cells = layout.group_width - 1
        after_selected = False
        for name in names:
            node = by_name[name]
            selected = name == self.selected
            dimmed = self._filtered and name not in self.highlighted
            # The separators either side of the selected node become a bracket in the selection colour.
            if selected:
                segments.append(Segment("\u2590", palette.selection))
            elif after_selected:
                segments.append(Segment("\u258c", palette.selection))
            else:
                segments.append(Segment(" ", palette.empty))
            after_selected = selected
            row = rows.get(name)
            crit = row is not None and row.severity is Severity.CRIT
            if layout.compact:
                segments.extend(self._compact_cells(node, cells, palette, dimmed))
            else:
                segments.extend(self._wide_cells(node, layout.cell_width, palette, dimmed, crit))
        if after_selected:
            segments.append(Segment("\u258c", palette.selection))
        strip = Strip(segments)
        return strip.crop_extend(0, width, palette.empty)

    def _cell_style(self, node: NodeSample, gpu: GpuSample | None, palette: Palette) -> tuple[Style, str]:
        """Style and glyph of one GPU cell. Glyphs repeat what colour says, for colour-blind users."""
        if node.reachability is Reachability.DOWN:
            return palette.down, "\u00d7"
        if gpu is None:
            return palette.missing, "-"
        if node.reachability is Reachability.STALE:
            return palette.stale, "\u00b7"
        value = self.metric.of(gpu)
        if value is None:
            return palette.na, "m" if gpu.mig_enabled else "?"
        return palette.heat_bg[self.scales[self.metric].step(value)], " "

    def _gpu_slots(self, node: NodeSample) -> list[GpuSample | None]:
        slots: list[GpuSample | None] = [None] * self._gpus_per_node
        for gpu in node.gpus:
            if 0 <= gpu.index < self._gpus_per_node:
                slots[gpu.index] = gpu
        return slots

    def _wide_cells(
        self, node: NodeSample, cell_width: int, palette: Palette, dimmed: bool, crit: bool
    ) -> list[Segment]:
        out: list[Segment] = []
        expected = node.expected_gpu_count or len(node.gpus)
        for index, gpu in enumerate(self._gpu_slots(node)):
            if gpu is None and index >= expected:
                out.append(Segment(" " * cell_width, palette.empty))
                continue
            style, glyph = self._cell_style(node, gpu, palette)
            if glyph == " " and crit and gpu is not None and self._gpu_has_crit(node.name, gpu.index):
                glyph = "!"
            if dimmed:
                style = style + Style(dim=True)
                glyph = glyph if glyph != " " else "\u2591"
            # state glyphs fill the cell; "!" marks the left of a heat-coloured cell
            text = glyph.ljust(cell_width) if glyph in " !" else glyph * cell_width
            out.append(Segment(text, style))
        return out

    def _gpu_has_crit(self, node: str, gpu_index: int) -> bool:
        row = self._view.rows.get(node) if self._view else None
        if row is None:
            return False
        return any(p.severity is Severity.CRIT and p.gpu_index == gpu_index for p in row.problems)

    def _compact_cells(self, node: NodeSample, cells: int, palette: Palette, dimmed: bool) -> list[Segment]:
        slots = self._gpu_slots(node)
        expected = node.expected_gpu_count or len(node.gpus)
        out: list[Segment] = []
        for column in range(cells):
            top_index, bottom_index = column, column + cells
            top = self._half_color(node, slots, top_index, expected, palette)
            bottom = self._half_color(node, slots, bottom_index, expected, palette)
            style = Style(color=top, bgcolor=bottom)
            if dimmed:
                style += Style(dim=True)
            out.append(Segment(UPPER_HALF, style))
        return out

    def _half_color(
        self, node: NodeSample, slots: list[GpuSample | None], index: int, expected: int, palette: Palette
    ) -> Color | None:
        if index >= len(slots) or (slots[index] is None and index >= expected):
            return palette.empty.bgcolor
        style, _glyph = self._cell_style(node, slots[index], palette)
        return style.bgcolor

    def _legend(self, palette: Palette, layout: MapLayout) -> list[Segment]:
        scale = self.scales[self.metric]
        segments = [Segment(f"{self.metric.label.capitalize()}: ", palette.text)]
        marks = dict(scale.legend(self.metric))
        for step, style in enumerate(palette.heat_bg):
            text = marks.get(step)
            if text is not None:
                segments.append(Segment(f" {text} ", style))
            else:
                segments.append(Segment("  ", style))
        segments.append(Segment("  ", palette.empty))
        for style, glyph, meaning in (
            (palette.down, "\u00d7", "down"),
            (palette.stale, "\u00b7", "stale"),
            (palette.missing, "-", "missing"),
            (palette.na, "m", "MIG/n/a"),
        ):
            segments.append(Segment(glyph, style))
            segments.append(Segment(f" {meaning}  ", palette.dim))
        if not layout.compact:
            segments.append(Segment("!", palette.heat_bg[-1]))
            segments.append(Segment(" critical  ", palette.dim))
        segments.append(Segment("[m] metric", palette.dim))
        return segments

    # -- input ------------------------------------------------------------------------------------------
    def action_move(self, dx: int, dy: int) -> None:
        if not self._names:
            return
        layout = self._current_layout()
        index = self._index.get(self.selected or "", 0)
        index = max(0, min(len(self._names) - 1, index + dx + dy * layout.nodes_per_row))
        self.selected = self._names[index]
        self.post_message(NodeSelected(self.selected))

    def action_open(self) -> None:
        if self.selected:
            self.post_message(NodeOpened(self.selected))

    def on_click(self, event: events.Click) -> None:
        name = self.node_at(event.x, event.y)
        if name is None:
            return
        self.selected = name
        self.post_message(NodeSelected(name))
        if event.chain >= 2:
            self.post_message(NodeOpened(name))

    def select(self, name: str) -> None:
        """Select a node without announcing it (the table already knows)."""
        if name in self._index:
            self.selected = name
