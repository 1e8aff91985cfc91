"""The interconnect of an HGX board (a DGX H100 and its kin) as gputop's parsers read it from a node.

Every GPU pair is bonded over NVLink through the NVSwitches; each NIC shares a PCIe switch with one GPU
(PIX); the board's two halves hang off the two CPU sockets, so a NIC of the GPU's own half is NODE away and
one of the other half SYS. The simulator attaches these values to its samples and the fake fleet prints
them as ``nvidia-smi topo -m`` and ``nvidia-smi nvlink -s``, so both roads give the same facts.
"""

from __future__ import annotations

import functools
from collections.abc import Collection, Iterable, Sequence
from typing import Final

from gputop.core.parsers.nvlink import GpuLinks, Link, NvlinkStatus
from gputop.core.parsers.topo import DeviceAffinity, Topology

# Two 56-core sockets with hyper-threading, as on a DGX H100: each NUMA node's cores and their siblings.
CPU_AFFINITY: Final = ("0-55,112-167", "56-111,168-223")


def board_topology(
    gpu_indices: Sequence[int], gpus_per_node: int, nic_names: Sequence[str], nvlinks: int
) -> Topology:
    """The matrix of a node whose GPUs ``gpu_indices`` answer (a GPU that fell off the bus is not listed).

    GPU k sits in the first NUMA node when k is in the first half of the board; NIC j shares a PCIe switch
    with GPU j (modulo the GPU count, when there are more NICs than GPUs).
    """
    half = max(1, gpus_per_node // 2)
    # (label, the GPU it sits beside, whether it is a GPU)
    gpus = [(f"GPU{k}", k, True) for k in gpu_indices]
    nics = [(f"NIC{j}", j % gpus_per_node, False) for j in range(len(nic_names))]

    def numa(gpu: int) -> int:
        return 0 if gpu < half else 1

    def cell(a: tuple[str, int, bool], b: tuple[str, int, bool]) -> str:
        if a[0] == b[0]:
            return "X"
        if a[2] and b[2]:
            return f"NV{nvlinks}"
        if a[2] != b[2] and a[1] == b[1]:
            return "PIX"
        return "NODE" if numa(a[1]) == numa(b[1]) else "SYS"

    devices = gpus + nics
    return Topology(
        devices=tuple(label for label, _, _ in devices),
        links={(a[0], b[0]): cell(a, b) for a in devices for b in devices},
        affinity={label: DeviceAffinity(CPU_AFFINITY[numa(k)], str(numa(k)), None) for label, k, _ in gpus},
        nic_names={label: name for (label, _, _), name in zip(nics, nic_names, strict=True)},
    )


def board_nvlinks(
    gpus: Iterable[tuple[int, str, str]],
    links_per_gpu: int,
    speed_gbyte_s: float,
    inactive: Collection[tuple[int, int]] = (),
) -> NvlinkStatus:
    """``nvidia-smi nvlink -s`` of GPUs given as (index, name, UUID); ``inactive`` holds (GPU, link)
    pairs that did not train."""
    return NvlinkStatus(
        tuple(
            GpuLinks(
                index,
                name,
                uuid,
                _links(links_per_gpu, speed_gbyte_s, frozenset(k for g, k in inactive if g == index)),
            )
            for index, name, uuid in gpus
        )
    )


@functools.lru_cache(maxsize=64)
def _links(count: int, speed_gbyte_s: float, inactive: frozenset[int]) -> tuple[Link, ...]:
    # Every healthy GPU of a fleet has the same links: one tuple for all of them.
    return tuple(
        Link(k, None, False) if k in inactive else Link(k, speed_gbyte_s, True) for k in range(count)
    )
