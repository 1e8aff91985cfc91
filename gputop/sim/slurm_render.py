"""The simulated cluster's Slurm state as gputop's models: nodes with their flags and reasons, running
and pending jobs, rebuilt only where something changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from gputop.core.models import (
    SlurmBaseState,
    SlurmJob,
    SlurmNode,
    SlurmState,
)
from gputop.sim.workload import PARTITIONS, SimJob

if TYPE_CHECKING:
    from gputop.sim.simulator import SimulatedCluster


DRAIN_FLAGS: Final = frozenset({"DRAIN"})

NOT_RESPONDING_FLAGS: Final = frozenset({"NOT_RESPONDING"})

DRAIN_NOT_RESPONDING_FLAGS: Final = DRAIN_FLAGS | NOT_RESPONDING_FLAGS


def slurm_state(sim: SimulatedCluster, t: float) -> SlurmState:
    if sim._dirty_nodes:
        nodes = dict(sim._slurm_nodes)
        for i in sorted(sim._dirty_nodes):
            name = sim.node_names[i]
            nodes[name] = slurm_node(sim, i, t)
        sim._slurm_nodes = nodes
        sim._dirty_nodes.clear()
    if sim._jobs_changed:
        running = sorted(sim._running.values(), key=lambda job: int(job.job_id))
        sim._slurm_jobs = tuple(slurm_job(sim, job) for job in running + sim._pending)
        sim._jobs_changed = False
    return SlurmState(nodes=sim._slurm_nodes, jobs=sim._slurm_jobs, sampled_at_s=t)


def slurm_node(sim: SimulatedCluster, i: int, t: float) -> SlurmNode:
    alloc = sim._node_alloc[i]
    if alloc == 0:
        base = SlurmBaseState.IDLE
    elif alloc >= sim.gpus_per_node:
        base = SlurmBaseState.ALLOCATED
    else:
        base = SlurmBaseState.MIXED
    part = (PARTITIONS[sim._node_part[i]],)
    flags: frozenset[str] = frozenset()
    if i in sim._drain:
        flags = DRAIN_FLAGS if i != sim._unresponsive else DRAIN_NOT_RESPONDING_FLAGS
    elif i == sim._unresponsive:
        flags = NOT_RESPONDING_FLAGS
    reason = sim._reasons.get(i)
    if reason is None:
        return SlurmNode(sim.node_names[i], base, flags, partitions=part)
    text, user, when = reason
    return SlurmNode(sim.node_names[i], base, flags, text, user, when, part)


def slurm_job(sim: SimulatedCluster, job: SimJob) -> SlurmJob:
    if job.slurm is None:
        names = sim.node_names
        job.slurm = SlurmJob(
            job_id=job.job_id,
            name=job.name,
            user=job.user,
            partition=PARTITIONS[job.partition],
            state="PENDING" if job.start_s is None else "RUNNING",
            gpus_by_node={names[i]: idxs for i, idxs in sorted(job.gpus.items())},
            start_time_s=job.start_s,
            time_limit_s=job.limit_s,
            pending_reason=job.reason if job.start_s is None else None,
            gpus_requested=job.gpu_count,  # as squeue's TRES request tells it, pending jobs too
        )
    return job.slurm
