"""The poller: merging sources, ageing silent nodes, deadlines, the change signal and the run loop."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence

import pytest

from gputop.clock import FrozenClock
from gputop.core.config import PollConfig, Thresholds
from gputop.core.models import (
    GpuSample,
    NodeSample,
    Reachability,
    SlurmBaseState,
    SlurmNode,
    SlurmState,
    SourceResult,
)
from gputop.core.summary import ClusterView
from gputop.poller import Poller
from gputop.sim.demo import SimulatorSource
from gputop.sim.simulator import SimulatedCluster
from tests.factories import gpu_sample

T0 = 1_700_000_000.0


def gpu(index: int) -> GpuSample:
    return gpu_sample(index, uuid=f"GPU-{index:04d}", mem_util_pct=20.0)


def node(name: str, sampled_at_s: float | None, gpus: int = 2) -> NodeSample:
    return NodeSample(name, Reachability.OK, sampled_at_s, tuple(gpu(i) for i in range(gpus)), gpus)


class FakeSource:
    """Answers with ``result`` (a SourceResult, or a function of now_s), after ``hang_s``, unless ``error``
    is set, which it raises instead."""

    def __init__(
        self,
        name: str,
        result: SourceResult | Callable[[float], SourceResult],
        *,
        hang_s: float = 0.0,
    ) -> None:
        self.name = name
        self.result = result
        self.hang_s = hang_s
        self.error: Exception | None = None
        self.started = 0
        self.closed = 0
        self.calls: list[float] = []

    async def start(self) -> None:
        self.started += 1

    async def collect(self, now_s: float) -> SourceResult:
        self.calls.append(now_s)
        if self.hang_s:
            await asyncio.sleep(self.hang_s)
        if self.error is not None:
            raise self.error
        return self.result(now_s) if callable(self.result) else self.result

    async def close(self) -> None:
        self.closed += 1


class Recorder:
    def __init__(self) -> None:
        self.calls: list[ClusterView] = []
        self.ticked = asyncio.Event()

    def __call__(self, view: ClusterView) -> None:
        self.calls.append(view)
        self.ticked.set()

    async def wait_for_ticks(self, count: int, timeout_s: float) -> None:
        async def until() -> None:
            while len(self.calls) < count:
                self.ticked.clear()
                await self.ticked.wait()

        await asyncio.wait_for(until(), timeout_s)


def make_poller(
    sources: Sequence[FakeSource | SimulatorSource],
    clock: FrozenClock,
    recorder: Recorder,
    **poll: float,
) -> Poller:
    return Poller(
        cluster="test",
        sources=sources,
        clock=clock,
        poll=PollConfig(**poll),
        thresholds=Thresholds(),
        on_view=recorder,
    )


def at(view: ClusterView, name: str) -> NodeSample:
    sample = view.snapshot.node(name)
    assert sample is not None, f"{name} is missing from the snapshot"
    return sample


def states(view: ClusterView) -> dict[str, Reachability]:
    return {n.name: n.reachability for n in view.snapshot.nodes}


# --- one tick -------------------------------------------------------------------------------------------


async def test_tick_merges_sources_in_natural_order_with_slurm() -> None:
    slurm = SlurmState(nodes={"gpu2": SlurmNode("gpu2", SlurmBaseState.IDLE)}, jobs=(), sampled_at_s=T0)
    a = FakeSource("a", SourceResult(nodes=(node("gpu10", T0), node("gpu1", T0))))
    b = FakeSource("b", SourceResult(nodes=(node("gpu2", T0),), slurm=slurm))
    recorder = Recorder()
    poller = make_poller([a, b], FrozenClock(T0), recorder)

    view = await poller.tick()

    assert [n.name for n in view.snapshot.nodes] == ["gpu1", "gpu2", "gpu10"]
    assert view.snapshot.slurm is slurm
    assert view.snapshot.cluster == "test"
    assert view.snapshot.taken_at_s == T0
    assert view.snapshot.tick == 1
    assert set(view.rows) == {"gpu1", "gpu2", "gpu10"}
    assert a.calls == [T0] and b.calls == [T0]
    assert len(recorder.calls) == 1
    assert recorder.calls[0] is view
    assert poller.view is view
    assert poller.source_errors == []


async def test_second_tick_counts_and_reports_removed_nodes() -> None:
    nodes = [node("gpu1", T0), node("gpu2", T0)]
    source = FakeSource("a", lambda _now: SourceResult(nodes=tuple(nodes)))
    recorder = Recorder()
    poller = make_poller([source], FrozenClock(T0), recorder)
    await poller.tick()
    nodes.pop()
    view = await poller.tick()
    assert view.snapshot.tick == 2
    assert recorder.calls[-1] is view
    assert set(view.rows) == {"gpu1"} and [n.name for n in view.snapshot.nodes] == ["gpu1"]


# --- staleness ------------------------------------------------------------------------------------------


async def test_old_samples_become_stale_then_down() -> None:
    fresh, stale, down = node("fresh", T0), node("stale", T0 - 20), node("down", T0 - 61)
    source = FakeSource("a", SourceResult(nodes=(fresh, stale, down)))
    poller = make_poller([source], FrozenClock(T0), Recorder())

    view = await poller.tick()

    assert states(view) == {
        "fresh": Reachability.OK,
        "stale": Reachability.STALE,
        "down": Reachability.DOWN,
    }
    assert at(view, "fresh") is fresh
    assert at(view, "fresh").error is None
    assert at(view, "stale").error == "no data for 20s"
    assert at(view, "stale").gpus == stale.gpus
    assert at(view, "stale").sampled_at_s == T0 - 20
    assert at(view, "down").error == "no data for 61s"
    assert at(view, "down").gpus == down.gpus
    assert view.rows["stale"].reachability is Reachability.STALE
    assert view.summary.nodes_ok == 1
    assert view.summary.nodes_stale == 1
    assert view.summary.nodes_down == 1


async def test_the_very_same_result_again_ages_when_its_oldest_sample_does() -> None:
    """A store's source hands the same result on between its refreshes: its nodes pass as they are while
    none is stale, and age as before once the oldest of them is."""
    older, newer = node("older", T0 - 5), node("newer", T0)
    source = FakeSource("a", SourceResult(nodes=(older, newer)))
    clock = FrozenClock(T0)
    poller = make_poller([source], clock, Recorder())
    view = await poller.tick()
    assert at(view, "older") is older and at(view, "newer") is newer
    clock.advance(4.0)  # older is 9 s old: not stale yet (10 s)
    view = await poller.tick()
    assert states(view) == {"older": Reachability.OK, "newer": Reachability.OK}
    assert at(view, "older") is older
    clock.advance(2.0)  # older 11 s, newer 6 s
    view = await poller.tick()
    assert states(view) == {"older": Reachability.STALE, "newer": Reachability.OK}
    assert at(view, "older").error == "no data for 11s" and at(view, "newer") is newer


async def test_ageing_keeps_a_reason_the_source_gave() -> None:
    old = NodeSample("gpu1", Reachability.OK, T0 - 30, (gpu(0),), 1, error="ssh: connection reset")
    poller = make_poller([FakeSource("a", SourceResult(nodes=(old,)))], FrozenClock(T0), Recorder())
    view = await poller.tick()
    assert at(view, "gpu1").reachability is Reachability.STALE
    assert at(view, "gpu1").error == "ssh: connection reset"


async def test_configured_thresholds_are_used() -> None:
    sample = node("gpu1", T0 - 3)
    source = FakeSource("a", SourceResult(nodes=(sample,)))
    strict = make_poller([source], FrozenClock(T0), Recorder(), stale_after_s=2.0, down_after_s=5.0)
    assert at(await strict.tick(), "gpu1").reachability is Reachability.STALE
    lenient = make_poller([source], FrozenClock(T0), Recorder())
    assert at(await lenient.tick(), "gpu1").reachability is Reachability.OK


async def test_node_already_down_is_left_alone() -> None:
    dead = NodeSample("gpu1", Reachability.DOWN, None, (), 8, error="connection refused")
    poller = make_poller([FakeSource("a", SourceResult(nodes=(dead,)))], FrozenClock(T0), Recorder())
    view = await poller.tick()
    assert at(view, "gpu1") is dead


# --- deadlines and failures -----------------------------------------------------------------------------


async def test_hanging_source_is_cut_at_the_deadline_and_keeps_its_nodes() -> None:
    clock = FrozenClock(T0)
    last_good = node("gpu1", T0)
    slow = FakeSource("slow", SourceResult(nodes=(last_good,)))
    quick = FakeSource("quick", lambda now: SourceResult(nodes=(node("gpu2", now),)))
    poller = make_poller([slow, quick], clock, Recorder(), node_deadline_s=0.05)
    await poller.tick()

    slow.hang_s = 10.0
    clock.advance(1)
    started = time.monotonic()
    view = await poller.tick()
    elapsed = time.monotonic() - started

    assert elapsed < 0.5
    assert states(view) == {"gpu1": Reachability.OK, "gpu2": Reachability.OK}
    assert at(view, "gpu1").sampled_at_s == T0
    assert at(view, "gpu2").sampled_at_s == T0 + 1
    assert len(poller.source_errors) == 1
    assert poller.source_errors[0].startswith("slow:")
    assert "0.05s" in poller.source_errors[0]

    clock.advance(19)
    view = await poller.tick()
    assert states(view) == {"gpu1": Reachability.STALE, "gpu2": Reachability.OK}
    assert at(view, "gpu1").error == "no data for 20s"
    assert at(view, "gpu1").gpus == last_good.gpus

    clock.advance(45)
    view = await poller.tick()
    assert states(view) == {"gpu1": Reachability.DOWN, "gpu2": Reachability.OK}


async def test_source_that_raises_is_isolated_and_named() -> None:
    clock = FrozenClock(T0)
    broken = FakeSource("broken", SourceResult(nodes=(node("gpu1", T0),)))
    fine = FakeSource("fine", lambda now: SourceResult(nodes=(node("gpu2", now),)))
    recorder = Recorder()
    poller = make_poller([broken, fine], clock, recorder)
    await poller.tick()

    broken.error = RuntimeError("permission denied")
    clock.advance(15)
    view = await poller.tick()

    assert len(recorder.calls) == 2
    assert states(view) == {"gpu1": Reachability.STALE, "gpu2": Reachability.OK}
    assert at(view, "gpu1").error == "no data for 15s"
    assert poller.source_errors == ["broken: permission denied"]

    broken.error = None
    broken.result = SourceResult(nodes=(node("gpu1", T0 + 15),))
    view = await poller.tick()
    assert states(view) == {"gpu1": Reachability.OK, "gpu2": Reachability.OK}
    assert poller.source_errors == []


async def test_a_source_that_answers_with_warnings_is_named_with_them_and_keeps_its_nodes() -> None:
    """A store whose one query failed: its nodes are shown, and the header says what it could not read."""
    clock = FrozenClock(T0)
    store = FakeSource("prometheus", lambda now: SourceResult(nodes=(node("gpu1", now),)))
    recorder = Recorder()
    poller = make_poller([store], clock, recorder)
    store.warnings = ("DCGM_FI_DEV_GPU_TEMP: no answer within 10s", "DCGM_FI_DEV_SM_CLOCK: partial answer")  # type: ignore[attr-defined]
    view = await poller.tick()
    assert states(view) == {"gpu1": Reachability.OK}
    assert poller.source_errors == ["prometheus: DCGM_FI_DEV_GPU_TEMP: no answer within 10s (and 1 more)"]
    store.warnings = ()  # type: ignore[attr-defined]
    await poller.tick()
    assert poller.source_errors == []


async def test_source_failing_on_its_first_collect_contributes_nothing() -> None:
    broken = FakeSource("broken", SourceResult(nodes=(node("gpu1", T0),)))
    broken.error = OSError("no route to host")
    fine = FakeSource("fine", SourceResult(nodes=(node("gpu2", T0),)))
    poller = make_poller([broken, fine], FrozenClock(T0), Recorder())
    view = await poller.tick()
    assert [n.name for n in view.snapshot.nodes] == ["gpu2"]
    assert poller.source_errors == ["broken: no route to host"]


# --- the change signal ------------------------------------------------------------------------------------


async def test_an_unchanged_node_keeps_its_row_and_map_cells() -> None:
    """The panes' one change signal: a node whose sample a source reused keeps its row object and its cell
    codes tuple; a node with a new sample gets new ones."""
    kept = node("gpu1", T0)
    source = FakeSource("a", lambda now: SourceResult(nodes=(kept, node("gpu2", now))))
    recorder = Recorder()
    poller = make_poller([source], FrozenClock(T0), recorder)
    await poller.tick()
    await poller.tick()

    first, second = recorder.calls
    assert second.snapshot.node("gpu1") is kept
    assert second.rows["gpu1"] is first.rows["gpu1"]
    assert second.cells["gpu1"] is first.cells["gpu1"]
    assert second.rows["gpu2"] is not first.rows["gpu2"]


# --- the run loop ---------------------------------------------------------------------------------------


async def test_run_ticks_repeatedly_and_stop_closes_sources() -> None:
    source = FakeSource("a", lambda now: SourceResult(nodes=(node("gpu1", now),)))
    recorder = Recorder()
    poller = make_poller([source], FrozenClock(T0), recorder, interval_s=0.05)
    task = asyncio.create_task(poller.run())
    try:
        await recorder.wait_for_ticks(3, timeout_s=2.0)
        assert source.started == 1
        assert source.closed == 0
    finally:
        poller.stop()
        await asyncio.wait_for(task, 1.0)
    assert task.done()
    assert task.exception() is None
    assert source.closed == 1
    assert [view.snapshot.tick for view in recorder.calls[:3]] == [1, 2, 3]


async def test_refresh_now_starts_the_next_tick_at_once() -> None:
    source = FakeSource("a", lambda now: SourceResult(nodes=(node("gpu1", now),)))
    recorder = Recorder()
    poller = make_poller([source], FrozenClock(T0), recorder, interval_s=5.0)
    task = asyncio.create_task(poller.run())
    try:
        await recorder.wait_for_ticks(1, timeout_s=2.0)
        await asyncio.sleep(0.05)
        assert len(recorder.calls) == 1  # the long interval holds the next tick back
        refreshed = time.monotonic()
        poller.refresh_now()
        await recorder.wait_for_ticks(2, timeout_s=0.5)
        assert time.monotonic() - refreshed < 0.5
        await asyncio.sleep(0.05)
        assert len(recorder.calls) == 2  # one refresh, one extra tick
    finally:
        poller.stop()
        await asyncio.wait_for(task, 1.0)


async def test_stop_ends_a_long_wait_promptly() -> None:
    source = FakeSource("a", SourceResult(nodes=(node("gpu1", T0),)))
    recorder = Recorder()
    poller = make_poller([source], FrozenClock(T0), recorder, interval_s=5.0)
    task = asyncio.create_task(poller.run())
    await recorder.wait_for_ticks(1, timeout_s=2.0)
    stopped = time.monotonic()
    poller.stop()
    await asyncio.wait_for(task, 1.0)
    assert time.monotonic() - stopped < 0.5
    assert source.closed == 1
    assert len(recorder.calls) == 1


async def test_sources_are_closed_even_if_one_close_fails() -> None:
    class BadClose(FakeSource):
        async def close(self) -> None:
            await super().close()
            raise RuntimeError("close failed")

    first = BadClose("first", SourceResult())
    second = FakeSource("second", SourceResult())
    recorder = Recorder()
    poller = make_poller([first, second], FrozenClock(T0), recorder, interval_s=0.05)
    task = asyncio.create_task(poller.run())
    await recorder.wait_for_ticks(1, timeout_s=2.0)
    poller.stop()
    await asyncio.wait_for(task, 1.0)
    assert first.closed == 1
    assert second.closed == 1


async def test_source_whose_start_fails_does_not_stop_the_others() -> None:
    class BadStart(FakeSource):
        async def start(self) -> None:
            await super().start()
            raise OSError("ssh: host key mismatch")

    good = FakeSource("good", SourceResult(nodes=(node("gpu1", T0),)))
    bad = BadStart("bad", SourceResult())
    recorder = Recorder()
    poller = make_poller([good, bad], FrozenClock(T0), recorder, interval_s=0.05)
    task = asyncio.create_task(poller.run())
    try:
        with contextlib.suppress(TimeoutError):
            await recorder.wait_for_ticks(1, timeout_s=0.5)
    finally:
        poller.stop()
        done, _ = await asyncio.wait({task}, timeout=1.0)
    assert task in done
    failure = task.exception()
    assert failure is None
    assert good.closed == 1
    assert len(recorder.calls) >= 1
    assert [n.name for n in recorder.calls[0].snapshot.nodes] == ["gpu1"]


# --- the simulator through the poller -------------------------------------------------------------------


@pytest.fixture
def simulated() -> tuple[SimulatedCluster, FrozenClock]:
    cluster = SimulatedCluster(nodes=16, gpus_per_node=8, gpu_model="H100", seed=7, start_time_s=T0)
    return cluster, FrozenClock(T0)


async def test_simulator_unresponsive_node_goes_stale_then_down(
    simulated: tuple[SimulatedCluster, FrozenClock],
) -> None:
    cluster, clock = simulated
    silent = next(inc.node for inc in cluster.incidents if inc.kind == "unresponsive")
    poller = make_poller([SimulatorSource(cluster)], clock, Recorder())

    view = await poller.tick()
    assert len(view.snapshot.nodes) == 16
    assert view.snapshot.slurm is not None
    assert at(view, silent).reachability is Reachability.STALE
    assert at(view, silent).error == "no data for 45s"
    assert at(view, silent).gpus  # its last values stay on screen
    others = {name: state for name, state in states(view).items() if name != silent}
    assert set(others.values()) == {Reachability.OK}

    clock.advance(20)
    view = await poller.tick()
    assert at(view, silent).reachability is Reachability.DOWN
    assert at(view, silent).error == "no data for 65s"
    others = {name: state for name, state in states(view).items() if name != silent}
    assert set(others.values()) == {Reachability.OK}
    assert all(n.sampled_at_s == T0 + 20 for n in view.snapshot.nodes if n.name != silent)
