"""Whether a node's GPUs may be repartitioned (or have their MIG mode changed) now, and if not, what to do.

Pure: fed the node's last sample and Slurm's view. Each failure carries a kind, so the dialog can offer the
fix (drain the node), and a message that says what to do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gputop.core.models import NodeSample, Reachability, SlurmState

PreconditionKind = Literal[
    "node_unreachable",
    "gpu_missing",
    "mig_disabled",
    "mig_unknown",
    "gpu_busy",
    "slurm_unknown",
    "not_drained",
    "draining",
]


@dataclass(frozen=True, slots=True)
class PreconditionFailure:
    kind: PreconditionKind  # for the UI to offer the fix ("not_drained": offer to drain)
    node: str
    gpu_index: int | None  # None: about the whole node
    message: str  # what to do


def check_preconditions(
    node: NodeSample, gpu_indices: Sequence[int], slurm: SlurmState | None, *, need_mig: bool = True
) -> tuple[PreconditionFailure, ...]:
    """What stands between ``node``'s GPUs and a MIG change: nothing may run there and nothing may start.

    ``slurm`` None: the cluster has no Slurm. A node Slurm does not list is not Slurm's to schedule.
    ``need_mig`` False for turning MIG mode itself on or off.
    """
    failures: list[PreconditionFailure] = []

    def fail(kind: PreconditionKind, gpu_index: int | None, message: str) -> None:
        failures.append(PreconditionFailure(kind, node.name, gpu_index, message))

    if node.reachability is not Reachability.OK:
        fail(
            "node_unreachable",
            None,
            f"gputop has no fresh sample of {node.name} ({node.reachability.value}); wait until it answers",
        )
    by_index = {gpu.index: gpu for gpu in node.gpus}
    for index in gpu_indices:
        gpu = by_index.get(index)
        if gpu is None:
            fail("gpu_missing", index, f"{node.name} has no GPU {index} in its last sample")
            continue
        if need_mig and gpu.mig_enabled is False:
            fail("mig_disabled", index, f"MIG mode is off on GPU {index} of {node.name}: turn it on first")
        elif need_mig and gpu.mig_enabled is None:
            fail(
                "mig_unknown",
                index,
                f"the MIG mode of GPU {index} on {node.name} is not known yet; wait a tick",
            )
        if gpu.processes:
            shown = ", ".join(f"{p.name} (pid {p.pid})" for p in gpu.processes[:3])
            more = f" and {len(gpu.processes) - 3} more" if len(gpu.processes) > 3 else ""
            noun = "process" if len(gpu.processes) == 1 else "processes"
            fail(
                "gpu_busy",
                index,
                f"GPU {index} of {node.name} runs {len(gpu.processes)} {noun}: {shown}{more}; end them first",
            )
    failures.extend(_slurm_failures(node.name, slurm))
    return tuple(failures)


def _slurm_failures(name: str, slurm: SlurmState | None) -> list[PreconditionFailure]:
    if slurm is None:
        return []
    state = slurm.nodes.get(name)
    if state is None:
        if slurm.error:
            why = f"Slurm could not be read ({slurm.error}), so whether {name} is drained is unknown"
            return [PreconditionFailure("slurm_unknown", name, None, why)]
        return []
    if state.drained:
        return []
    running = [
        j.job_id for j in slurm.jobs if j.state == "RUNNING" and name in (j.nodes or tuple(j.gpus_by_node))
    ]
    if state.draining:
        until = (
            f"{_jobs(running)} {'ends' if len(running) == 1 else 'end'}"
            if running
            else "Slurm shows it drained"
        )
        return [PreconditionFailure("draining", name, None, f"{name} is still draining: wait until {until}")]
    why = f"it runs {_jobs(running)}" if running else "Slurm may start jobs on it"
    return [PreconditionFailure("not_drained", name, None, f"drain {name} first: {why}")]


def _jobs(job_ids: Sequence[str]) -> str:
    shown = ", ".join(job_ids[:5]) + (f" and {len(job_ids) - 5} more" if len(job_ids) > 5 else "")
    return f"job {shown}" if len(job_ids) == 1 else f"jobs {shown}"
