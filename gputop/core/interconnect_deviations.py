"""Interconnect deviations: each node against the usual interconnect of its peers.

Peers are the nodes with the same GPU model and the same number of GPUs. For every aspect (the class of
each matrix pair, each GPU's active NVLinks and their speed, each IB port's state and rate) the usual value
is what a strict majority of the peers that report the aspect show. A group of one or two nodes has no
majority, nor does an aspect fewer than three peers report: nothing is flagged there, since with two nodes
that differ there is no telling which one is wrong.

A node is flagged where it is worse than usual; a matrix pair is flagged wherever its class differs, since a
device on another PCIe path is worth knowing about in either direction. A node better than its peers (a
port up where the others are down) is not flagged: its peers are the problem, and health rules say so.

Severity, for what the deviation does to a job spanning the node:
- CRIT where a path that carries traffic on the peers carries none here: an IB port not Active or missing,
  NVLinks inactive, a GPU pair without the NVLink its peers have. Collectives then stall or fall back to a
  path several times slower, and every rank of the job waits for this node.
- WARN where traffic still flows, slower or by a longer path: a lower IB rate, slower NVLinks, a PCIe path
  of another class (a NIC behind more bridges, or across the socket interconnect).

Speed: the tracker keeps each node's summary while its fact objects stay the same (sources reuse them
between ticks), counts equal summaries per peer group, and recomputes a group's usual interconnect only
when one of its members' summary changed.
"""

from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Generator, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import NamedTuple, TypeVar

from gputop.core.interconnect import (
    GpuNvlinks,
    LinkMatrix,
    MatrixCell,
    NodeInterconnect,
    gpu_model_of,
    gpu_nvlinks,
    link_matrix,
)
from gputop.core.models import IbPort, NodeSample, Severity
from gputop.core.parsers.nvlink import NvlinkStatus
from gputop.core.parsers.topo import LinkClass, Topology
from gputop.core.slices import run_to_end

KIND = "interconnect"
MIN_PEERS = 3  # fewer voters have no majority that means anything
ABSENT = "absent"  # the state of a port that a node does not list while its peers do
_KNOWN_TOPOLOGIES = 8  # distinct topologies kept per device list; one model rarely has more than two
NODES_PER_SLICE = 1000  # nodes looked at between two yields: some 3 ms when all of them are new

_V = TypeVar("_V", bound=Hashable)


class Aspect(StrEnum):
    """What a deviation compares: rules that speak of the same thing ask this, never the message."""

    NVLINKS_ACTIVE = "nvlinks_active"
    NVLINK_SPEED = "nvlink_speed"
    LINK_CLASS = "link_class"  # a cell of the topology matrix
    PORT_MISSING = "port_missing"
    PORT_STATE = "port_state"
    PORT_RATE = "port_rate"


PORT_ASPECTS = frozenset((Aspect.PORT_MISSING, Aspect.PORT_STATE, Aspect.PORT_RATE))


class PeerGroup(NamedTuple):
    gpu_model: str  # as nvidia-smi names the GPUs
    gpu_count: int


@dataclass(frozen=True, slots=True)
class Deviation:
    """How a node differs from its peers. ``message`` leaves the node out, for a table that shows it
    beside; ``text`` names it."""

    severity: Severity  # WARN or CRIT
    node: str
    gpu_index: int | None
    message: str  # "GPU5 has 12 of 18 NVLinks active", "mlx5_3 at 200 Gb/s, peers at 400"
    aspect: Aspect  # what is compared
    device: str | None = None  # the NIC or IB device it is about: mlx5_3
    port: int | None = None  # the IB port number, for the port aspects
    kind: str = KIND

    @property
    def text(self) -> str:
        return f"{self.node}: {self.message}"


@dataclass(frozen=True, slots=True)
class UsualInterconnect:
    """What a strict majority of a peer group shows, aspect by aspect; an aspect without one is absent."""

    peers: int  # nodes in the group, whatever they report
    cells: Mapping[tuple[str, str], MatrixCell]  # (row, column) -> the usual class, in its commonest spelling
    active_links: Mapping[int, int]  # GPU index -> NVLinks usually active
    link_speed_gbyte_s: Mapping[int, float]  # GPU index -> usual speed of its active links (GB/s)
    port_states: Mapping[tuple[str, int], str]  # (CA, port) -> usual state: Active, Down, ..., ABSENT
    port_rates_gbps: Mapping[tuple[str, int], float]  # (CA, port) -> usual rate of the port when Active


@dataclass(frozen=True, slots=True)
class FleetInterconnect:
    """Every node's interconnect summary, the usual one of each peer group, and the deviations."""

    summaries: Mapping[str, NodeInterconnect]  # by node
    groups: Mapping[str, PeerGroup]  # by node; a node without GPUs is in no group
    usual: Mapping[PeerGroup, UsualInterconnect]
    deviations: Mapping[str, tuple[Deviation, ...]]  # by node, worst first; only nodes that differ

    def of(self, node: str) -> tuple[Deviation, ...]:
        return self.deviations.get(node, ())

    def severity(self, node: str) -> Severity:
        found = self.deviations.get(node)
        return found[0].severity if found else Severity.OK

    def usual_for(self, node: str) -> UsualInterconnect | None:
        group = self.groups.get(node)
        return self.usual.get(group) if group is not None else None

    def all(self) -> tuple[Deviation, ...]:
        """Every deviation, worst first, then by node."""
        found = [d for devs in self.deviations.values() for d in devs]
        return tuple(sorted(found, key=lambda d: (-d.severity.rank, d.node)))


class _Finding(NamedTuple):
    """A deviation before it is given a node: equal summaries share their findings."""

    severity: Severity
    gpu_index: int | None
    message: str
    device: str | None
    aspect: Aspect
    port: int | None = None


def _majority(votes: Counter[_V]) -> _V | None:
    voters = votes.total()
    if voters < MIN_PEERS:
        return None
    value, top = votes.most_common(1)[0]
    return value if 2 * top > voters else None


def _usual_cell(votes: Counter[MatrixCell]) -> MatrixCell | None:
    """The cell of the majority class that most of its voters print (NV18 rather than NV12)."""
    by_class: Counter[LinkClass] = Counter()
    for cell, n in votes.items():
        by_class[cell.link_class] += n
    usual = _majority(by_class)
    if usual is None:
        return None
    return max((cell for cell in votes if cell.link_class is usual), key=votes.__getitem__)


def usual_interconnect(summaries: Mapping[NodeInterconnect, int]) -> UsualInterconnect:
    """The usual interconnect of one peer group, from its distinct summaries and how many nodes show each."""
    cells: dict[tuple[str, str], Counter[MatrixCell]] = {}
    active: dict[int, Counter[int]] = {}
    speed: dict[int, Counter[float]] = {}
    states: dict[tuple[str, int], Counter[str]] = {}
    rates: dict[tuple[str, int], Counter[float]] = {}
    port_voters = 0
    for summary, n in summaries.items():
        if summary.matrix is not None:
            for cell in summary.matrix.cells:
                cells.setdefault((cell.row, cell.column), Counter())[cell] += n
        for gpu in summary.nvlinks or ():
            active.setdefault(gpu.gpu_index, Counter())[gpu.active_links] += n
            if gpu.link_speed_gbyte_s is not None:
                speed.setdefault(gpu.gpu_index, Counter())[gpu.link_speed_gbyte_s] += n
        if summary.ib_ports is not None:
            port_voters += n
            for port in summary.ib_ports:
                key = (port.ca_name, port.port)
                states.setdefault(key, Counter())[port.state] += n
                if port.is_up and port.rate_gbps is not None:
                    rates.setdefault(key, Counter())[port.rate_gbps] += n
    for votes in states.values():
        absent = port_voters - votes.total()  # nodes that list ports, but not this one
        if absent:
            votes[ABSENT] += absent
    return UsualInterconnect(
        peers=sum(summaries.values()),
        cells=_decided({key: _usual_cell(votes) for key, votes in cells.items()}),
        active_links=_decided({k: _majority(votes) for k, votes in active.items()}),
        link_speed_gbyte_s=_decided({k: _majority(votes) for k, votes in speed.items()}),
        port_states=_decided({key: _majority(votes) for key, votes in states.items()}),
        port_rates_gbps=_decided({key: _majority(votes) for key, votes in rates.items()}),
    )


_K = TypeVar("_K")
_T = TypeVar("_T")


def _decided(values: Mapping[_K, _T | None]) -> dict[_K, _T]:
    return {key: value for key, value in values.items() if value is not None}


def _nvlink_findings(nvlinks: tuple[GpuNvlinks, ...], usual: UsualInterconnect) -> list[_Finding]:
    out = []
    for gpu in nvlinks:
        k = gpu.gpu_index
        usual_active = usual.active_links.get(k)
        if usual_active is not None and gpu.active_links < usual_active:
            total = max(gpu.total_links, usual_active)
            message = f"GPU{k} has {gpu.active_links} of {total} NVLinks active"
            out.append(_Finding(Severity.CRIT, k, message, None, Aspect.NVLINKS_ACTIVE))
        usual_speed = usual.link_speed_gbyte_s.get(k)
        speed = gpu.link_speed_gbyte_s
        if usual_speed is not None and speed is not None and speed < usual_speed:
            message = f"GPU{k} NVLinks at {speed:g} GB/s, peers at {usual_speed:g}"
            out.append(_Finding(Severity.WARN, k, message, None, Aspect.NVLINK_SPEED))
    return out


def _matrix_findings(matrix: LinkMatrix, usual: UsualInterconnect) -> list[_Finding]:
    out = []
    for cell in matrix.cells:
        peers = usual.cells.get((cell.row, cell.column))
        if peers is None or peers.link_class is cell.link_class:
            continue
        severity = Severity.CRIT if peers.link_class is LinkClass.NVLINK else Severity.WARN
        device = None if cell.column.startswith("GPU") else matrix.nic_name(cell.column)
        message = f"{cell.row}-{cell.column} {cell.cell}, peers {peers.cell}"
        out.append(_Finding(severity, _gpu_index(cell.row), message, device, Aspect.LINK_CLASS))
    return out


def _port_findings(ports: tuple[IbPort, ...], usual: UsualInterconnect) -> list[_Finding]:
    by_key = {(port.ca_name, port.port): port for port in ports}
    out = []
    for (ca, number), state in usual.port_states.items():
        if state.lower() != "active":
            continue  # a port usually down is no deviation when down here too
        port = by_key.get((ca, number))
        if port is None:
            message = f"{ca} port {number} missing"
            out.append(_Finding(Severity.CRIT, None, message, ca, Aspect.PORT_MISSING, number))
        elif not port.is_up:
            message = f"{port.label} {port.state}"
            out.append(_Finding(Severity.CRIT, None, message, ca, Aspect.PORT_STATE, number))
        else:
            peers_gbps = usual.port_rates_gbps.get((ca, number))
            rate = port.rate_gbps
            if peers_gbps is not None and rate is not None and rate < peers_gbps:
                where = ca if number == 1 else port.label
                message = f"{where} at {rate:g} Gb/s, peers at {peers_gbps:g}"
                out.append(_Finding(Severity.WARN, None, message, ca, Aspect.PORT_RATE, number))
    return out


def _gpu_index(label: str) -> int | None:
    digits = label.removeprefix("GPU")
    return int(digits) if digits.isdigit() else None


def _findings(summary: NodeInterconnect, usual: UsualInterconnect) -> tuple[_Finding, ...]:
    """Worst first; within a severity NVLink, then the matrix, then IB ports, each in its listing order."""
    found: list[_Finding] = []
    if summary.nvlinks is not None:
        found += _nvlink_findings(summary.nvlinks, usual)
    if summary.matrix is not None:
        found += _matrix_findings(summary.matrix, usual)
    if summary.ib_ports is not None:
        found += _port_findings(summary.ib_ports, usual)
    return tuple(sorted(found, key=lambda f: -f.severity.rank))


@dataclass(slots=True)
class _Seen:
    """A node as last fed: the fact objects its summary was made from, by identity."""

    topology: object
    nvlink: object
    ports: tuple[IbPort, ...]
    gpu_model: str | None
    gpu_count: int
    summary: NodeInterconnect
    group: PeerGroup | None


@dataclass(slots=True)
class _Group:
    members: dict[str, NodeInterconnect] = field(default_factory=dict)
    counts: Counter[NodeInterconnect] = field(default_factory=Counter)
    usual: UsualInterconnect | None = None
    findings: dict[NodeInterconnect, tuple[_Finding, ...]] = field(default_factory=dict)  # against usual
    changed: set[str] = field(default_factory=set)  # members whose summary changed since the last update


class InterconnectTracker:
    """Feeds on every tick's nodes and keeps the fleet's deviations, doing work only where facts changed.

    A node's summary is remade only when one of its fact objects is no longer the same object (sources keep
    them between ticks until a command's output changes); a remade summary equal to the last one changes
    nothing further. `update` returns the same FleetInterconnect object while nothing changed.
    """

    def __init__(self) -> None:
        self._seen: dict[str, _Seen] = {}
        # Matrices made, by the topology's devices: a few distinct topologies each, most recent first.
        self._matrices: dict[tuple[str, ...], list[tuple[Topology, LinkMatrix]]] = {}
        self._groups: dict[PeerGroup, _Group] = {}
        self._deviations: dict[str, tuple[Deviation, ...]] = {}
        self._result = FleetInterconnect(
            MappingProxyType({}), MappingProxyType({}), MappingProxyType({}), MappingProxyType({})
        )
        self._last_nodes: tuple[NodeSample, ...] = ()

    def update(self, nodes: Iterable[NodeSample]) -> FleetInterconnect:
        return run_to_end(self.update_steps(nodes))

    def update_steps(
        self, nodes: Iterable[NodeSample], nodes_per_slice: int = NODES_PER_SLICE
    ) -> Generator[None, None, FleetInterconnect]:
        """`update`, yielding after every ``nodes_per_slice`` nodes (a store's refresh brings 10,000 new
        samples). The very same samples as the last call (a store's source between its refreshes) are
        not looked at again."""
        nodes = tuple(nodes)
        last_nodes = self._last_nodes
        if len(last_nodes) == len(nodes) and all(map(operator.is_, last_nodes, nodes)):
            return self._result
        self._last_nodes = ()  # an update left half done (its caller gone) must not count as done
        seen = self._seen
        present: set[str] = set()
        dirty: set[PeerGroup] = set()
        summaries_changed = False
        for count, node in enumerate(nodes, 1):
            if not count % nodes_per_slice:
                yield
            name = node.name
            present.add(name)
            facts = node.facts
            topology = facts.topology.value
            nvlink = facts.nvlink.value
            ports = node.ib_ports
            model = gpu_model_of(node)
            count = len(node.gpus)
            last = seen.get(name)
            if (
                last is not None
                and last.topology is topology
                and last.nvlink is nvlink
                and last.ports is ports
                and last.gpu_count == count
                and last.gpu_model == model
            ):
                continue
            summary = NodeInterconnect(
                gpu_model=model,
                gpu_count=count,
                matrix=self._matrix(topology, last),
                nvlinks=self._nvlinks(nvlink, last),
                ib_ports=ports or None,
            )
            if last is not None and last.summary == summary:  # equal summaries: the same group too
                last.topology, last.nvlink, last.ports = topology, nvlink, ports
                continue
            summaries_changed = True
            group = PeerGroup(model, count) if model is not None else None
            if last is not None and last.group is not None:
                self._leave(name, last.group, last.summary, dirty)
            if group is not None:
                self._join(name, group, summary, dirty)
            seen[name] = _Seen(topology, nvlink, ports, model, count, summary, group)
        if len(present) != len(seen):
            summaries_changed = True
            for name in [name for name in seen if name not in present]:
                gone = seen.pop(name)
                if gone.group is not None:
                    self._leave(name, gone.group, gone.summary, dirty)
        self._last_nodes = nodes
        if not summaries_changed:
            return self._result
        for group in dirty:
            self._refresh(group)
        self._result = FleetInterconnect(
            summaries=MappingProxyType({name: s.summary for name, s in seen.items()}),
            groups=MappingProxyType({name: s.group for name, s in seen.items() if s.group is not None}),
            usual=MappingProxyType({g: s.usual for g, s in self._groups.items() if s.usual is not None}),
            deviations=MappingProxyType(dict(self._deviations)),
        )
        return self._result

    def _matrix(self, topology: object, last: _Seen | None) -> LinkMatrix | None:
        """The matrix of ``topology``, made once per distinct topology: nodes of one model print the same
        matrix, and comparing two parsed topologies costs a fraction of making a matrix again."""
        if not isinstance(topology, Topology):
            return None
        if last is not None and last.topology is topology:
            return last.summary.matrix
        known = self._matrices.setdefault(topology.devices, [])
        for k, (seen, matrix) in enumerate(known):
            if seen is topology or seen == topology:
                if k:
                    known.insert(0, known.pop(k))
                return matrix
        matrix = link_matrix(topology)
        known.insert(0, (topology, matrix))
        del known[_KNOWN_TOPOLOGIES:]
        return matrix

    @staticmethod
    def _nvlinks(nvlink: object, last: _Seen | None) -> tuple[GpuNvlinks, ...] | None:
        if not isinstance(nvlink, NvlinkStatus):
            return None
        if last is not None and last.nvlink is nvlink:
            return last.summary.nvlinks
        return gpu_nvlinks(nvlink)

    def _join(self, name: str, group: PeerGroup, summary: NodeInterconnect, dirty: set[PeerGroup]) -> None:
        state = self._groups.get(group)
        if state is None:
            state = self._groups[group] = _Group()
        state.members[name] = summary
        state.counts[summary] += 1
        state.changed.add(name)
        dirty.add(group)

    def _leave(self, name: str, group: PeerGroup, summary: NodeInterconnect, dirty: set[PeerGroup]) -> None:
        state = self._groups[group]
        del state.members[name]
        state.counts[summary] -= 1
        if not state.counts[summary]:
            del state.counts[summary]
            state.findings.pop(summary, None)
        state.changed.add(name)
        self._deviations.pop(name, None)
        dirty.add(group)

    def _refresh(self, group: PeerGroup) -> None:
        """The group's usual interconnect again, and the deviations of the members that need them."""
        state = self._groups[group]
        if not state.members:
            del self._groups[group]
            return
        usual = usual_interconnect(state.counts)
        if usual != state.usual:
            state.usual = usual
            state.findings.clear()
            again: Iterable[str] = state.members
        else:
            again = [name for name in state.changed if name in state.members]
        state.changed.clear()
        for name in again:
            summary = state.members[name]
            findings = state.findings.get(summary)
            if findings is None:
                findings = state.findings[summary] = _findings(summary, usual)
            if findings:
                self._deviations[name] = tuple(
                    Deviation(f.severity, name, f.gpu_index, f.message, f.aspect, f.device, f.port)
                    for f in findings
                )
            else:
                self._deviations.pop(name, None)


def fleet_interconnect(nodes: Iterable[NodeSample]) -> FleetInterconnect:
    """The fleet's summaries and deviations, from scratch (a tracker fed once)."""
    return InterconnectTracker().update(nodes)
