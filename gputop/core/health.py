"""What is wrong with a node, in words: one Problem per finding, worst first.

Rules read one node's sample and Slurm's view of it; thresholds come from the config. Pure: the caller
passes the time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gputop.core.config import Thresholds
from gputop.core.idle import IdleGpu
from gputop.core.interconnect_deviations import Deviation
from gputop.core.models import NodeSample, Reachability, Severity, SlurmNode

# Xid codes that point at the hardware or the driver rather than at the user's program.
# Meanings follow NVIDIA's Xid catalogue.
HARDWARE_XIDS: dict[int, str] = {
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}
APPLICATION_XIDS: dict[int, str] = {
    13: "graphics engine exception (often an application fault)",
    31: "GPU memory page fault (often an application fault)",
    43: "GPU stopped processing (often an application fault)",
    45: "preemptive cleanup, due to previous errors",
}


# Words in a collection error that mean the GPU or its driver, not the network, is in trouble.
DRIVER_TROUBLE_WORDS = ("lost", "fallen off", "driver", "nvml", "not installed")


@dataclass(frozen=True, slots=True)
class Problem:
    severity: Severity
    node: str
    gpu_index: int | None
    kind: str  # stable key: "temp", "mem", "ecc", "xid", "down", ...
    message: str  # short, for a table cell: "GPU3 91 C"
    # what, within its node, kind and GPU, this problem is about, where there can be several: the Xid
    # code, the IB port, the job; with the others it names one alert that lasts while its words change
    subject: str = ""

    @property
    def sort_key(self) -> tuple[int, str, int]:
        return (-self.severity.rank, self.node, -1 if self.gpu_index is None else self.gpu_index)


def xid_meaning(code: int) -> tuple[Severity, str]:
    if code in HARDWARE_XIDS:
        return Severity.CRIT, HARDWARE_XIDS[code]
    if code in APPLICATION_XIDS:
        return Severity.WARN, APPLICATION_XIDS[code]
    return Severity.WARN, "see NVIDIA's Xid catalogue"


def assess_node(
    node: NodeSample,
    slurm: SlurmNode | None,
    thresholds: Thresholds,
    now_s: float,
    *,
    idle_gpus: Sequence[IdleGpu] = (),
    interconnect: Sequence[Deviation] = (),
) -> tuple[Problem, ...]:
    """Every problem on one node, worst first.

    ``interconnect``: how the node's links differ from its peers'
    (`gputop.core.interconnect_deviations.FleetInterconnect.of`); a port already reported down by its own
    state is not reported again as a deviation.

    ``idle_gpus``: the node's GPUs that a running job holds idle for longer than the configured minutes
    (`gputop.core.idle.IdleState.flagged_by_node`); each job holding some gets one WARN of kind "idle".
    """
    found: list[Problem] = []
    name = node.name

    def add(severity: Severity, gpu: int | None, kind: str, message: str, subject: str = "") -> None:
        found.append(Problem(severity, name, gpu, kind, message, subject))

    if node.reachability is not Reachability.OK:
        if node.error:
            reason = node.error
        elif node.sampled_at_s is not None:
            reason = f"no data for {format_age(now_s - node.sampled_at_s)}"
        else:
            reason = "no answer"
        severity = Severity.CRIT if node.reachability is Reachability.DOWN else Severity.WARN
        add(severity, None, node.reachability.value, f"{node.reachability.value}: {reason}")

    elif node.error:
        # Still answering (the last data is fresh) but something on the node is broken right now.
        hardware = any(word in node.error.lower() for word in DRIVER_TROUBLE_WORDS)
        add(Severity.CRIT if hardware else Severity.WARN, None, "collect", node.error)

    # A node that never answered has no GPUs to count: "down" already says it all.
    missing = node.missing_gpu_count if node.gpus else 0
    if missing:
        present = {g.index for g in node.gpus}
        absent = [i for i in range(node.expected_gpu_count or 0) if i not in present][:missing]
        which = ",".join(f"GPU{i}" for i in absent) if absent else f"{missing} GPU(s)"
        add(Severity.CRIT, absent[0] if len(absent) == 1 else None, "missing", f"{which} missing")

    for gpu in node.gpus:
        if gpu.temp_c is not None:
            if gpu.temp_c >= thresholds.temp_crit_c:
                add(Severity.CRIT, gpu.index, "temp", f"GPU{gpu.index} {gpu.temp_c:.0f} C")
            elif gpu.temp_c >= thresholds.temp_warn_c:
                add(Severity.WARN, gpu.index, "temp", f"GPU{gpu.index} {gpu.temp_c:.0f} C")
        mem_pct = gpu.mem_pct
        if mem_pct is not None and mem_pct >= thresholds.mem_warn_pct:
            add(Severity.WARN, gpu.index, "mem", f"GPU{gpu.index} memory {mem_pct:.0f}%")
        if gpu.ecc_uncorrected:
            add(Severity.CRIT, gpu.index, "ecc", f"GPU{gpu.index} {gpu.ecc_uncorrected} uncorrected ECC")
        if any("thermal" in reason or "hw_slowdown" in reason for reason in gpu.throttle_reasons):
            add(Severity.WARN, gpu.index, "throttle", f"GPU{gpu.index} throttled ({gpu.throttle_reasons[0]})")

    for event in node.xid_events:
        severity, meaning = xid_meaning(event.code)
        where = f"GPU{event.gpu_index} " if event.gpu_index is not None else ""
        add(severity, event.gpu_index, "xid", f"{where}Xid {event.code}: {meaning}", str(event.code))

    for port in node.ib_ports:
        if not port.is_up:
            add(Severity.CRIT, None, "ib", f"{port.label} {port.state}", port.label)

    if slurm is not None:
        if slurm.drained or slurm.draining:
            reason = f": {slurm.reason}" if slurm.reason else ""
            add(Severity.WARN, None, "slurm", f"{slurm.label}{reason}")
        elif "NOT_RESPONDING" in slurm.flags:
            add(Severity.CRIT, None, "slurm", f"Slurm: not responding ({slurm.label})")
        elif slurm.base_state.value == "down":
            reason = f": {slurm.reason}" if slurm.reason else ""
            add(Severity.CRIT, None, "slurm", f"Slurm: down{reason}")

    found.extend(idle_problems(name, idle_gpus))

    said = {p.message for p in found if p.kind == "ib"}
    for deviation in interconnect:
        if deviation.message not in said:
            add(deviation.severity, deviation.gpu_index, deviation.kind, deviation.message, deviation.message)

    found.sort(key=lambda p: p.sort_key)
    return tuple(found)


def idle_problems(node: str, idle_gpus: Sequence[IdleGpu]) -> tuple[Problem, ...]:
    """One WARN per job holding idle GPUs on ``node``, saying which GPUs, for how long, whose job:
    "GPU3 idle 12 min in job 4812035 (ana)", "GPU0-7 idle 3.0 h in job 4812035 (dmitri)".

    The duration is the shortest of the group (each has been idle at least that long), in whole minutes
    or tenths of an hour, so the text (and the node's row) changes at most once a minute."""
    if not idle_gpus:
        return ()
    by_job: dict[str, list[IdleGpu]] = {}
    for gpu in idle_gpus:
        by_job.setdefault(gpu.job_id, []).append(gpu)
    problems = []
    for job_id, gpus in by_job.items():
        indices = sorted({gpu.index for gpu in gpus})
        shortest = min(gpu.idle_s for gpu in gpus)
        message = f"GPU{_index_ranges(indices)} idle {format_idle(shortest)} in job {job_id} ({gpus[0].user})"
        gpu_index = indices[0] if len(indices) == 1 else None
        problems.append(Problem(Severity.WARN, node, gpu_index, "idle", message, job_id))
    return tuple(problems)


def format_idle(seconds: float) -> str:
    """How long a GPU has been idle, as a problem message says it: "12 min", "3.4 h"."""
    minutes = int(max(0.0, seconds) // 60)
    if minutes < 120:
        return f"{minutes} min"
    return f"{minutes / 60:.1f} h"


def _index_ranges(indices: Sequence[int]) -> str:
    """[0, 1, 2, 3, 5] -> "0-3,5"."""
    parts: list[str] = []
    start = prev = indices[0]
    for index in indices[1:]:
        if index == prev + 1:
            prev = index
            continue
        parts.append(f"{start}-{prev}" if prev > start else str(start))
        start = prev = index
    parts.append(f"{start}-{prev}" if prev > start else str(start))
    return ",".join(parts)


def format_age(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f}m"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.0f}h"
    return f"{seconds / 86400:.0f}d"
