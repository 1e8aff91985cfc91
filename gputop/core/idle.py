"""GPUs that a running Slurm job holds but does not use: which, since when, and what it has cost.

`IdleTracker` is fed one snapshot per tick and returns an immutable `IdleState`. Pure: every time comes
from the snapshots (``taken_at_s``), so the same snapshots give the same state.

Rules:
- A GPU counts only while a RUNNING job holds it (``SlurmJob.gpus_by_node``) and its node answers
  (reachability OK). A STALE or DOWN node's GPUs have no current data and leave the state; their idle
  clock starts again when data returns. A GPU without a utilization figure (MIG) is never idle: unknown
  is not idle.
- Hysteresis: a GPU becomes idle when its utilization is under ``util_pct`` and stays idle until it rises
  above ``util_pct + IDLE_HYSTERESIS_PCT``, so a job hovering at 4-6 % against a 5 % threshold does not
  flap in and out of the list (and restart its idle clock) every tick.
- Idle time is what the tracker saw: between two snapshots in which the GPU was idle (for the same job),
  the time between them is added, but never more than ``max_step_s`` per step. A longer gap means gputop
  itself was not looking (a suspended laptop, a stopped process, a poller stuck for a minute): the GPU may
  have worked all that while, so the gap is not charged to the job. The default, 60 s, is the default
  ``poll.down_after_s``: a node silent that long is DOWN, and a snapshot that old is no better evidence.
  A poller that ticks slower than that should pass a larger cap (twice its interval, say).
- A GPU is flagged once it has been idle for at least ``minutes`` of that observed time.
- Wasted GPU-seconds add up per job over its GPUs and over the job's life, as long as Slurm lists the
  job; a job that leaves the listing (or is listed as ended) is dropped.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from gputop.core.models import ClusterSnapshot, GpuSample, Reachability
from gputop.core.parsers.slurm_common import JOB_BASE_STATES
from gputop.core.slices import run_to_end

IDLE_HYSTERESIS_PCT: Final = 5.0
DEFAULT_MAX_STEP_S: Final = 60.0
JOBS_PER_SLICE: Final = 1000  # jobs between two yields of `update_steps`: a few milliseconds

# Job states after which a job holds nothing and never will again; its figures are dropped.
ENDED_JOB_STATES: Final = frozenset(JOB_BASE_STATES) - {"PENDING", "RUNNING", "SUSPENDED"}

GpuKey = tuple[str, int]  # (node name, GPU index)


class IdleGpu(NamedTuple):
    """One GPU held idle by a job. A NamedTuple: hundreds are rebuilt per tick on a wasteful cluster."""

    node: str
    index: int  # type: ignore[assignment]  # the GPU index, as in GpuSample
    job_id: str
    user: str
    since_s: float  # the snapshot time at which it was first seen idle (this stretch, this job)
    idle_s: float  # idle time observed since then (gaps capped: see the module notes)


@dataclass(frozen=True, slots=True)
class IdleState:
    """Allocated-but-idle GPUs as of one snapshot."""

    taken_at_s: float | None
    gpus: Mapping[GpuKey, IdleGpu] = field(default_factory=dict)  # every idle held GPU, flagged or not
    flagged: frozenset[GpuKey] = frozenset()  # idle for at least the configured minutes
    wasted_s: Mapping[str, float] = field(default_factory=dict)  # job id -> idle GPU-seconds, while held
    flagged_by_job: Mapping[str, int] = field(default_factory=dict)  # job id -> flagged GPUs (> 0 only)
    flagged_by_node: Mapping[str, tuple[IdleGpu, ...]] = field(default_factory=dict)  # in index order
    # job id -> mean utilization of the GPUs a running job holds on answering nodes (those that report
    # one): the tracker reads every one of them anyway, and the queue's rows need the mean
    util_by_job: Mapping[str, float] = field(default_factory=dict)

    def since(self, node: str, index: int) -> float | None:
        """When the GPU was first seen idle, or None when it is not idle."""
        gpu = self.gpus.get((node, index))
        return gpu.since_s if gpu is not None else None

    def wasted_gpu_hours(self, job_id: str) -> float:
        return self.wasted_s.get(job_id, 0.0) / 3600.0


EMPTY_IDLE_STATE: Final = IdleState(taken_at_s=None)


def gpu_by_index(gpus: tuple[GpuSample, ...], index: int) -> GpuSample | None:
    """The sample of GPU ``index``: at position ``index`` on a complete node, searched for otherwise."""
    if 0 <= index < len(gpus):
        sample = gpus[index]
        if sample.index == index:
            return sample
    for sample in gpus:
        if sample.index == index:
            return sample
    return None


class IdleTracker:
    """Follows allocated GPUs from snapshot to snapshot; see the module notes for the rules."""

    def __init__(self, util_pct: float, minutes: float, *, max_step_s: float = DEFAULT_MAX_STEP_S) -> None:
        if minutes < 0 or max_step_s < 0:
            raise ValueError("minutes and max_step_s must not be negative")
        self.util_pct = float(util_pct)
        self.exit_pct = self.util_pct + IDLE_HYSTERESIS_PCT
        self.flag_after_s = float(minutes) * 60.0
        self.max_step_s = float(max_step_s)
        self.state: IdleState = EMPTY_IDLE_STATE
        self._snapshot: ClusterSnapshot | None = None

    def update(self, snapshot: ClusterSnapshot) -> IdleState:
        return run_to_end(self.update_steps(snapshot))

    def update_steps(
        self, snapshot: ClusterSnapshot, jobs_per_slice: int = JOBS_PER_SLICE
    ) -> Generator[None, None, IdleState]:
        """`update`, yielding after every ``jobs_per_slice`` jobs (the jobs of 10,000 nodes take some 40 ms).
        The state changes only when the last slice is done."""
        if snapshot is self._snapshot:
            return self.state
        now = snapshot.taken_at_s
        previous = self.state
        step = 0.0
        if previous.taken_at_s is not None:
            step = min(max(0.0, now - previous.taken_at_s), self.max_step_s)
        slurm = snapshot.slurm
        if slurm is None:
            state = IdleState(taken_at_s=now)
            self.state, self._snapshot = state, snapshot
            return state

        old_gpus = previous.gpus
        old_wasted = previous.wasted_s
        by_name = snapshot.by_name
        enter, leave = self.util_pct, self.exit_pct
        ok = Reachability.OK
        gpus: dict[GpuKey, IdleGpu] = {}
        wasted: dict[str, float] = {}
        util_by_job: dict[str, float] = {}
        for count, job in enumerate(slurm.jobs, 1):
            if not count % jobs_per_slice:
                yield
            state_word = job.state
            job_id = job.job_id
            if state_word != "RUNNING" or not job.gpus_by_node:
                if old_wasted and state_word not in ENDED_JOB_STATES:
                    carried = old_wasted.get(job_id)
                    if carried is not None:
                        wasted[job_id] = carried
                continue
            job_wasted = old_wasted.get(job_id, 0.0) if old_wasted else 0.0
            util_sum = 0.0
            util_count = 0
            for node_name, indices in job.gpus_by_node.items():
                node = by_name.get(node_name)
                if node is None or node.reachability is not ok:
                    continue
                samples = node.gpus
                count = len(samples)
                for index in indices:
                    # gpu_by_index's usual case inline: every allocated GPU of the cluster, every tick
                    sample = samples[index] if index < count else None
                    if sample is None or sample.index != index:
                        sample = gpu_by_index(samples, index)
                        if sample is None:
                            continue
                    util = sample.util_pct
                    if util is None:
                        continue
                    util_sum += util
                    util_count += 1
                    if util > leave:
                        continue  # busy: neither idle still nor idle anew (most GPUs, every tick)
                    key = (node_name, index)
                    if key in gpus:  # a GPU two jobs claim (shards, or a glitch): the first one keeps it
                        continue
                    old = old_gpus.get(key)
                    if old is not None and old.job_id == job_id:
                        if util <= leave:
                            idle_s = old.idle_s + step
                            gpus[key] = IdleGpu(node_name, index, job_id, job.user, old.since_s, idle_s)
                            job_wasted += step
                    elif util < enter:
                        gpus[key] = IdleGpu(node_name, index, job_id, job.user, now, 0.0)
            if job_wasted:
                wasted[job_id] = job_wasted
            if util_count:
                util_by_job[job_id] = util_sum / util_count

        flag_after = self.flag_after_s
        flagged_keys: list[GpuKey] = []
        by_job: dict[str, int] = {}
        by_node: dict[str, list[IdleGpu]] = {}
        for key, gpu in gpus.items():
            if gpu.idle_s >= flag_after:
                flagged_keys.append(key)
                by_job[gpu.job_id] = by_job.get(gpu.job_id, 0) + 1
                by_node.setdefault(gpu.node, []).append(gpu)
        state = IdleState(
            taken_at_s=now,
            gpus=gpus,
            flagged=frozenset(flagged_keys),
            wasted_s=wasted,
            flagged_by_job=by_job,
            flagged_by_node={name: tuple(sorted(found, key=_by_index)) for name, found in by_node.items()},
            util_by_job=util_by_job,
        )
        self.state, self._snapshot = state, snapshot
        return state


def _by_index(gpu: IdleGpu) -> int:
    return gpu.index
