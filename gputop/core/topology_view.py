"""What the topology pane shows for one node, derived from its slow facts: each GPU's affinity, NVLink
state, NVLink peers and nearest NIC; each NIC's mlx5 name and IB ports; and why a fact is missing.

Pure: it reads the parsed facts a source stored on the NodeSample (`facts["topology"]`,
`facts["nvlink"]`), the IB ports (`ib_ports`, from `ibstat`) and the failure reasons (`fact_errors`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gputop.core.facts import Reading
from gputop.core.models import IbPort, NodeSample, Severity
from gputop.core.nodeset import natural_key
from gputop.core.parsers.nvlink import GpuLinks, NvlinkStatus
from gputop.core.parsers.topo import LinkClass, Topology

# Best first: the order nearest_nic ranks by, and the legend's.
LINK_ORDER: tuple[LinkClass, ...] = (
    LinkClass.SELF,
    LinkClass.NVLINK,
    LinkClass.PIX,
    LinkClass.PXB,
    LinkClass.PHB,
    LinkClass.NODE,
    LinkClass.SYS,
    LinkClass.UNKNOWN,
)
_RANK = {link: rank for rank, link in enumerate(LINK_ORDER)}

# The command behind each fact, as the default command table runs it (gputop.sources.commands).
FACT_COMMANDS = {"topology": "nvidia-smi topo -m", "nvlink": "nvidia-smi nvlink -s", "ibstat": "ibstat"}

_NUMBERED = re.compile(r"^(GPU|NIC)(\d+)$")


@dataclass(frozen=True, slots=True)
class NvlinkSummary:
    """One GPU's NVLinks: how many are up of those listed, and at what per-link speed."""

    active: int
    total: int
    speeds_gbps: tuple[float, ...]  # the distinct speeds of the active links, GB/s per link, lowest first

    @property
    def severity(self) -> Severity | None:
        if self.total == 0 or self.active == self.total:
            return None
        return Severity.CRIT if self.active == 0 else Severity.WARN

    @property
    def speed_text(self) -> str:
        """ "26.6", or "25.8-26.6" when links differ; "" with no active link."""
        if not self.speeds_gbps:
            return ""
        low, high = self.speeds_gbps[0], self.speeds_gbps[-1]
        return f"{low:.1f}" if low == high else f"{low:.1f}-{high:.1f}"

    @property
    def text(self) -> str:
        """ "18/18 x 26.6": active/total links, times the GB/s of each."""
        if self.total == 0:
            return "none"
        speed = self.speed_text
        return f"{self.active}/{self.total}" + (f" x {speed}" if speed else "")


@dataclass(frozen=True, slots=True)
class GpuRow:
    device: str  # GPU3, as the matrix names it
    label: str  # G3
    cpu_affinity: str | None
    numa_affinity: str | None
    gpu_numa_id: str | None
    nvlink: NvlinkSummary | None  # None: `nvidia-smi nvlink -s` did not list this GPU
    nearest_nic: str | None  # a NIC device of the matrix, None when the node has none
    peers: tuple[str, ...]  # GPU devices joined to this one by NVLink

    @property
    def index(self) -> int | None:
        return gpu_index(self.device)


@dataclass(frozen=True, slots=True)
class NicRow:
    device: str  # NIC0, or an old-style name such as mlx5_0
    label: str  # N0
    name: str | None  # mlx5_0 from the NIC Legend; None when the legend does not name it
    ports: tuple[IbPort, ...]  # the ibstat ports of the CA with that name


@dataclass(frozen=True, slots=True)
class TopologyView:
    node: str
    topology: Topology | None
    gpus: tuple[GpuRow, ...]
    nics: tuple[NicRow, ...]
    other_ports: tuple[IbPort, ...]  # IB ports of CAs that no NIC of the matrix names
    missing: tuple[str, ...]  # why a fact is absent, one sentence each
    notes: tuple[str, ...]  # what the parsers noticed (clipped copies, elided output, no NVLink)

    def gpu(self, index: int) -> GpuRow | None:
        return next((g for g in self.gpus if g.index == index), None)

    def nic(self, device: str | None) -> NicRow | None:
        return next((n for n in self.nics if n.device == device), None)

    def label(self, device: str) -> str:
        rows: tuple[GpuRow | NicRow, ...] = (*self.gpus, *self.nics)
        return next((r.label for r in rows if r.device == device), device)


def gpu_index(device: str) -> int | None:
    """GPU3 -> 3 (nvidia-smi's index, the same in every command); None for anything else."""
    match = _NUMBERED.match(device)
    return int(match.group(2)) if match and match.group(1) == "GPU" else None


def legend_name(topology: Topology, nic: str) -> str | None:
    """The NIC's mlx5 name: from the NIC Legend, or the device itself in old matrices that name NICs
    directly; None when the legend is missing or cut short."""
    if nic in topology.nic_names:
        return topology.nic_names[nic]
    return None if _NUMBERED.match(nic) else nic


def short_label(device: str, position: int) -> str:
    """GPU3 -> G3, NIC12 -> N12; an old-style NIC name (mlx5_0) -> N and its position among the NICs."""
    match = _NUMBERED.match(device)
    if match:
        return match.group(1)[0] + match.group(2)
    return f"N{position}"


def nearest_nic(topology: Topology, gpu: str) -> str | None:
    """The NIC with the best link class to ``gpu``, the lowest-numbered on a tie; None without NICs or
    when no link to a NIC could be read."""
    ranked = [
        (_RANK[topology.link_class(gpu, nic)], position, nic) for position, nic in enumerate(topology.nics)
    ]
    known = [entry for entry in ranked if entry[0] != _RANK[LinkClass.UNKNOWN]]
    return min(known)[2] if known else None


def nvlink_peers(topology: Topology, gpu: str) -> tuple[str, ...]:
    return tuple(
        other
        for other in topology.gpus
        if other != gpu and topology.link_class(gpu, other) is LinkClass.NVLINK
    )


def nvlink_summary(links: GpuLinks) -> NvlinkSummary:
    speeds = sorted({link.speed_gbps for link in links.links if link.active and link.speed_gbps is not None})
    return NvlinkSummary(links.active_count, len(links.links), tuple(speeds))


def match_ports(
    topology: Topology | None, ports: Sequence[IbPort]
) -> tuple[dict[str, tuple[IbPort, ...]], tuple[IbPort, ...]]:
    """The ports of each NIC (by the NIC Legend's name = ibstat's CA name), and the ports no NIC names."""
    nic_by_name = {}
    if topology is not None:
        nic_by_name = {name: nic for nic in topology.nics if (name := legend_name(topology, nic)) is not None}
    by_nic: dict[str, list[IbPort]] = {}
    other: list[IbPort] = []
    for port in ports:
        nic = nic_by_name.get(port.ca_name)
        if nic is None:
            other.append(port)
        else:
            by_nic.setdefault(nic, []).append(port)
    other.sort(key=lambda port: (natural_key(port.ca_name), port.port))  # ibstat lists mlx5_10 before mlx5_2
    return {nic: tuple(found) for nic, found in by_nic.items()}, tuple(other)


def format_rate_gbps(rate_gbps: float | None) -> str:
    """Gb/s (bits) without its unit, for a column headed Gb/s: 400, 2.5; n/a when unknown."""
    return "n/a" if rate_gbps is None else f"{rate_gbps:g}"


def port_severity(port: IbPort) -> Severity | None:
    """Down is critical; anything between (Init, Armed, Polling, unreadable) is a warning."""
    if port.is_up:
        return None
    return Severity.CRIT if port.state.lower() == "down" else Severity.WARN


def port_state_text(port: IbPort) -> str:
    """ "Active"; a port that is not up adds its physical state, which says why (Down/Polling: no
    peer or cable; Down/Disabled: turned off)."""
    if port.is_up or port.physical_state in ("", "Unknown"):
        return port.state
    return f"{port.state}/{port.physical_state}"


def compress_labels(labels: Iterable[str]) -> str:
    """ "G0 G2 G3 G4" -> "G0 G2-G4": runs of consecutive numbers with the same prefix."""
    parts: list[str] = []
    run: list[tuple[str, int]] = []

    def flush() -> None:
        if run:
            first, last = run[0], run[-1]
            if len(run) > 2:
                parts.append(f"{first[0]}{first[1]}-{last[0]}{last[1]}")
            else:
                parts.extend(f"{prefix}{number}" for prefix, number in run)
            run.clear()

    for label in labels:
        match = re.match(r"^(\D+)(\d+)$", label)
        if match is None:
            flush()
            parts.append(label)
            continue
        item = (match.group(1), int(match.group(2)))
        if run and (run[-1][0] != item[0] or run[-1][1] + 1 != item[1]):
            flush()
        run.append(item)
    flush()
    return " ".join(parts)


def _missing(name: str, reading: Reading[object], present: bool, what: str = "no output") -> str | None:
    """Why fact ``name`` is not on screen: its command failed (the reason the source recorded), or the
    node has not reported it."""
    command = FACT_COMMANDS[name]
    reason = reading.error
    if reason:
        # The SSH source prefixes parse failures with the command name; the sentence already names it.
        return f"`{command}` failed: {reason.removeprefix(f'{name}: ')}"
    if not present:
        return f"`{command}`: {what} yet (or this source does not collect it)"
    return None


def _gpu_rows(topology: Topology | None, nvlink: NvlinkStatus | None) -> tuple[GpuRow, ...]:
    if topology is None:
        # Without the matrix, the GPUs NVLink listed still get their link counts.
        listed = nvlink.gpus if nvlink is not None else ()
        return tuple(
            GpuRow(f"GPU{g.index}", f"G{g.index}", None, None, None, nvlink_summary(g), None, ())
            for g in listed
        )
    rows = []
    for position, gpu in enumerate(topology.gpus):
        label = short_label(gpu, position)
        index = gpu_index(gpu)
        links = nvlink.gpu(index) if nvlink is not None and index is not None else None
        rows.append(
            GpuRow(
                device=gpu,
                label=label,
                cpu_affinity=topology.cpu_affinity(gpu),
                numa_affinity=topology.numa_affinity(gpu),
                gpu_numa_id=topology.gpu_numa_id(gpu),
                nvlink=nvlink_summary(links) if links is not None else None,
                nearest_nic=nearest_nic(topology, gpu),
                peers=nvlink_peers(topology, gpu),
            )
        )
    return tuple(rows)


def topology_view(node: NodeSample) -> TopologyView:
    topology = node.facts.topology.value
    nvlink = node.facts.nvlink.value
    # No ports is a real answer for a node without IB, so it is worth a word only when the matrix has NICs.
    expects_ports = topology is not None and bool(topology.nics)
    missing = [
        _missing("topology", node.facts.topology, topology is not None),
        _missing("nvlink", node.facts.nvlink, nvlink is not None),
        _missing("ibstat", node.facts.ibstat, bool(node.ib_ports) or not expects_ports, "no IB ports"),
    ]
    ports_by_nic, other_ports = match_ports(topology, node.ib_ports)
    nics: tuple[NicRow, ...] = ()
    if topology is not None:
        nics = tuple(
            NicRow(
                device=nic,
                label=short_label(nic, position),
                name=legend_name(topology, nic),
                ports=ports_by_nic.get(nic, ()),
            )
            for position, nic in enumerate(topology.nics)
        )
    notes = [f"{FACT_COMMANDS['topology']}: {note}" for note in (topology.notes if topology else ())]
    notes += [f"{FACT_COMMANDS['nvlink']}: {note}" for note in (nvlink.notes if nvlink else ())]
    return TopologyView(
        node=node.name,
        topology=topology,
        gpus=_gpu_rows(topology, nvlink),
        nics=nics,
        other_ports=other_ports,
        missing=tuple(m for m in missing if m is not None),
        notes=tuple(notes),
    )
