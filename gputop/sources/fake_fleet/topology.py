"""``nvidia-smi topo -m`` for a fake node: an HGX board (every GPU pair bonded over NVLink, one NIC beside
each GPU on its PCIe switch, two NUMA nodes) in the tab-separated layout the driver prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

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

# Two 56-core sockets with hyper-threading, as on a DGX H100: each NUMA node's cores and their siblings.
_CPU_AFFINITY: Final = ("0-55,112-167", "56-111,168-223")


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


def hgx_topology(
    gpu_indices: Sequence[int], gpus_per_node: int, nic_names: Sequence[str], nvlinks: int
) -> str:
    """The board of a node whose GPUs ``gpu_indices`` answer (a missing GPU leaves its row out).

    GPU k sits in the first NUMA node when k is in the first half of the board; NIC j shares a PCIe switch
    with GPU j.
    """
    half = max(1, gpus_per_node // 2)

    def numa_of_gpu(k: int) -> int:
        return 0 if k < half else 1

    def numa_of_nic(j: int) -> int:
        return numa_of_gpu(j % gpus_per_node)

    n_gpu = len(gpu_indices)
    size = n_gpu + len(nic_names)
    cells = [["X"] * size for _ in range(size)]
    for r in range(size):
        for c in range(size):
            if r == c:
                continue
            if r < n_gpu and c < n_gpu:
                cells[r][c] = f"NV{nvlinks}"
                continue
            if r < n_gpu or c < n_gpu:
                gpu, nic = (gpu_indices[r], c - n_gpu) if r < n_gpu else (gpu_indices[c], r - n_gpu)
                if nic % gpus_per_node == gpu:
                    cells[r][c] = "PIX"
                    continue
                same = numa_of_gpu(gpu) == numa_of_nic(nic)
            else:
                same = numa_of_nic(r - n_gpu) == numa_of_nic(c - n_gpu)
            cells[r][c] = "NODE" if same else "SYS"
    affinity = [GpuAffinity(_CPU_AFFINITY[numa_of_gpu(k)], str(numa_of_gpu(k))) for k in gpu_indices]
    return format_topo([f"GPU{k}" for k in gpu_indices], nic_names, cells, affinity)
