"""A simulated GPU cluster: Slurm jobs come and go, GPUs follow the jobs that hold them, and a fixed set of
incidents is on screen from the first sample.

Pure computation: no I/O and no wall clock; time is always passed in. The state evolves in fixed one-second
steps, so what the cluster looks like at a given time does not depend on how often it is asked. All
randomness comes from ``random.Random`` instances seeded from ``seed``: the same seed and the same sequence
of times give the same data.

Speed matters (the demo runs 1,000 nodes at one tick a second), so per-GPU state lives in flat lists of
floats indexed by ``node * gpus_per_node + gpu``, per-GPU constants are computed once, and the only objects
built per step are the NamedTuples and samples the poller must receive.

MIG state is kept per GPU with its model's real profile tables and changes only through `nvidia_smi`, which
answers nvidia-smi's MIG command lines as nvidia-smi does; each node's facts hold the MIG listings parsed as
the SSH source would hold them.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import shlex
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gputop.core.fact_table import node_facts
from gputop.core.facts import NodeFacts
from gputop.core.models import (
    GpuProcess,
    GpuSample,
    IbPort,
    NodeSample,
    Reachability,
    SlurmBaseState,
    SlurmJob,
    SlurmNode,
    SlurmState,
    SourceResult,
    XidEvent,
    new_gpu_sample,
)
from gputop.core.parsers.gpu_list import parse_gpu_list
from gputop.core.parsers.mig import parse_lci, parse_lgi, parse_lgip, parse_lgipp
from gputop.core.parsers.topo import Topology
from gputop.sim.gpu_models import GpuModel
from gputop.sim.gpu_models import gpu_model as lookup_gpu_model
from gputop.sim.hgx_board import board_nvlinks, board_topology
from gputop.sim.mig_commands import SmiGpu, SmiRun, run_nvidia_smi
from gputop.sim.mig_state import GpuMig
from gputop.sim.mig_tables import MIG_TABLES
from gputop.sim.mig_text import NO_MIG_DEVICES
from gputop.sources.commands import is_nvidia_smi, strip_sudo
from gputop.yielding import yield_to_ui

STEP_S: Final = 1.0
# Catching up after a long pause runs at most this many steps; older time is skipped, not simulated.
MAX_CATCH_UP_STEPS: Final = 120

SILENT_BEFORE_START_S: Final = 45.0
SLURM_NOT_RESPONDING_AFTER_S: Final = 30.0

# Spread over the cluster by eighths (see incident_node_indices).
_SPREAD_KINDS: Final = (
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
_INTERCONNECT_KINDS: Final = ("nvlink_degraded", "ib_slow")
# Faults a GPU reports of itself, on nodes between the spread ones too (16 nodes or more).
_GPU_FACT_KINDS: Final = ("pcie_degraded", "remap_pending")
INCIDENT_KINDS: Final = _SPREAD_KINDS + _INTERCONNECT_KINDS + _GPU_FACT_KINDS

DRAIN_REASON: Final = "Xid 48 DBE on GPU2, RMA requested (OPS-4411)"

# HGX boards enumerate their eight GPUs on these PCI buses.
_HGX_BUSES: Final = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)

_PARTITIONS: Final = ("train", "infer", "debug")
_TRAIN, _INFER, _DEBUG = 0, 1, 2

_USERS: Final = (
    "alice",
    "bob",
    "chen",
    "dmitri",
    "eva",
    "farah",
    "gwen",
    "hiro",
    "ines",
    "jonas",
    "kenji",
    "lena",
)
# hiro submits more than anyone and runs into the per-user GPU limit, so QOS pending reasons show up.
_USER_WEIGHTS: Final = (3, 2, 2, 1, 2, 1, 1, 4, 1, 1, 1, 1)
_QOS_USER: Final = "hiro"
_OTHER_USERS: Final = tuple(user for user in _USERS if user != _QOS_USER)

_IDLE_JOB_USER: Final = "dmitri"
_MIG_JOB_USER: Final = "farah"

# What a job does to its GPUs.
_P_TRAIN, _P_INFER, _P_LOADER, _P_IDLE = 0, 1, 2, 3

_NAMES: Final = {
    (_TRAIN, _P_TRAIN): (
        "llama3-8b-sft",
        "vit-h14-finetune",
        "dpo-13b",
        "sdxl-train",
        "whisper-ft",
        "ppo-7b",
    ),
    (_TRAIN, _P_LOADER): ("tokenize-shards", "webdataset-prep", "clip-embed-extract", "dedup-minhash"),
    (_INFER, _P_INFER): ("vllm-llama3-70b", "triton-embed", "tgi-mixtral", "eval-harness", "batch-infer-7b"),
    (_INFER, _P_LOADER): ("feature-extract", "rerank-precompute"),
    (_DEBUG, _P_TRAIN): ("nccl-tests", "ddp-smoke", "repro-nan"),
    (_DEBUG, _P_INFER): ("bench-latency", "profile-nsys"),
    (_DEBUG, _P_LOADER): ("dataloader-bench", "pytest-gpu"),
}
_MULTI_NODE_NAMES: Final = ("llama3-70b-pretrain", "moe-16x7b", "gpt-neox-20b", "mixtral-8x22b-cpt")

# How often each job size (GPUs on one node) is asked for, per partition; whole-node sizes use the 8 entry.
_REQUEST_WEIGHTS: Final = ({8: 6, 4: 3, 2: 2, 1: 1}, {8: 2, 4: 3, 2: 3, 1: 3}, {8: 1, 4: 2, 2: 4, 1: 4})
_FILL_WEIGHTS: Final = {8: 3, 4: 2, 2: 2, 1: 1}
# Share of a partition's GPUs the arrival rate aims to keep busy.
_TARGET_LOAD: Final = (0.95, 0.8, 0.45)
# Initial fill per partition: chance a node is full, chance it is empty (otherwise partly used).
_FILL_FULL: Final = (0.8, 0.5, 0.15)
_FILL_EMPTY: Final = (0.0, 0.1, 0.5)
# Job lengths, log-uniform between these bounds (seconds).
_DURATION_S: Final = ((900.0, 28800.0), (1200.0, 36000.0), (120.0, 1200.0))
_MULTI_NODE_DURATION_S: Final = (3600.0, 43200.0)
_TIME_LIMITS_S: Final = (1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 43200.0, 86400.0, 172800.0)
_PINNED_LIMIT_S: Final = 259200.0  # 3 days: incident jobs outlive any demo
# Slurm backfills a lower-priority job past a blocked one only when its time limit is this short.
_BACKFILL_LIMIT_S: Final = 3600.0

_JOB_ID_BASE: Final = 4812000

# GPU physics, per one-second step.
_UTIL_LAG: Final = 0.55  # share of the gap to the target utilization closed per step
_NOISE_KEEP: Final = 0.7  # AR(1) noise: values wander instead of jumping
_TEMP_LAG: Final = 0.05  # first-order thermal lag, time constant ~20 s
_THROTTLE_C: Final = 85.0  # thermal slowdown starts here
_HW_SLOWDOWN_C: Final = 92  # hardware slowdown on top, as the GPU nears its limit
_THROTTLE_PER_C: Final = 0.05  # power shed per degree over the slowdown temperature
_RISE_AT_LIMIT_C: Final = 50.0  # a GPU at its power limit runs this much above its inlet air
_HOT_GPU_RESISTANCE: Final = 1.85  # the hot GPU's cooling is this much worse (clogged heatsink, failing fan)
_CONTEXT_POWER: Final = 0.55  # a held CUDA context lifts power by this share of idle power
_POWER_CAP_SHARE: Final = 0.98  # reported as power capped from here
_IDLE_MEM_MIB: Final = 512
_CONTEXT_MIB: Final = 480.0  # what a fresh CUDA context takes before the job allocates anything
_IDLE_JOB_MEM_MIB: Final = 30720
_MIG_INSTANCE_USE: Final = (0.82, 0.64, 0.0, 0.91, 0.35, 0.0, 0.77)  # share of each 1g slice in use
# The drained node's GPU with MIG on and no instances yet: one the demo can repartition at once.
_DRAINED_MIG_GPU: Final = 0

# The MIG listings a node's facts hold, by the command names of gputop.sources.commands, with the
# nvidia-smi words that print them and their parsers: what the SSH source would read and make of them.
_MIG_LISTINGS: Final = (
    ("mig_gip", ("mig", "-lgip"), parse_lgip),
    ("mig_gipp", ("mig", "-lgipp"), parse_lgipp),
    ("mig_gi", ("mig", "-lgi"), parse_lgi),
    ("mig_ci", ("mig", "-lci"), parse_lci),
)
# On a node with a MIG GPU, also `nvidia-smi -L`: the UUIDs of its MIG devices.
_GPU_LIST: Final = ("gpu_list", ("-L",), parse_gpu_list)

_THERMAL_SW: Final = ("sw_thermal_slowdown",)
_THERMAL_HW: Final = ("sw_thermal_slowdown", "hw_thermal_slowdown")
_POWER_CAPPED: Final = ("sw_power_cap",)

_DRAIN_FLAGS: Final = frozenset({"DRAIN"})
_NOT_RESPONDING_FLAGS: Final = frozenset({"NOT_RESPONDING"})
_DRAIN_NOT_RESPONDING_FLAGS: Final = _DRAIN_FLAGS | _NOT_RESPONDING_FLAGS

_ROUNDER: Final = 6755399441055744.0  # 1.5 * 2**52: x + it - it rounds x to a whole number


def _stream(seed: int, name: str) -> random.Random:
    """A named random stream: string seeds hash the same in every process, unlike hash()."""
    return random.Random(f"gputop-sim:{seed}:{name}")  # noqa: S311 - a simulation, not a secret


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
    count = len(_SPREAD_KINDS)
    if nodes < count:
        return {kind: k for k, kind in enumerate(_SPREAD_KINDS[:nodes])}
    # Node k*n/8 + n/16: the middle of each eighth of the cluster.
    at = {kind: k * nodes // count + nodes // (2 * count) for k, kind in enumerate(_SPREAD_KINDS)}
    if nodes >= 2 * count:
        # The starts of the second and third eighths: n/16 or more away from every spread incident.
        at |= {kind: (k + 1) * nodes // count for k, kind in enumerate(_INTERCONNECT_KINDS)}
        at |= {kind: (k + 3) * nodes // count for k, kind in enumerate(_GPU_FACT_KINDS)}
    return at


class _Job:
    """A Slurm job as the simulator tracks it: request, placement and how it loads its GPUs."""

    __slots__ = (
        "amp",
        "base_level",
        "dip_level",
        "dip_s",
        "duration_s",
        "gpus",
        "has_context",
        "job_id",
        "level",
        "limit_s",
        "mem_mib",
        "mem_ratio",
        "name",
        "next_change_s",
        "nodes",
        "noise_amp",
        "partition",
        "per_node",
        "period_s",
        "phase_s",
        "pid_base",
        "pinned",
        "power_factor",
        "profile",
        "reason",
        "slurm",
        "spread",
        "start_s",
        "user",
        "warm_until_s",
    )

    def __init__(
        self, *, partition: int, profile: int, nodes: int, per_node: int, user: str, name: str
    ) -> None:
        self.job_id = ""
        self.partition = partition
        self.profile = profile
        self.nodes = nodes
        self.per_node = per_node
        self.user = user
        self.name = name
        self.gpus: dict[int, tuple[int, ...]] = {}
        self.start_s: float | None = None
        self.duration_s = 0.0
        self.limit_s = 0.0
        self.pinned = False
        self.warm_until_s = -math.inf
        self.has_context = True
        self.level = 0.0
        self.base_level = 0.0
        self.dip_level = 0.0
        self.amp = 0.0
        self.period_s = 1.0
        self.dip_s = 0.0
        self.phase_s = 0.0
        self.next_change_s = -math.inf
        self.noise_amp = 0.0
        self.spread = 0.0
        self.power_factor = 1.0
        self.mem_mib = 0
        self.mem_ratio = 0.0
        self.pid_base = 0
        self.reason: str | None = None
        self.slurm: SlurmJob | None = None

    @property
    def gpu_count(self) -> int:
        return self.nodes * self.per_node


def _idle_sentinel() -> _Job:
    """Stands in for "no job" on a GPU so the hot loop reads the same fields for every GPU."""
    job = _Job(partition=_TRAIN, profile=_P_IDLE, nodes=0, per_node=0, user="", name="")
    job.has_context = False
    return job


class SimulatedCluster:
    """A Slurm GPU cluster that evolves deterministically with the time it is given."""

    def __init__(
        self,
        *,
        nodes: int = 32,
        gpus_per_node: int = 8,
        gpu_model: str = "H100",
        seed: int = 42,
        start_time_s: float,
        silent_at_s: float | None = None,
    ) -> None:
        """``silent_at_s``: when the unresponsive node sent its last sample (default 45 s before the
        start). The demo, which replays minutes of history first, sets it to 45 s before its first frame."""
        if nodes < 1:
            raise ValueError("a simulated cluster needs at least one node")
        if gpus_per_node < 1:
            raise ValueError("a simulated node needs at least one GPU")
        self.model: GpuModel = lookup_gpu_model(gpu_model)
        self.seed = seed
        self.start_time_s = float(start_time_s)
        self.silent_at_s = self.start_time_s - SILENT_BEFORE_START_S if silent_at_s is None else silent_at_s
        self.gpus_per_node = gpus_per_node
        width = max(3, len(str(nodes)))
        self.node_names: tuple[str, ...] = tuple(f"gpu{i + 1:0{width}d}" for i in range(nodes))
        self._n = nodes
        self._node_index = {name: i for i, name in enumerate(self.node_names)}
        self._step_index = 0
        # Separate streams, so the jobs Slurm runs do not depend on how many GPUs draw noise.
        self._setup_rng = _stream(seed, "setup")
        self._sched_rng = _stream(seed, "sched")
        self._level_rng = _stream(seed, "level")
        self._noise_rng = _stream(seed, "noise")

        self._incident_at = incident_node_indices(nodes)
        self._setup_gpus()
        self._setup_partitions()
        self._setup_scheduler()
        self._setup_incident_jobs()
        self._initial_fill()
        self._initial_pending()
        t0 = self.start_time_s
        self._schedule(t0, force=True)
        self._update_levels(t0)
        self._settle(t0)
        self._setup_static_node_data()
        self.incidents: tuple[Incident, ...] = self._describe_incidents()

        self._result: SourceResult | None = None
        self._result_step = -1
        self._slurm_nodes: dict[str, SlurmNode] = {}
        self._slurm_jobs: tuple[SlurmJob, ...] = ()
        self._frozen: NodeSample | None = None
        frozen = self._incident_at.get("unresponsive")
        self._frozen_node = -1 if frozen is None else frozen
        if frozen is not None:
            # Values as they were when the node went silent; it never reports again.
            gpus = self._build_gpus()
            self._frozen = self._node_sample(frozen, gpus, self.silent_at_s)

    # ------------------------------------------------------------------ public API

    @property
    def now_s(self) -> float:
        """The time of the last simulated step."""
        return self.start_time_s + self._step_index * STEP_S

    def advance_to(self, now_s: float) -> None:
        """Run every whole step up to ``now_s``; the same or an earlier time changes nothing."""
        for t in self._steps_until(now_s):
            self._begin_step(t)
            self._evolve_nodes(0, self._n)
            self._step_index += 1

    async def advance_and_yield(self, now_s: float, chunk_nodes: int = 100) -> None:
        """`advance_to`, handing the event loop back every ``chunk_nodes`` nodes so a large step never
        blocks it for long. The data equals what `advance_to` gives; call `result` once this returns, and
        run one advance at a time."""
        chunk = max(1, chunk_nodes)
        for t in self._steps_until(now_s):
            self._begin_step(t)
            done = 0
            try:
                while done < self._n:
                    hi = min(self._n, done + chunk)
                    self._evolve_nodes(done, hi)
                    done = hi
                    await yield_to_ui()
            finally:
                # Cancelled half way (a poller deadline), the step still completes: no half-evolved state.
                self._evolve_nodes(done, self._n)
                self._step_index += 1

    async def result_and_yield(self, chunk_nodes: int = 100) -> SourceResult:
        """`result`, built a slice of nodes at a time with the event loop handed back in between."""
        if self._result is not None and self._result_step == self._step_index:
            return self._result
        step_index = self._step_index
        t = self.now_s
        g_per = self.gpus_per_node
        frozen = self._frozen
        nodes: list[NodeSample] = []
        for lo in range(0, self._n, max(1, chunk_nodes)):
            hi = min(self._n, lo + max(1, chunk_nodes))
            gpus = self._build_gpus(lo * g_per, hi * g_per)
            nodes.extend(
                frozen if frozen is not None and i == self._frozen_node else self._node_sample(i, gpus, t, lo)
                for i in range(lo, hi)
            )
            await yield_to_ui()
            if self._step_index != step_index:  # a step ran meanwhile: its result supersedes this one
                return self.result()
        self._result = SourceResult(nodes=tuple(nodes), slurm=self._slurm_state(t))
        self._result_step = step_index
        return self._result

    def result(self) -> SourceResult:
        """Every node and Slurm as of the last step. Asked again without a step in between, the same
        objects come back; the frozen node's sample never changes."""
        if self._result is not None and self._result_step == self._step_index:
            return self._result
        t = self.now_s
        gpus = self._build_gpus()
        frozen = self._frozen
        nodes = [
            frozen if frozen is not None and i == self._frozen_node else self._node_sample(i, gpus, t)
            for i in range(self._n)
        ]
        self._result = SourceResult(nodes=tuple(nodes), slurm=self._slurm_state(t))
        self._result_step = self._step_index
        return self._result

    def drain(self, nodes: Iterable[str], reason: str, user: str, now_s: float) -> None:
        """Set DRAIN on ``nodes`` with ``reason``, as ``scontrol update State=DRAIN`` does: no new job starts
        there, running jobs finish (the node shows draining, then drained), and the reason, its user and
        time replace any earlier one, also on a node already drained. An unknown name raises ValueError
        and changes nothing."""
        for i in self._indices(nodes):
            self._drain.add(i)
            self._reasons[i] = (reason, user, now_s)
            self._set_schedulable(i, False)
            self._dirty_nodes.add(i)
        self._result = None

    def resume(self, nodes: Iterable[str], now_s: float) -> tuple[str, ...]:
        """Clear DRAIN and the reason on ``nodes``, as ``scontrol update State=RESUME`` does, so jobs may
        start there again from the next step. Returns the nodes that were not drained (Slurm refuses to
        resume those), left as they were; the others are resumed all the same. An unknown name raises
        ValueError and changes nothing. ``now_s`` is taken to mirror `drain`; a resumed node has no reason,
        so no reason time either."""
        refused: list[str] = []
        for i in self._indices(nodes):
            if i not in self._drain:
                refused.append(self.node_names[i])
                continue
            self._drain.discard(i)
            self._reasons.pop(i, None)
            if i != self._unresponsive:  # a silent node stays out of Slurm's reach, drained or not
                self._set_schedulable(i, True)
                self._resumed = True
            self._dirty_nodes.add(i)
        self._result = None
        return tuple(refused)

    def nvidia_smi(self, node: str, argv: Sequence[str]) -> tuple[int, str, str]:
        """Run ``argv`` (``nvidia-smi ...``, perhaps after ``sudo`` and its options) on ``node`` as nvidia-smi
        would for its MIG command lines (gputop.sim.mig_commands): exit status, standard output,
        standard error. A change shows in the node's next sample and in its MIG facts. An unknown node, or
        a program other than nvidia-smi, raises ValueError."""
        (i,) = self._indices([node])
        words = strip_sudo(argv)
        if not is_nvidia_smi(words):
            raise ValueError(f"not an nvidia-smi command line: {shlex.join(argv)}")
        run = self._run_nvidia_smi(i, words[1:])
        return run.exit_status, run.stdout, run.stderr

    def mig_devices(self, node: str) -> dict[int, list[tuple[str, str]]]:
        """The (profile, MIG UUID) devices of each MIG-enabled GPU of ``node``, in ``nvidia-smi -L`` order."""
        (i,) = self._indices([node])
        return {k: state.devices() for k, state in sorted(self._mig.get(i, {}).items())}

    def _indices(self, nodes: Iterable[str]) -> list[int]:
        index = self._node_index
        wanted = list(dict.fromkeys(nodes))
        unknown = [name for name in wanted if name not in index]
        if unknown:
            raise ValueError(f"not nodes of this cluster: {', '.join(unknown)}")
        return [index[name] for name in wanted]

    # ------------------------------------------------------------------ setup

    def _setup_gpus(self) -> None:
        rng = self._setup_rng
        model = self.model
        g_per = self.gpus_per_node
        total = self._n * g_per
        spare = [bus for bus in range(1, 0xFF) if bus not in _HGX_BUSES]
        buses = list(_HGX_BUSES) + spare
        # The same slots on every node, as on real identical servers.
        self._pci = [f"{k // len(buses):08X}:{buses[k % len(buses)]:02X}:00.0" for k in range(g_per)]
        self._gidx = [g % g_per for g in range(total)]
        self._gpci = [self._pci[k] for k in self._gidx]
        self._uuid: list[str] = []
        self._idle_w: list[float] = []
        self._amb: list[float] = []
        self._rth: list[float] = []
        self._idle_mem: list[float] = []
        base_rth = _RISE_AT_LIMIT_C / model.power_limit_w
        for g in range(total):
            h = f"{rng.getrandbits(128):032x}"
            self._uuid.append(f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
            self._idle_w.append(model.idle_power_w * rng.uniform(0.93, 1.07))
            # GPUs further back in the chassis breathe air the front ones already warmed.
            self._amb.append(26.0 + rng.uniform(0.0, 2.5) + 0.5 * (g % g_per % 4))
            self._rth.append(base_rth * rng.uniform(0.93, 1.07))
            self._idle_mem.append(float(_IDLE_MEM_MIB + rng.randrange(0, 48)))
        hot = self._incident_at.get("hot_gpu")
        if hot is not None:
            self._rth[hot * g_per + self._incident_gpu("hot_gpu")] *= _HOT_GPU_RESISTANCE
        self._ecc = [0] * total
        ecc = self._incident_at.get("ecc_xid")
        if ecc is not None:
            self._ecc[ecc * g_per + self._incident_gpu("ecc_xid")] = 2
        # Memory repair and PCIe link, in GpuSample's order from retired_pages_pending on. H100-class
        # GPUs remap rows rather than retire pages, so retired pages are not reported.
        gen = model.pcie_gen_max
        healthy = (None, False, False, gen, gen, 16, 16)
        self._gfacts: list[tuple[object, ...]] = [healthy] * total
        pcie = self._incident_at.get("pcie_degraded")
        if pcie is not None:
            self._gfacts[pcie * g_per + self._incident_gpu("pcie_degraded")] = (
                None,
                False,
                False,
                gen,
                gen,
                8,
                16,
            )
        remap = self._incident_at.get("remap_pending")
        if remap is not None:
            self._gfacts[remap * g_per + self._incident_gpu("remap_pending")] = (
                None,
                True,
                False,
                gen,
                gen,
                16,
                16,
            )

        idle = _idle_sentinel()
        self._idle_job = idle
        self._gjob: list[_Job] = [idle] * total
        self._goff = [0.0] * total
        self._pbase = list(self._idle_w)
        self._span_w = [model.power_limit_w - w for w in self._idle_w]
        self._pcoef = [s / 100.0 for s in self._span_w]
        self._idle_jit_w = model.idle_power_w * 0.02
        self._busy_jit_w = model.power_limit_w * 0.01
        self._pjit = [self._idle_jit_w] * total
        self._util = [0.0] * total
        self._noise = [0.0] * total
        self._power = list(self._idle_w)
        self._temp = [0.0] * total
        self._mem = list(self._idle_mem)
        self._mem_target = list(self._idle_mem)
        self._procs: list[tuple[GpuProcess, ...]] = [()] * total
        self._pid = [0] * total
        self._ramping: dict[int, None] = {}  # GPUs whose memory is still filling up after a job start
        cmax = model.sm_clock_max_mhz
        # Clock by whole degree over the slowdown temperature, in the 15 MHz steps real clocks take.
        self._hot_clock = [
            float(max(model.sm_clock_idle_mhz, int(cmax * (1.0 - 0.035 * d) / 15) * 15)) for d in range(60)
        ]

    def _incident_gpu(self, kind: str) -> int:
        wanted = {
            "hot_gpu": 3,
            "ecc_xid": 4,
            "mig": 7,
            "missing_gpu": 5,
            "nvlink_degraded": 5,
            "pcie_degraded": 2,
            "remap_pending": 6,
        }[kind]
        return min(wanted, self.gpus_per_node - 1)

    def _setup_partitions(self) -> None:
        n = self._n
        if n >= 3:
            debug = max(1, round(n * 0.06))
            infer = max(1, round(n * 0.14))
        else:
            debug = infer = 0
        train = n - debug - infer
        self._node_part = [_TRAIN] * train + [_INFER] * infer + [_DEBUG] * debug
        mig = self._incident_at.get("mig")
        if mig is not None:
            self._node_part[mig] = _INFER  # MIG slices serve inference

    def _setup_scheduler(self) -> None:
        g_per = self.gpus_per_node
        at = self._incident_at
        self._node_free: list[list[int]] = [list(range(g_per)) for _ in range(self._n)]
        self._node_alloc = [0] * self._n
        # Free GPUs Slurm may hand out: the broken, missing and MIG GPUs are not among them.
        for kind in ("ecc_xid", "missing_gpu", "mig"):
            node = at.get(kind)
            if node is not None:
                self._node_free[node].remove(self._incident_gpu(kind))
        # Slurm's DRAIN flag and each node's reason (text, user, time); drain() and resume() change them.
        self._drain: set[int] = set()
        self._reasons: dict[int, tuple[str, str, float]] = {}
        t0 = self.start_time_s
        if "drained" in at:
            self._drain.add(at["drained"])
            self._reasons[at["drained"]] = (DRAIN_REASON, "root", t0 - 2 * 86400.0)
        self._unresponsive = at.get("unresponsive", -1)
        if "unresponsive" in at:
            # Silent since 45 s before the first sample, so already past Slurm's 30 s: flagged from the start.
            self._reasons[at["unresponsive"]] = (
                "Not responding",
                "slurm",
                self.silent_at_s + SLURM_NOT_RESPONDING_AFTER_S,
            )
        self._resumed = False  # a node came back: the scheduler looks at the queue at the next step
        unschedulable = {*self._drain, self._unresponsive}
        # Per partition, per number of free GPUs: the nodes with that many free (dicts as ordered sets).
        self._buckets: list[list[dict[int, None]]] = [[{} for _ in range(g_per + 1)] for _ in _PARTITIONS]
        self._schedulable = [i not in unschedulable for i in range(self._n)]
        self._train_nodes = sum(
            1 for i in range(self._n) if self._node_part[i] == _TRAIN and self._schedulable[i]
        )
        for i in range(self._n):
            if self._schedulable[i]:
                self._buckets[self._node_part[i]][len(self._node_free[i])][i] = None
        self._running: dict[str, _Job] = {}
        self._pending: list[_Job] = []
        self._ends: list[tuple[float, int, _Job]] = []
        self._end_seq = itertools.count()
        self._next_job_id = _JOB_ID_BASE
        self._user_gpus: dict[str, int] = dict.fromkeys(_USERS, 0)
        self._qos_cap = 2 * g_per
        self._fill_qos_gpus = 0
        self._pending_cap = max(6, self._n // 4)
        self._jobs_changed = True
        self._dirty_nodes: set[int] = set(range(self._n))
        self._arrival_rate = [self._arrival_rate_for(p) for p in range(len(_PARTITIONS))]
        self._next_arrival_s = [
            self.start_time_s + self._sched_rng.expovariate(rate) if rate > 0 else math.inf
            for rate in self._arrival_rate
        ]

    def _arrival_rate_for(self, partition: int) -> float:
        """Jobs per second that keep the partition near its target load, from the mean GPU-seconds of the
        jobs it gets (estimated on a private stream so the main ones are not disturbed)."""
        gpus = sum(len(self._node_free[i]) for i in range(self._n) if self._node_part[i] == partition)
        if gpus == 0:
            return 0.0
        rng = _stream(self.seed, f"rate:{partition}")
        samples = [self._draw_request(partition, rng) for _ in range(200)]
        mean_gpu_s = sum(nodes * per * dur for nodes, per, dur in samples) / len(samples)
        return _TARGET_LOAD[partition] * gpus / mean_gpu_s

    # ------------------------------------------------------------------ jobs

    def _draw_request(self, partition: int, rng: random.Random) -> tuple[int, int, float]:
        """Nodes, GPUs per node and run time of a job someone submits to ``partition``."""
        g_per = self.gpus_per_node
        if partition == _TRAIN and self._train_nodes >= 4 and rng.random() < 0.2:
            lo, hi = _MULTI_NODE_DURATION_S
            return rng.choice((2, 2, 3, 4)), g_per, math.exp(rng.uniform(math.log(lo), math.log(hi)))
        sizes = [s for s in (8, 4, 2, 1) if s <= g_per] + ([g_per] if g_per > 8 else [])
        weights = _REQUEST_WEIGHTS[partition]
        size = rng.choices(sizes, weights=[weights.get(s, weights[8]) for s in sizes])[0]
        lo, hi = _DURATION_S[partition]
        return 1, size, math.exp(rng.uniform(math.log(lo), math.log(hi)))

    def _pick_user(self, rng: random.Random) -> str:
        return rng.choices(_USERS, weights=_USER_WEIGHTS)[0]

    def _make_job(
        self,
        partition: int,
        nodes: int,
        per_node: int,
        duration_s: float,
        rng: random.Random,
        *,
        user: str | None = None,
        profile: int | None = None,
    ) -> _Job:
        if profile is None:
            if nodes > 1:
                profile = _P_TRAIN
            elif partition == _TRAIN:
                profile = _P_TRAIN if rng.random() < 0.78 else _P_LOADER
            elif partition == _INFER:
                profile = _P_INFER if rng.random() < 0.8 else _P_LOADER
            else:
                profile = rng.choice((_P_TRAIN, _P_TRAIN, _P_INFER, _P_LOADER))
        if nodes > 1:
            name = rng.choice(_MULTI_NODE_NAMES)
        elif profile == _P_IDLE:
            name = "jupyter"
        else:
            name = rng.choice(_NAMES.get((partition, profile), _NAMES[(_TRAIN, _P_TRAIN)]))
        job = _Job(
            partition=partition,
            profile=profile,
            nodes=nodes,
            per_node=per_node,
            user=user if user is not None else self._pick_user(rng),
            name=name,
        )
        job.duration_s = duration_s
        limit_floor = duration_s * 1.15
        job.limit_s = next((lim for lim in _TIME_LIMITS_S if lim >= limit_floor), _TIME_LIMITS_S[-1])
        job.warm_until_s = -math.inf
        job.pid_base = rng.randrange(12000, 3_900_000)
        mem_frac: float
        if profile == _P_TRAIN:
            job.base_level = rng.uniform(90.0, 97.0)
            job.dip_level = job.base_level - rng.uniform(12.0, 25.0)  # all-reduce stalls, eval, checkpoints
            job.period_s = rng.uniform(60.0, 300.0)
            job.dip_s = rng.uniform(2.0, 6.0)
            job.phase_s = rng.uniform(0.0, job.period_s)
            job.noise_amp, job.spread = 3.5, 1.5
            job.power_factor = rng.uniform(0.86, 1.0)
            mem_frac = rng.uniform(0.72, 0.94)
            job.mem_ratio = rng.uniform(0.35, 0.55)
        elif profile == _P_INFER:
            job.base_level = rng.uniform(20.0, 70.0)
            job.noise_amp, job.spread = 8.0, 5.0
            job.power_factor = rng.uniform(0.72, 0.86)
            mem_frac = 0.9 if rng.random() < 0.5 else rng.uniform(0.35, 0.6)  # vLLM reserves 90%
            job.mem_ratio = rng.uniform(0.55, 0.85)  # decoding is memory bound
        elif profile == _P_LOADER:
            job.base_level = rng.uniform(35.0, 45.0)
            job.amp = rng.uniform(5.0, 9.0)
            job.period_s = rng.uniform(20.0, 60.0)
            job.phase_s = rng.uniform(0.0, job.period_s)
            job.noise_amp, job.spread = 6.0, 3.0
            job.power_factor = rng.uniform(0.62, 0.75)
            mem_frac = rng.uniform(0.1, 0.35)
            job.mem_ratio = rng.uniform(0.2, 0.35)
        else:
            # Whatever the model, a notebook that loaded a model and stopped holds about the same.
            mem_frac = min(0.9, _IDLE_JOB_MEM_MIB / self.model.mem_total_mib)
        job.level = job.base_level
        job.mem_mib = int(self.model.mem_total_mib * mem_frac)
        return job

    def _assign_id(self, job: _Job) -> None:
        job.job_id = str(self._next_job_id)
        self._next_job_id += 1

    def _allocate(self, job: _Job, node: int, count: int, rng: random.Random, *, ramp: bool) -> None:
        free = self._node_free[node]
        idxs = tuple(free[:count])
        del free[:count]
        self._rebucket(node, len(free) + count)
        job.gpus[node] = idxs
        self._node_alloc[node] += count
        self._dirty_nodes.add(node)
        g_per = self.gpus_per_node
        model = self.model
        rank0 = len(job.gpus) == 1
        for local_rank, k in enumerate(idxs):
            g = node * g_per + k
            self._gjob[g] = job
            self._goff[g] = rng.uniform(-job.spread, job.spread)
            self._noise[g] = 0.0
            ctx_w = self._idle_w[g] * _CONTEXT_POWER
            self._pbase[g] = self._idle_w[g] + ctx_w
            self._pcoef[g] = (self._span_w[g] - ctx_w) * job.power_factor / 100.0
            self._pjit[g] = self._busy_jit_w
            # Rank 0 keeps a little more (optimizer bookkeeping, logging buffers).
            extra = 600 if rank0 and local_rank == 0 and job.profile != _P_IDLE else 0
            target = min(
                model.mem_total_mib - 200.0,
                job.mem_mib + extra + rng.randrange(-256, 257) + self._idle_mem[g],
            )
            self._mem_target[g] = target
            if ramp:
                self._ramping[g] = None
                self._mem[g] = self._idle_mem[g] + _CONTEXT_MIB  # the process exists from its first second
            else:
                self._mem[g] = target
            self._pid[g] = job.pid_base + 97 * (node % 7) + local_rank
            self._set_procs(g, job)

    def _set_procs(self, g: int, job: _Job) -> None:
        used = self._mem[g] - self._idle_mem[g]
        self._procs[g] = (GpuProcess(self._pid[g], "python", used, job.user),) if used > 0 else ()

    def _release(self, job: _Job) -> None:
        g_per = self.gpus_per_node
        for node, idxs in job.gpus.items():
            free = self._node_free[node]
            before = len(free)
            free.extend(idxs)
            free.sort()
            self._rebucket(node, before)
            self._node_alloc[node] -= len(idxs)
            self._dirty_nodes.add(node)
            for k in idxs:
                g = node * g_per + k
                self._gjob[g] = self._idle_job
                self._goff[g] = 0.0
                self._noise[g] = 0.0
                self._pbase[g] = self._idle_w[g]
                self._pcoef[g] = self._span_w[g] / 100.0
                self._pjit[g] = self._idle_jit_w
                self._mem[g] = self._mem_target[g] = self._idle_mem[g]  # the process exits, memory is freed
                self._procs[g] = ()
                self._ramping.pop(g, None)
        self._user_gpus[job.user] -= job.gpu_count

    def _set_schedulable(self, node: int, schedulable: bool) -> None:
        """Let the scheduler place jobs on ``node`` or not; what already runs there keeps running."""
        if self._schedulable[node] == schedulable:
            return
        bucket = self._buckets[self._node_part[node]][len(self._node_free[node])]
        if schedulable:
            bucket[node] = None
        else:
            del bucket[node]
        self._schedulable[node] = schedulable

    def _rebucket(self, node: int, old_free: int) -> None:
        if not self._schedulable[node]:
            return
        buckets = self._buckets[self._node_part[node]]
        del buckets[old_free][node]
        buckets[len(self._node_free[node])][node] = None

    def _try_place(self, job: _Job, rng: random.Random) -> bool:
        buckets = self._buckets[job.partition]
        g_per = self.gpus_per_node
        if job.nodes == 1:
            # Best fit: the node with the fewest free GPUs that still fits, to keep whole nodes free.
            for k in range(job.per_node, g_per + 1):
                if buckets[k]:
                    self._allocate(job, next(iter(buckets[k])), job.per_node, rng, ramp=True)
                    return True
            return False
        if len(buckets[g_per]) < job.nodes:
            return False
        for node in list(itertools.islice(buckets[g_per], job.nodes)):
            self._allocate(job, node, g_per, rng, ramp=True)
        return True

    def _run(self, job: _Job, start_s: float, end_s: float) -> None:
        job.start_s = start_s
        job.reason = None
        job.slurm = None
        self._running[job.job_id] = job
        self._user_gpus[job.user] += job.gpu_count
        if not job.pinned:
            heapq.heappush(self._ends, (end_s, next(self._end_seq), job))
        self._jobs_changed = True

    def _setup_incident_jobs(self) -> None:
        """The jobs the incidents need, pinned: they do not end while the simulation runs."""
        rng = self._setup_rng
        at = self._incident_at
        g_per = self.gpus_per_node
        t0 = self.start_time_s
        pinned: list[tuple[int, _Job, float, tuple[int, ...] | None]] = []  # None: the whole node
        for kind, started_ago_s, user in (("hot_gpu", 19800.0, "chen"), ("unresponsive", 33120.0, "alice")):
            node = at.get(kind)
            if node is not None:
                job = self._make_job(_TRAIN, 1, g_per, _PINNED_LIMIT_S, rng, user=user, profile=_P_TRAIN)
                if kind == "hot_gpu":
                    # Flat out, so the badly cooled GPU sits in thermal slowdown at 88-92 C whatever the seed.
                    job.base_level, job.dip_level, job.power_factor = 96.0, 88.0, 0.97
                pinned.append((node, job, started_ago_s, None))
        node = at.get("idle_job")
        if node is not None:
            job = self._make_job(_TRAIN, 1, g_per, _PINNED_LIMIT_S, rng, user=_IDLE_JOB_USER, profile=_P_IDLE)
            job.name = "jupyter"
            pinned.append((node, job, 3 * 3600.0, None))
        node = at.get("mig")
        if node is not None:
            job = self._make_job(_INFER, 1, 1, _PINNED_LIMIT_S, rng, user=_MIG_JOB_USER, profile=_P_INFER)
            job.name = "mig-embed-serve"
            pinned.append((node, job, 26 * 3600.0, (self._incident_gpu("mig"),)))
        self._pinned_jobs: list[_Job] = []
        for node, job, started_ago_s, idxs in pinned:
            job.pinned = True
            job.limit_s = _PINNED_LIMIT_S
            if idxs is None:
                self._allocate(job, node, g_per, rng, ramp=False)
            else:
                self._take_specific(job, node, idxs, rng)
            job.start_s = t0 - started_ago_s
            self._pinned_jobs.append(job)

    def _take_specific(self, job: _Job, node: int, idxs: tuple[int, ...], rng: random.Random) -> None:
        """Hold GPUs Slurm does not otherwise hand out (the MIG GPU)."""
        saved_free, saved_schedulable = self._node_free[node], self._schedulable[node]
        self._node_free[node] = list(idxs)
        self._schedulable[node] = False  # keeps the buckets out of this temporary free list
        self._allocate(job, node, len(idxs), rng, ramp=False)
        self._node_free[node], self._schedulable[node] = saved_free, saved_schedulable

    def _initial_fill(self) -> None:
        """Jobs already running at the start, started at random times in the past."""
        rng = self._sched_rng
        g_per = self.gpus_per_node
        t0 = self.start_time_s
        started: list[_Job] = [job for job in self._pinned_jobs]
        by_part: list[list[int]] = [[] for _ in _PARTITIONS]
        for i in range(self._n):
            if self._schedulable[i]:
                by_part[self._node_part[i]].append(i)
        for part, nodes in enumerate(by_part):
            cursor = 0
            while cursor < len(nodes):
                node = nodes[cursor]
                if part == _TRAIN and len(nodes) >= 4 and rng.random() < 0.3:
                    width = rng.choice((2, 2, 3, 4))
                    block = nodes[cursor : cursor + width]
                    if len(block) == width and all(len(self._node_free[i]) == g_per for i in block):
                        lo, hi = _MULTI_NODE_DURATION_S
                        duration = math.exp(rng.uniform(math.log(lo), math.log(hi)))
                        user = self._fill_user(rng, width * g_per)
                        job = self._make_job(part, width, g_per, duration, rng, user=user)
                        for i in block:
                            self._allocate(job, i, g_per, rng, ramp=False)
                        started.append(job)
                        cursor += width
                        continue
                self._fill_node(node, part, rng, started)
                cursor += 1
        for job in started:
            if job.pinned:
                continue
            elapsed = rng.uniform(0.02, 0.98) * job.duration_s
            job.start_s = float(math.floor(t0 - elapsed))  # Slurm keeps whole seconds
        # Older jobs got lower ids, as Slurm hands them out in submission order.
        started.sort(key=lambda job: job.start_s if job.start_s is not None else t0)
        for job in started:
            self._assign_id(job)
            start_s = job.start_s if job.start_s is not None else t0
            end_s = math.inf if job.pinned else start_s + job.duration_s
            self._run(job, start_s, end_s)

    def _fill_user(self, rng: random.Random, gpus: int) -> str:
        # Running jobs respect the per-user limit, as Slurm enforced it when they started.
        user = self._pick_user(rng)
        if user == _QOS_USER:
            if self._fill_qos_gpus + gpus > self._qos_cap:
                return rng.choice(_OTHER_USERS)
            self._fill_qos_gpus += gpus
        return user

    def _fill_node(self, node: int, part: int, rng: random.Random, started: list[_Job]) -> None:
        free = len(self._node_free[node])
        if free == 0:
            return
        r = rng.random()
        if r < _FILL_FULL[part]:
            target = free
        elif r < _FILL_FULL[part] + _FILL_EMPTY[part] or free == 1:
            target = 0
        else:
            target = rng.randint(1, free - 1)
        while target > 0:
            sizes = [s for s in (8, 4, 2, 1) if s <= target] + ([target] if target > 8 else [])
            size = rng.choices(sizes, weights=[_FILL_WEIGHTS.get(s, 3) for s in sizes])[0]
            lo, hi = _DURATION_S[part]
            duration = math.exp(rng.uniform(math.log(lo), math.log(hi)))
            job = self._make_job(part, 1, size, duration, rng, user=self._fill_user(rng, size))
            self._allocate(job, node, size, rng, ramp=False)
            started.append(job)
            target -= size

    def _initial_pending(self) -> None:
        """A queue that shows the usual reasons from the first sample: a big job waiting for whole
        nodes (Resources), jobs queued behind it (Priority) and one over the per-user limit (QOS)."""
        rng = self._sched_rng
        g_per = self.gpus_per_node
        train_nodes = self._train_nodes
        wanted: list[tuple[int, int, int, float, str | None]] = []
        if train_nodes >= 2:
            wanted.append((_TRAIN, min(4, train_nodes), g_per, 10 * 3600.0, "gwen"))
        wanted.append((_TRAIN, 1, g_per, 6 * 3600.0, _QOS_USER))
        wanted.append((_TRAIN, 1, g_per, 8 * 3600.0, "eva"))
        wanted.append((_TRAIN, 1, min(4, g_per), 5 * 3600.0, "bob"))
        wanted.append((_INFER, 1, min(2, g_per), 4 * 3600.0, None))
        for _ in range(self._n // 32):
            part = rng.choice((_TRAIN, _TRAIN, _INFER))
            nodes, per, duration = self._draw_request(part, rng)
            wanted.append((part, nodes, per, max(duration, 2 * _BACKFILL_LIMIT_S), None))
        for part, nodes, per, duration, user in wanted:
            if not any(self._node_part[i] == part and self._schedulable[i] for i in range(self._n)):
                continue
            job = self._make_job(part, nodes, per, duration, rng, user=user)
            self._assign_id(job)
            self._pending.append(job)
        self._jobs_changed = True

    # ------------------------------------------------------------------ evolution

    def _steps_until(self, now_s: float) -> list[float]:
        """The step times to run to reach ``now_s``, skipping (not simulating) beyond the catch-up cap."""
        steps = math.floor((now_s - self.now_s) / STEP_S + 1e-9)
        if steps <= 0:
            return []
        if steps > MAX_CATCH_UP_STEPS:
            self._step_index += steps - MAX_CATCH_UP_STEPS
            steps = MAX_CATCH_UP_STEPS
        base = self._step_index
        return [self.start_time_s + (base + k + 1) * STEP_S for k in range(steps)]

    def _begin_step(self, t: float) -> None:
        """The cluster-wide part of a step: Slurm, job load levels, memory filling up."""
        self._schedule(t)
        self._update_levels(t)
        if self._ramping:
            done = []
            for g in self._ramping:
                target = self._mem_target[g]
                mem = self._mem[g] + (target - self._mem[g]) * 0.35  # allocations grow over a few seconds
                if abs(target - mem) < 64:
                    mem = target
                    done.append(g)
                self._mem[g] = mem // 1.0
                self._set_procs(g, self._gjob[g])
            for g in done:
                del self._ramping[g]

    def _schedule(self, t: float, *, force: bool = False) -> None:
        changed = force or self._resumed
        self._resumed = False
        while self._ends and self._ends[0][0] <= t:
            _, _, job = heapq.heappop(self._ends)
            self._release(job)
            del self._running[job.job_id]
            self._jobs_changed = changed = True
        rng = self._sched_rng
        for part, rate in enumerate(self._arrival_rate):
            if self._next_arrival_s[part] < t - MAX_CATCH_UP_STEPS * STEP_S:
                self._next_arrival_s[part] = t  # after a skip, resume arrivals instead of replaying them
            while self._next_arrival_s[part] <= t:
                self._next_arrival_s[part] += rng.expovariate(rate)
                if len(self._pending) < self._pending_cap:
                    nodes, per, duration = self._draw_request(part, rng)
                    user = self._pick_user(rng)
                    if user == _QOS_USER and sum(1 for j in self._pending if j.user == user) >= 2:
                        # Someone at the limit stops submitting; others' work keeps the queue moving.
                        user = rng.choice(_OTHER_USERS)
                    job = self._make_job(part, nodes, per, duration, rng, user=user)
                    self._assign_id(job)
                    self._pending.append(job)
                    self._jobs_changed = changed = True
        if changed:
            self._dispatch(t)

    def _dispatch(self, t: float) -> None:
        """Start what fits, in priority order (job id), and give the rest Slurm's reasons."""
        rng = self._sched_rng
        blocked: set[int] = set()
        still: list[_Job] = []
        for job in self._pending:
            if job.user == _QOS_USER and self._user_gpus[job.user] + job.gpu_count > self._qos_cap:
                reason = "QOSMaxGpuPerUser"
            elif job.partition in blocked and job.limit_s > _BACKFILL_LIMIT_S:
                reason = "Priority"
            elif self._try_place(job, rng):
                job.warm_until_s = t + rng.uniform(15.0, 90.0)  # loading data and weights
                self._run(job, t, t + job.duration_s)
                continue
            elif job.partition in blocked:
                reason = "Priority"
            else:
                blocked.add(job.partition)
                reason = "Resources"
            if reason != job.reason:
                job.reason = reason
                job.slurm = None
                self._jobs_changed = True
            still.append(job)
        self._pending = still

    def _update_levels(self, t: float) -> None:
        """Each job's target utilization this second, shared by its GPUs (ranks of one job move together)."""
        rng = self._level_rng
        for job in self._running.values():
            profile = job.profile
            if t < job.warm_until_s:
                job.level = 5.0
            elif profile == _P_TRAIN:
                job.level = job.dip_level if (t + job.phase_s) % job.period_s < job.dip_s else job.base_level
            elif profile == _P_INFER:
                if t >= job.next_change_s:
                    job.level = rng.uniform(20.0, 70.0)  # request bursts come and go
                    job.next_change_s = t + rng.uniform(2.0, 12.0)
            elif profile == _P_LOADER:
                phase = (t + job.phase_s) % job.period_s / job.period_s
                job.level = job.base_level + job.amp * (2.0 * abs(2.0 * phase - 1.0) - 1.0)
            else:
                job.level = 0.0

    def _evolve_nodes(self, lo: int, hi: int) -> None:
        g_per = self.gpus_per_node
        frozen = self._frozen_node
        if lo <= frozen < hi:
            self._evolve(lo * g_per, frozen * g_per)
            self._evolve((frozen + 1) * g_per, hi * g_per)
        else:
            self._evolve(lo * g_per, hi * g_per)

    def _evolve(self, lo_g: int, hi_g: int) -> None:
        """One second of every GPU in [lo_g, hi_g): utilization chases its job's level through smooth
        noise, power follows utilization, temperature follows power with a lag, and heat sheds power."""
        gjob = self._gjob
        goff = self._goff
        noise = self._noise
        util = self._util
        temp = self._temp
        power = self._power
        pbase = self._pbase
        pcoef = self._pcoef
        pjit = self._pjit
        amb = self._amb
        rth = self._rth
        plim = self.model.power_limit_w
        rnd = self._noise_rng.random
        keep, lag, temp_lag = _NOISE_KEEP, _UTIL_LAG, _TEMP_LAG
        throttle_c, shed = _THROTTLE_C, _THROTTLE_PER_C
        for g in range(lo_g, hi_g):
            job = gjob[g]
            r = rnd() - 0.5
            n = noise[g] * keep + r * job.noise_amp
            noise[g] = n
            u = util[g]
            u += (job.level + goff[g] + n - u) * lag
            if u < 0.01:
                u = 0.0  # also keeps decaying values out of denormal floats
            elif u > 100.0:
                u = 100.0
            util[g] = u
            t = temp[g]
            p = pbase[g] + u * pcoef[g] + r * pjit[g]
            if t > throttle_c:
                p *= 1.0 - (t - throttle_c) * shed
            if p > plim:
                p = plim
            power[g] = p
            temp[g] = t + (amb[g] + p * rth[g] - t) * temp_lag

    def _settle(self, t0: float) -> None:
        """Start in equilibrium: utilization at its level, temperature where its power holds it."""
        for g, job in enumerate(self._gjob):
            u = min(100.0, max(0.0, job.level + self._goff[g]))
            self._util[g] = u
            p = min(self.model.power_limit_w, self._pbase[g] + u * self._pcoef[g])
            pr = p * self._rth[g]
            temp = self._amb[g] + pr
            if temp > _THROTTLE_C:
                # Solve T = amb + p * (1 - (T - 85) * k) * R for the throttled equilibrium.
                k = _THROTTLE_PER_C
                temp = (self._amb[g] + pr * (1.0 + _THROTTLE_C * k)) / (1.0 + pr * k)
                p *= 1.0 - (temp - _THROTTLE_C) * _THROTTLE_PER_C
            self._power[g] = p
            self._temp[g] = temp

    # ------------------------------------------------------------------ output

    def _setup_static_node_data(self) -> None:
        model = self.model
        up = tuple(IbPort(f"mlx5_{k}", 1, "Active", "LinkUp", model.ib_rate_gbps) for k in range(8))
        self._ib: list[tuple[IbPort, ...]] = [up] * self._n
        self._xids: list[tuple[XidEvent, ...]] = [()] * self._n
        self._fixups: dict[int, Callable[[list[GpuSample]], list[GpuSample]]] = {}
        self._missing_gpu: dict[int, int] = {}
        # What a MIG GPU's sample shows beyond "no utilization", by (node, GPU index).
        self._mig_sample_fields: dict[tuple[int, int], dict[str, Any]] = {}
        at = self._incident_at
        t0 = self.start_time_s
        if "ib_down" in at:
            ports = list(up)
            ports[3] = IbPort("mlx5_3", 1, "Down", "Disabled", None)
            self._ib[at["ib_down"]] = tuple(ports)
        if "ib_slow" in at:
            ports = list(up)
            ports[3] = IbPort("mlx5_3", 1, "Active", "LinkUp", model.ib_rate_gbps / 2)  # trained a step lower
            self._ib[at["ib_slow"]] = tuple(ports)
        if "ecc_xid" in at:
            k = self._incident_gpu("ecc_xid")
            bus = self._pci[k]
            kernel_bus = bus[4:-2].lower()  # "00000000:9A:00.0" -> "0000:9a:00", as NVRM prints it
            self._xids[at["ecc_xid"]] = (
                XidEvent(
                    t0 - 372.0,
                    48,
                    bus,
                    k,
                    f"NVRM: Xid (PCI:{kernel_bus}): 48, pid=2211873, name=python, An uncorrectable double "
                    "bit error (DBE) has been detected on GPU in the framebuffer at partition 6, "
                    "subpartition 0.",
                ),
                XidEvent(
                    t0 - 251.0,
                    79,
                    bus,
                    k,
                    f"NVRM: Xid (PCI:{kernel_bus}): 79, pid='<unknown>', name=<unknown>, "
                    "GPU has fallen off the bus.",
                ),
            )
        if "mig" in at:
            node = at["mig"]
            k = self._incident_gpu("mig")
            slice_mib = model.mig_slice_mib
            used = [int(slice_mib * share) for share in _MIG_INSTANCE_USE]
            g = node * self.gpus_per_node + k
            mig_mem = float(sum(used) + self._idle_mem[g])
            job = self._gjob[g]
            procs = tuple(
                GpuProcess(job.pid_base + j, "python", float(mib), job.user)
                for j, mib in enumerate(used)
                if mib > 0
            )
            self._mig_sample_fields[(node, k)] = {"mem_used_mib": mig_mem, "processes": procs}
        if "missing_gpu" in at:
            self._missing_gpu[at["missing_gpu"]] = self._incident_gpu("missing_gpu")
        self._facts = self._interconnect_facts()
        # by node: the typed record a sample carries, with the facts it was made from
        self._node_facts: list[tuple[dict[str, object], NodeFacts] | None] = [None] * self._n
        self._setup_mig()

    def _setup_mig(self) -> None:
        """MIG as the incidents need it: the "mig" GPU split into seven of its smallest instances, each with
        its compute instance, serving inference; the drained node's GPU 0 with MIG on and nothing on it.
        Every node's facts hold the MIG listings, as over SSH."""
        self._mig_table = MIG_TABLES[self.model.key]
        self._mig: dict[int, dict[int, GpuMig]] = {}  # by node, by GPU index: the GPUs with MIG on
        self._mig_withheld: set[int] = set()  # GPUs MIG mode took from Slurm's free list
        # By node: each listing's last text and what it parsed to.
        self._mig_memo: dict[int, dict[str, tuple[str, object]]] = {}
        # A node without a MIG GPU answers every listing so; parsed once, shared as the parse cache shares it.
        self._no_mig_facts = {name: parse(NO_MIG_DEVICES) for name, _words, parse in _MIG_LISTINGS}
        for facts in self._facts:
            facts.update(self._no_mig_facts)
        at = self._incident_at
        if "mig" in at:
            node, k = at["mig"], self._incident_gpu("mig")
            uuid = self._uuid[node * self.gpus_per_node + k]
            # On from the start: its serving job holds it, and a busy GPU's mode cannot change.
            self._mig[node] = {k: GpuMig(k, uuid, self._mig_table, enabled=True)}
            smallest = self._mig_table.profiles[0]
            layout = ",".join(f"{smallest.profile_id}:{start}" for start in smallest.starts)
            self._run_nvidia_smi(node, ("mig", "-i", str(k), "-cgi", layout, "-C"))
        if "drained" in at:
            k = min(_DRAINED_MIG_GPU, self.gpus_per_node - 1)
            self._run_nvidia_smi(at["drained"], ("-i", str(k), "-mig", "1"))
        for node in self._missing_gpu:
            self._set_fixup(node)

    def _smi_gpus(self, i: int) -> list[SmiGpu]:
        """Node i's GPUs as nvidia-smi sees them; one without MIG gets a fresh state, kept once MIG is on."""
        g_per = self.gpus_per_node
        states = self._mig.get(i, {})
        gone = self._missing_gpu.get(i)
        gpus = []
        for k in range(g_per):
            if k == gone:
                continue
            g = i * g_per + k
            state = states.get(k) or GpuMig(k, self._uuid[g], self._mig_table)
            # A GPU a job holds runs its processes.
            busy = self._gjob[g] is not self._idle_job
            gpus.append(SmiGpu(k, self.model.name, self._uuid[g], self._pci[k], busy, state))
        return gpus

    def _run_nvidia_smi(self, i: int, args: Sequence[str]) -> SmiRun:
        gpus = self._smi_gpus(i)
        before = {k: state.enabled for k, state in self._mig.get(i, {}).items()}
        run = run_nvidia_smi(args, gpus)
        if run.changed:
            self._mig[i] = {g.index: g.mig for g in gpus if g.mig.enabled}
            for g in gpus:
                if g.mig.enabled != before.get(g.index, False):
                    (self._withhold if g.mig.enabled else self._give_back)(i, g.index)
            if not self._mig[i]:
                del self._mig[i]
            self._set_fixup(i)
            self._refresh_mig_facts(i)
            self._result = None
        return run

    def _withhold(self, i: int, k: int) -> None:
        """A GPU in MIG mode is no whole GPU for Slurm to hand out: off the node's free list it goes."""
        free = self._node_free[i]
        if k in free:
            before = len(free)
            free.remove(k)
            self._rebucket(i, before)
            self._mig_withheld.add(i * self.gpus_per_node + k)

    def _give_back(self, i: int, k: int) -> None:
        g = i * self.gpus_per_node + k
        if g not in self._mig_withheld:
            return
        self._mig_withheld.discard(g)
        free = self._node_free[i]
        before = len(free)
        free.append(k)
        free.sort()
        self._rebucket(i, before)
        self._resumed = True  # a GPU came back: the scheduler looks at the queue at the next step

    def _set_fixup(self, i: int) -> None:
        """How node i's GPU samples differ from the plain ones: MIG GPUs report no utilization (and the
        MIG incident's memory and processes per instance); a missing GPU is left out."""
        mig = {
            k: self._mig_sample_fields.get((i, k), {})
            for k, state in self._mig.get(i, {}).items()
            if state.enabled
        }
        gone = self._missing_gpu.get(i)
        if not mig and gone is None:
            self._fixups.pop(i, None)
            return

        def fixup(gpus: list[GpuSample]) -> list[GpuSample]:
            for k, fields in mig.items():
                gpus[k] = gpus[k]._replace(util_pct=None, mem_util_pct=None, mig_enabled=True, **fields)
            return gpus if gone is None else [s for s in gpus if s.index != gone]

        self._fixups[i] = fixup

    def _refresh_mig_facts(self, i: int) -> None:
        """Node i's MIG facts as the SSH source would hold them: each listing printed from the state and
        parsed, a listing whose text did not change keeping its value; -L only where a GPU has MIG on."""
        base = {name: value for name, value in self._facts[i].items() if name not in self._no_mig_facts}
        base.pop(_GPU_LIST[0], None)
        if i not in self._mig:
            self._mig_memo.pop(i, None)
            self._facts[i] = {**base, **self._no_mig_facts}
            return
        memo = self._mig_memo.setdefault(i, {})
        gpus = self._smi_gpus(i)
        for name, words, parse in (*_MIG_LISTINGS, _GPU_LIST):
            text = run_nvidia_smi(words, gpus).stdout
            known = memo.get(name)
            if known is None or known[0] != text:
                known = memo[name] = (text, parse(text))
            base[name] = known[1]
        self._facts[i] = base

    def _interconnect_facts(self) -> list[dict[str, object]]:
        """Each node's `topo -m` and `nvlink -s` facts, made once and reused by every sample, as the SSH
        source reuses parsed facts until a command's output changes. Nodes that show the same board share
        one topology object, as the SSH source's parse cache makes them share one."""
        model = self.model
        g_per = self.gpus_per_node
        at = self._incident_at
        missing = {at["missing_gpu"]: self._incident_gpu("missing_gpu")} if "missing_gpu" in at else {}
        inactive: dict[int, list[tuple[int, int]]] = {}
        if "nvlink_degraded" in at:
            total = model.nvlinks_per_gpu
            down = _stream(self.seed, "nvlink").sample(range(total), total // 3)  # a third failed to train
            inactive[at["nvlink_degraded"]] = [(self._incident_gpu("nvlink_degraded"), k) for k in down]
        boards: dict[tuple[tuple[int, ...], tuple[str, ...]], Topology] = {}
        facts: list[dict[str, object]] = []
        links, speed = model.nvlinks_per_gpu, model.nvlink_speed_gbyte_s
        for i in range(self._n):
            indices = tuple(k for k in range(g_per) if k != missing.get(i))
            nics = tuple(port.ca_name for port in self._ib[i])
            topology = boards.get((indices, nics))
            if topology is None:
                topology = boards[(indices, nics)] = board_topology(indices, g_per, nics, links)
            gpus = [(k, model.name, self._uuid[i * g_per + k]) for k in indices]
            nvlink = board_nvlinks(gpus, links, speed, inactive.get(i, ()))
            facts.append({"topology": topology, "nvlink": nvlink})
        return facts

    def _build_gpus(self, first: int = 0, stop: int | None = None) -> list[GpuSample]:
        """Every GPU's sample from the current state, in the units and precision nvidia-smi reports.

        The hot path of a tick. Rounding adds and subtracts 1.5 * 2**52, which leaves a float rounded to
        the nearest whole number (ties to even) in two additions; round() and int() calls or floor
        division cost several times more.
        """
        model = self.model
        name = model.name
        mem_total = float(model.mem_total_mib)
        plim = model.power_limit_w
        pcap = plim * _POWER_CAP_SHARE
        cmax = float(model.sm_clock_max_mhz)
        cidle = float(model.sm_clock_idle_mhz)
        capped_clock = cmax - 105.0
        hot_clock = self._hot_clock
        hot_last = len(hot_clock) - 1
        throttle_c = _THROTTLE_C
        hw_c = float(_HW_SLOWDOWN_C)
        new = new_gpu_sample
        cls = GpuSample
        r = _ROUNDER
        out: list[GpuSample] = []
        append = out.append
        state = itertools.islice(
            zip(
                self._gjob,
                self._util,
                self._temp,
                self._power,
                self._mem,
                self._gidx,
                self._uuid,
                self._gpci,
                self._ecc,
                self._procs,
                self._gfacts,
                strict=True,
            ),
            first,
            stop,
        )
        for job, u, t, p, mem, k, uuid, pci, ecc, procs, facts in state:
            ti = t + r - r
            if ti >= throttle_c:
                clock = hot_clock[min(int(ti - throttle_c), hot_last)]
                reasons: tuple[str, ...] = _THERMAL_HW if ti >= hw_c else _THERMAL_SW
            elif not job.has_context:
                clock = cidle
                reasons = ()
            elif p >= pcap:
                clock = capped_clock
                reasons = _POWER_CAPPED
            else:
                clock = cmax
                reasons = ()
            append(
                new(
                    cls,
                    (
                        k,
                        uuid,
                        name,
                        pci,
                        u + r - r,
                        u * job.mem_ratio + r - r,
                        mem,
                        mem_total,
                        ti,
                        (p * 100.0 + r - r) / 100.0,
                        plim,
                        clock,
                        cmax,
                        ecc,
                        False,
                        reasons,
                        procs,
                        *facts,
                    ),
                )
            )
        return out

    def _node_sample(self, i: int, gpus: list[GpuSample], t: float, first_node: int = 0) -> NodeSample:
        """Node i's sample; `gpus` holds the GPUs of the nodes from `first_node` on."""
        g_per = self.gpus_per_node
        offset = (i - first_node) * g_per
        mine = gpus[offset : offset + g_per]
        fixup = self._fixups.get(i)
        if fixup is not None:
            mine = fixup(mine)
        return NodeSample(
            self.node_names[i],
            Reachability.OK,
            t,
            tuple(mine),
            g_per,
            None,
            self._ib[i],
            self._xids[i],
            self._typed_facts(i, t),
        )

    def _typed_facts(self, i: int, t: float) -> NodeFacts:
        """Node i's facts as a sample carries them, made again only when its facts were replaced (read at
        that tick), as the SSH source keeps them until a command's output changes."""
        facts = self._facts[i]
        made = self._node_facts[i]
        if made is None or made[0] is not facts:
            made = self._node_facts[i] = (facts, node_facts(facts, dict.fromkeys(facts, t), {}))
        return made[1]

    def _slurm_state(self, t: float) -> SlurmState:
        if self._dirty_nodes:
            nodes = dict(self._slurm_nodes)
            for i in sorted(self._dirty_nodes):
                name = self.node_names[i]
                nodes[name] = self._slurm_node(i, t)
            self._slurm_nodes = nodes
            self._dirty_nodes.clear()
        if self._jobs_changed:
            running = sorted(self._running.values(), key=lambda job: int(job.job_id))
            self._slurm_jobs = tuple(self._slurm_job(job) for job in running + self._pending)
            self._jobs_changed = False
        return SlurmState(nodes=self._slurm_nodes, jobs=self._slurm_jobs, sampled_at_s=t)

    def _slurm_node(self, i: int, t: float) -> SlurmNode:
        alloc = self._node_alloc[i]
        if alloc == 0:
            base = SlurmBaseState.IDLE
        elif alloc >= self.gpus_per_node:
            base = SlurmBaseState.ALLOCATED
        else:
            base = SlurmBaseState.MIXED
        part = (_PARTITIONS[self._node_part[i]],)
        flags: frozenset[str] = frozenset()
        if i in self._drain:
            flags = _DRAIN_FLAGS if i != self._unresponsive else _DRAIN_NOT_RESPONDING_FLAGS
        elif i == self._unresponsive:
            flags = _NOT_RESPONDING_FLAGS
        reason = self._reasons.get(i)
        if reason is None:
            return SlurmNode(self.node_names[i], base, flags, partitions=part)
        text, user, when = reason
        return SlurmNode(self.node_names[i], base, flags, text, user, when, part)

    def _slurm_job(self, job: _Job) -> SlurmJob:
        if job.slurm is None:
            names = self.node_names
            job.slurm = SlurmJob(
                job_id=job.job_id,
                name=job.name,
                user=job.user,
                partition=_PARTITIONS[job.partition],
                state="PENDING" if job.start_s is None else "RUNNING",
                gpus_by_node={names[i]: idxs for i, idxs in sorted(job.gpus.items())},
                start_time_s=job.start_s,
                time_limit_s=job.limit_s,
                pending_reason=job.reason if job.start_s is None else None,
                gpus_requested=job.gpu_count,  # as squeue's TRES request tells it, pending jobs too
            )
        return job.slurm

    def _describe_incidents(self) -> tuple[Incident, ...]:
        at = self._incident_at
        names = self.node_names
        g_per = self.gpus_per_node
        out: list[Incident] = []
        for kind in INCIDENT_KINDS:
            if kind not in at:
                continue
            node = names[at[kind]]
            gpu: int | None = None
            if kind == "hot_gpu":
                gpu = self._incident_gpu(kind)
                text = f"GPU{gpu} runs near 90 C and throttles (poor cooling)"
            elif kind == "ecc_xid":
                gpu = self._incident_gpu(kind)
                text = f"GPU{gpu}: 2 uncorrected ECC errors, Xid 48 then Xid 79 (fell off the bus)"
            elif kind == "unresponsive":
                text = "stopped answering; Slurm: NOT_RESPONDING"
            elif kind == "idle_job":
                text = f"{_IDLE_JOB_USER}'s job holds all {g_per} GPUs at 0% for 3 h"
            elif kind == "drained":
                text = f"drained: {DRAIN_REASON}"
            elif kind == "mig":
                gpu = self._incident_gpu(kind)
                text = f"GPU{gpu} in MIG mode: no utilization reported"
            elif kind == "ib_down":
                text = "mlx5_3 port 1 down (Disabled)"
            elif kind == "nvlink_degraded":
                gpu = self._incident_gpu(kind)
                total = self.model.nvlinks_per_gpu
                text = f"GPU{gpu} has {total - total // 3} of {total} NVLinks active"
            elif kind == "ib_slow":
                rate = self.model.ib_rate_gbps
                text = f"mlx5_3 trained at {rate / 2:g} Gb/s instead of {rate:g}"
            elif kind == "pcie_degraded":
                gpu = self._incident_gpu(kind)
                text = f"GPU{gpu} PCIe link trained at x8 instead of x16"
            elif kind == "remap_pending":
                gpu = self._incident_gpu(kind)
                text = f"GPU{gpu} has a row remapping pending (needs a GPU reset)"
            else:
                gpu = self._incident_gpu(kind)
                text = f"reports {g_per - 1} of {g_per} GPUs (GPU{gpu} missing)"
            out.append(Incident(kind, node, gpu, text))
        return tuple(out)
