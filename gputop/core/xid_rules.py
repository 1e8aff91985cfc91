"""A node's Xid events as problems: one per GPU and code, with the catalogue's verdict
(gputop.core.xid_codes), changed by how the events repeat.

- The same Xid on the same GPU `Thresholds.xid_repeat_count` times within `xid_repeat_window_min` makes
  the GPU a hardware suspect: CRIT, "run dcgmi diag -r 3 on it, then RMA it if it fails", whatever one
  event alone would say (an informational one included).
- The same job-class Xid (the catalogue's RESTART_APP) on two or more GPUs of one Slurm job points at the
  job, not the GPUs: one WARN for the job instead of one per GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gputop.core.config import Thresholds
from gputop.core.models import Severity, XidEvent
from gputop.core.xid_codes import XidVerdict, xid_verdict

JOB_BUCKET = "RESTART_APP"


# health.assess_node's add: (severity, gpu, kind, message, subject, since_s, action)
AddProblem = Callable[..., None]


def xid_problems(
    events: Sequence[XidEvent],
    node: str,
    thresholds: Thresholds,
    now_s: float,
    add: AddProblem,
    job_of: Callable[[int], str | None] | None = None,
    past: Sequence[XidEvent] = (),
) -> None:
    """Adds the problems of a node's Xid events through ``add``. ``job_of``: the Slurm job holding a GPU.
    ``past``: events seen before that the kernel log no longer lists (gputop.core.event_history): they
    count towards a repeat of an event listed now, and raise nothing alone."""
    groups: dict[tuple[int | None, int], list[XidEvent]] = {}
    for event in events:
        groups.setdefault((event.gpu_index, event.code), []).append(event)
    earlier: dict[tuple[int | None, int], list[XidEvent]] = {}
    for event in past:
        earlier.setdefault((event.gpu_index, event.code), []).append(event)
    window_s = thresholds.xid_repeat_window_min * 60.0
    # a job-class Xid's problem, held back until it is known whether other GPUs of the job had it too
    by_job: dict[tuple[str, int], list[tuple[int, XidVerdict, XidEvent, str]]] = {}
    for (index, code), found in groups.items():
        latest = max(found, key=lambda e: e.time_s)
        job = job_of(index) if job_of is not None and index is not None else None
        verdict = xid_verdict(code, latest.message, node=node, gpu=index, job=job)
        where = f"GPU{index} " if index is not None else ""
        recent = [e for e in (*earlier.get((index, code), ()), *found) if e.time_s >= now_s - window_s]
        if index is not None and len(recent) >= thresholds.xid_repeat_count:
            minutes = f"{thresholds.xid_repeat_window_min:g} min"
            message = f"{where}Xid {code} x{len(recent)} in {minutes}: {verdict.meaning}"
            action = (
                f"hardware suspect: drain {node}, run dcgmi diag -r 3 on GPU{index}, then RMA it if it fails"
            )
            since_s = min(e.time_s for e in recent)
            add(Severity.CRIT, index, "xid", message, str(code), since_s, action, "support")
            continue
        if verdict.severity is None:
            continue  # informational: the event is listed with the node, and raises no problem
        times = f" x{len(found)}" if len(found) > 1 else ""
        message = f"{where}Xid {code}{times}: {verdict.meaning}"
        if job is not None and index is not None and verdict.bucket == JOB_BUCKET:
            by_job.setdefault((job, code), []).append((index, verdict, latest, message))
            continue
        add(
            verdict.severity,
            index,
            "xid",
            message,
            str(code),
            latest.time_s,
            verdict.action,
            verdict.action_class,
        )
    for (job, code), hits in by_job.items():
        if len(hits) == 1:  # one GPU of the job: the GPU's problem, as held back
            index, verdict, latest, message = hits[0]
            add(verdict.severity, index, "xid", message, str(code), latest.time_s, verdict.action, "job")
            continue
        gpus = ",".join(f"GPU{hit[0]}" for hit in sorted(hits, key=lambda hit: hit[0]))
        meaning = hits[0][1].meaning
        message = f"Xid {code} on {gpus} of job {job}: {meaning}"
        action = f"the job, not the GPUs: restart job {job} and look at the application"
        since = min(hit[2].time_s for hit in hits)
        add(Severity.WARN, None, "xid", message, f"{code}:{job}", since, action, "job")
