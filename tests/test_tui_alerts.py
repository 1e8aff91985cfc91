"""The alerts pane on the demo: every problem worst first, acknowledge, silence, drain with the evidence;
a new CRIT problem shows a notice (and rings when configured); read-only has no drain."""

from __future__ import annotations

import dataclasses

from textual.widgets import Input, Static

from gputop.core.health import Problem
from gputop.core.models import Severity
from gputop.tui.app import ViewUpdated
from gputop.tui.screens.alerts import AlertsScreen
from gputop.tui.screens.node import NodeScreen
from gputop.tui.screens.node_action import NodeActionScreen
from gputop.tui.widgets.alert_table import AlertTable
from tests.tui_helpers import demo_app, wait_for_data

SIZE = (160, 50)


async def open_alerts(pilot: object) -> AlertsScreen:
    await pilot.press("A")  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    screen = pilot.app.screen  # type: ignore[attr-defined]
    assert isinstance(screen, AlertsScreen)
    return screen


async def test_every_problem_is_an_alert_worst_first() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        screen = await open_alerts(pilot)
        view = app.view
        assert view is not None and view.alerts is not None
        problems = {(p.node, p.kind, p.gpu_index, p.subject) for r in view.rows.values() for p in r.problems}
        table = screen.query_one(AlertTable)
        assert len(table.order) == len(problems) == view.summary.alerts_crit + view.summary.alerts_warn
        severities = [view.alerts.alerts[k].severity for k in table.order]
        assert severities == sorted(severities, key=lambda s: -s.rank) and severities[0] is Severity.CRIT
        line = str(screen.query_one("#alert-line", Static).render())
        first = view.alerts.alerts[table.order[0]]
        assert line.startswith(f"CRIT {first.node}: {first.message} (for ")


async def test_acknowledge_and_silence_mark_the_alert_and_toggle_back() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        screen = await open_alerts(pilot)
        table = screen.query_one(AlertTable)
        key = table.cursor_name
        assert key is not None
        book = app.poller.alert_book
        await pilot.press("a")
        await pilot.pause()
        assert book.state.alerts[key].acknowledged
        assert "; acknowledged)" in str(screen.query_one("#alert-line", Static).render())
        await pilot.press("a")
        await pilot.pause()
        assert not book.state.alerts[key].acknowledged
        await pilot.press("x")
        await pilot.pause()
        alert = book.state.alerts[key]
        assert alert.silenced_until_s == book.state.taken_at_s + 60 * 60
        assert "silenced for 60m more" in str(screen.query_one("#alert-line", Static).render())
        # it holds across ticks
        app.action_refresh()
        await pilot.pause(0.3)
        assert book.state.alerts[key].silenced(book.state.taken_at_s)
        await pilot.press("x")
        await pilot.pause()
        assert book.state.alerts[key].silenced_until_s is None


async def test_d_drains_the_alerts_node_with_its_evidence_and_enter_opens_it() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        screen = await open_alerts(pilot)
        table = screen.query_one(AlertTable)
        alert = app.poller.alert_book.state.alerts[table.cursor_name or ""]
        await pilot.press("d")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, NodeActionScreen) and dialog.nodes == (alert.node,)
        reason = dialog.query_one("#reason", Input).value
        assert reason.startswith(alert.message) and "(since " in reason
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen) and app.screen.node_name == alert.node


async def test_a_new_crit_problem_shows_a_notice_and_rings_when_configured() -> None:
    app = demo_app()
    config = app.settings.config
    app.settings.config = dataclasses.replace(config, alerts=dataclasses.replace(config.alerts, bell=True))
    rung: list[bool] = []
    app.bell = lambda: rung.append(True)  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        view = app.view
        assert view is not None
        assert not rung and not [n for n in app._notifications if n.title == "new CRIT"], "not at start"
        # the next tick brings an Xid on a healthy node
        healthy = next(r.name for r in view.rows.values() if not r.problems)
        book = app.poller.alert_book
        problems = [p for r in view.rows.values() for p in r.problems]
        xid = Problem(Severity.CRIT, healthy, 2, "xid", "GPU2 Xid 79: GPU has fallen off the bus", "79")
        state = book.update([*problems, xid], book.state.taken_at_s + 1)
        app.post_message(ViewUpdated(dataclasses.replace(view, alerts=state)))
        await pilot.pause()
        assert rung == [True]
        (notice,) = [n for n in app._notifications if n.title == "new CRIT"]
        assert notice.message == f"{healthy}: GPU2 Xid 79: GPU has fallen off the bus"
        assert notice.severity == "error"


async def test_read_only_alerts_have_no_drain() -> None:
    app = demo_app(read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        await open_alerts(pilot)
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, AlertsScreen)
        assert "drain" not in {b.binding.action for b in app.screen.active_bindings.values()}


async def test_the_demos_pcie_and_row_remapping_incidents_are_alerts_and_drain_from_one() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        screen = await open_alerts(pilot)
        table = screen.query_one(AlertTable)
        alerts = app.poller.alert_book.state.alerts
        by_message = {alerts[k].message: k for k in table.order}
        assert "GPU2 PCIe x8, max x16" in by_message
        remap = by_message["GPU6 row remapping pending: reset the GPU"]
        for _ in range(len(table.order)):
            if table.cursor_name == remap:
                break
            await pilot.press("down")
        assert table.cursor_name == remap
        await pilot.press("d")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, NodeActionScreen) and dialog.nodes == (alerts[remap].node,)
        assert dialog.query_one("#reason", Input).value.startswith(
            "GPU6 row remapping pending: reset the GPU"
        )


async def test_a_long_node_name_is_shown_whole() -> None:
    """Site node names run past ten characters: 'dgx-h100-rack12-n07' was cut to 'dgx-h100-r'."""
    from gputop.clock import FrozenClock
    from gputop.core.config import Config
    from gputop.core.models import GpuSample, NodeSample, Reachability, SourceResult
    from gputop.tui.app import AppSettings, GputopApp
    from tests.tui_helpers import FROZEN_EPOCH_S

    name = "dgx-h100-rack12-n07"

    class OneNode:
        name = "one"

        async def start(self) -> None:
            return None

        async def collect(self, now_s: float) -> SourceResult:
            gpu = GpuSample(
                *(0, "GPU-0", "NVIDIA H100 80GB HBM3", "00000000:18:00.0", 50.0, 20.0, 4096.0, 81559.0),
                *(40.0, 300.0, 700.0, 1980.0, 1980.0, 0, False),
            )
            return SourceResult(nodes=(NodeSample(name, Reachability.OK, now_s, (gpu,), 8),))

        async def close(self) -> None:
            return None

    settings = AppSettings(
        config=Config.default(),
        cluster_name="lab",
        sources=[OneNode()],  # type: ignore[list-item]
        clock=FrozenClock(FROZEN_EPOCH_S),
        freeze_gc=False,
    )
    app = GputopApp(settings)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        screen = await open_alerts(pilot)
        table = screen.query_one(AlertTable)
        row = "".join(segment.text for segment in table._build_row(0))
        assert row.startswith(f"{name} CRIT"), row
