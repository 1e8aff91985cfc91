"""The map zooms as a user drives it: a cell per node where GPUs do not fit, a cell per rack or partition
with '-', back in with '+' or Enter to a window that follows the selection, worst or mean with 'w'."""

from __future__ import annotations

from gputop.core.heatmap import STALE
from gputop.core.map_zoom import Zoom
from gputop.core.metrics import Metric
from gputop.tui.widgets.cluster_map import ClusterMap
from gputop.tui.widgets.node_table import NodeTable
from tests.test_tui import incident_node, map_lines
from tests.tui_helpers import demo_app, wait_for_data


async def test_zoom_out_to_racks_and_partitions_and_back_in_following_the_selection() -> None:
    app = demo_app(nodes=1000)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_data(pilot)
        node_map = app.screen.query_one(ClusterMap)
        table = app.screen.query_one(NodeTable)
        # 8,000 GPUs do not fit 120x40 a cell each: a cell per node, whole, a diamond on the selection
        layout = node_map.map_layout
        assert layout.zoom is Zoom.NODE and not layout.windowed
        lines = map_lines(node_map)
        assert sum("\u25c6" in line for line in lines) == 1
        assert "a cell per node, worst of its GPUs" in lines[-1]
        silent = incident_node(app, "unresponsive")

        await pilot.press("minus")
        layout = node_map.map_layout
        assert layout.zoom is Zoom.GROUP
        lines = map_lines(node_map)
        zoom_line = lines[layout.window]
        assert "a cell per rack" in zoom_line and "10 nodes" in zoom_line, zoom_line
        assert node_map.size.height == layout.window + 2

        await pilot.press("w")
        assert "mean of its nodes" in map_lines(node_map)[layout.window]
        await pilot.press("b")
        layout = node_map.map_layout
        zoom_line = map_lines(node_map)[layout.window]
        assert "a cell per partition" in zoom_line and "partition " in zoom_line, zoom_line

        # Enter zooms into the selected group: a cell per node again (the zoom that fits follows the screen)
        node_map.focus()
        await pilot.press("enter")
        assert node_map.map_layout.zoom is Zoom.NODE and node_map.zoom is None

        # finer than fits: GPUs in a window that holds the selection, and follows it as the table moves
        await pilot.press("plus")
        layout = node_map.map_layout
        assert layout.zoom is Zoom.GPU and layout.windowed
        table.focus()
        for key in ("G", "g", "j", "down"):
            await pilot.press(key)
            name = table.cursor_name
            assert name is not None and node_map.selected == name
            line = layout.line_of(node_map._index[name])
            assert node_map._top <= line < node_map._top + layout.window, (name, line, node_map._top)
            shown = map_lines(node_map)
            row = shown[line - node_map._top]
            assert "\u2590" in row, f"{name}'s line shows no bracket: {row!r}"
            assert f"lines {node_map._top + 1}-" in shown[layout.window]
        node_map.select(silent)
        await pilot.pause()
        # the silent node is drawn as stale at every zoom
        assert set(app.view.cells[silent]) == {STALE}  # type: ignore[union-attr]
        assert "\u00b7" in map_lines(node_map)[layout.line_of(node_map._index[silent]) - node_map._top]

        # back out: the zoom that fits again follows the screen
        await pilot.press("minus")
        assert node_map.map_layout.zoom is Zoom.NODE and node_map.zoom is None


async def test_a_group_cell_keeps_a_silent_node_in_sight() -> None:
    app = demo_app(nodes=1000)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for_data(pilot)
        node_map = app.screen.query_one(ClusterMap)
        silent = incident_node(app, "unresponsive")
        await pilot.press("minus")
        rack = node_map._groups[node_map._group_of[node_map._index[silent]]]  # type: ignore[index]
        at = node_map._groups.index(rack)  # type: ignore[union-attr]
        state, heat = node_map._group_codes[at]
        assert state == STALE and heat < 10  # its state, beside the heat of the rack's other nodes
        layout = node_map.map_layout
        line = map_lines(node_map)[layout.line_of(at)]
        assert "\u00b7" in line


async def test_switching_back_to_a_metric_reuses_its_lines_while_their_cells_are_the_same() -> None:
    app = demo_app(nodes=300)
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for_data(pilot)
        node_map = app.screen.query_one(ClusterMap)
        util_lines = map_lines(node_map)
        util_strips = dict(node_map._lines)
        assert len(util_strips) > 3
        node_map.set_metric(Metric.MEM)
        mem_lines = map_lines(node_map)
        assert mem_lines != util_lines
        drawn_for_util = {id(strip) for _, strip in util_strips.values()}
        assert not {id(strip) for _, strip in node_map._lines.values()} & drawn_for_util
        node_map.set_metric(Metric.UTIL)
        # the same cells: every line is the very strip drawn before, and shows the same
        assert map_lines(node_map) == util_lines
        assert all(node_map._lines[line][1] is strip for line, (_, strip) in util_strips.items())
        # new readings while another metric is shown: back on the first, a line shows its new cells
        node_map.set_metric(Metric.MEM)
        app.clock.advance(60.0)  # type: ignore[attr-defined]
        await app.poller.tick()
        await pilot.pause()
        node_map.set_metric(Metric.UTIL)
        shown = [list(node_map.render_line(y)) for y in range(node_map.size.height)]
        reused = sum(node_map._lines[line][1] is strip for line, (_, strip) in util_strips.items())
        node_map._forget_lines()
        assert shown == [list(node_map.render_line(y)) for y in range(node_map.size.height)]
        assert reused < len(util_strips)  # a minute of the simulator changes some line's cells
        # a new theme draws every metric's lines again
        node_map.set_metric(Metric.MEM)
        await pilot.press("t")
        await pilot.pause()
        assert node_map._other_metrics_lines == {}


async def test_a_large_fleets_new_view_reaches_the_map_in_the_frame_after_the_tables() -> None:
    from gputop.tui.screens.dashboard import SPLIT_FRAME_NODES, DashboardScreen

    app = demo_app(nodes=SPLIT_FRAME_NODES)
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for_data(pilot)
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        node_map, table = screen.query_one(ClusterMap), screen.query_one(NodeTable)
        earlier = app.view
        app.clock.advance(5.0)  # type: ignore[attr-defined]
        newest = await app.poller.tick()
        await pilot.pause()
        await pilot.pause()
        # (the app's own ticks go on meanwhile: what is asserted after a pause is the table's view)
        assert node_map._view is table._view
        shown = node_map._view
        # two views before a frame: the table takes each at once, the map the latest, once, a frame later
        screen.apply_view(earlier)
        screen.apply_view(newest)
        assert table._view is newest and node_map._view is shown and screen._map_view is newest
        screen.apply_view(earlier)
        assert table._view is earlier and node_map._view is shown and screen._map_view is earlier
        await pilot.pause()
        await pilot.pause()
        assert node_map._view is table._view and screen._map_view is None
        # the map's lines are that view's
        drawn = map_lines(node_map)
        node_map._forget_lines()
        assert map_lines(node_map) == drawn


async def test_a_key_that_moves_the_selection_repaints_only_the_map_lines_it_leaves_and_enters() -> None:
    app = demo_app(nodes=300)
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for_data(pilot)
        app.poller.stop()
        await pilot.pause()
        node_map = app.screen.query_one(ClusterMap)
        table = app.screen.query_one(NodeTable)
        asked: list[int] = []
        original = node_map.render_line

        def render_line(y: int):  # type: ignore[no-untyped-def]
            asked.append(y)
            return original(y)

        node_map.render_line = render_line  # type: ignore[method-assign]
        layout = node_map._current_layout()
        for _ in range(12):  # down the table until the selection crosses a map line
            before = node_map.selected
            asked.clear()
            await pilot.press("down")
            await pilot.pause()
            after = node_map.selected
            assert after == table.cursor_name and after != before
            lines = {node_map._line_of_name(name, layout) for name in (before, after)}
            assert set(asked) <= {line - node_map._top for line in lines if line is not None}
            assert asked  # the line that now shows the selection was drawn again
        # what the map shows (old lines kept, the two drawn again) is what a full redraw draws
        shown = map_lines(node_map)
        node_map._forget_lines()
        assert map_lines(node_map) == shown
