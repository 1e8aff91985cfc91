"""A virtual Line-API table: thousands of rows, only those on screen rendered, sortable by any column,
filterable, with marks. Each update re-sorts the keys (cheap) and throws away the cached lines; the
cursor follows its row by key across sorts and filters.

Subclasses say what a row is: their columns, where the rows come from, and what opening one means.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gputop.core.models import Severity
from gputop.core.safe_text import safe_line
from gputop.tui.palette import Palette, PaletteCache
from gputop.tui.strips import line_strip

Cell = tuple[str, Severity | None]

KEYED_CHANGES_MIN = 50  # rows added or removed in one update that are always inserted, not sorted
# (keys added, keys removed, the key that places a row; None when nothing was added or removed)
KeyedChanges = tuple[list[str], list[str], Callable[[Any], Any] | None]


@dataclass(frozen=True, slots=True)
class Column:
    key: str
    title: str
    width: int  # 0: take what is left
    right: bool
    sort_key: Callable[[Any], Any] | None  # None: the table's `ordered_keys` sorts by this column itself
    cell: Callable[[Any, Any], Cell]  # (row, the table's cell context) -> text and severity
    # A reading (utilization, temperature...): dim on a row the table calls stale (`row_dimmed`), and
    # sorted last, either way, where unknown (its sort key is `none_last`'s).
    measured: bool = False


def none_last(value: Any) -> tuple[bool, Any]:
    return (value is None, value if value is not None else 0)


def table_bindings(noun: str, open_description: str) -> list[BindingType]:
    """The keys every table has: move, open the row, sort."""
    return [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home,g", "jump(0)", f"First {noun}", show=False),
        Binding("end,G", "jump(-1)", f"Last {noun}", show=False),
        Binding("enter", "open", open_description),
        # in the help (?) and the palette, not the footer: on a narrow terminal it has room for the rest
        Binding("s", "sort_next", "Sort column", show=False),
        Binding("S", "sort_reverse", "Reverse sort", show=False),
    ]


_UNKNOWN = object()


class _Look(NamedTuple):
    """All that a row's line is drawn from."""

    key: str
    row: Any
    cells: tuple[Cell, ...]
    cursor: bool
    marked: bool
    dimmed: bool
    width: int
    key_width: int
    palette: object


class VirtualTable(ScrollView, can_focus=True):
    COLUMNS: ClassVar[Sequence[Column]] = ()
    DROP_ORDER: ClassVar[Sequence[str]] = ()  # columns dropped first on a narrow terminal
    LAST_MIN_WIDTH: ClassVar[int] = 24  # what the last column keeps before others are dropped
    DESCENDING_FIRST: ClassVar[frozenset[str]] = frozenset()  # "worst first" when first chosen
    KEY_IS_FIRST_COLUMN: ClassVar[bool] = True  # False: row_key is something else; the column keeps its width

    BINDINGS: ClassVar[list[BindingType]] = []  # a subclass lists table_bindings(...)

    def __init__(self, *, sort_column: str, cell_context: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.cell_context = cell_context
        self.sort_column = sort_column
        self.sort_reverse = False
        self.row_filter: Callable[[Any], bool] | None = None
        self.order: list[str] = []  # row keys on screen, filtered and sorted
        self.full_sorts = 0  # how often every row was sorted again (a few rows that come and go are not)
        self.cursor_name: str | None = None
        self.marked: frozenset[str] = frozenset()
        self._rows: Mapping[str, Any] = {}
        # each row's value by the sort column, as the last keyed check left it (key -> value): a changed
        # row is then compared with its last value, one sort-key call, not two
        self._sort_values: dict[str, Any] = {}
        self._sort_values_column: str | None = None
        self._row_index_cache: dict[str, int] | None = {}
        self._key_width = self.COLUMNS[0].width
        self._lines: dict[int, Strip] = {}
        # row index -> what its cached line was drawn from (`_row_look`), and what the last check for
        # changed lines found for a line it dropped, for the line's repaint in the same frame
        self._drawn_with: dict[int, _Look | None] = {}
        self._looked: dict[int, _Look | None] = {}
        self._repaints = False
        self._palettes = PaletteCache()
        self._columns_by_key = {c.key: c for c in self.COLUMNS}

    # -- what subclasses say ------------------------------------------------------------------------------
    def row_selected(self, key: str) -> None:
        """The cursor moved to ``key`` (by the user)."""

    def row_opened(self, key: str) -> None:
        """The user asked to open ``key`` (Enter, double click)."""

    def row_dimmed(self, row: Any) -> bool:
        """Whether ``row``'s readings are old (a node that stopped answering): shown dim."""
        return False

    def row_key(self, row: Any) -> str:
        """The key ``row`` has in the mapping given to `set_rows`: by default the first column's text
        (a node's name, a job's id)."""
        return self.COLUMNS[0].cell(row, self.cell_context)[0]

    def ordered_keys(self, rows: list[Any], column: Column, reverse: bool) -> list[str]:
        """The keys of the rows the filter kept, in the order shown. A subclass whose core module sorts its
        rows (the queue) hands over to it."""
        ordered = sorted(rows, key=column.sort_key, reverse=reverse)
        if reverse and column.measured and column.sort_key is not None:
            key = column.sort_key  # none_last's (unknown, value): unknown last in this order too
            ordered = [r for r in ordered if not key(r)[0]] + [r for r in ordered if key(r)[0]]
        return [self.row_key(r) for r in ordered]

    # -- data in ------------------------------------------------------------------------------------------
    def set_rows(self, rows: Mapping[str, Any]) -> None:
        old, self._rows = self._rows, rows
        self._looked.clear()  # worked out for the last rows, with the last tick's context (its trends)
        self._repaints = True
        # the very mapping (a store's source between refreshes): every row where it was
        changes = ([], [], None) if rows is old and self.order else self._keyed_changes(old, rows)
        if changes is None:
            self._reorder()
            return
        added, removed, position = changes
        if position is not None:
            self._apply_keyed(added, removed, position)
        if not added and not removed:
            # Each tick brings new values in the same order: repaint the lines whose cells changed (all
            # of them on a busy cluster; few or none between a store's refreshes, whose rows are the
            # very same), skip the sort.
            self._repaints = False
            self._refresh_changed_lines()
            return
        self._lines.clear()
        self.refresh()

    def _refresh_changed_lines(self) -> None:
        """Drops the cached lines out of sight, and repaints each line in sight whose cells, cursor, mark
        or layout differ from those it was drawn with."""
        top = self.scroll_offset.y
        shown = range(top, top + max(0, self.size.height - 1))
        for index in [index for index in self._lines if index >= 0 and index not in shown]:
            del self._lines[index]
        self._drawn_with = {index: drawn for index, drawn in self._drawn_with.items() if index in self._lines}
        width = self.size.width
        for index in shown:
            if index not in self._lines:
                # not drawn since it was dropped (a resize drops them all): Textual may still show what
                # it last drew there, so it is drawn again
                self.refresh(Region(0, index - top + 1, width, 1))
                self._repaints = True
                continue
            look = self._row_look(index)
            if look != self._drawn_with.get(index):
                del self._lines[index]
                self._looked[index] = look
                self.refresh(Region(0, index - top + 1, width, 1))
                self._repaints = True

    @property
    def repaints(self) -> bool:
        """Whether the last rows set have any line to draw again (none where no cell in sight changed)."""
        return self._repaints

    def _row_look(self, index: int) -> _Look | None:
        """All that row ``index``'s line is drawn from (None: no row there)."""
        if index >= len(self.order):
            return None
        key = self.order[index]
        row = self._rows.get(key)
        if row is None:
            return None
        width = self.size.width
        cells = tuple(column.cell(row, self.cell_context) for column, _ in self._layout(width))
        return _Look(key, row, cells, *self._flags(key, row))

    def _flags(self, key: str, row: Any) -> tuple[bool, bool, bool, int, int, object]:
        return (
            key == self.cursor_name,
            key in self.marked,
            self.row_dimmed(row),
            self.size.width,
            self._key_width,
            self._palettes.get(self.app),
        )

    def _still_looks(self, index: int, look: _Look) -> bool:
        """Whether ``look`` still holds for row ``index`` (the cursor or a mark may have moved since): its
        cells are the same while its row is the same object, within a frame."""
        if (
            index >= len(self.order)
            or self.order[index] != look.key
            or self._rows.get(look.key) is not look.row
        ):
            return False
        return look[3:] == self._flags(look.key, look.row)

    def _keyed_changes(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> KeyedChanges | None:
        """The keys added and removed, and the key that places new rows, when every row in both keeps its
        place (the same sort value and the same filter verdict; a row object that did not change keeps it
        by definition) and the table can place new rows itself (`position_key`); None when the whole table
        must be sorted again."""
        if not self.order:
            self._sort_values.clear()
            return None
        column = self._columns_by_key[self.sort_column]
        row_filter = self.row_filter
        added: list[str] = []
        # the plain test inlined when no subclass has its own: 10,000 changed rows a tick call it each
        sort_key = column.sort_key if type(self).keeps_place is VirtualTable.keeps_place else None
        if self._sort_values_column != column.key:
            self._sort_values, self._sort_values_column = {}, column.key
        values = self._sort_values
        for key, row in new.items():
            before = old.get(key)
            if before is row:
                continue
            if before is None:
                added.append(key)
                continue
            if sort_key is not None:
                value = sort_key(row)
                last = values.get(key, _UNKNOWN)
                if (sort_key(before) if last is _UNKNOWN else last) != value:
                    values.clear()  # values of rows not reached yet may be older than their rows
                    return None
                values[key] = value
            elif not self.keeps_place(before, row, column):
                return None
            if row_filter is not None and row_filter(before) != row_filter(row):
                values.clear()
                return None
        kept = len(new) - len(added)
        removed = [key for key in old if key not in new] if kept != len(old) else []
        for key in removed:
            values.pop(key, None)
        if not added and not removed:
            return [], [], None
        if len(added) + len(removed) > max(KEYED_CHANGES_MIN, len(new) // 20):
            return None  # past a few percent, one sort is cheaper than many inserts
        position = self.position_key(column, self.sort_reverse)
        return None if position is None else (added, removed, position)

    def _apply_keyed(self, added: list[str], removed: list[str], position: Callable[[Any], Any]) -> None:
        """Drops the removed keys from the order and inserts the added rows (those the filter keeps) where
        a full sort would put them."""
        if removed:
            gone = set(removed)
            self.order = [key for key in self.order if key not in gone]
        rows, row_filter = self._rows, self.row_filter
        for key in added:
            row = rows[key]
            if row_filter is not None and not row_filter(row):
                continue
            at = bisect.bisect_left(self.order, position(row), key=lambda k: position(rows[k]))
            self.order.insert(at, key)
            if self.KEY_IS_FIRST_COLUMN:
                self._key_width = max(self._key_width, len(key) + 2)
        self._row_index_cache = None
        if self.cursor_name is None or not self._has_key(self.cursor_name):
            self.cursor_name = self.order[0] if self.order else None
        self.virtual_size = Size(0, len(self.order) + 1)

    def position_key(self, column: Column, reverse: bool) -> Callable[[Any], Any] | None:
        """A key that puts one row where the table's sort would (for inserting new rows without sorting
        them all); None: this table always sorts."""
        return None

    def keeps_place(self, before: Any, after: Any, column: Column) -> bool:
        """Whether a row that changed from ``before`` to ``after`` sorts where it did by ``column``."""
        return column.sort_key is not None and bool(column.sort_key(before) == column.sort_key(after))

    def filtered(self, rows: list[Any]) -> list[Any]:
        """The rows the filter keeps, in their order. A subclass whose filter can do better than one
        call per row (the queue's, one pass per term) says so here."""
        row_filter = self.row_filter
        return [r for r in rows if row_filter(r)] if row_filter is not None else rows

    def set_row_filter(self, row_filter: Callable[[Any], bool] | None) -> None:
        self.row_filter = row_filter
        self._reorder()

    def sort_by(self, key: str, reverse: bool | None = None) -> None:
        if key not in self._columns_by_key:
            return
        if reverse is None:
            reverse = (not self.sort_reverse) if key == self.sort_column else key in self.DESCENDING_FIRST
        self.sort_column, self.sort_reverse = key, reverse
        self._reorder()

    def _reorder(self) -> None:
        self.full_sorts += 1
        rows = self.filtered(list(self._rows.values()))
        self.order = self.ordered_keys(rows, self._columns_by_key[self.sort_column], self.sort_reverse)
        first = self.COLUMNS[0]
        self._row_index_cache = None  # built when the cursor needs it: most ticks it does not
        if self.KEY_IS_FIRST_COLUMN:  # the first column is as wide as the longest key (and a mark)
            self._key_width = max(max(map(len, self.order), default=0), first.width - 2) + 2
        if self.cursor_name is None or not self._has_key(self.cursor_name):
            self.cursor_name = self.order[0] if self.order else None
        self.virtual_size = Size(0, len(self.order) + 1)  # width 0: never a horizontal scrollbar
        self._lines.clear()
        self.refresh()

    @property
    def _row_index(self) -> dict[str, int]:
        if self._row_index_cache is None:
            self._row_index_cache = {key: i for i, key in enumerate(self.order)}
        return self._row_index_cache

    def _has_key(self, key: str) -> bool:
        """Whether ``key`` is shown, without building the index (a set is as dear as the index)."""
        index = self._row_index_cache
        if index is not None:
            return key in index
        return key in self._rows and (self.row_filter is None or bool(self.row_filter(self._rows[key])))

    @property
    def cursor_index(self) -> int:
        return self._row_index.get(self.cursor_name or "", 0)

    @property
    def visible_names(self) -> frozenset[str]:
        return frozenset(self.order)

    # -- marks --------------------------------------------------------------------------------------------
    def set_marked(self, keys: frozenset[str]) -> None:
        if keys != self.marked:
            self.marked = keys
            self._lines.clear()
            self.refresh()

    def toggle_mark(self) -> None:
        """Marks or unmarks the row under the cursor, and moves on, so space marks a run of rows."""
        if self.cursor_name is None:
            return
        self.set_marked(self.marked ^ {self.cursor_name})
        self._move_to(self._row_index.get(self.cursor_name, 0) + 1)

    # -- rendering ----------------------------------------------------------------------------------------
    def _layout(self, total: int) -> list[tuple[Column, int]]:
        """The columns that fit in `total` characters, with their widths; the last takes what is left."""
        columns = list(self.COLUMNS)
        first = columns[0].key

        def width_of(c: Column) -> int:
            return self._key_width if c.key == first else c.width

        def fixed_width() -> int:  # every column but the last, and one space after each column
            return sum(width_of(c) for c in columns[:-1]) + len(columns)

        for key in self.DROP_ORDER:
            if total - fixed_width() >= self.LAST_MIN_WIDTH:
                break
            columns = [c for c in columns if c.key != key]
        widths = [width_of(c) for c in columns]
        widths[-1] = max(10, total - fixed_width())
        return list(zip(columns, widths, strict=True))

    def render_line(self, y: int) -> Strip:
        key = -1 if y == 0 else self.scroll_offset.y + y - 1
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
        # what the check for changed lines just worked out, where nothing has moved since
        look = self._looked.pop(index, None)
        if look is None or not self._still_looks(index, look):
            look = self._row_look(index)
        self._drawn_with[index] = look
        if look is None:
            return line_strip([], width, palette.empty)
        is_cursor, marked, dimmed = look.cursor, look.marked, look.dimmed
        base = palette.cursor if is_cursor else palette.text
        first = self.COLUMNS[0].key
        segments: list[Segment] = []
        for (column, col_width), (text, severity) in zip(self._layout(width), look.cells, strict=True):
            # Cells carry job names, reasons, problems: text any cluster user may have written.
            text = safe_line(text)
            if column.key == first and marked:
                text = "*" + text  # marked: the key column is two wider than the longest key
            text = text[:col_width]
            text = text.rjust(col_width) if column.right else text.ljust(col_width)
            style = base if severity is None else self._severity_style(palette, severity, is_cursor)
            if dimmed and column.measured and not is_cursor:
                style = palette.dim
            segments.append(Segment(text, style))
            segments.append(Segment(" ", base))
        return line_strip(segments, width, base)

    @staticmethod
    def _severity_style(palette: Palette, severity: Severity, is_cursor: bool) -> Style:
        if is_cursor:
            return palette.cursor + Style(bold=True, underline=True)
        return palette.severity[severity]

    # -- input --------------------------------------------------------------------------------------------
    def _move_to(self, index: int) -> None:
        if not self.order:
            return
        index = max(0, min(len(self.order) - 1, index))
        self._set_cursor(self.order[index])
        self.row_selected(self.order[index])

    def _set_cursor(self, key: str) -> None:
        """Move the cursor, repainting just the two rows it leaves and enters."""
        old_index = self._row_index.get(self.cursor_name or "")
        self.cursor_name = key
        new_index = self._row_index[key]
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
            self.row_opened(self.cursor_name)

    def action_sort_next(self) -> None:
        keys = [c.key for c in self.COLUMNS]
        self.sort_by(keys[(keys.index(self.sort_column) + 1) % len(keys)])

    def action_sort_reverse(self) -> None:
        self.sort_by(self.sort_column, not self.sort_reverse)

    def go_to(self, key: str) -> None:
        """Move the cursor to ``key``'s row as the arrow keys would, announcing the row selected."""
        index = self._row_index.get(key)
        if index is not None:
            self._move_to(index)

    def select(self, key: str) -> None:
        """Move the cursor to a row chosen elsewhere, without announcing it back."""
        if key in self._row_index and key != self.cursor_name:
            self._set_cursor(key)

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
