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

This module holds the clock, the GPU physics and the samples; the other concerns are functions of the
cluster in modules of their own: `workload` (what users ask for), `scheduler` (Slurm's placement and
queue), `incidents` (the scripted faults), `node_facts` (IB, Xid, topology, NVLink, MIG) and
`slurm_render` (Slurm's state as gputop's models).
"""

from __future__ import annotations

import dataclasses
import math
import random
import shlex
from collections.abc import Callable, Iterable, Sequence
from itertools import count
from operator import attrgetter
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from gputop.core.facts import NodeFacts
from gputop.core.models import (
    GpuProcess,
    GpuSample,
    IbPort,
    NodeSample,
    Reachability,
    SlurmJob,
    SlurmNode,
    SourceResult,
    XidEvent,
    new_gpu_sample,
)
from gputop.core.parsers.nvlink_errors import NvlinkErrors
from gputop.core.parsers.smi_counters import SmiCounters
from gputop.sim.counters import read_counters, setup_counters
from gputop.sim.gpu_models import GpuModel
from gputop.sim.gpu_models import gpu_model as lookup_gpu_model
from gputop.sim.incidents import Incident, describe_incidents, incident_gpu, incident_node_indices
from gputop.sim.mig_state import GpuMig
from gputop.sim.mig_tables import MigTable
from gputop.sim.node_facts import flap_ib, run_smi_on_node, setup_static_node_data, typed_facts
from gputop.sim.scheduler import (
    initial_fill,
    initial_pending,
    schedule,
    set_procs,
    set_schedulable,
    setup_incident_jobs,
    setup_partitions,
    setup_scheduler,
)
from gputop.sim.slurm_render import slurm_state
from gputop.sim.workload import (
    MAX_CATCH_UP_STEPS,
    P_INFER,
    P_LOADER,
    P_TRAIN,
    STEP_S,
    SimJob,
    idle_sentinel,
    random_stream,
)
from gputop.sources.commands import is_nvidia_smi, strip_sudo
from gputop.yielding import yield_to_ui

SILENT_BEFORE_START_S: Final = 45.0


# HGX boards enumerate their eight GPUs on these PCI buses.
_HGX_BUSES: Final = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)


# GPU physics, per one-second step.
_UTIL_LAG: Final = 0.55  # share of the gap to the target utilization closed per step
_NOISE_KEEP: Final = 0.7  # AR(1) noise: values wander instead of jumping
_TEMP_LAG: Final = 0.05  # first-order thermal lag, time constant ~20 s
_THROTTLE_C: Final = 85.0  # thermal slowdown starts here
_HW_SLOWDOWN_C: Final = 92  # hardware slowdown on top, as the GPU nears its limit
_THROTTLE_PER_C: Final = 0.05  # power shed per degree over the slowdown temperature
_RISE_AT_LIMIT_C: Final = 50.0  # a GPU at its power limit runs this much above its inlet air
_HOT_GPU_RESISTANCE: Final = 1.85  # the hot GPU's cooling is this much worse (clogged heatsink, failing fan)
_POWER_CAP_SHARE: Final = 0.98  # reported as power capped from here
_IDLE_MEM_MIB: Final = 512


_THERMAL_SW: Final = ("sw_thermal_slowdown",)
_THERMAL_HW: Final = ("sw_thermal_slowdown", "hw_thermal_slowdown")
_POWER_CAPPED: Final = ("sw_power_cap",)


_ROUNDER: Final = 6755399441055744.0  # 1.5 * 2**52: x + it - it rounds x to a whole number

_LEVEL = attrgetter("level")
Floats = npt.NDArray[np.float64]


def _floats(values: Iterable[float]) -> Floats:
    return np.array(list(values), dtype=np.float64)


def _draws(rng: random.Random, count: int) -> Floats:
    """``count`` values of ``rng.random()``, in order, drawn at once. random() builds each value from two
    32-bit outputs of the generator, the first shifted right by 5 and the second by 6, and
    getrandbits(64 * count) hands out the same outputs, least significant word first: the same numbers,
    and the stream left where count calls would leave it."""
    words = np.frombuffer(rng.getrandbits(64 * count).to_bytes(8 * count, "little"), dtype="<u4")
    high = (words[0::2] >> 5).astype(np.float64)
    low = (words[1::2] >> 6).astype(np.float64)
    return (high * 67108864.0 + low) * (1.0 / 9007199254740992.0)


class SimulatedCluster:
    """A Slurm GPU cluster that evolves deterministically with the time it is given."""

    # The state the parts of the simulation share (gputop.sim.scheduler, node_facts, slurm_render), set up
    # by their setup functions.
    _node_free: list[list[int]]
    _drain: set[int]
    _reasons: dict[int, tuple[str, str, float]]
    _buckets: list[list[dict[int, None]]]
    _running: dict[str, SimJob]
    _pending: list[SimJob]
    _ends: list[tuple[float, int, SimJob]]
    _user_gpus: dict[str, int]
    _dirty_nodes: set[int]
    _pinned_jobs: list[SimJob]
    _ib: list[tuple[IbPort, ...]]
    _xids: list[tuple[XidEvent, ...]]
    _counter_facts: list[tuple[SmiCounters, NvlinkErrors]]
    _counter_nodes: dict[str, int]
    _next_counter_read_s: float
    _fixups: dict[int, Callable[[list[GpuSample]], list[GpuSample]]]
    _missing_gpu: dict[int, int]
    _mig_sample_fields: dict[tuple[int, int], dict[str, Any]]
    _node_facts: list[tuple[dict[str, object], NodeFacts] | None]
    _mig: dict[int, dict[int, GpuMig]]
    _mig_withheld: set[int]
    _mig_memo: dict[int, dict[str, tuple[str, object]]]
    _arrival_rate: list[float]
    _end_seq: count[int]
    _facts: list[dict[str, object]]
    _fill_qos_gpus: int
    _jobs_changed: bool
    _mig_table: MigTable
    _next_arrival_s: list[float]
    _next_job_id: int
    _no_mig_facts: dict[str, object]
    _node_alloc: list[int]
    _node_part: list[int]
    _pending_cap: int
    _qos_cap: int
    _schedulable: list[bool]
    _train_nodes: int
    _unresponsive: int

    def __init__(
        self,
        *,
        nodes: int = 32,
        gpus_per_node: int = 8,
        gpu_model: str = "H100",
        seed: int = 42,
        start_time_s: float,
        origin_s: float | None = None,
    ) -> None:
        """``origin_s``: the moment the incidents are written around (default: the start). Their Xids,
        the drain's time, the silent node's last sample (45 s before it) are timed from it. The demo starts
        the cluster an hour before its first frame, replays that hour as history, and sets the origin to
        the first frame: the incidents are then as fresh at the first frame as they are without a past."""
        if nodes < 1:
            raise ValueError("a simulated cluster needs at least one node")
        if gpus_per_node < 1:
            raise ValueError("a simulated node needs at least one GPU")
        self.model: GpuModel = lookup_gpu_model(gpu_model)
        self.seed = seed
        self.start_time_s = float(start_time_s)
        self.origin_s = self.start_time_s if origin_s is None else float(origin_s)
        self.silent_at_s = self.origin_s - SILENT_BEFORE_START_S
        self.gpus_per_node = gpus_per_node
        width = max(3, len(str(nodes)))
        self.node_names: tuple[str, ...] = tuple(f"gpu{i + 1:0{width}d}" for i in range(nodes))
        self._n = nodes
        self._node_index = {name: i for i, name in enumerate(self.node_names)}
        self._step_index = 0
        self.steps_run = 0  # steps simulated since it was built (a long pause skips, not replays, most)
        # Separate streams, so the jobs Slurm runs do not depend on how many GPUs draw noise.
        self._setup_rng = random_stream(seed, "setup")
        self._sched_rng = random_stream(seed, "sched")
        self._level_rng = random_stream(seed, "level")
        self._noise_rng = random_stream(seed, "noise")

        self._incident_at = incident_node_indices(nodes)
        self._setup_gpus()
        setup_partitions(self)
        setup_scheduler(self)
        setup_incident_jobs(self)
        initial_fill(self)
        initial_pending(self)
        t0 = self.start_time_s
        schedule(self, t0, force=True)
        self._update_levels(t0)
        self._settle(t0)
        setup_static_node_data(self)
        setup_counters(self)
        self.incidents: tuple[Incident, ...] = describe_incidents(self)

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
            self.steps_run += 1

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
                self.steps_run += 1

    async def result_and_yield(self, chunk_nodes: int = 100) -> SourceResult:
        """`result`, built a slice of nodes at a time with the event loop handed back in between."""
        if self._result is not None and self._result_step == self._step_index:
            return self._result
        step_index = self._step_index
        t = self.now_s
        g_per = self.gpus_per_node
        nodes: list[NodeSample] = []
        for lo in range(0, self._n, max(1, chunk_nodes)):
            hi = min(self._n, lo + max(1, chunk_nodes))
            gpus = self._build_gpus(lo * g_per, hi * g_per)
            nodes.extend(
                self._frozen_sample(t) if i == self._frozen_node else self._node_sample(i, gpus, t, lo)
                for i in range(lo, hi)
            )
            await yield_to_ui()
            if self._step_index != step_index:  # a step ran meanwhile: its result supersedes this one
                return self.result()
        self._result = SourceResult(nodes=tuple(nodes), slurm=slurm_state(self, t))
        self._result_step = step_index
        return self._result

    def result(self) -> SourceResult:
        """Every node and Slurm as of the last step. Asked again without a step in between, the same
        objects come back; the frozen node's sample never changes."""
        if self._result is not None and self._result_step == self._step_index:
            return self._result
        t = self.now_s
        gpus = self._build_gpus()
        nodes = [
            self._frozen_sample(t) if i == self._frozen_node else self._node_sample(i, gpus, t)
            for i in range(self._n)
        ]
        self._result = SourceResult(nodes=tuple(nodes), slurm=slurm_state(self, t))
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
            set_schedulable(self, i, False)
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
                set_schedulable(self, i, True)
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
        run = run_smi_on_node(self, i, words[1:])
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
        ambient_c: list[float] = []
        rth: list[float] = []
        self._idle_mem: list[float] = []
        base_rth = _RISE_AT_LIMIT_C / model.power_limit_w
        for g in range(total):
            h = f"{rng.getrandbits(128):032x}"
            self._uuid.append(f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
            self._idle_w.append(model.idle_power_w * rng.uniform(0.93, 1.07))
            # GPUs further back in the chassis breathe air the front ones already warmed.
            ambient_c.append(26.0 + rng.uniform(0.0, 2.5) + 0.5 * (g % g_per % 4))
            rth.append(base_rth * rng.uniform(0.93, 1.07))
            self._idle_mem.append(float(_IDLE_MEM_MIB + rng.randrange(0, 48)))
        hot = self._incident_at.get("hot_gpu")
        if hot is not None:
            rth[hot * g_per + incident_gpu(self, "hot_gpu")] *= _HOT_GPU_RESISTANCE
        self._ecc = [0] * total
        ecc = self._incident_at.get("ecc_xid")
        if ecc is not None:
            self._ecc[ecc * g_per + incident_gpu(self, "ecc_xid")] = 2
        # Memory repair and PCIe link, in GpuSample's order from retired_pages_pending on. H100-class
        # GPUs remap rows rather than retire pages, so retired pages are not reported.
        gen = model.pcie_gen_max
        healthy = (None, False, False, gen, gen, 16, 16)
        self._gfacts: list[tuple[object, ...]] = [healthy] * total
        pcie = self._incident_at.get("pcie_degraded")
        if pcie is not None:
            self._gfacts[pcie * g_per + incident_gpu(self, "pcie_degraded")] = (
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
            self._gfacts[remap * g_per + incident_gpu(self, "remap_pending")] = (
                None,
                True,
                False,
                gen,
                gen,
                16,
                16,
            )

        idle = idle_sentinel()
        self._idle_job = idle
        self._gjob: list[SimJob] = [idle] * total
        self._span_w = [model.power_limit_w - w for w in self._idle_w]
        self._idle_jit_w = model.idle_power_w * 0.02
        self._busy_jit_w = model.power_limit_w * 0.01
        # The physics state and constants as arrays: a step is a few array operations over every GPU
        # (_evolve), which makes the demo's warm-up history and each tick's step several times cheaper.
        self._goff = _floats([0.0] * total)
        self._noise_amp = _floats([0.0] * total)  # its job's noise_amp, set with _gjob
        self._pbase = _floats(self._idle_w)
        self._pcoef = _floats(s / 100.0 for s in self._span_w)
        self._pjit = _floats([self._idle_jit_w] * total)
        self._amb = _floats(ambient_c)
        self._rth = _floats(rth)
        self._util = _floats([0.0] * total)
        self._noise = _floats([0.0] * total)
        self._power = _floats(self._idle_w)
        self._temp = _floats([0.0] * total)
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

    # ------------------------------------------------------------------ jobs

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
        schedule(self, t)
        self._update_levels(t)
        read_counters(self, t)
        flap_ib(self, t)
        if self._ramping:
            done = []
            for g in self._ramping:
                target = self._mem_target[g]
                mem = self._mem[g] + (target - self._mem[g]) * 0.35  # allocations grow over a few seconds
                if abs(target - mem) < 64:
                    mem = target
                    done.append(g)
                self._mem[g] = mem // 1.0
                set_procs(self, g, self._gjob[g])
            for g in done:
                del self._ramping[g]

    def _update_levels(self, t: float) -> None:
        """Each job's target utilization this second, shared by its GPUs (ranks of one job move together)."""
        rng = self._level_rng
        for job in self._running.values():
            profile = job.profile
            if t < job.warm_until_s:
                job.level = 5.0
            elif profile == P_TRAIN:
                job.level = job.dip_level if (t + job.phase_s) % job.period_s < job.dip_s else job.base_level
            elif profile == P_INFER:
                if t >= job.next_change_s:
                    job.level = rng.uniform(20.0, 70.0)  # request bursts come and go
                    job.next_change_s = t + rng.uniform(2.0, 12.0)
            elif profile == P_LOADER:
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
        noise, power follows utilization, temperature follows power with a lag, and heat sheds power.

        Array operations in the order the per-GPU formulas give them (each one rounded as a Python float
        operation is), with the noise drawn GPU by GPU from the same stream: the same numbers as a loop
        over the GPUs, at a fraction of the cost."""
        count = hi_g - lo_g
        if count <= 0:
            return
        window = slice(lo_g, hi_g)
        jobs = self._gjob[window]
        level = np.fromiter(map(_LEVEL, jobs), np.float64, count)
        r = _draws(self._noise_rng, count) - 0.5
        n = self._noise[window] * _NOISE_KEEP + r * self._noise_amp[window]
        self._noise[window] = n
        u = self._util[window]
        u = u + (level + self._goff[window] + n - u) * _UTIL_LAG
        # (also keeps decaying values out of denormal floats)
        u = np.where(u < 0.01, 0.0, np.where(u > 100.0, 100.0, u))
        self._util[window] = u
        t = self._temp[window]
        p = self._pbase[window] + u * self._pcoef[window] + r * self._pjit[window]
        p = np.where(t > _THROTTLE_C, p * (1.0 - (t - _THROTTLE_C) * _THROTTLE_PER_C), p)
        p = np.where(p > self.model.power_limit_w, self.model.power_limit_w, p)
        self._power[window] = p
        self._temp[window] = t + (self._amb[window] + p * self._rth[window] - t) * _TEMP_LAG

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
        window = slice(first, stop)
        state = zip(
            self._gjob[window],
            self._util[window].tolist(),  # Python floats, as the samples hold them
            self._temp[window].tolist(),
            self._power[window].tolist(),
            self._mem[window],
            self._gidx[window],
            self._uuid[window],
            self._gpci[window],
            self._ecc[window],
            self._procs[window],
            self._gfacts[window],
            strict=True,
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

    def _frozen_sample(self, t: float) -> NodeSample:
        """The silent node's sample: the same object from the moment it went silent; before that (the
        demo's replayed past) its readings as they were then, taken at ``t``."""
        frozen = self._frozen
        if frozen is None:
            raise RuntimeError("the cluster has no silent node")
        if t >= self.silent_at_s:
            return frozen
        return dataclasses.replace(frozen, sampled_at_s=t, xid_events=self._xids_by(self._frozen_node, t))

    def _xids_by(self, i: int, t: float) -> tuple[XidEvent, ...]:
        """Node i's Xid events logged by ``t``: the kernel's log before then did not hold the later ones."""
        events = self._xids[i]
        if not events or max(event.time_s for event in events) <= t:
            return events  # the same tuple each step, as the trackers' identity checks like it
        return tuple(event for event in events if event.time_s <= t)

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
            self._xids_by(i, t),
            typed_facts(self, i, t),
        )
