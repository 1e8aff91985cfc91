"""The Slurm queue pane's rows: one per job, with what its GPUs do and what its idle GPUs have cost.

`job_rows` derives them once per tick from a snapshot and the `IdleTracker`'s state
(`gputop.core.idle`); a row whose job, figures and idle numbers did not change is the previous row
object, so the table repaints only what moved. `sort_job_rows` orders them for any column; the `/`
filter language lives in `gputop.core.job_filter` (`parse_job_filter`, re-exported here), the idle tracking
in `gputop.core.idle`.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Callable, Generator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gputop.core.idle import EMPTY_IDLE_STATE, IdleGpu, IdleState, IdleTracker, gpu_by_index
from gputop.core.job_filter import FilterError, JobFilter, parse_job_filter
from gputop.core.models import ClusterSnapshot, Reachability, SlurmJob
from gputop.core.nodeset import fold_nodes, natural_key
from gputop.core.slices import run_to_end

__all__ = [
    "DESCENDING_KEYS",
    "SORT_KEYS",
    "FilterError",
    "IdleGpu",
    "IdleState",
    "IdleTracker",
    "JobFilter",
    "JobRow",
    "job_id_key",
    "job_position_key",
    "job_rows",
    "parse_job_filter",
    "sort_job_rows",
    "sort_value",
]

JobIdKey = tuple[int, int, int, str]

_NOT_NUMERIC: Final = 1 << 62  # ids that are not numbers sort after every numeric one
_JOB_ID = re.compile(r"(\d+)(?:([_+])(?:(\d+)|\[(\d*)))?")


def job_id_key(job_id: str) -> JobIdKey:
    """Numeric-aware order of Slurm job ids: 99 < 123 < 123_4 < 123_10 < 123_[11-20] < 124.

    Array tasks ("123_4") and heterogeneous components ("123+1") follow their job; a pending array's
    remaining tasks ("123_[11-20]") follow its tasks; ids that are not numbers come last."""
    match = _JOB_ID.match(job_id)
    if match is None:
        return (_NOT_NUMERIC, 0, 0, job_id)
    base = int(match[1])
    if match[2] is None:
        return (base, 0, 0, job_id)
    if match[3] is not None:
        return (base, 1, int(match[3]), job_id)
    return (base, 2, int(match[4] or 0), job_id)


@dataclass(frozen=True, slots=True)
class JobRow:
    job: SlurmJob
    gpus: int  # GPUs whose indices are known, else what the job asked for (0: none, or not said)
    util_mean_pct: float | None  # mean over its GPUs that report utilization on answering nodes
    idle_gpus: int  # its GPUs flagged idle (held idle for the configured minutes)
    wasted_gpu_hours: float  # idle GPU-hours while held, over the job's life as far as gputop saw it
    elapsed_s: float | None  # run time as of the snapshot; None while pending (unless Slurm says)
    time_limit_s: float | None  # None: UNLIMITED or not given
    nodes_text: str  # "gpu[001-004]"; "" before the job has nodes
    # derived once per job for filtering and sorting, carried over while the job does not change
    node_names: frozenset[str] = field(compare=False, repr=False)
    id_key: JobIdKey = field(compare=False, repr=False)
    search_text: str = field(compare=False, repr=False)  # id, name, user, partition, reason; lower case

    @property
    def job_id(self) -> str:
        return self.job.job_id

    @property
    def user(self) -> str:
        return self.job.user

    @property
    def partition(self) -> str:
        return self.job.partition

    @property
    def state(self) -> str:
        return self.job.state

    @property
    def reason(self) -> str:
        return self.job.pending_reason or ""


def _nodes_text(job: SlurmJob, names: Iterable[str]) -> str:
    if job.nodelist:
        return job.nodelist
    listed = list(names)
    if len(listed) <= 1:
        return listed[0] if listed else ""
    try:
        return fold_nodes(listed)
    except ValueError:  # a name that is not a host name: show it as Slurm gave it
        return ",".join(listed)


def _search_text(job: SlurmJob) -> str:
    return " ".join((job.job_id, job.name, job.user, job.partition, job.pending_reason or "")).lower()


JOBS_PER_SLICE = 1000  # a few milliseconds: the view stage yields between slices


def job_rows(
    snapshot: ClusterSnapshot,
    idle: IdleState | None = None,
    previous: Mapping[str, JobRow] | None = None,
) -> dict[str, JobRow]:
    """A row per job in the snapshot's Slurm listing (in its order), keyed by job id; the previous row
    object where the job (the same object, or an equal one after Slurm was read again), its GPUs'
    mean utilization, its elapsed time and its idle figures are unchanged. No Slurm: no rows.

    A running job's elapsed time moves with the snapshot's time, so its row is new every tick; a pending
    job's row stays the same object until Slurm changes it."""
    return run_to_end(job_rows_steps(snapshot, idle, previous))


def job_rows_steps(
    snapshot: ClusterSnapshot,
    idle: IdleState | None = None,
    previous: Mapping[str, JobRow] | None = None,
    jobs_per_slice: int = JOBS_PER_SLICE,
) -> Generator[None, None, dict[str, JobRow]]:
    """`job_rows`, yielding after each ``jobs_per_slice`` jobs (a 10,000-node queue took some 60 ms)."""
    slurm = snapshot.slurm
    if slurm is None:
        return {}
    state = idle if idle is not None else EMPTY_IDLE_STATE
    flagged_by_job = state.flagged_by_job
    # the idle tracker has read every held GPU's utilization of this snapshot already
    util_by_job = state.util_by_job if idle is not None and idle.taken_at_s == snapshot.taken_at_s else None
    wasted_s = state.wasted_s
    old_rows: Mapping[str, JobRow] = previous if previous is not None else {}
    by_name = snapshot.by_name
    now = snapshot.taken_at_s
    slurm_age = max(0.0, now - slurm.sampled_at_s) if slurm.sampled_at_s is not None else 0.0
    ok = Reachability.OK
    rows: dict[str, JobRow] = {}
    for count, job in enumerate(slurm.jobs, 1):
        if count % jobs_per_slice == 0:
            yield
        job_id = job.job_id
        old = old_rows.get(job_id)
        same = old is not None and (old.job is job or old.job == job)
        held = job.gpus_by_node
        util: float | None = None
        elapsed = job.elapsed_s
        if job.state == "RUNNING":
            if util_by_job is not None:
                util = util_by_job.get(job_id)
            elif held:
                total = 0.0
                count = 0
                for node_name, indices in held.items():
                    node = by_name.get(node_name)
                    if node is None or node.reachability is not ok:
                        continue
                    for index in indices:
                        sample = gpu_by_index(node.gpus, index)
                        if sample is not None and sample.util_pct is not None:
                            total += sample.util_pct
                            count += 1
                if count:
                    util = total / count
            if job.start_time_s is not None:
                elapsed = max(0.0, now - job.start_time_s)
            elif elapsed is not None:
                elapsed += slurm_age
        flagged = flagged_by_job.get(job_id, 0)
        wasted_h = wasted_s.get(job_id, 0.0) / 3600.0
        if old is not None and same:
            if (
                old.util_mean_pct == util
                and old.elapsed_s == elapsed
                and old.idle_gpus == flagged
                and old.wasted_gpu_hours == wasted_h
            ):
                rows[job_id] = old
                continue
            nodes_text, node_names, id_key, search_text = (
                old.nodes_text,
                old.node_names,
                old.id_key,
                old.search_text,
            )
        else:
            names = job.nodes or tuple(held)
            nodes_text = _nodes_text(job, names)
            node_names = frozenset(job.nodes).union(held)
            id_key = job_id_key(job_id)
            search_text = _search_text(job)
        gpus = (sum(map(len, held.values())) if held else 0) or job.gpus_requested or 0
        rows[job_id] = JobRow(
            job,
            gpus,
            util,
            flagged,
            wasted_h,
            elapsed,
            job.time_limit_s,
            nodes_text,
            node_names,
            id_key,
            search_text,
        )
    return rows


# --- sorting ----------------------------------------------------------------------------------------------

_Getter = Callable[[JobRow], Any]

_SORT_VALUES: Final[Mapping[str, _Getter]] = {
    "user": lambda r: r.job.user.casefold(),
    "partition": lambda r: r.job.partition.casefold(),
    "state": lambda r: r.job.state,
    "gpus": lambda r: r.gpus,
    "elapsed": lambda r: r.elapsed_s,
    "util": lambda r: r.util_mean_pct,
    "wasted": lambda r: r.wasted_gpu_hours,
    "reason": lambda r: r.job.pending_reason.casefold() if r.job.pending_reason else None,
    # by the first node: "gpu[001-002]" between gpu001 and gpu002
    "nodes": lambda r: natural_key(r.nodes_text.replace("[", "")) if r.nodes_text else None,
}
SORT_KEYS: Final = ("id", *_SORT_VALUES)
# Keys whose first order is largest first: the most wasted, the biggest, the longest running.
DESCENDING_KEYS: Final = frozenset({"wasted", "gpus", "elapsed"})


_ID_ORDER: Final = operator.attrgetter("id_key")
_FIRST: Final = operator.itemgetter(0)


def sort_value(row: JobRow, key: str) -> Any:
    """What ``row`` is sorted by for ``key`` (None: no value): two rows with the same sort place equal."""
    if key == "id":
        return row.id_key
    getter = _SORT_VALUES.get(key)
    if getter is None:
        raise ValueError(f"unknown sort key {key!r} (known: {', '.join(SORT_KEYS)})")
    return getter(row)


def job_position_key(key: str, descending: bool) -> Callable[[JobRow], Any]:
    """A sort key that puts a row where `sort_job_rows` would, for inserting one row into an ordered list
    with bisect (a table that adds the jobs new since the last tick instead of sorting 20,000 again).
    ``descending``: largest first (for "id", the ids reversed); rows without a value last either way,
    ties in job id order."""
    getter = None if key == "id" else _SORT_VALUES.get(key)
    if key != "id" and getter is None:
        raise ValueError(f"unknown sort key {key!r} (known: {', '.join(SORT_KEYS)})")
    sign = -1 if descending else 1

    def by_id(a: JobRow, b: JobRow) -> int:
        return (a.id_key > b.id_key) - (a.id_key < b.id_key)

    def compare(a: JobRow, b: JobRow) -> int:
        if getter is None:
            return sign * by_id(a, b)
        va, vb = getter(a), getter(b)
        if va is None or vb is None:
            return by_id(a, b) if va is None and vb is None else (1 if va is None else -1)
        if va != vb:
            return sign * (1 if va > vb else -1)
        return by_id(a, b)

    return functools.cmp_to_key(compare)


def sort_job_rows(
    rows: Mapping[str, JobRow] | Iterable[JobRow], key: str = "id", reverse: bool = False
) -> list[str]:
    """Job ids ordered by ``key`` (one of SORT_KEYS): ascending, except DESCENDING_KEYS, which start with
    the largest; ``reverse`` turns that order around. Rows without a value (a pending job's utilization,
    a running job's reason) come last either way, and ties are in job id order."""
    values = rows.values() if isinstance(rows, Mapping) else rows
    by_id = sorted(values, key=_ID_ORDER)
    if key == "id":
        ids = [row.job.job_id for row in by_id]
        if reverse:
            ids.reverse()
        return ids
    getter = _SORT_VALUES.get(key)
    if getter is None:
        raise ValueError(f"unknown sort key {key!r} (known: {', '.join(SORT_KEYS)})")
    keyed = [(getter(row), row) for row in by_id]
    present = [pair for pair in keyed if pair[0] is not None]
    present.sort(key=_FIRST, reverse=(key in DESCENDING_KEYS) != reverse)  # stable: ties stay in id order
    ordered = [row.job.job_id for _, row in present]
    if len(present) < len(keyed):
        ordered.extend(row.job.job_id for value, row in keyed if value is None)
    return ordered
