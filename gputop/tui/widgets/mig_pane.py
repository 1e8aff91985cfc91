"""The node screen's MIG pane: per MIG-enabled GPU, a bar of its placement grid showing which GPU instance
occupies each slice and which are free, then its GPU instances with their compute instances, the profiles
it offers with how many more of each fit, and its MIG devices with their UUIDs. A listing that could not be
read is named with why. Hidden on a node without MIG.

A Line-API widget: its lines are built once per (node facts, width, theme) and painted as they are.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.color import Color
from textual.strip import Strip
from textual.widget import Widget

from gputop.core.mig_view import MigGpuView, MigInstanceView, MigNodeView, listings, mig_node_view
from gputop.core.models import NodeSample, Severity
from gputop.tui.palette import Palette, PaletteCache
from gputop.tui.strips import line_strip, safe_line_strip

Line = list[Segment]
INDENT = 2
# Widest a slice is drawn: past this a bar on a wide terminal reads as stretched, not clearer.
MAX_SLICE_CELLS = 14


class MigPane(Widget):
    DEFAULT_CSS = """
    MigPane { height: auto; margin-bottom: 1; }
    MigPane.-empty { display: none; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.view: MigNodeView = MigNodeView((), (), ())
        self._facts_key: tuple[object, ...] = ()
        self._palettes = PaletteCache()
        self._cache: tuple[tuple[object, ...], list[Strip]] | None = None

    def show(self, node: NodeSample) -> None:
        """Show ``node``'s MIG state; derived again only when the facts it reads changed."""
        key = (
            node.name,
            *(reading for _command, reading in listings(node.facts)),
            tuple((g.index, g.name, g.mig_enabled) for g in node.gpus),
        )
        if key == self._facts_key:
            return
        self._facts_key = key
        self.view = mig_node_view(node)
        self.set_class(not self.view.shown, "-empty")
        self.refresh(layout=True)

    # -- rendering ------------------------------------------------------------------------------------------
    def _lines(self, width: int) -> list[Strip]:
        palette = self._palettes.get(self.app)
        key = (width, self.view, palette)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        lines = _Painter(palette, _block_styles(self), width).lines(self.view)
        strips = [safe_line_strip(line, width, palette.empty) for line in lines]
        self._cache = (key, strips)
        return strips

    def get_content_height(self, container: object, viewport: object, width: int) -> int:
        return len(self._lines(width))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        strips = self._lines(width)
        if y < len(strips):
            return strips[y]
        return line_strip([], width, self._palettes.get(self.app).empty)

    def text_lines(self) -> list[str]:
        """What the pane shows, line by line, as plain text."""
        return [strip.text.rstrip() for strip in self._lines(self.size.width)]


def _block_styles(widget: Widget) -> tuple[Style, Style]:
    """Two backgrounds that alternate along the bar, so neighbouring instances stay apart."""
    variables = widget.app.theme_variables or widget.app.get_css_variables()
    styles = []
    for name in ("primary", "secondary"):
        color = Color.parse(variables.get(name, "grey"))
        styles.append(Style(bgcolor=color.rich_color, color=color.get_contrast_text().rich_color))
    return styles[0], styles[1]


class _Painter:
    def __init__(self, palette: Palette, blocks: tuple[Style, Style], width: int) -> None:
        self.p = palette
        self.blocks = blocks
        self.width = width

    def lines(self, view: MigNodeView) -> list[Line]:
        if not view.shown:
            return []
        p = self.p
        out: list[Line] = [[Segment("MIG", p.text + Style(bold=True))]]
        warn = p.severity[Severity.WARN]
        for command, why in view.missing:
            out.append([Segment(" " * INDENT + f"{command}: {why}", warn)])
        out.extend([Segment(" " * INDENT + note, warn)] for note in view.notes)
        for gpu in view.gpus:
            out.extend(self._gpu(gpu))
        return out

    def _gpu(self, gpu: MigGpuView) -> list[Line]:
        p = self.p
        pad = " " * INDENT
        count = len(gpu.instances)
        head = f"GPU {gpu.index}  {gpu.model.removeprefix('NVIDIA ')}: "
        if not gpu.instances_known:
            head += "GPU instances unknown until nvidia-smi mig -lgi is read"
        else:
            head += f"{count} GPU instance{'s' * (count != 1)}"
            if gpu.grid_slices is not None:
                head += f", {len(gpu.free_slices)} of {gpu.grid_slices} slices free"
        lines: list[Line] = [[Segment(pad + head, p.text + Style(bold=True))]]
        if gpu.grid_slices is None:
            lines.append([Segment(pad + "slice grid unknown until nvidia-smi mig -lgipp is read", p.dim)])
        elif gpu.grid_slices and gpu.instances_known:
            lines.extend(self._bar(gpu))
        for instance in gpu.instances:
            lines.append(self._instance(instance))
        if gpu.instances_known and not gpu.instances:
            lines.append(
                [Segment(pad + "no GPU instances: MIG is on, but nothing can run on this GPU", p.dim)]
            )
        if gpu.profiles:
            rooms = "  ".join(
                f"{r.profile} {'?' if r.free is None else r.free}/{'?' if r.total is None else r.total}"
                for r in gpu.profiles
            )
            lines.extend(self._wrapped("profiles free/total: ", rooms, p.dim))
        label = "MIG devices: "
        for n, device in enumerate(gpu.devices):
            lines.append(
                [
                    Segment(pad + (label if n == 0 else " " * len(label)), p.dim),
                    Segment(f"{device.device_id} {device.profile:<11} {device.uuid}", p.text),
                ]
            )
        return lines

    def _bar(self, gpu: MigGpuView) -> list[Line]:
        grid = gpu.grid_slices or 0
        cell = max(1, min(MAX_SLICE_CELLS, (self.width - INDENT - 1) // grid))
        labels = {i.gi_id: i for i in gpu.instances}
        bar: Line = [Segment(" " * INDENT, self.p.empty)]
        scale = " " * INDENT
        runs: list[tuple[int | None, int]] = []  # (owner, slices) along the grid
        for owner in gpu.owners:
            if runs and runs[-1][0] == owner:
                runs[-1] = (owner, runs[-1][1] + 1)
            else:
                runs.append((owner, 1))
        shade = 0
        for owner, slices in runs:
            width = cell * slices
            if owner is None:
                text = _fit(("free", "\u00b7"), width - 1).center(width - 1, "\u00b7")
                bar.append(Segment("\u258f" + text, self.p.na))
                continue
            instance = labels[owner]
            names = (
                f"GI {owner} {instance.profile}",
                f"{owner} {instance.profile}",
                f"GI {owner}",
                str(owner),
            )
            bar.append(Segment("\u258f" + _fit(names, width - 1).center(width - 1), self.blocks[shade % 2]))
            shade += 1
        for start in range(grid):
            scale += str(start).ljust(cell)[:cell]
        return [bar, [Segment(scale, self.p.dim)]]

    def _instance(self, instance: MigInstanceView) -> Line:
        p = self.p
        where = f"at {instance.placement}" if instance.placement else "placement not printed"
        line: Line = [
            Segment(" " * INDENT + f"GI {instance.gi_id:>2}  ", p.dim),
            Segment(f"{instance.profile:<13}", p.text),
            Segment(f" {where:<9} ", p.dim),
        ]
        if instance.compute:
            cis = ", ".join(f"CI {ci.instance_id} {ci.name.removeprefix('MIG ')}" for ci in instance.compute)
            line.append(Segment(cis, p.text))
        else:
            line.append(Segment("no compute instance", p.severity[Severity.WARN]))
        for device in instance.devices:
            line.append(Segment(f"  {device.uuid}", p.dim))
        return line

    def _wrapped(self, label: str, text: str, style: Style) -> list[Line]:
        """``label`` then ``text`` split at double spaces over as many lines as the width needs."""
        pad = " " * INDENT
        room = max(20, self.width - INDENT - len(label))
        lines: list[Line] = []
        current = ""
        for word in text.split("  "):
            if current and len(current) + 2 + len(word) > room:
                lines.append([Segment(pad + (label if not lines else " " * len(label)) + current, style)])
                current = word
            else:
                current = f"{current}  {word}" if current else word
        lines.append([Segment(pad + (label if not lines else " " * len(label)) + current, style)])
        return lines


def _fit(candidates: tuple[str, ...], width: int) -> str:
    """The first candidate that fits ``width`` cells, else none."""
    return next((c for c in candidates if len(c) <= width), "")
