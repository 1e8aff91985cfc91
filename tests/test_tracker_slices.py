"""The trackers, the alerts, the timeline, the summary and the history's gathering a slice at a time (the
view stage yields between slices, so a key pressed at 10,000 nodes need not wait for a whole tracker) give
what they give all at once, and change nothing until the last slice."""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

import pytest

from gputop.core.alerts import AlertBook
from gputop.core.config import HistoryConfig, Thresholds
from gputop.core.counter_rates import CounterRateTracker
from gputop.core.health_tracker import HealthTracker
from gputop.core.idle import IdleTracker
from gputop.core.interconnect_deviations import InterconnectTracker
from gputop.core.models import ClusterSnapshot, NodeSample, Severity
from gputop.core.node_timeline import NodeTimeline
from gputop.core.problem import Problem
from gputop.core.summary import NodeRow, summarize, summarize_steps
from gputop.core.view import ViewStage
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


def test_the_alert_book_in_slices() -> None:
    whole, sliced = AlertBook(), AlertBook()
    for snapshot in snapshots(8, 30.0):
        problems = [p for row in derived_rows(snapshot).values() for p in row.problems]
        expected = whole.update(problems, snapshot.taken_at_s)
        before = sliced.state
        steps = sliced.update_steps(problems, snapshot.taken_at_s, problems_per_slice=5)
        next(steps)
        assert sliced.state is before
        state, yields = run(steps)
        assert yields + 1 == len(problems) // 5
        assert state == expected and sliced.state is state
    assert expected.alerts  # the demo's problems are alerts


def test_an_alert_acknowledged_between_slices_says_so_and_does_not_ring() -> None:
    book = AlertBook()
    hot = Problem(Severity.WARN, "n1", 3, "temp", "GPU3 88 C")
    hotter = Problem(Severity.CRIT, "n1", 3, "temp", "GPU3 96 C")
    other = Problem(Severity.WARN, "n2", 0, "temp", "GPU0 87 C")
    book.update([hot], T0)
    steps = book.update_steps([other, hotter, other], T0 + 30, problems_per_slice=1)
    next(steps)
    book.acknowledge("n1/temp/GPU3")  # the user, on the warning the table shows, while the update runs
    state, _ = run(steps)
    assert state.alerts["n1/temp/GPU3"].acknowledged
    assert state.alerts["n1/temp/GPU3"].severity is Severity.CRIT
    assert state.new_crit == ()
    # without the acknowledgement the same update rings
    fresh = AlertBook()
    fresh.update([hot], T0)
    assert [a.key.text for a in fresh.update([other, hotter, other], T0 + 30).new_crit] == ["n1/temp/GPU3"]


def test_the_timeline_and_the_summary_in_slices() -> None:
    whole, sliced = NodeTimeline(), NodeTimeline()
    stage = ViewStage(Thresholds(), interval_s=30.0)
    for snapshot in snapshots(8, 30.0):
        rows = stage.derive(snapshot).rows
        whole.update(snapshot.taken_at_s, rows)
        _, yields = run(sliced.update_steps(snapshot.taken_at_s, rows, rows_per_slice=9))
        assert yields == len(rows) // 9
        summary, yields = run(summarize_steps(rows.values(), rows_per_slice=9))
        assert summary == summarize(rows.values()) and yields == len(rows) // 9
    names = list(rows)
    assert any(whole.events(name) for name in names)  # the demo's problems came and went
    assert all(whole.events(name) == sliced.events(name) for name in names)


def derived_rows(snapshot: ClusterSnapshot) -> Mapping[str, NodeRow]:
    return ViewStage(Thresholds(), interval_s=30.0).derive(snapshot).rows


def test_the_interconnect_tracker_in_slices_and_the_same_samples_not_looked_at_again() -> None:
    whole, sliced = InterconnectTracker(), InterconnectTracker()
    for snapshot in snapshots(3, 30.0):
        expected = whole.update(snapshot.nodes)
        got, yields = run(sliced.update_steps(snapshot.nodes, nodes_per_slice=16))
        assert yields == len(snapshot.nodes) // 16
        assert got == expected
    # a store's source between refreshes: the very same samples, the same result and no slice at all
    again, yields = run(sliced.update_steps(snapshot.nodes, nodes_per_slice=16))
    assert again is got and yields == 0


def test_the_stage_gathers_the_same_samples_readings_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from gputop.core import history_store

    gathered: list[int] = []
    real = history_store.gather_steps

    def counting(nodes: Sequence[NodeSample]) -> Generator[None, None, history_store.Gathered]:
        gathered.append(len(nodes))
        return (yield from real(nodes))

    monkeypatch.setattr(history_store, "gather_steps", counting)
    stage = ViewStage(Thresholds(), interval_s=1.0, history=HistoryConfig())
    first, later = snapshots(2, 15.0)
    stage.derive(first)
    refresh_s = later.taken_at_s - first.taken_at_s
    for tick in range(1, int(refresh_s)):  # the ticks between a store's refreshes hand on the same samples
        stage.derive(replace(first, taken_at_s=first.taken_at_s + tick))
    stage.derive(later)
    assert gathered == [len(first.nodes), len(later.nodes)]
    store = stage.history_store
    assert store is not None
    gpu = (first.nodes[0].name, first.nodes[0].gpus[0].index)
    series = store.series(*gpu, "util_pct", 600.0, later.taken_at_s)
    # one row a refresh, not one a tick: the held ticks wrote nothing, and the next row spans them
    assert series.times_s.tolist() == [first.taken_at_s, later.taken_at_s]
    assert series.spans_s is not None and series.spans_s.tolist() == [1.0, refresh_s]


def test_the_counter_rates_in_slices() -> None:
    whole, sliced = CounterRateTracker(), CounterRateTracker()
    for snapshot in snapshots(6, 30.0):
        expected = whole.update(snapshot)
        got, yields = run(sliced.update_steps(snapshot, nodes_per_slice=16))
        assert yields == len(snapshot.nodes) // 16
        assert got == expected
    assert any(rates for rates in expected.values())  # the demo's counters move
