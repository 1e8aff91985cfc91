"""The node table: one row per node, sortable by any column, filterable, thousands of rows without lag.

A virtual Line-API table: only the rows on screen are rendered, each tick re-sorts the keys (cheap) and
throws away the cached lines. The cursor follows its node by name across sorts and filters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gputop.core.config import Thresholds
from gputop.core.filter import NodeFilter
from gputop.core.models import Reachability, Severity
from gputop.core.nodeset import natural_key
from gputop.core.summary import ClusterView, NodeRow
from gputop.tui import format as fmt
from gputop.tui.messages import NodeOpened, NodeSelected
from gputop.tui.palette import Palette, PaletteCache
from gputop.tui.strips import line_strip

Cell = tuple[str, Severity | None]


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    title: str
    width: int  # 0: take what is left
    right: bool
    sort_key: Callable[[NodeRow], Any]
    cell: Callable[[NodeRow, Thresholds], Cell]


def _none_last(value: Any) -> tuple[bool, Any]:
    return (value is None, value if value is not None else 0)


def _temp_cell(row: NodeRow, t: Thresholds) -> Cell:
    value = row.temp_max_c
    if value is None:
        return fmt.NA, None
    severity = Severity.CRIT if value >= t.temp_crit_c else Severity.WARN if value >= t.temp_warn_c else None
    return fmt.temp(value), severity


def _mem_cell(row: NodeRow, t: Thresholds) -> Cell:
    pct = row.mem_pct
    text = fmt.mem_pair(row.mem_used_mib, row.mem_total_mib)
    return text, Severity.WARN if pct is not None and pct >= t.mem_warn_pct else None


def _state_cell(row: NodeRow, _t: Thresholds) -> Cell:
    severity = {Reachability.OK: None, Reachability.STALE: Severity.WARN, Reachability.DOWN: Severity.CRIT}
    return row.reachability.value, severity[row.reachability]


def _gpus_cell(row: NodeRow, _t: Thresholds) -> Cell:
    expected = row.expected_gpu_count
    if expected is None:
        return str(row.gpu_count), None
    return f"{row.gpu_count}/{expected}", Severity.CRIT if row.gpu_count < expected else None


def _slurm_cell(row: NodeRow, _t: Thresholds) -> Cell:
    state = row.slurm_state
    if state is None:
        return "-", None
    if state.endswith("*") or state.startswith("down"):
        return state, Severity.CRIT
    if state.startswith("drain"):
        return state, Severity.WARN
    return state, None


def _problem_cell(row: NodeRow, _t: Thresholds) -> Cell:
    return row.worst_problem, row.severity if row.problems else None


SEVERITY_ORDER = {Severity.CRIT: 0, Severity.WARN: 1, Severity.OK: 2}

COLUMNS: tuple[Column, ...] = (
    Column("name", "Node", 10, False, lambda r: natural_key(r.name), lambda r, t: (r.name, None)),
    Column("state", "State", 6, False, lambda r: r.reachability.value, _state_cell),
    Column("gpus", "GPUs", 5, True, lambda r: r.gpu_count, _gpus_cell),
    Column(
        "util",
        "Util",
        5,
        True,
        lambda r: _none_last(r.util_mean_pct),
        lambda r, t: (fmt.pct(r.util_mean_pct), None),
    ),
    Column(
        "util_max",
        "Max",
        5,
        True,
        lambda r: _none_last(r.util_max_pct),
        lambda r, t: (fmt.pct(r.util_max_pct), None),
    ),
    Column("temp", "Temp", 5, True, lambda r: _none_last(r.temp_max_c), _temp_cell),
    Column("mem", "Memory", 10, True, lambda r: _none_last(r.mem_pct), _mem_cell),
    Column(
        "power", "Power", 7, True, lambda r: _none_last(r.power_w), lambda r, t: (fmt.power(r.power_w), None)
    ),
    Column("slurm", "Slurm", 12, False, lambda r: r.slurm_state or "", _slurm_cell),
    Column(
        "problem",
        "Problem",
        0,
        False,
        # rows arrive in natural name order and the sort is stable, so ties stay in name order
        lambda r: (SEVERITY_ORDER[r.severity], -len(r.problems)),
        _problem_cell,
    ),
)
COLUMN_BY_KEY = {c.key: c for c in COLUMNS}
# On a narrow terminal these go first, so the problem column keeps room to say what is wrong.
DROP_ORDER = ("util_max", "power", "gpus", "state", "slurm", "mem")
PROBLEM_MIN_WIDTH = 24
# Columns whose natural order is "worst first" when first chosen.
DESCENDING_FIRST = {"util", "util_max", "temp", "mem", "power"}


class NodeTable(ScrollView, can_focus=True):
    """Sortable, filterable node list. Enter opens the node under the cursor."""

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home,g", "jump(0)", "First node", show=False),
        Binding("end,G", "jump(-1)", "Last node", show=False),
        Binding("enter", "open", "Open node"),
        Binding("s", "sort_next", "Sort column"),
        Binding("S", "sort_reverse", "Reverse sort"),
    ]

    DEFAULT_CSS = """
    NodeTable { height: 1fr; overflow-x: hidden; }
    """

    def __init__(self, *, thresholds: Thresholds, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.thresholds = thresholds
        self.sort_column = "problem"
        self.sort_reverse = False
        self.node_filter: NodeFilter | None = None
        self.order: list[str] = []  # node names on screen, filtered and sorted
        self.cursor_name: str | None = None
        self.marked: frozenset[str] = frozenset()  # nodes marked for an action (drain, resume)
        self._view: ClusterView | None = None
        self._lines: dict[int, Strip] = {}
        self._palettes = PaletteCache()

    # -- marks ------------------------------------------------------------------------------------------
    def set_marked(self, names: frozenset[str]) -> None:
        if names != self.marked:
            self.marked = names
            self._lines.clear()
            self.refresh()

    def toggle_mark(self) -> None:
        """Marks or unmarks the node under the cursor, and moves on, so space marks a run of nodes."""
        if self.cursor_name is None:
            return
        self.set_marked(self.marked ^ {self.cursor_name})
        self._move_to(self._row_index.get(self.cursor_name, 0) + 1)

    # -- data in ----------------------------------------------------------------------------------------
    def apply_view(self, view: ClusterView) -> None:
        self._view = view
        self._reorder()

    def set_filter(self, node_filter: NodeFilter | None) -> None:
        self.node_filter = node_filter
        self._reorder()

    def sort_by(self, key: str, reverse: bool | None = None) -> None:
        if key not in COLUMN_BY_KEY:
            return
        if reverse is None:
            reverse = (not self.sort_reverse) if key == self.sort_column else key in DESCENDING_FIRST
        self.sort_column, self.sort_reverse = key, reverse
        self._reorder()

    def _reorder(self) -> None:
        if self._view is None:
            return
        rows = self._view.rows.values()
        if self.node_filter is not None:
            rows = [r for r in rows if self.node_filter(r)]  # type: ignore[assignment]
        column = COLUMN_BY_KEY[self.sort_column]
        ordered = sorted(rows, key=column.sort_key, reverse=self.sort_reverse)
        self.order = [r.name for r in ordered]
        self._row_index = {name: i for i, name in enumerate(self.order)}
        self._name_width = max([len(n) for n in self.order] + [COLUMNS[0].width - 2]) + 2
        if self.cursor_name not in self._row_index:
            self.cursor_name = self.order[0] if self.order else None
        self.virtual_size = Size(0, len(self.order) + 1)  # width 0: never a horizontal scrollbar
        self._lines.clear()
        self.refresh()

    _row_index: dict[str, int] = {}
    _name_width = COLUMNS[0].width

    @property
    def cursor_index(self) -> int:
        return self._row_index.get(self.cursor_name or "", 0)

    @property
    def visible_names(self) -> frozenset[str]:
        return frozenset(self.order)

    # -- rendering --------------------------------------------------------------------------------------
    def _layout(self, total: int) -> list[tuple[Column, int]]:
        """The columns that fit in `total` characters, with their widths; the last takes what is left."""
        name_width = self._name_width
        columns = list(COLUMNS)
        dropped = iter(DROP_ORDER)

        def fixed_width() -> int:
            return sum(name_width if c.key == "name" else c.width for c in columns[:-1]) + len(columns)

        while total - fixed_width() < PROBLEM_MIN_WIDTH:
            key = next(dropped, None)
            if key is None:
                break
            columns = [c for c in columns if c.key != key]
        widths = [name_width if c.key == "name" else c.width for c in columns]
        widths[-1] = max(10, total - fixed_width())
        return list(zip(columns, widths, strict=True))

    def render_line(self, y: int) -> Strip:
        scroll_y = self.scroll_offset.y
        key = -1 if y == 0 else scroll_y + y - 1
        strip = self._lines.get(key)
        if strip is None:
            strip = self._build_header() if y == 0 else self._build_row(key)
            self._lines[key] = strip
        return strip

    def _build_header(self) -> Strip:
        palette = self._palettes.get(self.app)
        width = self.size.width
        segments: list[Segment] = []
        for column, col_width in self._layout(width):
            title = column.title
            if column.key == self.sort_column:
                title += "\u25bc" if self.sort_reverse else "\u25b2"
            text = title.rjust(col_width) if column.right else title.ljust(col_width)
            segments.append(Segment(text[:col_width] + " ", palette.header))
        return line_strip(segments, width, palette.header)

    def _build_row(self, index: int) -> Strip:
        palette = self._palettes.get(self.app)
        width = self.size.width
        if self._view is None or index >= len(self.order):
            return line_strip([], width, palette.empty)
        name = self.order[index]
        row = self._view.rows[name]
        is_cursor = name == self.cursor_name
        base = palette.cursor if is_cursor else palette.text
        segments: list[Segment] = []
        for column, col_width in self._layout(width):
            text, severity = column.cell(row, self.thresholds)
            if column.key == "name" and name in self.marked:
                text = "*" + text  # marked: the name column is two wider than the longest name
            text = text[:col_width]
            text = text.rjust(col_width) if column.right else text.ljust(col_width)
            style = base if severity is None else self._severity_style(palette, severity, is_cursor)
            segments.append(Segment(text, style))
            segments.append(Segment(" ", base))
        return line_strip(segments, width, base)

    @staticmethod
    def _severity_style(palette: Palette, severity: Severity, is_cursor: bool) -> Style:
        if is_cursor:
            return palette.cursor + Style(bold=True, underline=True)
        return palette.severity[severity]

    # -- input ------------------------------------------------------------------------------------------
    def _move_to(self, index: int) -> None:
        if not self.order:
            return
        index = max(0, min(len(self.order) - 1, index))
        self._set_cursor(self.order[index])
        self.post_message(NodeSelected(self.order[index]))

    def _set_cursor(self, name: str) -> None:
        """Move the cursor, repainting just the two rows it leaves and enters."""
        old_index = self._row_index.get(self.cursor_name or "")
        self.cursor_name = name
        new_index = self._row_index[name]
        for index in (old_index, new_index):
            if index is not None:
                self._lines.pop(index, None)
                y = index - self.scroll_offset.y + 1
                if 1 <= y < self.size.height:
                    self.refresh(Region(0, y, self.size.width, 1))
        self._scroll_cursor_into_view(new_index)

    def _scroll_cursor_into_view(self, index: int) -> None:
        body_height = max(1, self.size.height - 1)
        top = self.scroll_offset.y
        if index < top:
            self.scroll_to(y=index, animate=False)
        elif index >= top + body_height:
            self.scroll_to(y=index - body_height + 1, animate=False)

    def action_cursor(self, step: int) -> None:
        self._move_to(self.cursor_index + step)

    def action_page(self, direction: int) -> None:
        self._move_to(self.cursor_index + direction * max(1, self.size.height - 2))

    def action_jump(self, where: int) -> None:
        self._move_to(0 if where == 0 else len(self.order) - 1)

    def action_open(self) -> None:
        if self.cursor_name:
            self.post_message(NodeOpened(self.cursor_name))

    def action_sort_next(self) -> None:
        keys = [c.key for c in COLUMNS]
        self.sort_by(keys[(keys.index(self.sort_column) + 1) % len(keys)])

    def action_sort_reverse(self) -> None:
        self.sort_by(self.sort_column, not self.sort_reverse)

    def select(self, name: str) -> None:
        """Move the cursor to a node chosen elsewhere (the map), without announcing it back."""
        if name in self._row_index and name != self.cursor_name:
            self._set_cursor(name)

    def on_click(self, event: events.Click) -> None:
        if event.y == 0:
            x = 0
            for column, col_width in self._layout(self.size.width):
                if x <= event.x < x + col_width + 1:
                    self.sort_by(column.key)
                    return
                x += col_width + 1
            return
        index = self.scroll_offset.y + event.y - 1
        if 0 <= index < len(self.order):
            self._move_to(index)
            if event.chain >= 2:
                self.action_open()

    def on_resize(self, _event: events.Resize) -> None:
        self.virtual_size = Size(0, len(self.order) + 1)
        self._lines.clear()
