"""The cluster map: one cell per GPU, grouped by node, coloured by the selected metric.

A Line-API widget built for thousands of GPUs. Each GPU becomes a small integer code (a heat step or a
state) once per view; a screen line is rebuilt only when the codes on it changed, neighbouring cells with the
same code are painted as one segment, and only changed lines are repainted. Three densities: two characters
per GPU, one, or half blocks that stack two GPUs in one character (GPUs 0-3 on top, 4-7 below).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.filter import ANSIToTruecolor, LineFilter, dim_color
from textual.geometry import Region
from textual.reactive import reactive
from textual.strip import Strip
from textual.widget import Widget

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
from gputop.core.metrics import HEAT_STEPS, HeatScale, Metric
from gputop.core.summary import ClusterView
from gputop.tui.messages import NodeOpened, NodeSelected
from gputop.tui.palette import Palette, PaletteCache
from gputop.tui.strips import line_strip

UPPER_HALF = "\u2580"  # upper half block: foreground paints the top GPU, background the bottom one
LEFT_BRACKET = "\u2590"  # right half block, hugging the selected node's first cell
RIGHT_BRACKET = "\u258c"  # left half block, hugging its last cell

Codes = CellCodes


@dataclass(frozen=True, slots=True)
class MapLayout:
    label_width: int
    group_width: int  # characters per node, separator included
    nodes_per_row: int
    rows: int
    compact: bool
    cell_width: int  # characters per GPU (1 or 2; 1 in compact mode)


class CellStyles:
    """Style and glyph of every cell code for one palette, and the half-block styles as they are needed."""

    def __init__(self, palette: Palette) -> None:
        self.palette = palette
        plain: dict[int, tuple[Style, str]] = {}
        for step in range(HEAT_STEPS):
            plain[step] = (palette.heat_bg[step], " ")
            plain[step + CRIT_FLAG] = (palette.heat_bg[step], "!")
            plain[step + IDLE_FLAG] = (palette.heat_bg[step], "z")  # held by a job, idle (asleep)
        # Glyphs repeat what the colour says, for colour-blind users.
        plain[DOWN] = (palette.down, "\u00d7")
        plain[MISSING] = (palette.missing, "-")
        plain[STALE] = (palette.stale, "\u00b7")
        plain[MIG_NA] = (palette.na, "m")
        plain[NA] = (palette.na, "?")
        plain[NOT_EXPORTED] = (palette.na, "\u2205")  # empty set: the site's exporter gives no such field
        plain[EMPTY] = (palette.empty, " ")
        self.plain = plain
        self.dimmed = {
            code: (_dimmed(style), "\u2591" if glyph == " " and code != EMPTY else glyph)
            for code, (style, glyph) in plain.items()
        }
        self._halves: dict[tuple[int, int, bool], Style] = {}
        # Textual turns ANSI colours into the theme's truecolour, and dim into a blended colour, on every
        # segment it paints; a map whose cells are truecolour without dim does not need it.
        drawn = [style for style, _glyph in (*plain.values(), *self.dimmed.values())]
        self.truecolor_undimmed = all(
            map(_truecolor_undimmed, [*drawn, palette.dim, palette.selection, palette.text])
        )

    def half(self, top: int, bottom: int, dimmed: bool) -> Style:
        key = (top, bottom, dimmed)
        style = self._halves.get(key)
        if style is None:
            style = Style(color=self.plain[top][0].bgcolor, bgcolor=self.plain[bottom][0].bgcolor)
            self._halves[key] = style = _dimmed(style) if dimmed else style
        return style


def _truecolor_undimmed(style: Style) -> bool:
    colors = (style.color, style.bgcolor)
    return not style.dim and all(color is None or color.triplet is not None for color in colors)


def _dimmed(style: Style) -> Style:
    """``style`` dimmed as Textual paints dim: the text colour blended towards the background (done here
    once per style, rather than by Textual's line filter on every segment of every line)."""
    color, bgcolor = style.color, style.bgcolor
    if bgcolor is None or bgcolor.triplet is None or (color is not None and color.triplet is None):
        return style + Style(dim=True)  # ANSI colours: Textual's filter blends them as it converts them
    if color is None:
        return style  # no text colour to dim
    return style + Style(color=dim_color(bgcolor, color))


# In compact mode a character holds two GPUs; when either has a state or a flag, its glyph takes the
# character, the most urgent first.
_GLYPH_ORDER = (DOWN, MISSING, STALE)


def _marked(top: int, bottom: int) -> int | None:
    """The code whose glyph a two-GPU character shows, or None for the two heat colours."""
    for code in (top, bottom):
        if CRIT_FLAG <= code < IDLE_FLAG:
            return code
    for state in _GLYPH_ORDER:
        if state in (top, bottom):
            return state
    for code in (top, bottom):
        if IDLE_FLAG <= code < NOT_EXPORTED:
            return code
    for state in (MIG_NA, NOT_EXPORTED):
        if state in (top, bottom):
            return state
    return None


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
        self._filtered = False
        # within highlighted nodes, the GPU indices kept lit (a job's GPUs); a node absent here is lit whole
        self._kept_gpus: Mapping[str, frozenset[int]] = {}
        self._view: ClusterView | None = None
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._gpus_per_node = 8
        self._layout: MapLayout | None = None
        self._layout_key: tuple[int, int] = (0, 0)
        self._palettes = PaletteCache()
        self._styles: CellStyles | None = None
        # the view's cell codes for the map's metric, by node (the core's: the map never works them out)
        self._cells: Mapping[str, Codes] = {}
        self._unexported = False  # some node's exporter does not give the map's metric
        # line -> (signature, strip): a line is rebuilt only when its signature changed
        self._lines: dict[int, tuple[object, Strip]] = {}

    # -- data in ----------------------------------------------------------------------------------------
    def apply_view(self, view: ClusterView) -> None:
        nodes = view.snapshot.nodes
        if len(nodes) != len(self._names) or any(
            n.name != m for n, m in zip(nodes, self._names, strict=True)
        ):
            self._names = [n.name for n in nodes]
            self._index = {name: i for i, name in enumerate(self._names)}
            self._gpus_per_node = (
                max(
                    (max(n.expected_gpu_count or 0, (n.gpus[-1].index + 1) if n.gpus else 0) for n in nodes),
                    default=8,
                )
                or 8
            )
            self._forget_lines()
            self.refresh(layout=True)
        self._view = view
        if self.selected is None and self._names:
            self.selected = self._names[0]
        self._cells = view.cells_for(self.metric)
        self._note_unexported()
        self._refresh_changed_lines()

    def set_metric(self, metric: Metric) -> None:
        self.metric = metric
        if self._view is not None:
            self._cells = self._view.cells_for(metric)
            self._note_unexported()
        self._forget_lines()

    def _note_unexported(self) -> None:
        """Whether the legend explains the "not exported" mark: only while some node shows it."""
        fields = self.metric.fields
        if self._view is None:
            return
        self._unexported = any(
            not node.not_exported.isdisjoint(fields)
            for node in self._view.snapshot.nodes
            if node.not_exported
        )

    def set_filter(
        self, kept: frozenset[str] | None, gpus: Mapping[str, frozenset[int]] | None = None
    ) -> None:
        """Dim the nodes a table filter leaves out (None: no filter); ``gpus`` also dims, on the nodes it
        names, every GPU but those listed (a job's)."""
        self._filtered = kept is not None
        self.highlighted = kept or frozenset()
        self._kept_gpus = gpus or {}
        self._forget_lines()

    def _dims(self, name: str, cells: int) -> tuple[bool, ...]:
        """Per GPU slot of ``name``: dimmed or not."""
        if not self._filtered:
            return (False,) * cells
        if name not in self.highlighted:
            return (True,) * cells
        kept = self._kept_gpus.get(name)
        if kept is None:
            return (False,) * cells
        return tuple(i not in kept for i in range(cells))

    def watch_selected(self, old: str | None, new: str | None) -> None:
        # only the lines holding the old and the new selection change
        if not self.is_mounted or self._layout is None:
            return
        per_row = self._layout.nodes_per_row
        for name in (old, new):
            index = self._index.get(name or "")
            if index is not None:
                line = index // per_row
                self._lines.pop(line, None)
                self.refresh(Region(0, line, self.size.width, 1))

    def on_resize(self, _event: events.Resize) -> None:
        self._forget_lines()

    def _forget_lines(self) -> None:
        self._lines.clear()
        self.refresh()

    # -- cell codes -------------------------------------------------------------------------------------
    def _codes(self, name: str) -> Codes:
        """``name``'s cell codes, every node as wide as the widest so groups line up."""
        codes = self._cells.get(name, ())
        pad = self._gpus_per_node - len(codes)
        return codes + (EMPTY,) * pad if pad > 0 else codes[: self._gpus_per_node]

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

    @property
    def map_layout(self) -> MapLayout:
        """The layout the map is drawn in at its current size: density, nodes per row, rows."""
        return self._current_layout()

    def _screen_height(self) -> int:
        return self.screen.size.height if self.is_mounted else 50

    def _current_layout(self) -> MapLayout:
        key = (self.size.width or 80, self._screen_height())
        if self._layout is None or self._layout_key != key:
            self._layout = self.layout_for(*key)
            self._layout_key = key
            self._lines.clear()
        return self._layout

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        self._layout = None  # names or sizes changed: recompute on the next line
        return self.layout_for(width, self._screen_height()).rows + 1  # + legend

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
    def _cell_styles(self) -> CellStyles:
        palette = self._palettes.get(self.app)
        if self._styles is None or self._styles.palette is not palette:
            self._styles = CellStyles(palette)
            self._lines.clear()
        return self._styles

    def _line_names(self, line: int, layout: MapLayout) -> list[str]:
        first = line * layout.nodes_per_row
        return self._names[first : first + layout.nodes_per_row]

    def _signature(self, line: int, layout: MapLayout) -> object:
        names = self._line_names(line, layout)
        # the view's tuples: the same objects while the nodes did not move, so comparing them is quick
        cells = self._cells
        codes = tuple(cells.get(name, ()) for name in names)
        selected = names.index(self.selected) if self.selected in names else -1
        kept = self._kept_gpus
        dimmed = tuple((n in self.highlighted, kept.get(n)) for n in names) if self._filtered else ()
        return (codes, selected, dimmed, self.size.width)

    def _refresh_changed_lines(self) -> None:
        """Repaint only the lines whose cells changed since they were last drawn."""
        if not self.is_mounted or self.size.width == 0:
            self.refresh()
            return
        self._cell_styles()  # a new theme drops every cached line
        layout = self._current_layout()
        width = self.size.width
        for line in range(layout.rows):
            cached = self._lines.get(line)
            if cached is None or cached[0] != self._signature(line, layout):
                self._lines.pop(line, None)
                self.refresh(Region(0, line, width, 1))

    def get_line_filters(self) -> Sequence[LineFilter]:
        # The map is some 200 segments a line: converting each, as Textual's ANSI filter does, was a third
        # of the CPU of a key that repaints the whole map. Skipped only when every colour is truecolour and
        # the dimmed cells are blended already, so the filter has nothing to change; the others (NO_COLOR)
        # stay.
        filters = super().get_line_filters()
        if not self._cell_styles().truecolor_undimmed:
            return filters
        return [f for f in filters if not isinstance(f, ANSIToTruecolor)]

    def render_line(self, y: int) -> Strip:
        styles = self._cell_styles()
        layout = self._current_layout()
        width = self.size.width
        if y == layout.rows:
            return line_strip(self._legend(styles, layout), width, styles.palette.empty)
        if self._view is None or y > layout.rows:
            return line_strip([], width, styles.palette.empty)
        signature = self._signature(y, layout)
        cached = self._lines.get(y)
        if cached is not None and cached[0] == signature:
            return cached[1]
        strip = self._build_line(y, layout, styles)
        self._lines[y] = (signature, strip)
        return strip

    def _build_line(self, line: int, layout: MapLayout, styles: CellStyles) -> Strip:
        palette = styles.palette
        names = self._line_names(line, layout)
        segments: list[Segment] = [
            Segment((names[0] if names else "").ljust(layout.label_width), palette.dim)
        ]
        after_selected = False
        for name in names:
            selected = name == self.selected
            # The separators either side of the selected node become a bracket in the selection colour.
            if selected:
                segments.append(Segment(LEFT_BRACKET, palette.selection))
            elif after_selected:
                segments.append(Segment(RIGHT_BRACKET, palette.selection))
            else:
                segments.append(Segment(" ", palette.empty))
            after_selected = selected
            codes = self._codes(name)
            dims = self._dims(name, len(codes))
            if layout.compact:
                self._compact_cells(segments, codes, styles, dims)
            else:
                self._wide_cells(segments, codes, styles, dims, layout.cell_width)
        if after_selected:
            segments.append(Segment(RIGHT_BRACKET, palette.selection))
        return line_strip(segments, self.size.width, palette.empty)

    @staticmethod
    def _wide_cells(
        segments: list[Segment], codes: Codes, styles: CellStyles, dims: tuple[bool, ...], width: int
    ) -> None:
        run = (codes[0], dims[0])
        run_length = 0
        for cell_key in (*zip(codes, dims, strict=True), (-1, False)):  # -1 flushes the last run
            if cell_key == run:
                run_length += 1
                continue
            run_code, run_dimmed = run
            style, glyph = (styles.dimmed if run_dimmed else styles.plain)[run_code]
            # a state glyph fills its cell; "!" marks the left of a heat-coloured cell
            cell = glyph * width if glyph not in " !z" else glyph.ljust(width)
            segments.append(Segment(cell * run_length, style))
            run, run_length = cell_key, 1

    @staticmethod
    def _compact_cells(
        segments: list[Segment], codes: Codes, styles: CellStyles, dims: tuple[bool, ...]
    ) -> None:
        columns = (len(codes) + 1) // 2
        run_style: Style | None = None
        run_length = 0
        for column in range(columns):
            top = codes[column]
            below = column + columns
            bottom = codes[below] if below < len(codes) else EMPTY
            # a character holds two GPUs: it stays lit if either is kept
            dimmed = dims[column] and (dims[below] if below < len(dims) else True)
            if top >= HEAT_STEPS or bottom >= HEAT_STEPS:
                marked = _marked(top, bottom)
                if marked is not None:
                    # colour is never the only signal: a state or flag of either GPU shows its glyph
                    if run_style is not None:
                        segments.append(Segment(UPPER_HALF * run_length, run_style))
                        run_style, run_length = None, 0
                    style, glyph = (styles.dimmed if dimmed else styles.plain)[marked]
                    segments.append(Segment(glyph, style))
                    continue
            style = styles.half(top, bottom, dimmed)
            if style is run_style:
                run_length += 1
                continue
            if run_style is not None:
                segments.append(Segment(UPPER_HALF * run_length, run_style))
            run_style, run_length = style, 1
        if run_style is not None:
            segments.append(Segment(UPPER_HALF * run_length, run_style))

    def _legend(self, styles: CellStyles, layout: MapLayout) -> list[Segment]:
        """The metric's scale and every glyph with its meaning; on a narrow map, the short words, so that
        no glyph falls off the end."""
        for short in (False, True):
            segments = self._legend_segments(styles, short)
            if sum(len(segment.text) for segment in segments) <= self.size.width:
                break
        return segments

    def _legend_segments(self, styles: CellStyles, short: bool) -> list[Segment]:
        palette = styles.palette
        scale = self.scales[self.metric]
        label = self.metric.label.capitalize()
        segments = [Segment(f"{label[:4] if short else label}: ", palette.text)]
        marks = dict(scale.legend(self.metric))
        for step, style in enumerate(palette.heat_bg):
            text = marks.get(step)
            if text is None:
                segments.append(Segment("  ", style))
            else:
                segments.append(Segment(text if short else f" {text} ", style))
        gap = " " if short else "  "
        segments.append(Segment(gap, palette.empty))
        meanings = (
            (styles.plain[DOWN], "down"),
            (styles.plain[STALE], "stale"),
            (styles.plain[MISSING], "missing" if not short else "miss"),
            (styles.plain[MIG_NA], "MIG/n/a" if not short else "MIG"),
            *(
                ((styles.plain[NOT_EXPORTED], "not exported" if not short else "n/e"),)
                if self._unexported
                else ()
            ),
            ((palette.heat_bg[-1], "!"), "critical" if not short else "crit"),
            ((palette.heat_bg[0], "z"), "idle in a job" if not short else "idle"),
        )
        for (style, glyph), meaning in meanings:
            segments.append(Segment(glyph, style))
            segments.append(Segment(f"{'' if short else ' '}{meaning}{gap}", palette.dim))
        segments.append(Segment("[m] metric" if not short else "[m]", palette.dim))
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
        if name in self._index and name != self.selected:
            self.selected = name
