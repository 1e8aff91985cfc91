"""The node screen's topology pane: how the node's GPUs and NICs reach each other, and how their links are
(the layout is described in topology_lines). Up/down move a GPU selection while the pane has the focus; the
selected GPU's row, its nearest NIC and its NVLink peers are marked, and the node screen's GPU table follows.

A Line-API widget: its lines are built once per (node facts, selection, width, theme) and painted as they are.
"""

from __future__ import annotations

from rich.segment import Segment
from textual import events
from textual.binding import Binding
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from gputop.core.models import NodeSample
from gputop.core.topology_view import TopologyView, topology_view
from gputop.tui.palette import PaletteCache
from gputop.tui.strips import line_strip, safe_line_strip
from gputop.tui.widgets.topology_lines import Line, Painter, PaneStyles, Selection


class TopologyPane(Widget, can_focus=True):
    """The node's GPU/NIC topology. Up/down move the GPU selection while the pane has the focus."""

    BINDINGS = [
        Binding("up,k", "move(-1)", "Previous GPU", show=False),
        Binding("down,j", "move(1)", "Next GPU", show=False),
        Binding("home,g", "jump(0)", "First GPU", show=False),
        Binding("end,G", "jump(-1)", "Last GPU", show=False),
        # The pane is taller than a small terminal's node screen: these scroll the screen's details.
        Binding("pageup", "page(-1)", "Scroll up", show=False),
        Binding("pagedown", "page(1)", "Scroll down", show=False),
    ]

    DEFAULT_CSS = """
    TopologyPane { height: auto; }
    """

    class GpuSelected(Message):
        """The user moved the pane's GPU selection (the node screen's GPU table follows)."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.view: TopologyView | None = None
        self.selected_gpu: int | None = None
        self._facts_key: tuple[object, ...] = ()
        self._palettes = PaletteCache()
        self._cache: tuple[tuple[object, ...], list[Strip], dict[str, int]] | None = None

    # -- data in ------------------------------------------------------------------------------------------
    def show(self, node: NodeSample) -> None:
        """Show ``node``; the view is derived again only when the facts it reads changed."""
        key = (
            node.name,
            node.facts.topology,
            node.facts.nvlink,
            node.ib_ports,
            node.facts.errors(),
        )
        # Tuples compare their items by identity first, and sources keep the parsed object while a command's
        # output stays the same: an unchanged node costs one pass over five references.
        if self.view is not None and key == self._facts_key:
            return
        self._facts_key = key
        self.view = topology_view(node)
        indices = [g.index for g in self.view.gpus]
        if self.selected_gpu not in indices:
            self.selected_gpu = indices[0] if indices else None
        self.refresh(layout=True)

    def select_gpu(self, index: int) -> None:
        """Select a GPU chosen elsewhere (the GPU table), without announcing it back."""
        if self.view is not None and self.view.gpu(index) is not None and index != self.selected_gpu:
            self.selected_gpu = index
            self.refresh(layout=True)

    # -- rendering ------------------------------------------------------------------------------------------
    def _lines(self, width: int) -> tuple[list[Strip], dict[str, int]]:
        palette = self._palettes.get(self.app)
        key = (width, self.view, self.selected_gpu, self.has_focus, palette)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1], self._cache[2]
        if self.view is None:
            lines: list[Line] = [[Segment("Topology: waiting for the node's data", palette.dim)]]
            gpu_lines: dict[str, int] = {}
        else:
            gpu = self.view.gpu(self.selected_gpu) if self.selected_gpu is not None else None
            painter = Painter(self.view, PaneStyles.of(palette), Selection(gpu, self.has_focus), width)
            lines = painter.lines()
            gpu_lines = painter.gpu_lines
        strips = [safe_line_strip(line, width, palette.empty) for line in lines]
        self._cache = (key, strips, gpu_lines)
        return strips, gpu_lines

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        return len(self._lines(width)[0])

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        strips = self._lines(width)[0]
        if y < len(strips):
            return strips[y]
        return line_strip([], width, self._palettes.get(self.app).empty)

    def text_lines(self) -> list[str]:
        """What the pane shows, line by line, as plain text."""
        return [strip.text.rstrip() for strip in self._lines(self.size.width)[0]]

    # -- input ----------------------------------------------------------------------------------------------
    def _move_to(self, position: int) -> None:
        if self.view is None or not self.view.gpus:
            return
        gpus = self.view.gpus
        row = gpus[max(0, min(len(gpus) - 1, position))]
        if row.index is None or row.index == self.selected_gpu:
            return
        self.selected_gpu = row.index
        self.refresh(layout=True)
        self._scroll_to_gpu(row.device)
        self.post_message(self.GpuSelected(row.index))

    def _position(self) -> int:
        indices = [g.index for g in self.view.gpus] if self.view else []
        return indices.index(self.selected_gpu) if self.selected_gpu in indices else 0

    def action_move(self, step: int) -> None:
        self._move_to(self._position() + step)

    def action_jump(self, where: int) -> None:
        self._move_to(0 if where == 0 else len(self.view.gpus) - 1 if self.view else 0)

    def action_page(self, direction: int) -> None:
        parent = self.parent
        if isinstance(parent, Widget):
            if direction > 0:
                parent.scroll_page_down(animate=False)
            else:
                parent.scroll_page_up(animate=False)

    def _scroll_to_gpu(self, device: str) -> None:
        y = self._lines(self.size.width)[1].get(device)
        parent = self.parent
        if y is not None and isinstance(parent, Widget):
            top = self.virtual_region.y
            parent.scroll_to_region(Region(0, top + y - 1, 1, 3), animate=False)

    def on_focus(self, _event: events.Focus) -> None:
        self.refresh()

    def on_blur(self, _event: events.Blur) -> None:
        self.refresh()
