"""The data every layer speaks: samples from nodes, Slurm's view, and one immutable snapshot per tick.

Values a source could not read are ``None`` (shown as "n/a"), never 0: a MIG GPU whose utilization the
driver does not report is not an idle GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple, cast

from gputop.core.facts import NO_FACTS, NodeFacts


def percent(part: float | None, whole: float | None) -> float | None:
    """100 * part / whole, or None when either is unknown or the whole is zero."""
    if part is None or not whole:
        return None
    return 100.0 * part / whole


class Reachability(StrEnum):
    """Whether gputop currently hears from a node (independent of what Slurm thinks of it)."""

    OK = "ok"
    STALE = "stale"  # last good sample kept, but it is older than the stale threshold
    DOWN = "down"  # never answered, or silent for longer than the down threshold


class Severity(StrEnum):
    OK = "ok"
    WARN = "warn"
    CRIT = "crit"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.OK: 0, Severity.WARN: 1, Severity.CRIT: 2}


class GpuProcess(NamedTuple):
    pid: int
    name: str
    used_mib: float | None
    user: str | None = None


class GpuSample(NamedTuple):
    """One GPU at one instant.

    A NamedTuple rather than a frozen dataclass: a 1,000-node cluster builds 8,000 of these per tick and a
    frozen dataclass costs about four times as much to construct. Both are immutable.
    """

    index: int  # type: ignore[assignment]  # nvidia-smi's name; shadows tuple.index, which nothing uses
    uuid: str
    name: str
    pci_bus_id: str | None
    util_pct: float | None
    mem_util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    temp_c: float | None
    power_w: float | None
    power_limit_w: float | None
    sm_clock_mhz: float | None
    sm_clock_max_mhz: float | None
    ecc_uncorrected: int | None
    mig_enabled: bool | None
    throttle_reasons: tuple[str, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    # Memory repair state: None where the GPU does not report it (retired pages on GPUs that remap rows
    # instead, remapped rows before Ampere, or a driver that lacks the field).
    retired_pages_pending: bool | None = None
    remapped_rows_pending: bool | None = None
    remapped_rows_failure: bool | None = None
    # The PCIe link as trained now and at best; idle GPUs lower the generation to save power.
    pcie_link_gen: int | None = None
    pcie_link_gen_max: int | None = None
    pcie_link_width_lanes: int | None = None
    pcie_link_width_max_lanes: int | None = None

    @property
    def mem_pct(self) -> float | None:
        return percent(self.mem_used_mib, self.mem_total_mib)

    @property
    def power_pct(self) -> float | None:
        return percent(self.power_w, self.power_limit_w)


@dataclass(frozen=True, slots=True)
class XidEvent:
    """A kernel ``NVRM: Xid`` line, reduced to what triage needs."""

    time_s: float  # epoch seconds
    code: int
    pci_bus_id: str | None
    gpu_index: int | None
    message: str


@dataclass(frozen=True, slots=True)
class IbFailure:
    """An adapter ibstat could not read: it prints the adapters before it, then stops (exit 255)."""

    adapter: str | None  # None when ibstat failed without naming one
    reason: str  # its own words, without the "ibpanic: [pid] main:" prefix


@dataclass(frozen=True, slots=True)
class IbPort:
    ca_name: str  # e.g. mlx5_0
    port: int
    state: str  # Active, Down, Init, Armed, Polling
    physical_state: str  # LinkUp, Disabled, Polling, ...
    rate_gbps: float | None
    link_layer: str = "InfiniBand"

    @property
    def is_up(self) -> bool:
        return self.state.lower() == "active"

    @property
    def label(self) -> str:
        return f"{self.ca_name} port {self.port}"


# A GpuSample built from its field values in order, without NamedTuple's keyword handling (a third of
# the cost, for the 8,000 samples a 1,000-node tick builds): tuple.__new__ itself, typed. The simulator and
# the SSH sample builder use it; the stream parser has its own compiled reader (parsers.row_reader).
new_gpu_sample = cast(Callable[[type[GpuSample], tuple[object, ...]], GpuSample], tuple.__new__)
GPU_PROCESSES_AT = GpuSample._fields.index("processes")


def gpu_with_processes(gpu: GpuSample, processes: tuple[GpuProcess, ...]) -> GpuSample:
    """``gpu`` with other processes, by slicing the tuple rather than _replace (a dict of every field)."""
    at = GPU_PROCESSES_AT
    return new_gpu_sample(GpuSample, (*gpu[:at], processes, *gpu[at + 1 :]))


@dataclass(frozen=True, slots=True)
class NodeSample:
    """What one node reported, plus whether we still hear from it.

    ``sampled_at_s`` is when its data was taken; the poller compares it with its clock to mark the node
    STALE or DOWN while keeping the last good GPUs on screen.
    """

    name: str
    reachability: Reachability
    sampled_at_s: float | None
    gpus: tuple[GpuSample, ...] = ()
    expected_gpu_count: int | None = None  # from config, Slurm GRES or earlier samples
    error: str | None = None  # a human reason when collection failed ("connection refused", ...)
    ib_ports: tuple[IbPort, ...] = ()
    xid_events: tuple[XidEvent, ...] = ()
    # Slow facts as their parsers made them (topology, NVLink, MIG listings, ...), each with its read time
    # and why its command failed: shown on the node screen, never a node failure.
    facts: NodeFacts = NO_FACTS
    ib_failures: tuple[IbFailure, ...] = ()  # adapters ibstat could not read (ib_ports lacks them)
    # GpuSample fields this node's source does not give at all (a store whose exporters do not export
    # them): shown as "not exported", never as a reading or a plain "n/a"
    not_exported: frozenset[str] = frozenset()

    @property
    def missing_gpu_count(self) -> int:
        if self.expected_gpu_count is None:
            return 0
        return max(0, self.expected_gpu_count - len(self.gpus))


class SlurmBaseState(StrEnum):
    IDLE = "idle"
    MIXED = "mixed"
    ALLOCATED = "allocated"
    DOWN = "down"
    FUTURE = "future"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """Slurm's opinion of a node: base state, flags (DRAIN, NOT_RESPONDING, MAINT, ...) and reason."""

    name: str
    base_state: SlurmBaseState
    flags: frozenset[str] = frozenset()
    reason: str | None = None
    reason_user: str | None = None
    reason_time_s: float | None = None  # epoch seconds (text outputs: see gputop.core.parsers.slurm_common)
    partitions: tuple[str, ...] = ()
    # GPUs as Slurm counts them (Gres / CfgTRES, GresUsed / AllocTRES); None where the output does not say.
    gpus_configured: int | None = None
    gpus_allocated: int | None = None
    gpu_indices_in_use: tuple[int, ...] | None = None  # GRES IDX held by jobs; None where not printed
    state_text: str | None = None  # the state as Slurm printed it: "MIXED+DRAIN", "idle~", "drng"

    @property
    def draining(self) -> bool:
        """DRAIN set while jobs still run (Slurm shows DRAINING)."""
        return "DRAIN" in self.flags and self.base_state in (SlurmBaseState.MIXED, SlurmBaseState.ALLOCATED)

    @property
    def drained(self) -> bool:
        return "DRAIN" in self.flags and not self.draining

    @property
    def label(self) -> str:
        """Short state as an on-call engineer reads it: drained, draining, down*, mixed, ..."""
        if self.draining:
            text = "draining"
        elif self.drained:
            text = "drained"
        else:
            text = self.base_state.value
        if "MAINT" in self.flags:
            text += "+maint"
        if "RESERVED" in self.flags:
            text += "+resv"
        if "FAIL" in self.flags:
            text += "+fail"
        if "NOT_RESPONDING" in self.flags:
            text += "*"
        return text


@dataclass(frozen=True, slots=True)
class SlurmJob:
    job_id: str
    name: str
    user: str
    partition: str
    state: str  # RUNNING, PENDING, ...
    # node name -> GPU indices this job holds there (GRES IDX)
    gpus_by_node: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    start_time_s: float | None = None
    time_limit_s: float | None = None  # None: UNLIMITED or not given
    pending_reason: str | None = None  # Slurm's reason while the job is not RUNNING ("Priority", ...)
    nodelist: str = ""  # folded as Slurm printed it: "node[01-02]"; "" before the job has nodes
    nodes: tuple[str, ...] = ()  # nodelist expanded, in natural order
    gpus_requested: int | None = None  # GPUs for the whole job (all nodes), from its TRES/GRES request
    submit_time_s: float | None = None
    elapsed_s: float | None = None  # run time where the output gives it
    state_flags: frozenset[str] = frozenset()  # COMPLETING, REQUEUED, CONFIGURING, ... next to the state
    cluster: str | None = None  # the Slurm cluster, where the output names it (squeue -M, JSON "cluster")

    @property
    def gpu_count(self) -> int:
        """GPUs whose indices are known (gpus_by_node); gpus_requested also counts jobs without IDX."""
        return sum(len(v) for v in self.gpus_by_node.values())


@dataclass(frozen=True, slots=True)
class SlurmState:
    nodes: Mapping[str, SlurmNode]
    jobs: tuple[SlurmJob, ...]
    sampled_at_s: float | None
    error: str | None = None

    def job_on_gpu(self, node: str, gpu_index: int) -> SlurmJob | None:
        for job in self.jobs:
            held = job.gpus_by_node.get(node)
            if held and gpu_index in held:
                return job
        return None


@dataclass(frozen=True, slots=True)
class SourceResult:
    """What one source hands the poller on a tick: the nodes it covers, and Slurm if it reads Slurm."""

    nodes: tuple[NodeSample, ...] = ()
    slurm: SlurmState | None = None
    # how long of the source's own time the result stands for, where that is not the poll interval: a
    # replay at 64x hands over a tick that stands for the 64 recorded seconds it passed over
    span_s: float | None = None


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """The whole cluster at one tick. Immutable: panes render it and keep nothing else."""

    cluster: str
    taken_at_s: float
    nodes: tuple[NodeSample, ...]  # in natural name order
    slurm: SlurmState | None = None
    is_demo: bool = False
    tick: int = 0
    by_name: Mapping[str, NodeSample] = field(default_factory=dict, compare=False)

    @staticmethod
    def build(
        cluster: str,
        taken_at_s: float,
        nodes: tuple[NodeSample, ...],
        slurm: SlurmState | None = None,
        is_demo: bool = False,
        tick: int = 0,
    ) -> ClusterSnapshot:
        return ClusterSnapshot(
            cluster=cluster,
            taken_at_s=taken_at_s,
            nodes=nodes,
            slurm=slurm,
            is_demo=is_demo,
            tick=tick,
            by_name={n.name: n for n in nodes},
        )

    def node(self, name: str) -> NodeSample | None:
        return self.by_name.get(name)
