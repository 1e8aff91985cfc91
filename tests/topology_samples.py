"""Interconnect facts for the topology tests: the real captured outputs in tests/fixtures, parsed as the SSH
source parses them, and one hand-made DGX-H100-like matrix (8 GPUs, 8 NICs), which no real sample has."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from gputop.core.models import GpuSample, NodeSample, Reachability
from gputop.core.parsers.ib import IbStat, parse_ibstat
from gputop.core.parsers.nvlink import NvlinkStatus, parse_nvlink
from gputop.core.parsers.topo import Topology, parse_topo
from tests.factories import facts_of, gpu_sample

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLED_AT_S = 1_800_000_000.0

# The compute NICs of a DGX H100, as in the real ibstat sample (its InfiniBand CAs); mlx5_1, 2, 7 and 8 are
# the storage Ethernet ports there.
DGX_COMPUTE_NICS = ("mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11")


def fixture(folder: str, prefix: str) -> str:
    (path,) = (FIXTURES / folder).glob(prefix + "*")
    return path.read_text(encoding="utf-8")


def dgx_topo_text(nic_names: Sequence[str] = DGX_COMPUTE_NICS) -> str:
    """`nvidia-smi topo -m` of an 8-GPU NV18 board, tab-separated as the driver prints it: NIC k on GPU k's
    PCIe switch (PIX), GPUs 0-3 and their NICs on NUMA node 0, the rest on node 1."""
    labels = [f"GPU{i}" for i in range(8)] + [f"NIC{j}" for j in range(len(nic_names))]

    def numa(device: str) -> int:
        return int(device[3:]) % 8 // 4

    lines = ["\t" + "\t".join([*labels, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"])]
    for row in labels:
        cells = []
        for column in labels:
            if row == column:
                cells.append(" X ")
            elif row.startswith("GPU") and column.startswith("GPU"):
                cells.append("NV18")
            elif row[3:] == column[3:]:
                cells.append("PIX")
            else:
                cells.append("NODE" if numa(row) == numa(column) else "SYS")
        cpus = "0-55,112-167" if numa(row) == 0 else "56-111,168-223"
        tail = f"\t{cpus}\t{numa(row)}\t\tN/A" if row.startswith("GPU") else "\t\t\t\t"
        lines.append(row + "\t" + "\t".join(cells) + tail)
    legend = "".join(f"  NIC{j}: {name}\n" for j, name in enumerate(nic_names))
    return "\n".join(lines) + "\n\nLegend:\n\n  X    = Self\n\nNIC Legend:\n\n" + legend


def h100_nvlink_text(gpus: int = 8) -> str:
    """The real one-GPU H100 `nvlink -s` capture, repeated for each GPU of a board."""
    one = fixture("nvidia-smi-nvlink", "h100")
    return "".join(one.replace("GPU 0:", f"GPU {i}:") for i in range(gpus))


def topo(text: str) -> Topology:
    parsed = parse_topo(text)
    assert isinstance(parsed, Topology), parsed
    return parsed


def nvlink(text: str) -> NvlinkStatus:
    parsed = parse_nvlink(text)
    assert isinstance(parsed, NvlinkStatus), parsed
    return parsed


def ibstat(text: str) -> IbStat:
    parsed = parse_ibstat(text)
    assert isinstance(parsed, IbStat), parsed
    return parsed


def gpu(index: int) -> GpuSample:
    return gpu_sample(
        index,
        uuid=f"GPU-{index:08d}",
        mem_util_pct=10.0,
        mem_used_mib=1024.0,
        mem_total_mib=81920.0,
        temp_c=40.0,
    )


def node_sample(
    name: str,
    *,
    topology: str | None = None,
    nvlink_s: str | None = None,
    ibstat_text: str | None = None,
    fact_errors: Mapping[str, str] | None = None,
    gpus: int = 8,
) -> NodeSample:
    """A node as the SSH source builds it: parsed facts by command name, IB ports from ibstat."""
    facts: dict[str, object] = {}
    if topology is not None:
        facts["topology"] = topo(topology)
    if nvlink_s is not None:
        facts["nvlink"] = nvlink(nvlink_s)
    ports = ibstat(ibstat_text).to_ports() if ibstat_text is not None else ()
    return NodeSample(
        name,
        Reachability.OK,
        SAMPLED_AT_S,
        tuple(gpu(i) for i in range(gpus)),
        gpus,
        ib_ports=ports,
        facts=facts_of(facts, fact_errors),
    )


def dgx_node(name: str = "dgx01", nic_names: Sequence[str] = DGX_COMPUTE_NICS) -> NodeSample:
    return node_sample(
        name,
        topology=dgx_topo_text(nic_names),
        nvlink_s=h100_nvlink_text(),
        ibstat_text=fixture("ib", "ibstat-h100"),
    )
