"""`gputop replay`: the dashboard on a recording made from the demo, read-only, through the same view
stage; the time bar in the header; pause, step, speed, the next problem, a jump to a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop.clock import FrozenClock
from gputop.core.config import Config, Thresholds
from gputop.core.models import ClusterSnapshot
from gputop.core.record_tick import TickRecorder
from gputop.core.recording import Frame, frame, header
from gputop.core.view import ViewStage
from gputop.sim.simulator import SimulatedCluster
from gputop.sources.recording_file import read_recording
from gputop.sources.replay import ReplayClock, ReplaySource
from gputop.tui.app import AppSettings, GputopApp
from gputop.tui.screens.replay_jump import ReplayJumpScreen, parse_jump
from gputop.tui.widgets.cluster_map import ClusterMap
from gputop.tui.widgets.node_table import NodeTable
from gputop.tui.widgets.status_header import StatusHeader
from tests.tui_helpers import wait_for_data

T0 = 1_800_000_000.0
TICKS = 90


def demo_recording(path: Path) -> None:
    """90 s of the 32-node demo, one frame a second, as `gputop record` writes it."""
    long_recording(path, TICKS, nodes=32)


def replay_app(path: Path) -> tuple[GputopApp, ReplaySource, ReplayClock]:
    source = ReplaySource(read_recording(path))
    clock = ReplayClock(source.start_s, source.end_s)
    clock.toggle()  # paused: the test moves it
    settings = AppSettings(
        config=Config.default(),
        cluster_name="demo",
        sources=[source],
        clock=clock,
        read_only=True,
        replay=source,
    )
    app = GputopApp(settings)
    app.settings.freeze_gc = False
    return app, source, clock


def header_text(app: GputopApp) -> str:
    return str(app.screen.query_one(StatusHeader).render())


async def test_the_replay_dashboard_steps_jumps_and_shows_what_was_recorded(tmp_path: Path) -> None:
    path = tmp_path / "demo.gtr"
    demo_recording(path)
    app, source, clock = replay_app(path)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for_data(pilot)
        assert "REPLAY 2027-01-15 08:00:00 UTC paused" in header_text(app)
        assert app.read_only
        await pilot.press("P", "d")  # read-only: no policy, no drain dialog
        assert "POLICY" not in header_text(app) and len(app.screen_stack) == 2
        table = app.screen.query_one(NodeTable)
        assert len(table.order) == 32
        await pilot.press("full_stop", "full_stop")
        await pilot.pause(0.3)
        assert clock.now() == T0 + 2 and "08:00:02 UTC" in header_text(app)
        await pilot.press("comma")
        assert clock.now() == T0 + 1
        cluster_map = app.screen.query_one(ClusterMap)
        await pilot.press("plus", "plus", "minus")
        assert clock.speed == 2.0
        assert cluster_map.zoom is None  # + and - are the replay's speed here; z and Z zoom the map
        await pilot.press("Z")
        assert cluster_map.zoom is not None and clock.speed == 2.0
        # the demo's node that stops answering does so during the recording: n jumps to it
        event = source.next_event(clock.now())
        assert event is not None
        await pilot.press("n")
        await pilot.pause(0.5)
        assert clock.now() == event
        view = app.view
        assert view is not None and view.snapshot.taken_at_s <= event
        await pilot.press("T")
        await pilot.pause()
        assert isinstance(app.screen, ReplayJumpScreen)
        await pilot.press(*"08:00:30", "enter")
        await pilot.pause(0.5)
        assert clock.now() == T0 + 30


def test_jump_times_are_read_in_utc_on_the_replays_day(tmp_path: Path) -> None:
    clock = ReplayClock(T0, T0 + 3600)
    assert parse_jump("08:30", clock) == T0 + 1800
    assert parse_jump("2027-01-15T08:59:59", clock) == T0 + 3599
    assert parse_jump("07:00", clock) == "outside the recording"
    assert "type a UTC time" in str(parse_jump("soon", clock))


def test_frozen_clock_is_not_a_replay() -> None:
    settings = AppSettings(config=Config.default(), cluster_name="x", sources=[], clock=FrozenClock(T0))
    assert GputopApp(settings).replay_status() is None


@pytest.mark.parametrize("version", [(1, 0), (1, 1)])
async def test_a_recording_of_every_format_still_replays(version: tuple[int, int]) -> None:
    """A file kept from each format (tests/fixtures/recordings): it opens, plays, and shows the cluster;
    from 1.1 on, with the node's slow facts; before, without them (and nothing fails for it)."""
    name = f"demo-32-nodes-90s-format-{version[0]}.{version[1]}.gtr"
    path = Path(__file__).parent / "fixtures" / "recordings" / name
    recording = read_recording(path)
    assert recording.meta["version"] == list(version) and recording.frames.stopped is None
    app, source, clock = replay_app(path)
    assert (source.start_s, source.end_s, len(source.frames)) == (T0, T0 + TICKS - 1, TICKS)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for_data(pilot)
        assert len(app.screen.query_one(NodeTable).order) == 32
        clock.seek(T0 + 60)
        app.poller.refresh_now()
        await pilot.pause(0.5)
        view = app.view
        assert view is not None and view.snapshot.taken_at_s == T0 + 60
        assert view.summary.alerts_crit > 0
        node = view.snapshot.nodes[0]
        has_facts = node.facts.topology.value is not None and bool(node.ib_ports)
        assert has_facts == (version >= (1, 1))


def long_recording(path: Path, ticks: int, *, nodes: int = 8, hole: tuple[int, int] | None = None) -> None:
    """``ticks`` seconds of the demo, a frame a second (none for the seconds in ``hole``)."""
    cluster = SimulatedCluster(nodes=nodes, gpus_per_node=8, gpu_model="H100", seed=42, start_time_s=T0)
    stage = ViewStage(Thresholds(), interval_s=1.0)
    recorder = TickRecorder()
    data = header({"cluster": "demo", "interval_s": 1.0})
    for tick in range(ticks):
        cluster.advance_to(T0 + tick)
        if hole is not None and hole[0] <= tick < hole[1]:
            continue
        result = cluster.result()
        view = stage.derive(ClusterSnapshot.build("demo", T0 + tick, result.nodes, result.slurm))
        data += frame(*recorder.frame(view))
    path.write_bytes(data)


def played_straight(path: Path, time_s: float) -> tuple[object, ...]:
    """The samples a replay shows at ``time_s`` when it got there a second at a time."""
    source = ReplaySource(read_recording(path))
    for tick_s in range(int(source.start_s), int(time_s) + 1):
        result = source.at(float(tick_s))
    return result.nodes


def test_a_jump_unpacks_from_the_last_full_frame_and_lays_out_the_past(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "long.gtr"
    long_recording(path, 600)
    source = ReplaySource(read_recording(path))
    unpacked: list[int] = []
    arrays = Frame.arrays

    def counting(found: Frame) -> object:
        unpacked.append(found.offset)
        return arrays.fget(found)  # type: ignore[attr-defined]

    monkeypatch.setattr(Frame, "arrays", property(counting))
    source.at(T0)
    assert source.take_jump() is None  # the start is no jump
    target_s = T0 + 590
    nodes = source.at(target_s).nodes
    past = source.take_jump()
    assert past is not None
    times = [t for t, _ in past]
    # a tick a minute from the recording's start (the hour before reaches past it), every 30 s for
    # the last five minutes, all before the jump's time
    assert times == sorted(times) and times[0] == T0 and times[-1] < target_s
    assert {T0 + 60 * k for k in range(5)} <= set(times)
    assert {target_s - 30 * k for k in range(1, 10)} <= set(times)
    # before the last five minutes (and the full frame they start from) only the full frames unpack
    offsets = {f.offset: t for f, t in zip(source.frames, source.times_s, strict=True)}
    keyframes = {source.frames[i].offset for i in source.keyframes}
    early = {o for o in unpacked if offsets[o] < target_s - 300 - 60}
    assert early and early <= keyframes
    monkeypatch.setattr(Frame, "arrays", arrays)
    assert nodes == played_straight(path, target_s)
    # back: the same as getting there from the start, and a jump again
    back = source.at(T0 + 100).nodes
    assert source.take_jump() is not None
    assert back == played_straight(path, T0 + 100)


def test_fast_play_stands_for_the_ticks_it_passed_over_but_not_across_a_hole(tmp_path: Path) -> None:
    path = tmp_path / "holed.gtr"
    long_recording(path, 300, hole=(100, 160))
    source = ReplaySource(read_recording(path))
    assert source.at(T0).span_s is None
    assert source.at(T0 + 1).span_s is None  # the next tick: the poll interval says it
    assert source.at(T0 + 65).span_s == 64.0  # 64x: one tick for 64 recorded seconds
    assert source.take_jump() is None
    # across the minute gputop did not record: no span, so the history keeps the gap
    result = source.at(T0 + 170)
    assert source.take_jump() is None and result.span_s is None


async def test_after_a_jump_the_charts_have_the_recorded_past_before_it(tmp_path: Path) -> None:
    path = tmp_path / "long.gtr"
    long_recording(path, 600)
    app, _source, clock = replay_app(path)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for_data(pilot)
        clock.seek(T0 + 590)
        app.poller.refresh_now()
        await pilot.pause(1.0)
        view = app.view
        assert view is not None and view.snapshot.taken_at_s == T0 + 590
        store = view.history
        assert store is not None
        # from the recording's start: the minutes the jump passed over are in the history, not a gap
        series = store.node_mean("gpu001", "util_pct", 900.0, T0 + 590)
        assert series.times_s[0] == T0 and len(series) >= 15
        assert not series.gap_after().any()
        assert len(store.node_mean("gpu001", "util_pct", 3600.0, T0 + 590)) == 9  # the minutes closed


async def test_the_dashboards_record_then_replay_shows_the_node_screens_facts(tmp_path: Path) -> None:
    """--record records on its own thread; what it wrote replays with the node screen's slow facts
    (the topology and NVLink panes, the processes), as the live dashboard showed them."""
    from gputop.tui.screens.node import NodeScreen
    from tests.tui_helpers import demo_app

    path = tmp_path / "dash.gtr"
    app = demo_app()
    app.settings.record_to = str(path)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for_data(pilot)
        for _ in range(3):
            app.poller.refresh_now()
            await pilot.pause(0.3)
        live = app.view
        assert live is not None
    recording = read_recording(path)
    assert len(recording.frames.frames) >= 2
    replay, _source, _clock = replay_app(path)
    async with replay.run_test(size=(160, 45)) as pilot:
        await wait_for_data(pilot)
        view = replay.view
        assert view is not None
        node = next(n for n in view.snapshot.nodes if n.name == "gpu001")
        live_node = next(n for n in live.snapshot.nodes if n.name == "gpu001")
        assert node.facts.topology.value == live_node.facts.topology.value is not None
        assert node.ib_ports == live_node.ib_ports and any(g.processes for g in node.gpus)
        replay.screen.query_one(NodeTable).go_to("gpu001")
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert isinstance(replay.screen, NodeScreen)
