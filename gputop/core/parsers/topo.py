"""`nvidia-smi topo -m`: the GPU/NIC connection matrix, CPU/NUMA affinity and the NIC legend.

nvidia-smi separates cells with tabs (doubled before some columns), but copies through terminals expand
them to spaces, so rows are read as whitespace-separated words: no cell value contains a space. Only the
header has multi-word names ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID"); they are found by name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from gputop.core.parsers.common import NOT_AVAILABLE, ParseFailure, ParserInfo

KIND = "topo"


class LinkClass(StrEnum):
    """How two devices reach each other, best first (nvidia-smi's legend)."""

    SELF = "self"
    NVLINK = "nvlink"  # NV#: a bonded set of # NVLinks
    PIX = "pix"  # at most one PCIe bridge
    PXB = "pxb"  # several PCIe bridges, no host bridge
    PHB = "phb"  # through a PCIe host bridge (the CPU)
    NODE = "node"  # between host bridges inside one NUMA node
    SYS = "sys"  # across the SMP interconnect between NUMA nodes (QPI/UPI)
    UNKNOWN = "unknown"


_CLASS_BY_CELL = {
    "X": LinkClass.SELF,
    "PIX": LinkClass.PIX,
    "PXB": LinkClass.PXB,
    "PHB": LinkClass.PHB,
    "NODE": LinkClass.NODE,
    "SYS": LinkClass.SYS,
    "SOC": LinkClass.SYS,  # drivers before ~384 called the cross-socket path SOC
}
_NVLINK_CELL = re.compile(r"^NV(\d+)$")
# Header columns that are not devices, in the spelling nvidia-smi prints.
_AFFINITY_LABELS = {"CPU Affinity": "cpu", "NUMA Affinity": "numa", "GPU NUMA ID": "gpu_numa"}
_AFFINITY_LABEL = re.compile("|".join(re.escape(label) for label in _AFFINITY_LABELS))
_CPU_LIST = re.compile(r"^\d+(-\d+)?(,\d+(-\d+)?)*$")
_NUMBER = re.compile(r"^\d+$")
_NIC_LEGEND_ENTRY = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


@dataclass(frozen=True, slots=True)
class DeviceAffinity:
    """The affinity columns of one GPU row; None where nvidia-smi printed N/A or the cell was unreadable."""

    cpu_affinity: str | None  # a CPU list as printed, e.g. "0-31,64-95"
    numa_affinity: str | None  # NUMA node(s) of the CPUs, e.g. "0"
    gpu_numa_id: str | None  # the GPU's own NUMA node (coherent-memory systems such as Grace); mostly N/A


@dataclass(frozen=True, slots=True)
class Topology:
    devices: tuple[str, ...]  # GPU0.., NIC0.. (or old-style NIC names such as mlx5_0), matrix order
    links: Mapping[tuple[str, str], str]  # (row, column) -> the raw cell: X, NV12, PIX, PXB, PHB, NODE, SYS
    affinity: Mapping[str, DeviceAffinity] = field(default_factory=dict)  # by GPU name
    nic_names: Mapping[str, str] = field(default_factory=dict)  # NIC0 -> mlx5_0, from the NIC Legend
    notes: tuple[str, ...] = ()

    @property
    def gpus(self) -> tuple[str, ...]:
        return tuple(d for d in self.devices if d.startswith("GPU"))

    @property
    def nics(self) -> tuple[str, ...]:
        return tuple(d for d in self.devices if not d.startswith("GPU"))

    def link(self, a: str, b: str) -> str | None:
        """The cell between two devices; the matrix is symmetric, so a clipped column is read from its row."""
        cell = self.links.get((a, b))
        return cell if cell is not None else self.links.get((b, a))

    def link_class(self, a: str, b: str) -> LinkClass:
        cell = self.link(a, b)
        if cell is None:
            return LinkClass.UNKNOWN
        if _NVLINK_CELL.match(cell):
            return LinkClass.NVLINK
        return _CLASS_BY_CELL.get(cell, LinkClass.UNKNOWN)

    def nvlink_count(self, a: str, b: str) -> int | None:
        """NV12 -> 12; None when the pair is not joined by NVLink."""
        match = _NVLINK_CELL.match(self.link(a, b) or "")
        return int(match.group(1)) if match else None

    def cpu_affinity(self, gpu: str) -> str | None:
        found = self.affinity.get(gpu)
        return found.cpu_affinity if found else None

    def numa_affinity(self, gpu: str) -> str | None:
        found = self.affinity.get(gpu)
        return found.numa_affinity if found else None

    def gpu_numa_id(self, gpu: str) -> str | None:
        found = self.affinity.get(gpu)
        return found.gpu_numa_id if found else None

    def nic_name(self, device: str) -> str:
        """mlx5_0 for NIC0 when the legend names it, else the device label itself."""
        return self.nic_names.get(device, device)


def _is_header(words: list[str]) -> bool:
    return any(re.match(r"^GPU\d+$", w) for w in words) and "X" not in words


def _split_header(line: str) -> tuple[list[str], list[str]]:
    """Device columns and affinity columns ("cpu", "numa", "gpu_numa") of the header line."""
    first = _AFFINITY_LABEL.search(line)
    device_part = line[: first.start()] if first else line
    labels = [_AFFINITY_LABELS[m.group(0)] for m in _AFFINITY_LABEL.finditer(line)]
    return device_part.split(), labels


def _affinity_value(device: str, label: str, raw: str | None, notes: list[str]) -> str | None:
    if raw is None or raw in NOT_AVAILABLE:
        return None
    pattern = _CPU_LIST if label in ("cpu", "numa") else _NUMBER
    if not pattern.match(raw):
        printed = next(text for text, key in _AFFINITY_LABELS.items() if key == label)
        notes.append(f"{device}: {printed} {raw!r} is unreadable (clipped copy?)")
        return None
    return raw


def _read_row(
    words: list[str],
    columns: list[str],
    affinity_labels: list[str],
    links: dict[tuple[str, str], str],
    affinity: dict[str, DeviceAffinity],
    notes: list[str],
) -> None:
    name, cells = words[0], words[1:]
    link_cells, extra = cells[: len(columns)], cells[len(columns) :]
    for column, cell in zip(columns, link_cells, strict=False):
        links[(name, column)] = cell
        if cell not in _CLASS_BY_CELL and not _NVLINK_CELL.match(cell):
            notes.append(f"{name}-{column}: unknown link cell {cell!r}")
    if len(link_cells) < len(columns):
        notes.append(f"{name}: row has {len(link_cells)} of {len(columns)} link cells (cut short?)")
    if not name.startswith("GPU"):
        if extra:
            notes.append(f"{name}: unexpected cells after the matrix: {' '.join(extra)}")
        return
    if len(link_cells) == len(columns) and len(extra) != len(affinity_labels):
        notes.append(f"{name}: {len(extra)} affinity values for {len(affinity_labels)} columns")
    values = dict(zip(affinity_labels, extra, strict=False))
    affinity[name] = DeviceAffinity(
        cpu_affinity=_affinity_value(name, "cpu", values.get("cpu"), notes),
        numa_affinity=_affinity_value(name, "numa", values.get("numa"), notes),
        gpu_numa_id=_affinity_value(name, "gpu_numa", values.get("gpu_numa"), notes),
    )


def _nic_legend(lines: list[str]) -> dict[str, str]:
    names: dict[str, str] = {}
    in_legend = False
    for line in lines:
        if line.strip().startswith("NIC Legend"):
            in_legend = True
            continue
        match = _NIC_LEGEND_ENTRY.match(line) if in_legend else None
        if match:
            names[match.group(1)] = match.group(2)
    return names


def parse_topo(text: str) -> Topology | ParseFailure:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _is_header(line.split())), None)
    if start is None:
        excerpt = "\n".join(line for line in lines if line.strip())[:200]
        reason = "no topology matrix header (a line naming GPU0...)" if excerpt else "empty output"
        return ParseFailure(KIND, reason, excerpt)
    notes: list[str] = []
    if any(line.strip() for line in lines[:start]):
        notes.append(f"skipped {start} line(s) before the matrix")
    columns, affinity_labels = _split_header(lines[start])
    links: dict[tuple[str, str], str] = {}
    affinity: dict[str, DeviceAffinity] = {}
    rows: list[str] = []
    for line in lines[start + 1 :]:
        words = line.split()
        if not words or words[0].startswith("Legend"):
            break  # the matrix ends at the first blank line; the legend follows
        rows.append(words[0])
        _read_row(words, columns, affinity_labels, links, affinity, notes)
    extra_rows = [r for r in rows if r not in columns]
    if extra_rows:
        notes.append(f"rows without a column: {', '.join(extra_rows)} (columns clipped?)")
    missing_rows = [c for c in columns if c not in rows]
    if missing_rows:
        notes.append(f"columns without a row: {', '.join(missing_rows)} (output cut short?)")
    nic_names = _nic_legend(lines[start:])
    unnamed = [d for d in columns + extra_rows if d.startswith("NIC") and d not in nic_names]
    if unnamed:
        notes.append(f"no NIC Legend name for {', '.join(unnamed)} (legend cut short?)")
    return Topology(
        devices=tuple(columns + extra_rows),
        links=links,
        affinity=affinity,
        nic_names=nic_names,
        notes=tuple(notes),
    )


PARSERS: dict[str, ParserInfo] = {KIND: ParserInfo(KIND, "nvidia-smi topo -m", parse_topo)}
