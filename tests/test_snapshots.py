"""Pictures of the main screens, compared with the reviewed ones in tests/__snapshots__.

Fixed seed, frozen clock, no animation, no blinking cursor: the same code draws the same picture.
Update after a reviewed UI change with `pytest tests/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Input

from gputop.tui.app import GputopApp
from tests.tui_helpers import demo_app, wait_for_data

SIZE = (200, 50)
Compare = Callable[..., bool]


async def _ready(pilot: Pilot[None]) -> None:
    await wait_for_data(pilot)
    for widget in pilot.app.query(Input):
        widget.cursor_blink = False


def _open(kind: str) -> Callable[[Pilot[None]], object]:
    async def run(pilot: Pilot[None]) -> None:
        await _ready(pilot)
        app = pilot.app
        assert isinstance(app, GputopApp)
        node = next(i.node for i in app.settings.sources[0].cluster.incidents if i.kind == kind)  # type: ignore[attr-defined]
        app.open_node(node)
        await pilot.pause()

    return run


def test_dashboard(snap_compare: Compare) -> None:
    assert snap_compare(demo_app(), terminal_size=SIZE, run_before=_ready)


def test_dashboard_thousand_nodes(snap_compare: Compare) -> None:
    assert snap_compare(demo_app(nodes=1000), terminal_size=SIZE, run_before=_ready)


def test_dashboard_filtered_by_temperature_in_memory_metric(snap_compare: Compare) -> None:
    async def run(pilot: Pilot[None]) -> None:
        await _ready(pilot)
        await pilot.press("m", "slash", *"temp>75")
        for widget in pilot.app.query(Input):
            widget.cursor_blink = False

    assert snap_compare(demo_app(), terminal_size=SIZE, run_before=run)


def test_node_screen_with_ecc_and_xid(snap_compare: Compare) -> None:
    assert snap_compare(demo_app(), terminal_size=SIZE, run_before=_open("ecc_xid"))


def test_node_screen_with_mig_gpu(snap_compare: Compare) -> None:
    assert snap_compare(demo_app(), terminal_size=SIZE, run_before=_open("mig"))


def test_node_screen_topology_pane_at_80_columns(snap_compare: Compare) -> None:
    """The narrow layout: GPU3 selected in the pane, its nearest NIC the one whose port is down."""

    async def run(pilot: Pilot[None]) -> None:
        await _open("ib_down")(pilot)
        await pilot.press("i", "down", "down", "down")
        await pilot.pause()

    assert snap_compare(demo_app(), terminal_size=(80, 50), run_before=run)


def test_help_screen(snap_compare: Compare) -> None:
    assert snap_compare(demo_app(), terminal_size=SIZE, run_before=_ready, press=["question_mark"])


def test_dashboard_light_theme_at_80_columns(snap_compare: Compare) -> None:
    assert snap_compare(demo_app(theme="gputop-light"), terminal_size=(80, 24), run_before=_ready)


def test_queue_most_idle_first(snap_compare: Compare) -> None:
    async def run(pilot: Pilot[None]) -> None:
        await _ready(pilot)
        await pilot.press("J", "w")
        await pilot.pause()

    assert snap_compare(demo_app(), terminal_size=SIZE, run_before=run)


def test_replay_paused_at_a_minute(snap_compare: Compare) -> None:
    """The dashboard on the kept demo recording, paused a minute in: the header's time bar."""
    from tests.test_tui_replay import T0, replay_app

    path = Path(__file__).parent / "fixtures" / "recordings" / "demo-32-nodes-90s-format-1.0.gtr"
    app, _source, clock = replay_app(path)
    clock.seek(T0 + 60)

    async def run(pilot: Pilot[None]) -> None:
        await _ready(pilot)
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=SIZE, run_before=run)
