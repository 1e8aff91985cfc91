"""``nvidia-smi topo -m`` for a fake node: the simulator's topology fact in the tab-separated layout the
driver prints."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Final

from gputop.core.parsers.topo import Topology

_LEGEND: Final = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


@dataclass(frozen=True, slots=True)
class GpuAffinity:
    cpus: str
    numa: str
    gpu_numa: str = "N/A"


def format_topo(
    gpu_labels: Sequence[str],
    nic_names: Sequence[str],
    cells: Sequence[Sequence[str]],
    affinity: Sequence[GpuAffinity],
) -> str:
    """The matrix (GPUs, then NICs; "X" on the diagonal), the legend and the NIC legend.

    A GPU row ends with its affinities; a NIC row ends with the same tabs left empty, as the driver does.
    """
    labels = [*gpu_labels, *(f"NIC{k}" for k in range(len(nic_names)))]
    lines = ["\t" + "\t".join([*labels, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])]
    for r, label in enumerate(labels):
        row = "\t".join(" X " if cell == "X" else cell for cell in cells[r])
        if r < len(gpu_labels):
            a = affinity[r]
            tail = f"\t{a.cpus}\t{a.numa}\t\t{a.gpu_numa}"
        else:
            tail = "\t\t\t\t"
        lines.append(f"{label}\t{row}{tail}")
    text = "\n".join(lines) + "\n" + _LEGEND
    if nic_names:
        text += "\nNIC Legend:\n\n" + "".join(f"  NIC{k}: {name}\n" for k, name in enumerate(nic_names))
    return text


def topology_text(topology: Topology, gpus: Collection[str] | None = None) -> str:
    """``topology`` (a complete matrix, as the simulator makes) as the driver prints it; ``gpus`` (labels
    such as GPU0) leaves out the GPUs a node no longer sees, as a GPU that fell off the bus drops out."""
    gpu_labels = [d for d in topology.gpus if gpus is None or d in gpus]
    nic_labels = list(topology.nics)
    labels = gpu_labels + nic_labels
    cells = [[topology.links[(row, column)] for column in labels] for row in labels]
    affinity = [
        GpuAffinity(
            topology.cpu_affinity(gpu) or "N/A",
            topology.numa_affinity(gpu) or "N/A",
            topology.gpu_numa_id(gpu) or "N/A",
        )
        for gpu in gpu_labels
    ]
    return format_topo(gpu_labels, [topology.nic_name(nic) for nic in nic_labels], cells, affinity)
