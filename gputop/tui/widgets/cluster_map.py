"""The cluster map: every GPU, node or group of nodes as a cell coloured by the selected metric, zoomed to
fit.

A Line-API widget built for tens of thousands of GPUs. Each GPU becomes a small integer code (a heat step
or a state) once per view, in the core; a screen line is rebuilt only when the codes on it changed,
neighbouring cells with the same code are painted as one segment, and only changed lines are repainted.

Zoom (`gputop.core.map_zoom`): one cell per GPU while that fits (two characters per GPU, one, or half
blocks that stack GPUs 0-3 over 4-7), then one per node (a character each, or two rows of nodes stacked in
half blocks), then one per group (a Slurm partition, or a rack read from the name with ``ui.rack_pattern``).
``+`` and ``-`` zoom by hand; a zoom finer than what fits shows a window of lines that follows the
selection. ``w`` switches a node's or group's heat between the worst and the mean of its cells; states
(down, critical, missing, stale) always show.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping, Sequence

from rich.segment import Segment
from textual import events
from textual.binding import Binding
from textual.filter import ANSIToTruecolor, LineFilter
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
    NOT_EXPORTED,
    STALE,
    CellCodes,
)
from gputop.core.map_zoom import (
    Group,
    GroupBy,
    MapLayout,
    Reduce,
    Zoom,
    choose_layout,
    groups_by_partition,
    groups_by_pattern,
    has_zoom_line,
    reduce_group,
    window_top,
)
from gputop.core.metrics import HeatScale, Metric
from gputop.core.models import SlurmState
from gputop.core.safe_text import safe_line
from gputop.core.summary import ClusterView
from gputop.tui.messages import NodeOpened, NodeSelected
from gputop.tui.palette import PaletteCache
from gputop.tui.strips import line_strip
from gputop.tui.widgets.map_cells import CellStyles, _marked, legend
from gputop.tui.widgets.map_lines import MAX_GROUP_LABEL, gpu_line, group_line, node_line

__all__ = ["CellStyles", "ClusterMap", "MapLayout", "_marked"]


Codes = CellCodes


SIGN_ZOOM_ACTIONS = frozenset({"zoom_by_sign", "zoom_map_by_sign"})


def sign_zoom_allowed(app: object, action: str) -> bool:
    """+ and - zoom the map, except in a replay, where they are the replay's speed (z and Z still zoom)."""
    settings = getattr(app, "settings", None)
    return action not in SIGN_ZOOM_ACTIONS or getattr(settings, "replay", None) is None


class ClusterMap(Widget, can_focus=True):
    """Heat map of every GPU. Arrow keys move between nodes (groups); Enter opens the selected node (zooms
    into the selected group)."""

    BINDINGS = [
        Binding("left", "move(-1, 0)", "Previous node", show=False),
        Binding("right", "move(1, 0)", "Next node", show=False),
        Binding("up", "move(0, -1)", "Node above", show=False),
        Binding("down", "move(0, 1)", "Node below", show=False),
        Binding("enter", "open", "Open node"),
        Binding("plus,equals_sign", "zoom_by_sign(-1)", "Zoom in", show=False),
        Binding("minus", "zoom_by_sign(1)", "Zoom out", show=False),
        Binding("z", "zoom(-1)", "Zoom in", show=False),
        Binding("Z", "zoom(1)", "Zoom out", show=False),
        Binding("w", "switch_reduce", "Worst or mean", show=False),
        Binding("b", "switch_group_by", "Group by partition or rack", show=False),
    ]

    DEFAULT_CSS = """
    ClusterMap { height: auto; max-height: 60%; }
    """

    # repainted by its watcher: only the lines of the old and the new selection (and the zoom line that
    # names it), not the whole map, whose lines a key would otherwise all look at again
    selected: reactive[str | None] = reactive(None, layout=False, repaint=False)

    def __init__(
        self,
        *,
        metric: Metric,
        scales: dict[Metric, HeatScale],
        height_share: float = 0.6,
        rack_pattern: str | None = None,
        **kwargs: object,
    ) -> None:
        """height_share: the share of the screen the map may take (its CSS max-height), legend included."""
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.metric = metric
        self.scales = scales
        self.height_share = height_share
        self.rack_pattern = re.compile(rack_pattern) if rack_pattern else None
        self.highlighted: frozenset[str] = frozenset()  # nodes kept by the table's filter
        self._filtered = False
        # within highlighted nodes, the GPU indices kept lit (a job's GPUs); a node absent here is lit whole
        self._kept_gpus: Mapping[str, frozenset[int]] = {}
        self._view: ClusterView | None = None
        self._names: list[str] = []
        self._index: dict[str, int] = {}
        self._gpus_per_node = 8
        self._layout: MapLayout | None = None
        self._layout_key: tuple[object, ...] = ()
        self._palettes = PaletteCache()
        self._styles: CellStyles | None = None
        # the view's cell codes for the map's metric, by node (the core's: the map never works them out)
        self._cells: Mapping[str, Codes] = {}
        self._unexported = False  # some node's exporter does not give the map's metric
        # line -> (signature, strip): a line is rebuilt only when its signature changed
        self._lines: dict[int, tuple[object, Strip]] = {}
        # the other metrics' lines, as last drawn: switching back to a metric whose cells did not change
        # since (a store's source changes them once a refresh) finds its lines drawn
        self._other_metrics_lines: dict[Metric, dict[int, tuple[object, Strip]]] = {}
        # zoom: None follows the screen; the user's +/- set it
        self.zoom: Zoom | None = None
        self.reduce = Reduce.WORST
        self.group_by = GroupBy.RACK if self.rack_pattern is not None else GroupBy.PARTITION
        self._top = 0  # first line shown when the map is windowed
        self._node_codes: list[int] = []  # per node, in map order (node and group zoom)
        self._groups: list[Group] | None = None  # None: nothing to group by
        self._group_of: list[int] = []  # node index -> group index
        self._groups_key: tuple[object, ...] = ()
        self._group_codes: list[tuple[int, int]] = []  # per group: its state, its heat
        self._reduced_for: tuple[object, ...] = ()  # what the codes above were reduced from
        # by metric and reduction: the node cells and groups the group cells beside them came from
        self._group_memo: dict[
            tuple[Metric, Reduce], tuple[list[int], list[Group], list[tuple[int, int]]]
        ] = {}

    # -- data in ----------------------------------------------------------------------------------------
    def apply_view(self, view: ClusterView) -> None:
        nodes = view.snapshot.nodes
        names = [n.name for n in nodes]
        if names != self._names:  # compared in C: a tick at 10,000 nodes asks this
            self._names = names
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
        self._regroup(view.snapshot.slurm)
        self._reduce_cells()
        self._refresh_changed_lines()

    def set_metric(self, metric: Metric) -> None:
        if metric is not self.metric:
            self._other_metrics_lines[self.metric] = self._lines
            self._lines = self._other_metrics_lines.pop(metric, {})
        self.metric = metric
        if self._view is not None:
            self._cells = self._view.cells_for(metric)
            self._note_unexported()
            self._reduce_cells()
        # every line: each is taken from the metric's own lines where its signature is still the same
        self.refresh()

    def _note_unexported(self) -> None:
        """Whether the legend explains the "not exported" mark: only while some node shows it."""
        if self._view is None:
            return
        self._unexported = not self._view.unexported.isdisjoint(self.metric.fields)

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

    # -- zoom: nodes and groups as one cell -----------------------------------------------------------------
    def _regroup(self, slurm: SlurmState | None) -> None:
        """The groups of the group zoom, worked out again when the names, Slurm's state or the grouping
        change."""
        by_rack = self.group_by is GroupBy.RACK and self.rack_pattern is not None
        key = (len(self._names), self._names[:1], by_rack, None if by_rack else slurm)
        if key == self._groups_key:
            return
        self._groups_key = key
        if by_rack and self.rack_pattern is not None:
            groups: list[Group] | None = groups_by_pattern(self._names, self.rack_pattern)
        elif slurm is not None and slurm.nodes:
            groups = groups_by_partition(self._names, {n: s.partitions for n, s in slurm.nodes.items()})
        else:
            groups = None
        self._groups = groups
        self._group_of = [0] * len(self._names)
        for at, group in enumerate(groups or ()):
            for member in group.members:
                self._group_of[member] = at
        self._layout = None
        self._drop_lines()
        self.refresh(layout=True)

    def _reduce_cells(self) -> None:
        """Each node's one cell (and each group's) where the zoom shows them."""
        zoom = self._current_layout().zoom if self.is_mounted else Zoom.GPU
        if zoom is Zoom.GPU:
            return
        # the same cells, names and groups as last time (a store's source between refreshes hands the
        # same mapping on): the same reductions, without a look at every node
        done_for = (self._cells, self._names, zoom, self.reduce, self._groups)
        if len(done_for) == len(self._reduced_for) and all(map(operator.is_, done_for, self._reduced_for)):
            return
        self._reduced_for = done_for
        # the view's, worked out once for every widget and view that shows the same cells (the map's
        # cells are always the view's: `apply_view`, `set_metric`)
        view = self._view
        self._node_codes = view.node_codes_for(self.metric, self.reduce) if view is not None else []
        if zoom is Zoom.GROUP and self._groups is not None:
            codes, groups = self._node_codes, self._groups
            # the groups' cells of the same node cells and groups as when last worked out for this metric
            # (the metric keys go round between a store's refreshes)
            known = self._group_memo.get((self.metric, self.reduce))
            if known is not None and known[0] is codes and known[1] is groups:
                self._group_codes = known[2]
                return
            self._group_codes = [
                reduce_group([codes[i] for i in group.members], self.reduce) for group in groups
            ]
            if len(self._group_memo) > 2 * len(Metric):
                self._group_memo.clear()
            self._group_memo[(self.metric, self.reduce)] = (codes, groups, self._group_codes)

    def action_zoom(self, step: int) -> None:
        """One zoom finer (-1) or coarser (+1) than shown; back to following the screen where that is
        the zoom that fits."""
        layout = self._current_layout()
        coarsest = Zoom.GROUP if self._groups is not None else Zoom.NODE
        wanted = Zoom(max(Zoom.GPU, min(coarsest, layout.zoom + step)))
        self.zoom = wanted
        if self._chosen_layout(None).zoom is wanted and not self._chosen_layout(wanted).windowed:
            self.zoom = None
        self._relayout()

    def action_zoom_by_sign(self, step: int) -> None:
        self.action_zoom(step)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return sign_zoom_allowed(self.app, action)

    def action_switch_reduce(self) -> None:
        self.reduce = self.reduce.other()
        self._relayout()

    def action_switch_group_by(self) -> None:
        if self.rack_pattern is None:
            self.app.notify("Set ui.rack_pattern in the config to group nodes by rack", timeout=4)
            return
        self.group_by = GroupBy.PARTITION if self.group_by is GroupBy.RACK else GroupBy.RACK
        self._regroup(self._view.snapshot.slurm if self._view is not None else None)
        self._relayout()

    def _relayout(self) -> None:
        self._layout = None
        self._reduce_cells()
        self._forget_lines()
        self.refresh(layout=True)

    # -- selection -------------------------------------------------------------------------------------------
    def watch_selected(self, old: str | None, new: str | None) -> None:
        # only the lines holding the old and the new selection change, unless the window moves
        if not self.is_mounted or self._layout is None:
            return
        layout = self._layout
        top = self._top
        self._follow_selection(layout)
        if self._top != top:
            self._forget_lines()
            return
        for name in (old, new):
            line = self._line_of_name(name, layout)
            if line is not None:
                self._lines.pop(line, None)
                self.refresh(Region(0, line - self._top, self.size.width, 1))
        if has_zoom_line(layout):
            self.refresh(Region(0, layout.window, self.size.width, 1))  # the zoom line names it

    def _line_of_name(self, name: str | None, layout: MapLayout) -> int | None:
        index = self._index.get(name or "")
        if index is None:
            return None
        if layout.zoom is Zoom.GROUP:
            index = self._group_of[index] if index < len(self._group_of) else 0
        return layout.line_of(index)

    def _follow_selection(self, layout: MapLayout) -> None:
        line = self._line_of_name(self.selected, layout)
        self._top = window_top(layout, line if line is not None else 0, self._top)

    def on_resize(self, _event: events.Resize) -> None:
        self._forget_lines()

    def _forget_lines(self) -> None:
        self._drop_lines()
        self.refresh()

    def _drop_lines(self) -> None:
        """Every drawn line, of every metric (the layout, the palette or what a signature does not
        hold changed)."""
        self._lines.clear()
        self._other_metrics_lines.clear()

    # -- cell codes -------------------------------------------------------------------------------------
    def _codes(self, name: str) -> Codes:
        """``name``'s cell codes, every node as wide as the widest so groups line up."""
        codes = self._cells.get(name, ())
        pad = self._gpus_per_node - len(codes)
        return codes + (EMPTY,) * pad if pad > 0 else codes[: self._gpus_per_node]

    # -- geometry ---------------------------------------------------------------------------------------
    def _budget(self, screen_height: int) -> int:
        """Lines the map may give its cells and zoom line: its share of what the header and footer leave
        (as Textual resolves the max-height), less the legend."""
        return max(3, int((screen_height - 3) * self.height_share) - 1)

    def layout_for(self, width: int, screen_height: int, zoom: Zoom | None = None) -> MapLayout:
        groups = self._groups
        group_label = max((len(g.name) for g in groups or ()), default=6)
        return choose_layout(
            width=width,
            screen_height=screen_height,
            budget=self._budget(screen_height),
            nodes=len(self._names),
            gpus_per_node=self._gpus_per_node,
            label_width=max((len(n) for n in self._names), default=6) + 1,
            group_label_width=min(group_label, MAX_GROUP_LABEL) + 1,
            groups=len(groups) if groups is not None else None,
            zoom=zoom,
        )

    def _chosen_layout(self, zoom: Zoom | None) -> MapLayout:
        return self.layout_for(self.size.width or 80, self._screen_height(), zoom)

    @property
    def map_layout(self) -> MapLayout:
        """The layout the map is drawn in at its current size: zoom, density, items per row, rows."""
        return self._current_layout()

    def _screen_height(self) -> int:
        return self.screen.size.height if self.is_mounted else 50

    def _current_layout(self) -> MapLayout:
        key = (self.size.width or 80, self._screen_height(), self.zoom)
        if self._layout is None or self._layout_key != key:
            self._layout = self.layout_for(*key)
            self._layout_key = key
            self._drop_lines()
            self._follow_selection(self._layout)
        return self._layout

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        self._layout = None  # names or sizes changed: recompute on the next line
        layout = self.layout_for(width, self._screen_height(), self.zoom)
        return layout.window + 1 + has_zoom_line(layout)  # + legend (+ zoom line)

    def node_at(self, x: int, y: int) -> str | None:
        layout = self._current_layout()
        if y >= layout.window or x < layout.label_width:
            return None
        line = y + self._top
        column = (x - layout.label_width) // layout.group_width
        if column >= layout.nodes_per_row:
            return None
        if layout.zoom is Zoom.GROUP:
            at = line * layout.nodes_per_row + column
            groups = self._groups or []
            return self._names[groups[at].members[0]] if at < len(groups) else None
        row = line * 2 if layout.compact and layout.zoom is Zoom.NODE else line
        index = row * layout.nodes_per_row + column
        return self._names[index] if index < len(self._names) else None

    # -- rendering --------------------------------------------------------------------------------------
    def _cell_styles(self) -> CellStyles:
        palette = self._palettes.get(self.app)
        if self._styles is None or self._styles.palette is not palette:
            self._styles = CellStyles(palette)
            self._drop_lines()
        return self._styles

    def _line_items(self, line: int, layout: MapLayout) -> range:
        """The items (nodes, or groups) on ``line``: at stacked node zoom, two rows of them."""
        per_row = layout.nodes_per_row
        rows = 2 if layout.compact and layout.zoom is Zoom.NODE else 1
        first = line * rows * per_row
        total = len(self._groups or ()) if layout.zoom is Zoom.GROUP else len(self._names)
        return range(first, min(first + rows * per_row, total))

    def _signature(self, line: int, layout: MapLayout) -> object:
        items = self._line_items(line, layout)
        if layout.zoom is Zoom.GPU:
            names = self._names[items.start : items.stop]
            # the view's tuples: the same objects while the nodes did not move, so comparing them is quick
            cells = self._cells
            codes: object = tuple(cells.get(name, ()) for name in names)
            selected = names.index(self.selected) if self.selected in names else -1
            kept = self._kept_gpus
            dimmed: object = (
                tuple((n in self.highlighted, kept.get(n)) for n in names) if self._filtered else ()
            )
        else:
            source: Sequence[object] = self._group_codes if layout.zoom is Zoom.GROUP else self._node_codes
            codes = tuple(source[items.start : items.stop])
            at = self._line_of_selected(layout)
            selected = at - items.start if at is not None and at in items else -1
            dimmed = tuple(self._item_dims(items, layout)) if self._filtered else ()
        return (codes, selected, dimmed, self.size.width, layout)

    def _line_of_selected(self, layout: MapLayout) -> int | None:
        """The selected item: its node's index, or its group's."""
        index = self._index.get(self.selected or "")
        if index is None or layout.zoom is not Zoom.GROUP:
            return index
        return self._group_of[index] if index < len(self._group_of) else None

    def _item_dims(self, items: range, layout: MapLayout) -> list[bool]:
        if not self._filtered:
            return [False] * len(items)
        names, kept = self._names, self.highlighted
        if layout.zoom is Zoom.GROUP:
            groups = self._groups or []
            return [all(names[m] not in kept for m in groups[at].members) for at in items]
        return [names[at] not in kept for at in items]

    def _refresh_changed_lines(self) -> None:
        """Repaint only the lines whose cells changed since they were last drawn."""
        if not self.is_mounted or self.size.width == 0:
            self.refresh()
            return
        self._cell_styles()  # a new theme drops every cached line
        layout = self._current_layout()
        width = self.size.width
        top = self._top
        for y in range(min(layout.window, layout.lines - top)):
            cached = self._lines.get(top + y)
            if cached is None or cached[0] != self._signature(top + y, layout):
                self._lines.pop(top + y, None)
                self.refresh(Region(0, y, width, 1))
        if has_zoom_line(layout):
            self.refresh(Region(0, layout.window, width, 1))

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
        zoom_line = has_zoom_line(layout)
        if zoom_line and y == layout.window:
            return line_strip(self._zoom_line(styles, layout), width, styles.palette.empty)
        if y == layout.window + zoom_line:
            return line_strip(self._legend(styles, layout), width, styles.palette.empty)
        line = y + self._top
        if self._view is None or y > layout.window or line >= layout.lines:
            return line_strip([], width, styles.palette.empty)
        signature = self._signature(line, layout)
        cached = self._lines.get(line)
        if cached is not None and cached[0] == signature:
            return cached[1]
        items = self._line_items(line, layout)
        if layout.zoom is Zoom.GPU:
            names = self._names[items.start : items.stop]
            strip = gpu_line(names, self._codes, self._dims, self.selected, layout, styles, width)
        elif layout.zoom is Zoom.NODE:
            dims = self._item_dims(items, layout)
            at = self._line_of_selected(layout)
            label = self._names[items.start]
            strip = node_line(label, self._node_codes, items, dims, at, layout, styles, width)
        else:
            dims = self._item_dims(items, layout)
            at = self._line_of_selected(layout)
            groups = self._groups or []
            strip = group_line(groups, self._group_codes, items, dims, at, layout, styles, width)
        self._lines[line] = (signature, strip)
        return strip

    def _zoom_line(self, styles: CellStyles, layout: MapLayout) -> list[Segment]:
        """What a cell stands for, what is selected, where the window is, and the keys."""
        palette = styles.palette
        what = {
            Zoom.GPU: "a cell per GPU",
            Zoom.NODE: "a cell per node",
            Zoom.GROUP: f"a cell per {self.group_by}",
        }
        parts = [what[layout.zoom]]
        if layout.zoom is not Zoom.GPU:
            parts.append(f"{self.reduce} of its {'GPUs' if layout.zoom is Zoom.NODE else 'nodes'}")
        described = self._describe_selected(layout)
        if described:
            parts.append(described)
        if layout.windowed:
            parts.append(f"lines {self._top + 1}-{self._top + layout.window} of {layout.lines}")
        keys = "[+/-] zoom [w] worst/mean" + (" [b] partition/rack" if self.rack_pattern is not None else "")
        return [Segment(" \u00b7 ".join(parts) + "  ", palette.text), Segment(keys, palette.dim)]

    def _describe_selected(self, layout: MapLayout) -> str:
        index = self._index.get(self.selected or "")
        if index is None:
            return ""
        if layout.zoom is Zoom.GROUP and self._groups is not None and index < len(self._group_of):
            group = self._groups[self._group_of[index]]
            codes = [self._node_codes[m] for m in group.members] if self._node_codes else []
            counts = [
                (sum(c == DOWN for c in codes), "down"),
                (sum(CRIT_FLAG <= c < IDLE_FLAG for c in codes), "critical"),
                (sum(c in (MISSING, STALE) for c in codes), "stale or missing GPUs"),
            ]
            said = ", ".join(f"{n} {word}" for n, word in counts if n)
            named = f"{self.group_by} {safe_line(group.name)[:40]}"
            return f"{named}: {len(group.members)} nodes" + (f", {said}" if said else "")
        if layout.zoom is Zoom.NODE and index < len(self._node_codes):
            return f"{self.selected}: {_CODE_WORDS.get(self._node_codes[index], 'ok')}"
        return str(self.selected)

    def _legend(self, styles: CellStyles, layout: MapLayout) -> list[Segment]:
        prefix: list[Segment] = []
        if layout.zoom is Zoom.NODE and not has_zoom_line(layout):
            prefix = [
                Segment(f"a cell per node, {self.reduce} of its GPUs [+/-/w] \u00b7 ", styles.palette.dim)
            ]
        scale = self.scales[self.metric]
        return legend(styles, self.metric, scale, self._unexported, self.size.width, prefix)

    # -- input ------------------------------------------------------------------------------------------
    def action_move(self, dx: int, dy: int) -> None:
        if not self._names:
            return
        layout = self._current_layout()
        index = self._index.get(self.selected or "", 0)
        if layout.zoom is Zoom.GROUP and self._groups:
            at = self._group_of[index] if index < len(self._group_of) else 0
            at = max(0, min(len(self._groups) - 1, at + dx + dy * layout.nodes_per_row))
            self.selected = self._names[self._groups[at].members[0]]
        else:
            index = max(0, min(len(self._names) - 1, index + dx + dy * layout.nodes_per_row))
            self.selected = self._names[index]
        self.post_message(NodeSelected(self.selected))

    def action_open(self) -> None:
        """Enter: at group zoom, into the selected group; else the selected node's screen."""
        if self._current_layout().zoom is Zoom.GROUP:
            self.action_zoom(-1)
        elif self.selected:
            self.post_message(NodeOpened(self.selected))

    def on_click(self, event: events.Click) -> None:
        name = self.node_at(event.x, event.y)
        if name is None:
            return
        self.selected = name
        self.post_message(NodeSelected(name))
        if event.chain >= 2:
            self.action_open()

    def select(self, name: str) -> None:
        """Select a node without announcing it (the table already knows)."""
        if name in self._index and name != self.selected:
            self.selected = name


_CODE_WORDS = {
    DOWN: "down",
    MISSING: "a GPU missing",
    STALE: "stale",
    MIG_NA: "MIG",
    NOT_EXPORTED: "not exported",
    **{CRIT_FLAG + step: "critical" for step in range(10)},
    **{IDLE_FLAG + step: "a GPU idle in a job" for step in range(10)},
}
