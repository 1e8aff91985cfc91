"""One node's interconnect in the terms peers are compared on: the link matrix, NVLink per GPU, IB ports.

Built from the slow facts a source attaches to a NodeSample (``facts["topology"]`` from ``nvidia-smi topo
-m``, ``facts["nvlink"]`` from ``nvidia-smi nvlink -s``) and its ``ib_ports`` (sources turn ``ibstat`` into
those). Nothing here names one node: UUIDs and GUIDs are left out, so healthy nodes of one model give equal
summaries, which is what lets a fleet be compared by counting distinct summaries instead of nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputop.core.models import IbPort, NodeSample
from gputop.core.parsers.nvlink import NvlinkStatus
from gputop.core.parsers.topo import LinkClass, Topology


@dataclass(frozen=True, slots=True)
class Nic:
    label: str  # NIC0, as topo -m names its row and column
    name: str  # mlx5_0 from the NIC Legend; the label again where the legend does not name it


@dataclass(frozen=True, slots=True)
class MatrixCell:
    """One pair of the matrix: the cell as nvidia-smi printed it (NV18, PIX, SOC) and its class."""

    row: str  # always a GPU
    column: str  # a GPU after it in matrix order, or a NIC
    cell: str
    link_class: LinkClass


@dataclass(frozen=True, slots=True)
class LinkMatrix:
    """The GPU x GPU (each pair once) and GPU x NIC cells of ``topo -m``; NIC x NIC pairs carry no GPU
    traffic and are left out. Pairs whose cell is missing or unreadable are left out too."""

    gpus: tuple[str, ...]
    nics: tuple[Nic, ...]
    cells: tuple[MatrixCell, ...]
    _by_pair: dict[tuple[str, str], MatrixCell] = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_pair", {(c.row, c.column): c for c in self.cells})
        object.__setattr__(self, "_hash", hash((self.gpus, self.nics, self.cells)))

    def __hash__(self) -> int:
        # Kept: a fleet's summaries are counted in dicts, and hashing a hundred cells each time added up.
        return self._hash

    def cell(self, a: str, b: str) -> MatrixCell | None:
        """The pair in either order."""
        return self._by_pair.get((a, b)) or self._by_pair.get((b, a))

    def link_class(self, a: str, b: str) -> LinkClass:
        found = self.cell(a, b)
        return found.link_class if found is not None else LinkClass.UNKNOWN

    def nic_name(self, label: str) -> str:
        return next((nic.name for nic in self.nics if nic.label == label), label)


@dataclass(frozen=True, slots=True)
class GpuNvlinks:
    gpu_index: int
    active_links: int
    total_links: int  # active and inactive, as nvlink -s lists them
    # GB/s (gigabytes) per link and direction as nvlink -s prints it; the slowest active link, so one link
    # that trained slower shows; None when no link is active
    link_speed_gbyte_s: float | None


@dataclass(frozen=True, slots=True)
class NodeInterconnect:
    """What a node's interconnect looks like; an aspect is None where its fact is missing (not yet
    collected, or the command failed): such an aspect is neither compared nor counted among peers."""

    gpu_model: str | None  # the GPU name as nvidia-smi prints it; None for a node that reports no GPU
    gpu_count: int
    matrix: LinkMatrix | None
    nvlinks: tuple[GpuNvlinks, ...] | None
    ib_ports: tuple[IbPort, ...] | None  # None also when the node lists no port at all

    @property
    def nics(self) -> tuple[Nic, ...]:
        return self.matrix.nics if self.matrix is not None else ()

    def nvlink(self, gpu_index: int) -> GpuNvlinks | None:
        return next((g for g in self.nvlinks or () if g.gpu_index == gpu_index), None)


def link_matrix(topology: Topology) -> LinkMatrix:
    gpus = topology.gpus
    nics = topology.nics
    cells: list[MatrixCell] = []
    for i, row in enumerate(gpus):
        for column in (*gpus[i + 1 :], *nics):
            cell = topology.link(row, column)
            link_class = topology.link_class(row, column)
            if cell is not None and link_class is not LinkClass.UNKNOWN:
                cells.append(MatrixCell(row, column, cell, link_class))
    return LinkMatrix(gpus, tuple(Nic(nic, topology.nic_name(nic)) for nic in nics), tuple(cells))


def gpu_nvlinks(status: NvlinkStatus) -> tuple[GpuNvlinks, ...]:
    out = []
    for gpu in status.gpus:
        speeds = [link.speed_gbps for link in gpu.links if link.active and link.speed_gbps is not None]
        out.append(GpuNvlinks(gpu.index, gpu.active_count, len(gpu.links), min(speeds) if speeds else None))
    return tuple(out)


def gpu_model_of(node: NodeSample) -> str | None:
    """The node's GPU model, by its first GPU's name (the GPUs of one node are one model)."""
    return node.gpus[0].name if node.gpus else None


def node_interconnect(node: NodeSample) -> NodeInterconnect:
    topology = node.facts.topology.value
    status = node.facts.nvlink.value
    return NodeInterconnect(
        gpu_model=gpu_model_of(node),
        gpu_count=len(node.gpus),
        matrix=link_matrix(topology) if topology is not None else None,
        nvlinks=gpu_nvlinks(status) if status is not None else None,
        ib_ports=node.ib_ports or None,
    )
