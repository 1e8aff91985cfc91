"""Slurm queue benchmark: idle tracking, job rows, the queue filter and sort on a large queue.

    python bench/bench_jobs.py [--nodes 1000] [--running 2000] [--pending 18000] [--runs 15]

A synthetic cluster (no simulator, so only the code under test is timed): 1,000 nodes x 8 GPUs, 2,000
running jobs holding every GPU (a tenth of them idle), 18,000 pending jobs (some arrays). Each tick brings
new GPU samples and the same Slurm job objects, as between two Slurm reads; "after a Slurm re-read" gives
every job as a new but equal object, as after squeue/scontrol is read again. Every figure is the median
(and the slowest) of ``--runs`` runs from this one process; the filter and sort path is what a key press in
the queue pane pays and has the 16 ms target (one frame at 60 Hz).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report import Row, cpu_model, print_table

from gputop.core.idle import IdleState, IdleTracker
from gputop.core.job_filter import parse_job_filter
from gputop.core.jobs import JobRow, job_rows, sort_job_rows
from gputop.core.models import (
    ClusterSnapshot,
    GpuSample,
    NodeSample,
    Reachability,
    SlurmJob,
    SlurmState,
)

GPUS_PER_NODE = 8
FRAME_MS = 16.0
START_S = 1_800_000_000.0
USERS = tuple(f"user{i:02d}" for i in range(50))
PARTITIONS = ("train", "infer", "debug")
REASONS = ("Priority", "Resources", "QOSMaxGpuPerUserLimit", "Dependency", "ReqNodeNotAvail")
FILTERS = (
    "",
    "state=pending user=user07",
    "idle",
    "gpus>4 util<5",
    "node=gpu[0001-0100]",
    "llama !user=user01",
)
SORT_KEYS_TIMED = ("id", "user", "state", "gpus", "elapsed", "util", "wasted", "reason", "nodes")
# What a key press in the queue pane costs: the filter, then the sort (text, key, label).
FILTER_AND_SORT = (
    ("state=pending user=user07", "wasted", "'state=pending user=user07', by wasted"),
    ("", "id", "no filter, by id"),
    ("", "user", "no filter, by user"),
    ("", "reason", "no filter, by reason"),
)

_T = TypeVar("_T")


@dataclasses.dataclass
class Cluster:
    """The synthetic cluster: its jobs and a way to sample its GPUs at a time."""

    node_names: tuple[str, ...]
    jobs: tuple[SlurmJob, ...]
    idle_gpus: frozenset[tuple[int, int]]  # (node number, GPU index) held at 0-3 %
    rng: random.Random

    def snapshot(self, tick: int, *, jobs: tuple[SlurmJob, ...] | None = None) -> ClusterSnapshot:
        now = START_S + tick
        rng = self.rng
        nodes = []
        for n, name in enumerate(self.node_names):
            gpus = tuple(
                _gpu(i, rng.uniform(0.0, 3.0) if (n, i) in self.idle_gpus else rng.uniform(30.0, 100.0))
                for i in range(GPUS_PER_NODE)
            )
            nodes.append(NodeSample(name, Reachability.OK, now, gpus, GPUS_PER_NODE))
        slurm = SlurmState(nodes={}, jobs=jobs if jobs is not None else self.jobs, sampled_at_s=now)
        return ClusterSnapshot.build("bench", now, tuple(nodes), slurm, tick=tick)

    def reread(self) -> tuple[SlurmJob, ...]:
        """The same jobs as new, equal objects (what parsing Slurm's output again gives)."""
        return tuple(dataclasses.replace(job) for job in self.jobs)


def _gpu(index: int, util: float) -> GpuSample:
    return GpuSample(
        index,
        f"GPU-{index}",
        "NVIDIA H100",
        None,
        util,
        None,
        1000.0,
        81559.0,
        50.0,
        300.0,
        700.0,
        None,
        None,
        0,
        False,
    )


def build_cluster(nodes: int = 1000, running: int = 2000, pending: int = 18000, seed: int = 1) -> Cluster:
    """``running`` jobs share the nodes' GPUs evenly (whole GPUs, one node each; every 20th spans two
    nodes), a tenth of them idle; ``pending`` jobs wait, every 50th an array."""
    rng = random.Random(seed)  # noqa: S311  # synthetic data, not secrets
    names = tuple(f"gpu{i + 1:04d}" for i in range(nodes))
    slots = [(n, i) for n in range(nodes) for i in range(GPUS_PER_NODE)]
    per_job = max(1, len(slots) // max(1, running))
    jobs: list[SlurmJob] = []
    idle: set[tuple[int, int]] = set()
    job_id = 4_000_000
    for j in range(running):
        mine = slots[j * per_job : (j + 1) * per_job]
        if j % 20 == 19 and (j + 1) * per_job + per_job <= len(slots):
            mine = mine + slots[(j + 1) * per_job : (j + 1) * per_job + 1]  # a second node's GPU, shared
        held: dict[str, list[int]] = {}
        for n, i in mine:
            held.setdefault(names[n], []).append(i)
        if j % 10 == 3:
            idle.update(mine)
        job_id += 1
        jobs.append(
            SlurmJob(
                job_id=str(job_id),
                name=rng.choice(("llama3-8b-sft", "vit-h14", "dpo-13b", "eval-harness")),
                user=rng.choice(USERS),
                partition=rng.choice(PARTITIONS),
                state="RUNNING",
                gpus_by_node={node: tuple(idx) for node, idx in held.items()},
                start_time_s=START_S - rng.uniform(60, 86400),
                time_limit_s=rng.choice((3600.0, 14400.0, 86400.0)),
                nodes=tuple(held),
                gpus_requested=len(mine),
            )
        )
    for p in range(pending):
        job_id += 1
        jobs.append(
            SlurmJob(
                job_id=f"{job_id}_[1-{rng.randint(2, 100)}]" if p % 50 == 0 else str(job_id),
                name=rng.choice(("llama3-70b-pretrain", "sweep", "nccl-tests", "batch-infer")),
                user=rng.choice(USERS),
                partition=rng.choice(PARTITIONS),
                state="PENDING",
                pending_reason=rng.choice(REASONS),
                gpus_requested=rng.choice((1, 2, 4, 8, 16)),
                time_limit_s=rng.choice((3600.0, 14400.0, 86400.0, None)),
                submit_time_s=START_S - rng.uniform(0, 86400),
            )
        )
    return Cluster(names, tuple(jobs), frozenset(idle), rng)


@dataclasses.dataclass
class Timings:
    """Medians and maxima in milliseconds, by figure name."""

    median_ms: dict[str, float]
    max_ms: dict[str, float]
    rows: int
    running: int


def _timed(fn: Callable[..., _T], *args: Any) -> tuple[float, _T]:
    started = time.perf_counter()
    result = fn(*args)
    return (time.perf_counter() - started) * 1000.0, result


def _select(rows: dict[str, JobRow], text: str) -> list[JobRow]:
    return parse_job_filter(text).select(rows)


def _filter_then_sort(rows: dict[str, JobRow], text: str, key: str) -> list[str]:
    return sort_job_rows(parse_job_filter(text).select(rows), key)


def measure(cluster: Cluster, runs: int = 15) -> Timings:
    """Time each step ``runs`` times on fresh ticks; the collector is off while a step runs."""
    samples: dict[str, list[float]] = {}

    def note(name: str, fn: Callable[..., _T], *args: Any) -> _T:
        ms, result = _timed(fn, *args)
        samples.setdefault(name, []).append(ms)
        return result

    tracker = IdleTracker(5.0, 10.0)
    first = cluster.snapshot(0)
    state: IdleState = tracker.update(first)
    rows: dict[str, JobRow] = job_rows(first, state, None)
    gc.collect()
    gc.disable()
    try:
        for run in range(1, runs + 1):
            snapshot = cluster.snapshot(run)
            previous = rows
            state = note("IdleTracker.update", tracker.update, snapshot)
            rows = note("job_rows, previous view", job_rows, snapshot, state, previous)
            note("job_rows, no previous view", job_rows, snapshot, state, None)
            reread = cluster.snapshot(run, jobs=cluster.reread())
            note("job_rows, after a Slurm re-read", job_rows, reread, state, previous)
            for text in FILTERS:
                note(f"filter {text or '(none)'!r}", _select, rows, text)
            for key in SORT_KEYS_TIMED:
                note(f"sort by {key}", sort_job_rows, rows, key)
            for text, key, label in FILTER_AND_SORT:
                note(f"filter+sort: {label}", _filter_then_sort, rows, text, key)
            gc.enable()
            gc.collect()
            gc.disable()
    finally:
        gc.enable()
    running = sum(1 for job in cluster.jobs if job.state == "RUNNING")
    return Timings(
        median_ms={name: statistics.median(values) for name, values in samples.items()},
        max_ms={name: max(values) for name, values in samples.items()},
        rows=len(rows),
        running=running,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--running", type=int, default=2000)
    parser.add_argument("--pending", type=int, default=18000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print(f"CPU: {cpu_model()}; Python {platform.python_version()}")
    cluster = build_cluster(args.nodes, args.running, args.pending)
    timings = measure(cluster, args.runs)
    print(
        f"{args.nodes} nodes x {GPUS_PER_NODE} GPUs, {timings.rows:,} jobs ({timings.running:,} running), "
        f"median of {args.runs} runs (max in the note)\n"
    )
    rows = []
    for name, median in timings.median_ms.items():
        on_key_press = name.startswith(("filter", "sort"))
        rows.append(
            Row(
                name,
                median,
                "ms",
                FRAME_MS if on_key_press else None,
                note=f"max {timings.max_ms[name]:.2f} ms",
            )
        )
    print_table(rows, {"ms": "{:.2f} ms"})


if __name__ == "__main__":
    main()
