"""`gputop replay`: the dashboard on a recording made from the demo, read-only, through the same view
stage; the time bar in the header; pause, step, speed, the next problem, a jump to a time."""

from __future__ import annotations

from pathlib import Path

from gputop.clock import FrozenClock
from gputop.core.config import Config, Thresholds
from gputop.core.models import ClusterSnapshot
from gputop.core.record_tick import TickRecorder
from gputop.core.recording import frame, header
from gputop.core.view import ViewStage
from gputop.sim.simulator import SimulatedCluster
from gputop.sources.recording_file import read_recording
from gputop.sources.replay import ReplayClock, ReplaySource
from gputop.tui.app import AppSettings, GputopApp
from gputop.tui.screens.replay_jump import ReplayJumpScreen, parse_jump
from gputop.tui.widgets.node_table import NodeTable
from gputop.tui.widgets.status_header import StatusHeader
from tests.tui_helpers import wait_for_data

T0 = 1_800_000_000.0
TICKS = 90


def demo_recording(path: Path) -> None:
    """90 s of the 32-node demo, one frame a second, as `gputop record` writes it."""
    cluster = SimulatedCluster(nodes=32, gpus_per_node=8, gpu_model="H100", seed=42, start_time_s=T0)
    stage = ViewStage(Thresholds(), interval_s=1.0)
    recorder = TickRecorder()
    data = header({"cluster": "demo", "interval_s": 1.0})
    for tick in range(TICKS):
        cluster.advance_to(T0 + tick)
        result = cluster.result()
        view = stage.derive(ClusterSnapshot.build("demo", T0 + tick, result.nodes, result.slurm))
        data += frame(*recorder.frame(view))
    path.write_bytes(data)


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
        await pilot.press("plus", "plus", "minus")
        assert clock.speed == 2.0
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


async def test_a_recording_of_format_1_0_still_replays() -> None:
    """A file kept from format 1.0 (tests/fixtures/recordings): it opens, plays, and shows the cluster."""
    path = Path(__file__).parent / "fixtures" / "recordings" / "demo-32-nodes-90s-format-1.0.gtr"
    recording = read_recording(path)
    assert recording.meta["version"] == [1, 0] and recording.frames.stopped is None
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
