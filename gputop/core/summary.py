"""Per-node rows and the cluster header, derived once per tick from a snapshot.

A row is recomputed only when its node's sample, its Slurm entry, its reachability or what its idle GPUs
say changed: the previous view is passed in and unchanged rows are reused as they are (the tables then skip
them too).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gputop.core.alerts import AlertState

if TYPE_CHECKING:
    from gputop.core.history_store import HistoryStore
    from gputop.core.node_timeline import NodeTimeline
from gputop.core.config import Thresholds
from gputop.core.counter_rates import GpuRates, NodeRates
from gputop.core.event_history import NodeMemory
from gputop.core.health import Problem, assess_node, idle_problems
from gputop.core.health_tracker import GpuFlag, HealthFlags
from gputop.core.heatmap import CellCodes, cells_of
from gputop.core.ib_flaps import IbFlaps, PortFlaps
from gputop.core.idle import IdleGpu, IdleState
from gputop.core.interconnect_deviations import Deviation, FleetInterconnect
from gputop.core.jobs import JobRow
from gputop.core.map_zoom import Reduce, node_cells
from gputop.core.metrics import HeatScale, Metric
from gputop.core.models import (
    ClusterSnapshot,
    NodeSample,
    Reachability,
    Severity,
    SlurmNode,
    SlurmState,
    percent,
)
from gputop.core.slices import run_to_end

SUMMARY_ROWS_PER_SLICE = 2500  # some 3 ms of work between two yields
WORST_FIRST = {Severity.CRIT: 0, Severity.WARN: 1, Severity.OK: 2}  # a row's severity, the worst first


@dataclass(frozen=True, slots=True)
class NodeRow:
    name: str
    reachability: Reachability
    gpu_count: int
    util_gpu_count: int  # GPUs that report utilization (MIG GPUs do not)
    expected_gpu_count: int | None
    util_mean_pct: float | None
    util_max_pct: float | None
    temp_max_c: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    power_w: float | None
    power_limit_w: float | None
    slurm_state: str | None
    problems: tuple[Problem, ...]
    # identity of the inputs, to know when the row can be reused
    source: NodeSample = field(compare=False, repr=False)
    slurm: SlurmNode | None = field(compare=False, repr=False)
    # GPUs a running job holds idle past the configured minutes (the map marks them, `idle` filters them)
    idle_gpu_indices: frozenset[int] = frozenset()
    # this node's "idle" problems, also in `problems`: the row is rebuilt when they read differently
    idle_problems: tuple[Problem, ...] = field(default=(), compare=False, repr=False)
    # how its links differ from its peers' (also in `problems`): the row is rebuilt when they change
    interconnect: tuple[Deviation, ...] = field(default=(), compare=False, repr=False)
    # its GPUs' tracked temperature, memory and PCIe flags (None: read at once, without a tracker); the
    # row is rebuilt when they change
    flags: tuple[GpuFlag, ...] | None = field(default=None, compare=False, repr=False)
    # its IB ports that went down and came back (gputop.core.ib_flaps): the row is rebuilt when they change
    ib_flaps: Mapping[str, PortFlaps] | None = field(default=None, compare=False, repr=False)
    # its GPUs' counter rates (gputop.core.counter_rates): the row is rebuilt when they change
    rates: Mapping[int, GpuRates] | None = field(default=None, compare=False, repr=False)
    # what gputop remembers of it from before (gputop.core.event_history): the row is rebuilt when it changes
    memory: NodeMemory | None = field(default=None, compare=False, repr=False)
    # the node table's "worst first" order: CRIT, WARN, then OK, and more problems first (worked out with
    # the row, so a refresh's sort of 10,000 rows reads it in C)
    worst_first: tuple[int, int] = field(default=(2, 0), compare=False, repr=False)

    @property
    def idle_gpu_count(self) -> int:
        return len(self.idle_gpu_indices)

    @property
    def mem_pct(self) -> float | None:
        return percent(self.mem_used_mib, self.mem_total_mib)

    @property
    def severity(self) -> Severity:
        return self.problems[0].severity if self.problems else Severity.OK

    @property
    def worst_problem(self) -> str:
        if not self.problems:
            return ""
        extra = len(self.problems) - 1
        return self.problems[0].message + (f" (+{extra})" if extra else "")


@dataclass(frozen=True, slots=True)
class ClusterSummary:
    nodes_ok: int
    nodes_stale: int
    nodes_down: int
    gpu_count: int
    util_mean_pct: float | None
    power_w: float
    alerts_warn: int
    alerts_crit: int


@dataclass(frozen=True, slots=True)
class ClusterView:
    """A snapshot with everything the dashboard shows derived from it."""

    snapshot: ClusterSnapshot
    rows: Mapping[str, NodeRow]
    summary: ClusterSummary
    # the cluster map's cell codes for the stage's metric, by node; `cells_for` gives any other metric's
    cells: Mapping[str, CellCodes] = field(default_factory=dict)
    cells_metric: Metric | None = None
    # the heat scale of each metric, the stage's (for `cells_for`)
    scales: Mapping[Metric, HeatScale] = field(default_factory=dict)
    # allocated-but-idle GPUs as of this snapshot, where the caller tracks them (gputop.core.idle)
    idle: IdleState | None = None
    # the Slurm queue's rows by job id (gputop.core.jobs.job_rows); empty without Slurm
    jobs: Mapping[str, JobRow] = field(default_factory=dict)
    # sources that failed this tick, as "<source>: <reason>" (their last good data is still shown)
    source_errors: tuple[str, ...] = ()
    # every node's links compared with its peers' (gputop.core.interconnect_deviations)
    interconnect: FleetInterconnect | None = None
    # every current problem as an alert, with since when and what the user did (gputop.core.alerts)
    alerts: AlertState | None = None
    # every GPU's recent readings (gputop.core.history_store), where the stage keeps them; the store
    # goes on filling after this view: read it for "up to now", not for this view's instant
    history: HistoryStore | None = field(default=None, compare=False, repr=False)
    # what changed on each node and when (gputop.core.node_timeline), where the stage keeps it; like the
    # history, it goes on filling after this view
    timeline: NodeTimeline | None = field(default=None, compare=False, repr=False)
    # other metrics' cell codes: those the stage worked out beside its own (a large cluster's, where a
    # switch would otherwise wait for them), and `cells_for`'s, worked out on first ask
    more_cells: dict[Metric, Mapping[str, CellCodes]] = field(default_factory=dict, compare=False, repr=False)
    # each node's one map cell (`map_zoom.node_cells`, in the snapshot's order) by metric and reduction:
    # worked out once per view on first ask, or by the stage beside the cells, and handed on by it while
    # the cells are the same (a store's source between refreshes), so a switch of the map's metric at
    # 10,000 nodes is a lookup
    node_codes: dict[tuple[Metric, Reduce], list[int]] = field(
        default_factory=dict, compare=False, repr=False
    )
    # the fields some node's host does not export (the map's legend explains the mark), on first ask
    unexported_memo: list[frozenset[str]] = field(default_factory=list, compare=False, repr=False)

    def cells_known(self, metric: Metric) -> Mapping[str, CellCodes] | None:
        """``metric``'s cell codes if this view has them already (None: not worked out)."""
        return self.cells if metric is self.cells_metric else self.more_cells.get(metric)

    def cells_for(self, metric: Metric) -> Mapping[str, CellCodes]:
        """The map's cell codes of every node for ``metric``, the one place they come from. The stage's
        metric comes with the view; another (the user has just switched, and the next view will carry it)
        is worked out here once, from the same rows and problems, so the map never judges a cell itself.
        A node's codes are the same tuple while its row is the same object: that identity is the map's
        change signal."""
        if metric is self.cells_metric:
            return self.cells
        done = self.more_cells.get(metric)
        if done is None:
            done = cells_of(self.snapshot.nodes, self.rows, metric, self.scales[metric])
            self.more_cells[metric] = done
        return done

    def node_codes_for(self, metric: Metric, how: Reduce) -> list[int]:
        """Each node's one map cell for ``metric``, reduced ``how``, in the snapshot's node order."""
        key = (metric, how)
        done = self.node_codes.get(key)
        if done is None:
            names = [node.name for node in self.snapshot.nodes]
            done = self.node_codes[key] = node_cells(self.cells_for(metric), names, how)
        return done

    @property
    def unexported(self) -> frozenset[str]:
        """Every field that some node's host does not export."""
        if not self.unexported_memo:
            gone = {node.not_exported for node in self.snapshot.nodes if node.not_exported}
            self.unexported_memo.append(frozenset().union(*gone))
        return self.unexported_memo[0]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


_NO_GPUS: frozenset[int] = frozenset()


def node_row(
    node: NodeSample,
    slurm: SlurmNode | None,
    thresholds: Thresholds,
    now_s: float,
    *,
    idle_gpus: tuple[IdleGpu, ...] = (),
    interconnect: tuple[Deviation, ...] = (),
    flags: tuple[GpuFlag, ...] | None = None,
    jobs: SlurmState | None = None,
    ib_flaps: Mapping[str, PortFlaps] | None = None,
    rates: Mapping[int, GpuRates] | None = None,
    memory: NodeMemory | None = None,
) -> NodeRow:
    """The node's row. ``jobs``: Slurm's state, whose jobs an Xid's action names (only read for a node
    with Xid events)."""
    job_of = None
    if jobs is not None and node.xid_events:
        name, listed = node.name, jobs

        def job_of(index: int) -> str | None:
            job = listed.job_on_gpu(name, index)
            return job.job_id if job is not None else None

    problems = assess_node(
        node,
        slurm,
        thresholds,
        now_s,
        idle_gpus=idle_gpus,
        interconnect=interconnect,
        flags=flags,
        job_of=job_of,
        ib_flaps=ib_flaps,
        rates=rates,
        memory=memory,
    )
    utils: list[float] = []
    temps: list[float] = []
    mem_used = mem_total = power = power_limit = 0.0
    has_mem = has_power = False
    for gpu in node.gpus:
        if gpu.util_pct is not None:
            utils.append(gpu.util_pct)
        if gpu.temp_c is not None:
            temps.append(gpu.temp_c)
        if gpu.mem_used_mib is not None and gpu.mem_total_mib is not None:
            mem_used += gpu.mem_used_mib
            mem_total += gpu.mem_total_mib
            has_mem = True
        if gpu.power_w is not None:
            power += gpu.power_w
            power_limit += gpu.power_limit_w or 0.0
            has_power = True
    return NodeRow(
        name=node.name,
        reachability=node.reachability,
        gpu_count=len(node.gpus),
        util_gpu_count=len(utils),
        expected_gpu_count=node.expected_gpu_count,
        util_mean_pct=_mean(utils),
        util_max_pct=max(utils) if utils else None,
        temp_max_c=max(temps) if temps else None,
        mem_used_mib=mem_used if has_mem else None,
        mem_total_mib=mem_total if has_mem else None,
        power_w=power if has_power else None,
        power_limit_w=power_limit if has_power else None,
        slurm_state=slurm.label if slurm is not None else None,
        problems=problems,
        source=node,
        slurm=slurm,
        worst_first=(WORST_FIRST[problems[0].severity] if problems else 2, -len(problems)),
        idle_gpu_indices=frozenset(gpu.index for gpu in idle_gpus) if idle_gpus else _NO_GPUS,
        idle_problems=tuple(p for p in problems if p.kind == "idle") if idle_gpus else (),
        interconnect=interconnect,
        flags=flags,
        ib_flaps=ib_flaps,
        rates=rates,
        memory=memory,
    )


def derive_rows(
    snapshot: ClusterSnapshot,
    nodes: Iterable[NodeSample],
    thresholds: Thresholds,
    previous: ClusterView | None = None,
    *,
    idle: IdleState | None = None,
    interconnect: FleetInterconnect | None = None,
    health: HealthFlags | None = None,
    ib_flaps: IbFlaps | None = None,
    rates: Mapping[str, NodeRates] | None = None,
    memory: Mapping[str, NodeMemory] | None = None,
) -> dict[str, NodeRow]:
    """Rows for some of the snapshot's nodes, reusing the previous view's row where nothing changed
    (gputop.core.view derives a large cluster a slice at a time). ``idle``: the `IdleTracker`'s state for
    this snapshot; its flagged GPUs become "idle" problems. ``interconnect``: the `InterconnectTracker`'s
    comparison of the nodes' links with their peers'; each deviation becomes a problem of kind
    "interconnect". ``health``: the `HealthTracker`'s flags (None: every threshold counts at once).
    """
    deviations: Mapping[str, tuple[Deviation, ...]] = interconnect.deviations if interconnect else {}
    slurm_nodes: Mapping[str, SlurmNode] = snapshot.slurm.nodes if snapshot.slurm else {}
    old_rows: Mapping[str, NodeRow] = previous.rows if previous else {}
    idle_by_node: Mapping[str, tuple[IdleGpu, ...]] = idle.flagged_by_node if idle is not None else {}
    rows: dict[str, NodeRow] = {}
    now_s = snapshot.taken_at_s
    for node in nodes:
        name = node.name
        slurm = slurm_nodes.get(name)
        old = old_rows.get(name)
        idle_gpus = idle_by_node.get(name, ())
        differs = deviations.get(name, ())
        flags = None if health is None else health.get(name, ())
        flapped = ib_flaps.get(name) if ib_flaps else None
        node_rates = rates.get(name) if rates else None
        remembered = memory.get(name) if memory else None
        # A stale or down node's problem text carries its age, so it is redone every tick; an idle GPU's
        # text carries its idle minutes and is compared (only nodes with idle GPUs pay for it).
        if (
            old is not None
            and old.source is node
            and old.slurm is slurm
            and node.reachability is Reachability.OK
            and (old.idle_problems == idle_problems(name, idle_gpus) if idle_gpus else not old.idle_problems)
            and old.interconnect == differs
            and old.flags == flags
            and old.ib_flaps == flapped
            and old.rates == node_rates
            and old.memory is remembered
        ):
            rows[name] = old
        else:
            rows[name] = node_row(
                node,
                slurm,
                thresholds,
                now_s,
                idle_gpus=idle_gpus,
                interconnect=differs,
                flags=flags,
                jobs=snapshot.slurm,
                ib_flaps=flapped,
                rates=node_rates,
                memory=remembered,
            )
    return rows


def summarize(rows: Iterable[NodeRow]) -> ClusterSummary:
    return run_to_end(summarize_steps(rows))


def summarize_steps(
    rows: Iterable[NodeRow], rows_per_slice: int = SUMMARY_ROWS_PER_SLICE
) -> Generator[None, None, ClusterSummary]:
    """`summarize`, yielding after every ``rows_per_slice`` rows."""
    ok = stale = down = gpus = warn = crit = 0
    util_sum = 0.0
    util_count = 0
    power = 0.0
    for count, row in enumerate(rows, 1):
        if not count % rows_per_slice:
            yield
        if row.reachability is Reachability.OK:
            ok += 1
        elif row.reachability is Reachability.STALE:
            stale += 1
        else:
            down += 1
        gpus += row.gpu_count
        if row.util_mean_pct is not None and row.reachability is Reachability.OK:
            # weight by GPUs that reported utilization, so a MIG GPU does not count as idle
            util_sum += row.util_mean_pct * row.util_gpu_count
            util_count += row.util_gpu_count
        if row.power_w is not None and row.reachability is Reachability.OK:
            power += row.power_w
        for problem in row.problems:
            if problem.severity is Severity.CRIT:
                crit += 1
            elif problem.severity is Severity.WARN:
                warn += 1
    return ClusterSummary(
        nodes_ok=ok,
        nodes_stale=stale,
        nodes_down=down,
        gpu_count=gpus,
        util_mean_pct=util_sum / util_count if util_count else None,
        power_w=power,
        alerts_warn=warn,
        alerts_crit=crit,
    )
