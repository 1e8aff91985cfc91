"""The scripted incidents of the simulated cluster: their kinds, the nodes and GPUs they sit on, and
how they are described.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from gputop.sim.workload import IDLE_JOB_USER

if TYPE_CHECKING:
    from gputop.sim.simulator import SimulatedCluster


# Spread over the cluster by eighths (see incident_node_indices).
SPREAD_KINDS: Final = (
    "hot_gpu",
    "ecc_xid",
    "unresponsive",
    "idle_job",
    "drained",
    "mig",
    "ib_down",
    "missing_gpu",
)

# Interconnect faults that only comparing a node with its peers reveals; they take nodes between the
# spread ones, so they need a cluster of 16 nodes or more.
INTERCONNECT_KINDS: Final = ("nvlink_degraded", "ib_slow")

# Faults a GPU reports of itself, on nodes between the spread ones too (16 nodes or more).
GPU_FACT_KINDS: Final = ("pcie_degraded", "remap_pending")

# Counters that grow (or a port that keeps dropping), and Xid events of each of the catalogue's action
# classes: from 32 nodes on, at 3/32 and 1/32 into each eighth, clear of the kinds above.
COUNTER_KINDS: Final = ("pcie_replays", "nvlink_crc", "hbm_hot", "memory_wear", "sbe_storm", "ib_flapping")
XID_KINDS: Final = ("xid_job", "xid_reset", "xid_repeat")

INCIDENT_KINDS: Final = SPREAD_KINDS + INTERCONNECT_KINDS + GPU_FACT_KINDS + COUNTER_KINDS + XID_KINDS

DRAIN_REASON: Final = "Xid 48 DBE on GPU2, RMA requested (OPS-4411)"


_LATER_WORDS: Final = {
    "pcie_replays": "GPU{gpu} PCIe replays at 40 a minute (a loose riser)",
    "nvlink_crc": "GPU{gpu} NVLink CRC errors at 250 a second, and replays",
    "hbm_hot": "GPU{gpu} HBM at 92 C, near its 95 C limit",
    "memory_wear": "GPU{gpu}: 2 memory banks with no spare row left",
    "sbe_storm": "GPU{gpu} 30 single-bit ECC errors a minute",
    "ib_flapping": "mlx5_5 port 1 drops for a minute every four",
    "xid_job": "Xid 13 on GPU0 and GPU1 of one job (the job's fault); Xid 63, informational, on GPU2",
    "xid_reset": "Xid 119 (GSP timeout) on GPU{gpu}, and Xid 154: GPU reset required",
    "xid_repeat": "Xid 95 three times in 40 min on GPU{gpu}: a hardware suspect",
}


@dataclass(frozen=True)
class Incident:
    kind: str
    node: str
    gpu_index: int | None
    description: str


def incident_node_indices(nodes: int) -> dict[str, int]:
    """Where each scripted incident lives: spread evenly over the cluster by fractions of the node count, so
    they sit in the same places whatever the seed. A cluster under eight nodes gets the first few kinds; the
    interconnect incidents come from 16 nodes on."""
    count = len(SPREAD_KINDS)
    if nodes < count:
        return {kind: k for k, kind in enumerate(SPREAD_KINDS[:nodes])}
    # Node k*n/8 + n/16: the middle of each eighth of the cluster.
    at = {kind: k * nodes // count + nodes // (2 * count) for k, kind in enumerate(SPREAD_KINDS)}
    if nodes >= 2 * count:
        # The starts of the second and third eighths: n/16 or more away from every spread incident.
        at |= {kind: (k + 1) * nodes // count for k, kind in enumerate(INTERCONNECT_KINDS)}
        at |= {kind: (k + 3) * nodes // count for k, kind in enumerate(GPU_FACT_KINDS)}
    if nodes >= 4 * count:
        at |= {kind: k * nodes // count + 3 * nodes // 32 for k, kind in enumerate(COUNTER_KINDS)}
        at |= {kind: k * nodes // count + nodes // 32 for k, kind in enumerate(XID_KINDS)}
    return at


def incident_gpu(sim: SimulatedCluster, kind: str) -> int:
    wanted = {
        "hot_gpu": 3,
        "ecc_xid": 4,
        "mig": 7,
        "missing_gpu": 5,
        "nvlink_degraded": 5,
        "pcie_degraded": 2,
        "remap_pending": 6,
        "pcie_replays": 1,
        "nvlink_crc": 3,
        "hbm_hot": 2,
        "memory_wear": 7,
        "sbe_storm": 0,
        "ib_flapping": 0,
        "xid_job": 0,
        "xid_reset": 6,
        "xid_repeat": 4,
    }[kind]
    return min(wanted, sim.gpus_per_node - 1)


def describe_incidents(sim: SimulatedCluster) -> tuple[Incident, ...]:
    at = sim._incident_at
    names = sim.node_names
    g_per = sim.gpus_per_node
    out: list[Incident] = []
    for kind in INCIDENT_KINDS:
        if kind not in at:
            continue
        node = names[at[kind]]
        gpu: int | None = None
        if kind == "hot_gpu":
            gpu = incident_gpu(sim, kind)
            text = f"GPU{gpu} runs near 90 C and throttles (poor cooling)"
        elif kind == "ecc_xid":
            gpu = incident_gpu(sim, kind)
            text = f"GPU{gpu}: 2 uncorrected ECC errors, Xid 48 then Xid 79 (fell off the bus)"
        elif kind == "unresponsive":
            text = "stopped answering; Slurm: NOT_RESPONDING"
        elif kind == "idle_job":
            text = f"{IDLE_JOB_USER}'s job holds all {g_per} GPUs at 0% for 3 h"
        elif kind == "drained":
            text = f"drained: {DRAIN_REASON}"
        elif kind == "mig":
            gpu = incident_gpu(sim, kind)
            text = f"GPU{gpu} in MIG mode: no utilization reported"
        elif kind == "ib_down":
            text = "mlx5_3 port 1 down (Disabled)"
        elif kind == "nvlink_degraded":
            gpu = incident_gpu(sim, kind)
            total = sim.model.nvlinks_per_gpu
            text = f"GPU{gpu} has {total - total // 3} of {total} NVLinks active"
        elif kind == "ib_slow":
            rate = sim.model.ib_rate_gbps
            text = f"mlx5_3 trained at {rate / 2:g} Gb/s instead of {rate:g}"
        elif kind == "pcie_degraded":
            gpu = incident_gpu(sim, kind)
            text = f"GPU{gpu} PCIe link trained at x8 instead of x16"
        elif kind == "remap_pending":
            gpu = incident_gpu(sim, kind)
            text = f"GPU{gpu} has a row remapping pending (needs a GPU reset)"
        elif kind in COUNTER_KINDS or kind in XID_KINDS:
            gpu = incident_gpu(sim, kind)
            text = _LATER_WORDS[kind].format(gpu=gpu)
        else:
            gpu = incident_gpu(sim, kind)
            text = f"reports {g_per - 1} of {g_per} GPUs (GPU{gpu} missing)"
        out.append(Incident(kind, node, gpu, text))
    return tuple(out)
