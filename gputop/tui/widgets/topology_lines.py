"""The lines of the topology pane: a GPU block, a NIC block, the selected GPU's details, the legend and
what is missing, for one view, selection, width and theme. Pure rendering to Rich segments; the widget
(topology_pane) holds the selection and paints them.

GPUs: one row per GPU with its link to every other GPU (NV18, PIX, ... as `nvidia-smi topo -m` prints
it), its CPU and NUMA affinity and its NVLinks up/listed. NICs: one row per NIC with its link to every
GPU, its mlx5 name and its IB ports. NICs are rows rather than columns so the pane stays as wide as the
GPU count whatever the NIC count (18 NICs add rows, not columns past 80 characters), and each NIC has
room for its name and port state beside its links. Side by side when the terminal is wide enough, else
one above the other.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rich.segment import Segment
from rich.style import Style

from gputop.core.models import IbPort, Severity
from gputop.core.parsers.topo import LinkClass, Topology
from gputop.core.topology_view import (
    GpuRow,
    TopologyView,
    compress_labels,
    format_rate_gbps,
    port_severity,
    port_state_text,
)
from gputop.tui.palette import Palette

# Link classes on the theme's heat scale, nearest brightest: the scale is ordered in lightness in every
# theme (colour-blind safe), so "closer" reads as "brighter" without new theme variables; the cell text
# says the class anyway.
LINK_HEAT_STEP = {
    LinkClass.NVLINK: 9,
    LinkClass.PIX: 7,
    LinkClass.PXB: 5,
    LinkClass.PHB: 4,
    LinkClass.NODE: 2,
    LinkClass.SYS: 0,
}
LEGEND = (
    (LinkClass.NVLINK, "NV#", "NVLink"),
    (LinkClass.PIX, "PIX", "same PCIe switch"),
    (LinkClass.PXB, "PXB", "PCIe switches"),
    (LinkClass.PHB, "PHB", "host bridge"),
    (LinkClass.NODE, "NODE", "same NUMA node"),
    (LinkClass.SYS, "SYS", "cross-socket"),
)
SELECTED_MARK = "\u25b6"  # the selected GPU, and its nearest NIC
PEER_MARK = "\u2022"  # an NVLink peer of the selected GPU
BLOCK_GAP = 3  # columns between the GPU and NIC blocks when side by side
MAX_NOTES = 3

Line = list[Segment]


def line_width(line: Line) -> int:
    return sum(segment.cell_length for segment in line)


@dataclass(frozen=True)
class PaneStyles:
    palette: Palette
    links: dict[LinkClass, Style]

    @staticmethod
    def of(palette: Palette) -> PaneStyles:
        links = {link: palette.heat_bg[step] for link, step in LINK_HEAT_STEP.items()}
        links[LinkClass.SELF] = palette.dim
        links[LinkClass.UNKNOWN] = palette.na
        return PaneStyles(palette, links)

    def severity(self, severity: Severity | None) -> Style:
        return self.palette.text if severity is None else self.palette.severity[severity]


@dataclass(frozen=True)
class Selection:
    gpu: GpuRow | None
    focused: bool  # the pane has the focus: its title says which keys work

    def is_gpu(self, row: GpuRow) -> bool:
        return self.gpu is not None and row.device == self.gpu.device

    @property
    def peers(self) -> tuple[str, ...]:
        return self.gpu.peers if self.gpu else ()

    @property
    def nearest_nic(self) -> str | None:
        return self.gpu.nearest_nic if self.gpu else None


class Painter:
    """Builds the pane's lines for one view, selection, width and theme."""

    def __init__(self, view: TopologyView, styles: PaneStyles, selection: Selection, width: int) -> None:
        self.view = view
        self.styles = styles
        self.palette = styles.palette
        self.selection = selection
        self.width = width
        self.gpu_lines: dict[str, int] = {}  # GPU device -> its line in the pane

    # -- the pane ----------------------------------------------------------------------------------------
    def lines(self) -> list[Line]:
        view = self.view
        out: list[Line] = [self._title()]
        for text in view.missing:
            out += wrapped(text, self.width, self.palette.severity[Severity.WARN])
        if view.topology is not None:
            out += self._blocks(view.topology, len(out))
        elif view.gpus:
            out += self._nvlink_list()
        out += self._selected_detail()
        if view.topology is not None:
            out += self._legend()
        out += self._other_ports()
        out += self._notes()
        return out

    def _title(self) -> Line:
        palette = self.palette
        title = [
            Segment("Topology", palette.cursor if self.selection.focused else palette.text + Style(bold=True))
        ]
        if self.view.gpus:
            hint = (
                "  \u2191\u2193 GPU, i back to the GPU table"
                if self.selection.focused
                else "  i: select a GPU"
            )
            title.append(Segment(hint, palette.dim))
        return title

    def _blocks(self, topology: Topology, first_line: int) -> list[Line]:
        gpu_lines, gpu_rows = self._gpu_block(topology)
        nic_lines = self._nic_block(topology)
        if not nic_lines:
            nic_lines = [[Segment("  no NICs in the matrix", self.palette.dim)]]
        gpu_width = max(line_width(line) for line in gpu_lines)
        nic_width = max(line_width(line) for line in nic_lines)
        if gpu_width + BLOCK_GAP + nic_width <= self.width:
            merged = []
            for y in range(max(len(gpu_lines), len(nic_lines))):
                left = gpu_lines[y] if y < len(gpu_lines) else []
                right = nic_lines[y] if y < len(nic_lines) else []
                pad = gpu_width + BLOCK_GAP - line_width(left)
                merged.append([*left, Segment(" " * pad, self.palette.empty), *right])
            blocks = merged
        else:
            blocks = [*gpu_lines, [], *nic_lines]
        self.gpu_lines = {device: first_line + y for device, y in gpu_rows.items()}
        return blocks

    # -- GPUs ----------------------------------------------------------------------------------------------
    def _gpu_block(self, topology: Topology) -> tuple[list[Line], dict[str, int]]:
        view, palette, selection = self.view, self.palette, self.selection
        gpus = view.gpus
        cell_width = max(3, *(len(topology.link(a.device, b.device) or "?") for a in gpus for b in gpus))
        label_width = max(len(g.label) for g in gpus)
        numa_width = max(4, *(len(g.numa_affinity or "n/a") for g in gpus))
        with_gpu_numa = any(g.gpu_numa_id for g in gpus)
        nvlink_width = max(len("NVLink GB/s"), *(len(g.nvlink.text if g.nvlink else "n/a") for g in gpus))
        fixed = 1 + label_width + len(gpus) * (cell_width + 1) + 2 + 1 + numa_width + 1 + nvlink_width
        fixed += 9 if with_gpu_numa else 0
        widest_cpus = max(4, *(len(g.cpu_affinity or "n/a") for g in gpus))
        # The CPU list gives way first on a narrow terminal; the selected GPU's line below has it whole.
        cpu_width = max(5, min(widest_cpus, self.width - fixed))

        header: Line = [Segment(" " * (1 + label_width), palette.header)]
        for gpu in gpus:
            header += [
                Segment(" ", palette.header),
                Segment(gpu.label.center(cell_width), self._gpu_header_style(gpu)),
            ]
        header.append(
            Segment("  " + "CPUs".ljust(cpu_width) + " " + "NUMA".ljust(numa_width), palette.header)
        )
        if with_gpu_numa:
            header.append(Segment(" GPU NUMA", palette.header))
        header.append(Segment(" " + "NVLink GB/s".ljust(nvlink_width), palette.header))
        lines = [header]
        rows: dict[str, int] = {}
        for gpu in gpus:
            rows[gpu.device] = len(lines)
            is_selected = selection.is_gpu(gpu)
            base = palette.cursor if is_selected else palette.text
            line = [self._gpu_mark(gpu), Segment(gpu.label.ljust(label_width), self._gpu_label_style(gpu))]
            for other in gpus:
                line.append(Segment(" ", palette.empty))
                line.append(self._cell(topology, gpu.device, other.device, cell_width, is_selected))
            line.append(Segment("  " + clip(gpu.cpu_affinity or "n/a", cpu_width).ljust(cpu_width), base))
            line.append(Segment(" " + (gpu.numa_affinity or "n/a").ljust(numa_width), base))
            if with_gpu_numa:
                line.append(Segment(" " + (gpu.gpu_numa_id or "n/a").ljust(8), base))
            nvlink = gpu.nvlink
            nvlink_style = (
                base
                if nvlink is None or nvlink.severity is None or is_selected
                else self.styles.severity(nvlink.severity)
            )
            line.append(Segment(" " + (nvlink.text if nvlink else "n/a").ljust(nvlink_width), nvlink_style))
            lines.append(line)
        return lines, rows

    def _gpu_mark(self, gpu: GpuRow) -> Segment:
        if self.selection.is_gpu(gpu):
            return Segment(SELECTED_MARK, self.palette.cursor)
        if gpu.device in self.selection.peers:
            return Segment(PEER_MARK, self.palette.selection)
        return Segment(" ", self.palette.empty)

    def _gpu_header_style(self, gpu: GpuRow) -> Style:
        return self.palette.cursor if self.selection.is_gpu(gpu) else self.palette.header

    def _gpu_label_style(self, gpu: GpuRow) -> Style:
        if self.selection.is_gpu(gpu):
            return self.palette.cursor
        if gpu.device in self.selection.peers:
            return self.palette.selection
        return self.palette.text + Style(bold=True)

    def _cell(self, topology: Topology, a: str, b: str, width: int, emphasised: bool) -> Segment:
        """The link between devices ``a`` and ``b`` as nvidia-smi prints it, on its class's colour."""
        style = self.styles.links[topology.link_class(a, b)]
        if emphasised:
            style += Style(bold=True, underline=True)
        return Segment((topology.link(a, b) or "?").center(width), style)

    # -- NICs ----------------------------------------------------------------------------------------------
    def _nic_block(self, topology: Topology) -> list[Line]:
        view, palette, selection = self.view, self.palette, self.selection
        nics, gpus = view.nics, view.gpus
        if not nics:
            return []
        cell_width = max(3, *(len(topology.link(n.device, g.device) or "?") for n in nics for g in gpus))
        label_width = max(3, *(len(n.label) for n in nics))
        name_width = max(4, *(len(n.name or "?") for n in nics))
        ports = [p for n in nics for p in n.ports]
        columns = PortColumns.of(ports)

        header: Line = [
            Segment(" " + "NIC".ljust(label_width) + " " + "name".ljust(name_width), palette.header)
        ]
        for gpu in gpus:
            header += [
                Segment(" ", palette.header),
                Segment(gpu.label.center(cell_width), self._gpu_header_style(gpu)),
            ]
        header.append(Segment("  " + columns.header(), palette.header))
        lines = [header]
        selected = selection.gpu.device if selection.gpu else None
        for nic in nics:
            nearest = nic.device == selection.nearest_nic
            mark = Segment(SELECTED_MARK, palette.cursor) if nearest else Segment(" ", palette.empty)
            label_style = palette.cursor if nearest else palette.text + Style(bold=True)
            line = [mark, Segment(nic.label.ljust(label_width), label_style), Segment(" ", palette.empty)]
            line.append(
                Segment((nic.name or "?").ljust(name_width), palette.text if nic.name else palette.dim)
            )
            for gpu in gpus:
                line.append(Segment(" ", palette.empty))
                line.append(self._cell(topology, nic.device, gpu.device, cell_width, gpu.device == selected))
            line.append(Segment("  ", palette.empty))
            line += columns.cells(nic.ports[0] if nic.ports else None, self.styles)
            lines.append(line)
            indent = 1 + label_width + 1 + name_width + len(gpus) * (cell_width + 1) + 2
            for port in nic.ports[1:]:
                lines.append([Segment(" " * indent, palette.empty), *columns.cells(port, self.styles)])
        return lines

    def _other_ports(self) -> list[Line]:
        ports = self.view.other_ports
        if not ports:
            return []
        palette = self.palette
        title = "IB ports" if self.view.topology is None else "IB ports on CAs the matrix does not list"
        columns = PortColumns.of(ports, always_number=True)
        name_width = max(len(p.ca_name) for p in ports)
        lines: list[Line] = [[], [Segment(title, palette.text + Style(bold=True))]]
        lines.append([Segment("  " + "CA".ljust(name_width) + "  " + columns.header(), palette.header)])
        for port in ports:
            lines.append(
                [
                    Segment("  " + port.ca_name.ljust(name_width) + "  ", palette.text),
                    *columns.cells(port, self.styles),
                ]
            )
        return lines

    # -- without a matrix -----------------------------------------------------------------------------------
    def _nvlink_list(self) -> list[Line]:
        palette = self.palette
        label_width = max(len(g.label) for g in self.view.gpus)
        lines: list[Line] = [[Segment(" " * (label_width + 2) + "NVLink GB/s", palette.header)]]
        for gpu in self.view.gpus:
            nvlink = gpu.nvlink
            style = palette.text if nvlink is None else self.styles.severity(nvlink.severity)
            label = Segment(gpu.label.ljust(label_width + 1), self._gpu_label_style(gpu))
            lines.append([self._gpu_mark(gpu), label, Segment(nvlink.text if nvlink else "n/a", style)])
        return lines

    # -- below the blocks ------------------------------------------------------------------------------------
    def _legend(self) -> list[Line]:
        items: list[Line] = []
        for link, code, meaning in LEGEND:
            items.append([Segment(code, self.styles.links[link]), Segment(f" {meaning}", self.palette.dim)])
        marks = f"{SELECTED_MARK} selected GPU and its nearest NIC  {PEER_MARK} its NVLink peers"
        items.append([Segment(marks, self.palette.dim)])
        return pack(items, self.width, Segment("  ", self.palette.empty))

    def _selected_detail(self) -> list[Line]:
        gpu = self.selection.gpu
        if gpu is None:
            return []
        palette, view = self.palette, self.view
        items: list[Line] = []
        if view.topology is not None:
            affinity = f"CPUs {gpu.cpu_affinity or 'n/a'}, NUMA {gpu.numa_affinity or 'n/a'}"
            items.append([Segment(affinity, palette.text)])
            if gpu.gpu_numa_id:
                items.append([Segment(f"GPU NUMA {gpu.gpu_numa_id}", palette.text)])
            items.append(self._nearest_nic_item(gpu))
        peers = compress_labels(view.label(p) for p in gpu.peers)
        nvlink = gpu.nvlink
        if nvlink is not None and nvlink.total:
            speed = f" x {nvlink.speed_text} GB/s" if nvlink.speed_text else ""
            text = f"NVLinks {nvlink.active}/{nvlink.total} active{speed}" + (f" to {peers}" if peers else "")
            items.append([Segment(text, self.styles.severity(nvlink.severity))])
        elif view.topology is not None:
            items.append([Segment(f"NVLink peers {peers}" if peers else "no NVLink peers", palette.text)])
        if not items:
            return []
        items[0].insert(0, Segment(f"{gpu.label}: ", palette.text + Style(bold=True)))
        return pack(items, self.width, Segment(", ", palette.text))

    def _nearest_nic_item(self, gpu: GpuRow) -> Line:
        palette, view = self.palette, self.view
        nic = view.nic(gpu.nearest_nic)
        if nic is None or view.topology is None:
            return [Segment("no NIC", palette.text)]
        link = view.topology.link(gpu.device, nic.device) or "?"
        item = [Segment(f"nearest NIC {nic.label} {nic.name or '?'} ({link})", palette.text)]
        for port in nic.ports:
            state = Segment(port_state_text(port), self.styles.severity(port_severity(port)))
            item += [Segment(f" port {port.port} ", palette.text), state]
            if port.rate_gbps is not None:
                item.append(Segment(f" {format_rate_gbps(port.rate_gbps)} Gb/s", palette.text))
        return item

    def _notes(self) -> list[Line]:
        notes = self.view.notes
        lines = [line for note in notes[:MAX_NOTES] for line in wrapped(note, self.width, self.palette.dim)]
        if len(notes) > MAX_NOTES:
            lines.append([Segment(f"  and {len(notes) - MAX_NOTES} more notes", self.palette.dim)])
        return lines


@dataclass(frozen=True)
class PortColumns:
    """The port columns of a list of ports: the port number only where some NIC has another than 1,
    the link layer only where some port is not InfiniBand (RoCE, storage Ethernet)."""

    number: bool
    state_width: int
    layer: bool

    @staticmethod
    def of(ports: Sequence[IbPort], always_number: bool = False) -> PortColumns:
        number = always_number or any(p.port != 1 for p in ports)
        state_width = max(5, *(len(port_state_text(p)) for p in ports)) if ports else 5
        layer = any(p.link_layer != "InfiniBand" for p in ports)
        return PortColumns(number, state_width, layer)

    def header(self) -> str:
        text = "port " if self.number else ""
        text += "state".ljust(self.state_width) + " Gb/s"
        return text + (" link" if self.layer else "")

    def cells(self, port: IbPort | None, styles: PaneStyles) -> Line:
        palette = styles.palette
        if port is None:
            return [Segment("-", palette.dim)]
        line: Line = []
        if self.number:
            line.append(Segment(f"p{port.port}".ljust(5), palette.text))
        line.append(
            Segment(port_state_text(port).ljust(self.state_width), styles.severity(port_severity(port)))
        )
        line.append(Segment(" " + format_rate_gbps(port.rate_gbps).rjust(4), palette.text))
        if self.layer:
            line.append(Segment(" " + ("IB" if port.link_layer == "InfiniBand" else "Eth"), palette.text))
        return line


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + "\u2026"


def wrapped(text: str, width: int, style: Style) -> list[Line]:
    """A sentence over as many lines as it needs, indented by two and its continuation lines by four."""
    lines = textwrap.wrap(text, max(10, width), initial_indent="  ", subsequent_indent="    ")
    return [[Segment(line, style)] for line in lines]


def pack(items: Iterable[Line], width: int, separator: Segment) -> list[Line]:
    """Items laid out left to right, a new line whenever the next one would pass ``width``."""
    lines: list[Line] = []
    current: Line = []
    for item in items:
        if current and line_width(current) + separator.cell_length + line_width(item) > width:
            lines.append(current)
            current = []
        current = [*current, separator, *item] if current else list(item)
    if current:
        lines.append(current)
    return lines
