"""The real app on the demo cluster, driven with Textual's Pilot: keys and clicks in, screen content out."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.style import Style
from textual.filter import ANSIToTruecolor
from textual.widgets import DataTable, Input

from gputop.clock import FrozenClock
from gputop.core.metrics import Metric
from gputop.core.models import Reachability, Severity
from gputop.sim.demo import SimulatorSource
from gputop.tui.app import GputopApp
from gputop.tui.screens.dashboard import DashboardScreen
from gputop.tui.screens.help import HelpScreen
from gputop.tui.screens.node import GPU_COLUMNS, NodeScreen
from gputop.tui.widgets.cluster_map import CellStyles, ClusterMap
from gputop.tui.widgets.node_table import NodeTable
from gputop.tui.widgets.status_header import StatusHeader
from tests.tui_helpers import demo_app, send_burst, wait_for_data

SIZE = (200, 50)


def incident_node(app: GputopApp, kind: str) -> str:
    source = app.settings.sources[0]
    assert isinstance(source, SimulatorSource)
    return next(i.node for i in source.cluster.incidents if i.kind == kind)


def table_lines(table: NodeTable) -> list[str]:
    return [table.render_line(y).text for y in range(table.size.height)]


def map_lines(node_map: ClusterMap) -> list[str]:
    return [node_map.render_line(y).text for y in range(node_map.size.height)]


async def test_dashboard_shows_cluster_header_map_and_worst_nodes_first() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        header = str(app.screen.query_one(StatusHeader).render())
        assert "DEMO" in header
        assert "demo" in header
        assert "GPUs 255" in header  # 32 x 8, one GPU missing
        assert "crit" in header and "data 0s old" in header
        table = app.screen.query_one(NodeTable)
        assert len(table.order) == 32
        lines = table_lines(table)
        assert lines[0].split()[:3] == ["Node", "State", "GPUs"]
        view = app.view
        assert view is not None
        assert view.rows[table.order[0]].severity is Severity.CRIT
        # every incident node sorts above the healthy ones
        healthy_from = next(i for i, n in enumerate(table.order) if not view.rows[n].problems)
        for kind in ("hot_gpu", "ecc_xid", "missing_gpu", "ib_down", "drained", "unresponsive"):
            assert table.order.index(incident_node(app, kind)) < healthy_from, kind
        node_map = app.screen.query_one(ClusterMap)
        assert node_map.size.height <= SIZE[1] // 4 + 1
        legend = map_lines(node_map)[-1]
        assert legend.startswith("Utilization")


async def test_table_cursor_selects_on_map_and_enter_opens_node_screen() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        table = app.screen.query_one(NodeTable)
        node_map = app.screen.query_one(ClusterMap)
        await pilot.press("down", "down")
        expected = table.order[2]
        assert table.cursor_name == expected
        assert node_map.selected == expected
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen)
        assert app.screen.node_name == expected
        gpus = app.screen.query_one("#gpus", DataTable)
        assert gpus.row_count == len(app.view.snapshot.by_name[expected].gpus)  # type: ignore[union-attr]
        await pilot.press("right_square_bracket")
        assert app.screen.node_name != expected
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)


async def test_map_keys_and_click_select_a_node() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        node_map = app.screen.query_one(ClusterMap)
        table = app.screen.query_one(NodeTable)
        node_map.focus()
        node_map.selected = "gpu001"
        await pilot.press("right", "right", "down")
        layout = node_map.map_layout
        expected = f"gpu{3 + layout.nodes_per_row:03d}"
        assert node_map.selected == expected
        assert table.cursor_name == expected
        # a click on the first GPU cell of the second node of the first row
        x = layout.label_width + layout.group_width + 1
        await pilot.click(ClusterMap, offset=(x, 0))
        assert node_map.selected == "gpu002"
        assert table.cursor_name == "gpu002"
        await pilot.click(ClusterMap, offset=(x, 0), times=2)
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen) and app.screen.node_name == "gpu002"


async def test_filter_by_expression_and_text_then_clear() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        table = app.screen.query_one(NodeTable)
        hot = incident_node(app, "hot_gpu")
        await pilot.press("slash", *"temp>85", "enter")
        assert hot in table.order
        view = app.view
        assert view is not None
        assert all((view.rows[n].temp_max_c or 0) > 85 for n in table.order)
        assert len(table.order) < 32
        # the map dims what the filter leaves out
        assert app.screen.query_one(ClusterMap).highlighted == frozenset(table.order)
        await pilot.press("slash", "ctrl+u", *"drain", "enter")
        assert table.order == [incident_node(app, "drained")]
        await pilot.press("slash", "ctrl+u", *"temp>hot")
        error = app.screen.query_one("#filter-error")
        assert "compares with a number" in str(error.render())
        await pilot.press("escape")
        assert len(table.order) == 32
        assert table.node_filter is None


async def test_keys_typed_in_one_burst_after_slash_all_reach_the_filter() -> None:
    """``/temp>75`` arriving in one read: the keys after ``/`` were handed to the table before the
    filter had the focus; they must still land in the filter, and ``m`` must not switch the metric."""
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        send_burst(app, "/temp>75")
        await pilot.pause(0.2)
        await pilot.pause()
        filter_input = app.screen.query_one("#filter", Input)
        assert filter_input.value == "temp>75"
        assert app.metric is Metric.UTIL
        table = app.screen.query_one(NodeTable)
        view = app.view
        assert view is not None
        assert table.order and all((view.rows[n].temp_max_c or 0) > 75 for n in table.order)


async def test_a_burst_ending_in_enter_applies_the_whole_filter_and_keeps_it_shown() -> None:
    """``/temp>85`` + Enter in one read: Enter (an input binding, run at once) submitted the empty filter
    before the characters handed on from the table arrived, so the filter bar closed on a filter that
    then applied unseen."""
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        send_burst(app, "/temp>85\r")
        await pilot.pause(0.2)
        await pilot.pause()
        screen = app.screen
        assert screen.query_one("#filter", Input).value == "temp>85"
        assert screen.query_one("#filter-bar").has_class("active")
        assert str(screen.query_one("#filter-count").render()).startswith("showing ")
        assert isinstance(app.focused, NodeTable)


async def test_the_maps_bracket_follows_the_table_cursor_as_soon_as_a_filter_moves_it() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        table = app.screen.query_one(NodeTable)
        node_map = app.screen.query_one(ClusterMap)
        hot = incident_node(app, "hot_gpu")
        assert node_map.selected == table.cursor_name != hot
        await pilot.press("slash", *"temp>85")  # no tick between the keys and the check
        assert table.cursor_name == hot
        assert node_map.selected == hot


async def test_the_map_skips_the_ansi_filter_when_it_has_nothing_to_convert() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        node_map = app.screen.query_one(ClusterMap)
        assert any(isinstance(f, ANSIToTruecolor) for f in app.get_line_filters())
        assert not any(isinstance(f, ANSIToTruecolor) for f in node_map.get_line_filters())
        # dimmed cells come blended already, as Textual's filter would have blended them
        await pilot.press("slash", *"temp>85", "enter")
        assert not any(isinstance(f, ANSIToTruecolor) for f in node_map.get_line_filters())
        styles = node_map._cell_styles()
        ansi_filter = next(f for f in app.get_line_filters() if isinstance(f, ANSIToTruecolor))
        for code, (style, _glyph) in styles.plain.items():
            blended = ansi_filter.truecolor_style(style + Style(dim=True), style.bgcolor)
            ours = styles.dimmed[code][0]
            # (a cell without a text colour keeps none: Textual would leave it dim, with nothing to dim)
            assert (ours.color, ours.bgcolor) == (blended.color, blended.bgcolor) and not ours.dim, code
        # a theme colour that is an ANSI colour needs converting
        assert CellStyles(styles.palette).truecolor_undimmed
        ansi = dataclasses.replace(styles.palette, down=Style(color="red", bgcolor="black"))
        assert not CellStyles(ansi).truecolor_undimmed


async def test_sort_keys_and_header_click() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        table = app.screen.query_one(NodeTable)
        assert table.sort_column == "problem"
        await pilot.press("s")  # wraps to the first column: node name
        assert table.sort_column == "name"
        assert table.order[:3] == ["gpu001", "gpu002", "gpu003"]
        await pilot.press("S")
        assert table.order[0] == "gpu032"
        # the header cell of the sixth column: past the Util 5m trend
        x = sum(width + 1 for column, width in table._layout(table.size.width)[:6])
        await pilot.click(NodeTable, offset=(x + 1, 0))
        assert table.sort_column == "temp"
        assert table.order[0] == incident_node(app, "hot_gpu")
        assert "Temp\u25bc" in table_lines(table)[0]


async def test_metric_and_theme_switch() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        node_map = app.screen.query_one(ClusterMap)
        before = node_map.render_line(0)
        await pilot.press("m")
        assert app.metric is Metric.MEM
        assert map_lines(node_map)[-1].startswith("Memory used")
        await pilot.press("m", "m")
        assert app.metric is Metric.POWER
        assert map_lines(node_map)[-1].startswith("Power of limit")
        await pilot.press("m")
        assert app.metric is Metric.UTIL
        theme_before = app.theme
        await pilot.press("t")
        await pilot.pause()
        assert app.theme != theme_before
        assert app.theme in app.gputop_theme_names
        after = node_map.render_line(0)
        assert [s.style for s in after] != [s.style for s in before]


async def test_help_lists_bindings_from_the_bindings() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        rendered = app.export_screenshot().replace("&#160;", " ")
        for description in (
            "Filter",
            "Metric",
            "Sort column",
            "Open node",
            "Previous node",
            "Refresh now",
            "Theme",
        ):
            assert description in rendered, description
        await pilot.press("escape")
        assert isinstance(app.screen, DashboardScreen)


async def test_command_palette_opens_a_node() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Open node gpu005")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert isinstance(app.screen, NodeScreen)
        assert app.screen.node_name == "gpu005"


async def test_node_screen_shows_incidents_in_words() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        missing = incident_node(app, "missing_gpu")
        app.open_node(missing)
        await pilot.pause()
        gpus = app.screen.query_one("#gpus", DataTable)
        assert gpus.row_count == 7
        details = str(app.screen.query_one("#details-text").render())
        assert "GPU5 missing" in details
        mig = incident_node(app, "mig")
        app.open_node(mig)
        await pilot.pause()
        table = app.screen.query_one("#gpus", DataTable)
        columns = [key for key, _ in GPU_COLUMNS]
        utils = [str(table.get_row_at(i)[columns.index("util")]) for i in range(table.row_count)]
        migs = [str(table.get_row_at(i)[columns.index("mig")]) for i in range(table.row_count)]
        assert "n/a" in utils  # MIG GPU: not reported, never 0%
        assert migs[utils.index("n/a")] == "on"
        drained = incident_node(app, "drained")
        app.open_node(drained)
        await pilot.pause()
        details = str(app.screen.query_one("#details-text").render())
        assert "RMA requested (OPS-4411)" in details and "by root" in details
        hot = incident_node(app, "hot_gpu")
        app.open_node(hot)
        await pilot.pause()
        table = app.screen.query_one("#gpus", DataTable)
        health = [str(table.get_row_at(i)[columns.index("health")]) for i in range(table.row_count)]
        assert health[3].startswith(("CRIT ", "WARN ")) and health[0] == "ok"  # GPU3 runs near 90 C


async def test_unresponsive_node_goes_from_stale_to_down_as_time_passes() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        silent = incident_node(app, "unresponsive")
        assert app.view is not None
        assert app.view.rows[silent].reachability is Reachability.STALE
        clock = app.clock
        assert isinstance(clock, FrozenClock)
        clock.advance(30)
        await app.poller.tick()
        await pilot.pause()
        assert app.view.rows[silent].reachability is Reachability.DOWN
        header = str(app.screen.query_one(StatusHeader).render())
        assert "1 down" in header


async def test_thousand_nodes_fit_on_one_200x50_screen() -> None:
    app = demo_app(nodes=1000)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        node_map = app.screen.query_one(ClusterMap)
        layout = node_map.map_layout
        assert layout.compact
        assert layout.nodes_per_row * layout.rows >= 1000
        assert node_map.size.height == layout.rows + 1
        table = app.screen.query_one(NodeTable)
        assert table.size.height >= 10, "the node table keeps room for at least 9 nodes"
        assert node_map.region.bottom <= table.region.y


async def test_read_only_badge() -> None:
    app = demo_app(read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        assert "READ-ONLY" in str(app.screen.query_one(StatusHeader).render())


async def test_broken_theme_file_warns_and_falls_back(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("name: broken\nprimary: [not a colour\n")
    app = demo_app(theme="broken")
    app.settings.theme_dirs = [tmp_path]
    app._install_themes()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        assert app.theme == "gputop-dark"
        warnings = " ".join(app.startup_warnings)
        assert "broken.yaml" in warnings and "unknown theme 'broken'" in warnings
        assert len(app._notifications) >= 2


async def test_the_data_keeps_flowing_under_help_the_palette_and_a_dialog() -> None:
    """With ? or Ctrl+P or a drain dialog on top, the dashboard below (its header, map and table) showed
    the data of the moment the overlay opened: 'data 41s old' when it closed."""
    from gputop.tui.screens.dashboard import DashboardScreen
    from gputop.tui.widgets.status_header import StatusHeader

    app = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for_data(pilot)
        dashboard = app.screen
        assert isinstance(dashboard, DashboardScreen)
        for opening in ("question_mark", "ctrl+p", "d"):
            await pilot.press(opening)
            await pilot.pause(0.2)
            assert app.screen is not dashboard, opening
            app.clock.advance(5.0)  # type: ignore[attr-defined]
            view = await app.poller.tick()
            await pilot.pause(0.2)
            shown = dashboard.query_one(StatusHeader)._view
            assert shown is not None and shown.snapshot.taken_at_s >= view.snapshot.taken_at_s, opening
            await pilot.press("escape")
            await pilot.pause(0.2)


async def test_a_down_nodes_last_readings_are_dim_and_sort_as_unknown() -> None:
    from gputop.core.models import Reachability
    from gputop.tui.widgets.node_table import NodeTable

    app = demo_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for_data(pilot)
        app.clock.advance(120.0)  # type: ignore[attr-defined]  # the demo's silent node is down by now
        view = await app.poller.tick()
        await pilot.pause(0.2)
        down = [name for name, row in view.rows.items() if row.reachability is Reachability.DOWN]
        assert down, "the demo has a node that stops answering"
        table = app.screen.query_one(NodeTable)
        for reverse in (True, False):
            table.sort_by("util", reverse=reverse)
            await pilot.pause()
            assert table.order[-len(down) :] == sorted(down), "unknown now: last, whichever the direction"
        index = table.order.index(down[0])
        table.cursor_name = table.order[0]
        strip = table._build_row(index)
        palette = app.palette
        styles = [segment.style for segment in strip if segment.text.strip()]
        assert palette.dim in styles, "its last readings are drawn dim"
