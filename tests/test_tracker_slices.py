"""The idle and health trackers a slice at a time (the view stage yields between slices, so a key pressed
at 10,000 nodes need not wait for a whole tracker) give what they give all at once, and change nothing
until the last slice."""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

from gputop.core.config import Thresholds
from gputop.core.health_tracker import HealthTracker
from gputop.core.idle import IdleTracker
from gputop.core.models import ClusterSnapshot
from gputop.sim.simulator import SimulatedCluster

T0 = 1_800_000_000.0
Result = TypeVar("Result")


def run(steps: Generator[None, None, Result]) -> tuple[Result, int]:
    """What the steps return, and how many times they yielded."""
    yields = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value, yields
        yields += 1


def snapshots(count: int, step_s: float) -> list[ClusterSnapshot]:
    cluster = SimulatedCluster(nodes=200, gpus_per_node=8, seed=7, start_time_s=T0)
    found = []
    for k in range(count):
        cluster.advance_to(T0 + k * step_s)
        result = cluster.result()
        found.append(ClusterSnapshot.build("c", T0 + k * step_s, result.nodes, result.slurm))
    return found


def test_the_idle_tracker_in_slices() -> None:
    thresholds = Thresholds()
    whole = IdleTracker(thresholds.idle_util_pct, thresholds.idle_minutes)
    sliced = IdleTracker(thresholds.idle_util_pct, thresholds.idle_minutes)
    for snapshot in snapshots(14, 60.0):
        expected = whole.update(snapshot)
        before = sliced.state
        steps = sliced.update_steps(snapshot, jobs_per_slice=7)
        next(steps)
        assert sliced.state is before  # nothing changes before the last slice
        state, yields = run(steps)
        jobs = len(snapshot.slurm.jobs)  # type: ignore[union-attr]
        assert yields + 1 == jobs // 7 and jobs >= 50
        assert state == expected and sliced.state is state
    assert expected.flagged  # the run got as far as flagging idle GPUs


def test_the_health_tracker_in_slices() -> None:
    thresholds = Thresholds()
    whole = HealthTracker(thresholds)
    sliced = HealthTracker(thresholds)
    for snapshot in snapshots(8, 30.0):
        expected = whole.update(snapshot)
        before = sliced.flags
        steps = sliced.update_steps(snapshot, nodes_per_slice=16)
        next(steps)
        assert sliced.flags is before
        flags, yields = run(steps)
        assert yields + 1 == len(snapshot.nodes) // 16
        assert flags == expected and sliced.flags is flags
    assert expected  # the demo's hot GPUs are flagged
