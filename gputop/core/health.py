"""What is wrong with a node, in words: one Problem per finding, worst first.

Rules read one node's sample and Slurm's view of it; thresholds come from the config. Pure: the caller
passes the time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from gputop.core.config import Thresholds
from gputop.core.counter_rates import GpuRates
from gputop.core.counter_rules import counter_problems
from gputop.core.event_history import REDRAIN_WINDOW_S, NodeMemory, cause_words
from gputop.core.gpu_rules import gpu_problems
from gputop.core.health_tracker import GpuFlag, instant_flags
from gputop.core.ib_flaps import PortFlaps
from gputop.core.identity_memo import IdentityMemo
from gputop.core.idle import IdleGpu
from gputop.core.interconnect_deviations import PORT_ASPECTS, Aspect, Deviation
from gputop.core.models import IbPort, NodeSample, Reachability, Severity, SlurmNode
from gputop.core.problem import Problem
from gputop.core.xid_rules import xid_problems

__all__ = [
    "DRIVER_TROUBLE_WORDS",
    "Problem",
    "assess_node",
    "format_age",
    "format_idle",
    "idle_problems",
]

# Words in a collection error that mean the GPU or its driver, not the network, is in trouble.
DRIVER_TROUBLE_WORDS = ("lost", "fallen off", "driver", "nvml", "not installed")


def assess_node(
    node: NodeSample,
    slurm: SlurmNode | None,
    thresholds: Thresholds,
    now_s: float,
    *,
    idle_gpus: Sequence[IdleGpu] = (),
    interconnect: Sequence[Deviation] = (),
    flags: tuple[GpuFlag, ...] | None = None,
    job_of: Callable[[int], str | None] | None = None,
    ib_flaps: Mapping[str, PortFlaps] | None = None,
    rates: Mapping[int, GpuRates] | None = None,
    memory: NodeMemory | None = None,
) -> tuple[Problem, ...]:
    """Every problem on one node, worst first.

    ``flags``: the node's temperature, memory and PCIe generation flags from the poller's
    `gputop.core.health_tracker.HealthTracker` (sustained, with hysteresis); None reads every threshold
    at once, as a tracker with no past would.

    ``interconnect``: how the node's links differ from its peers'
    (`gputop.core.interconnect_deviations.FleetInterconnect.of`); a port already reported down by its own
    state is not reported again as a deviation.

    ``idle_gpus``: the node's GPUs that a running job holds idle for longer than the configured minutes
    (`gputop.core.idle.IdleState.flagged_by_node`); each job holding some gets one WARN of kind "idle".

    ``job_of``: the Slurm job id holding a GPU of this node, which an Xid's action for the job names.

    ``ib_flaps``: the node's IB ports that went down and came back (`gputop.core.ib_flaps`), by label.

    ``rates``: the node's GPU counter rates (`gputop.core.counter_rates`), by GPU index.

    ``memory``: what gputop remembers of the node from before (`gputop.core.event_history`): Xid events
    out of the kernel log's window, and the causes it drained the node for more than once this week.
    """
    found: list[Problem] = []
    name = node.name

    def add(
        severity: Severity,
        gpu: int | None,
        kind: str,
        message: str,
        subject: str = "",
        since_s: float | None = None,
        action: str = "",
        action_class: str = "",
    ) -> None:
        found.append(Problem(severity, name, gpu, kind, message, subject, since_s, action, action_class))

    if node.reachability is not Reachability.OK:
        if node.error:
            reason = node.error
        elif node.sampled_at_s is not None:
            reason = f"no data for {format_age(now_s - node.sampled_at_s)}"
        else:
            reason = "no answer"
        severity = Severity.CRIT if node.reachability is Reachability.DOWN else Severity.WARN
        add(
            severity,
            None,
            node.reachability.value,
            f"{node.reachability.value}: {reason}",
            "",
            node.sampled_at_s,
        )

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
        # a GPU gone from the bus: a reset cannot reach it, the node needs a reboot
        action = f"drain {name}, then reboot {name}"
        at = absent[0] if len(absent) == 1 else None
        add(Severity.CRIT, at, "missing", f"{which} missing", "", None, action, "reboot")

    # GPUs whose NVLink count a comparison with the peers already names: the node's own rule keeps quiet
    nvlink_said = {
        d.gpu_index for d in interconnect if d.gpu_index is not None and d.aspect is Aspect.NVLINKS_ACTIVE
    }
    gpu_problems(node, instant_flags(node.gpus, thresholds) if flags is None else flags, add, nvlink_said)

    if rates or node.facts.counters.value is not None:
        counter_problems(node, rates, thresholds, add)

    if node.xid_events:
        past = memory.past_xids if memory is not None else ()
        xid_problems(node.xid_events, name, thresholds, now_s, add, job_of, past)
    # drained again for a cause it was drained for before: while it is drained, it needs a person's look
    if memory is not None and memory.redrains and slurm is not None and "DRAIN" in slurm.flags:
        for cause, count in memory.redrains:
            message = f"drained {count}x for {cause_words(cause)} within {REDRAIN_WINDOW_S / 86400:.0f} days"
            action = (
                f"inspect {name} before it runs jobs again (dcgmi diag -r 3, the kernel log, the "
                "hardware): the same cause came back after a drain"
            )
            add(Severity.CRIT, None, "redrain", message, cause, None, action, "inspect")

    _port_problems(node, thresholds, now_s, ib_flaps or {}, add)
    ib_failures = node.ib_failures
    if ib_failures:  # rare: the usual node pays one test
        for failure in ib_failures:
            # an adapter ibstat cannot read is no healthy adapter, whatever the others say
            if failure.adapter is not None:
                add(
                    Severity.CRIT,
                    None,
                    "ib",
                    f"{failure.adapter} unreadable: {failure.reason}",
                    failure.adapter,
                )
            else:  # ibstat failed after listing adapters without naming one: the listing may lack some
                add(Severity.WARN, None, "ib", f"ibstat failed: {failure.reason}", "ibstat")

    if slurm is not None:
        if slurm.drained or slurm.draining:
            reason = f": {slurm.reason}" if slurm.reason else ""
            add(Severity.WARN, None, "slurm", f"{slurm.label}{reason}", "", slurm.reason_time_s)
        elif "NOT_RESPONDING" in slurm.flags:
            add(Severity.CRIT, None, "slurm", f"Slurm: not responding ({slurm.label})")
        elif slurm.base_state.value == "down":
            reason = f": {slurm.reason}" if slurm.reason else ""
            add(Severity.CRIT, None, "slurm", f"Slurm: down{reason}")

    found.extend(idle_problems(name, idle_gpus))

    for deviation in interconnect:
        if deviation.aspect in PORT_ASPECTS and _said_by_the_node(deviation, node):
            continue
        add(deviation.severity, deviation.gpu_index, deviation.kind, deviation.message, deviation.message)

    found.sort(key=lambda p: p.sort_key)
    return tuple(found)


# The SSH source hands over the same ports tuple at every tick until ibstat prints something else.
_ports_down: IdentityMemo[tuple[IbPort, ...], tuple[IbPort, ...]] = IdentityMemo(
    lambda ports: tuple(port for port in ports if not port.is_up)
)


def _port_problems(
    node: NodeSample,
    thresholds: Thresholds,
    now_s: float,
    flaps: Mapping[str, PortFlaps],
    add: Callable[..., None],
) -> None:
    """A port down is CRIT, unless it has been flapping and went down within the grace: then the
    flapping is the problem (WARN). A port up that flapped in the window is flapping too."""
    window = f"{thresholds.ib_flap_window_min:g} min"
    down = _ports_down(node.ib_ports)
    for port in down:
        flap = flaps.get(port.label)
        since = flap.down_since_s if flap is not None else None
        if flap is not None and since is not None and now_s - since <= thresholds.ib_flap_grace_s:
            message = f"{port.label} {port.state}, flapping: back {flap.count}x in {window}"
            add(Severity.WARN, None, "ib", message, port.label, since, _FLAP_ACTION.format(node=node.name))
        else:
            add(Severity.CRIT, None, "ib", f"{port.label} {port.state}", port.label)
    if flaps:
        down_labels = {port.label for port in down}
        for label, flap in sorted(flaps.items()):
            if label not in down_labels:
                message = f"{label} flapping: down and back {flap.count}x in {window}"
                add(Severity.WARN, None, "ib", message, label, None, _FLAP_ACTION.format(node=node.name))


_FLAP_ACTION = "check the cable, the transceiver and the switch port; drain {node} if it keeps dropping"


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


def _said_by_the_node(deviation: Deviation, node: NodeSample) -> bool:
    """Whether the node's own IB rules already name the port of a comparison with the peers: a port down
    (its own rule says so), or one of an adapter ibstat could not read (said once, as unreadable)."""
    if deviation.aspect is Aspect.PORT_STATE and any(
        port.ca_name == deviation.device and port.port == deviation.port
        for port in _ports_down(node.ib_ports)
    ):
        return True
    failures = node.ib_failures
    return bool(failures) and any(f.adapter == deviation.device for f in failures)
