"""Nodes whose links differ from their peers': named in words on the table, marked on the map, found by
the filter (the demo's degraded-NVLink, slow-port and port-down nodes)."""

from __future__ import annotations

from textual.widgets import Input

from gputop.core.heatmap import CRIT_FLAG
from gputop.core.models import Severity
from gputop.tui.widgets.node_table import NodeTable
from tests.tui_helpers import demo_app, wait_for_data

SIZE = (160, 50)


def incident_node(app: object, kind: str) -> str:
    cluster = app.settings.sources[0].cluster  # type: ignore[attr-defined]
    return next(i.node for i in cluster.incidents if i.kind == kind)


async def test_deviations_from_peers_are_problems_on_the_table_and_the_map() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        view = app.view
        assert view is not None
        nvlink = view.rows[incident_node(app, "nvlink_degraded")]
        (link,) = [p for p in nvlink.problems if p.kind == "interconnect"]
        assert link.message == "GPU5 has 12 of 18 NVLinks active" and link.severity is Severity.CRIT
        assert view.cells[nvlink.name][5] >= CRIT_FLAG, "the GPU is marked critical on the map"
        slow = view.rows[incident_node(app, "ib_slow")]
        assert [p.message for p in slow.problems if p.kind == "interconnect"] == [
            "mlx5_3 at 200 Gb/s, peers at 400"
        ]
        # a port down is said once: by its own state, not again as a difference from the peers
        down = view.rows[incident_node(app, "ib_down")]
        assert [p.message for p in down.problems if "mlx5_3 port 1" in p.message] == ["mlx5_3 port 1 Down"]
        others = [r for r in view.rows.values() if r.name not in {nvlink.name, slow.name, down.name}]
        assert not any(p.kind == "interconnect" for r in others for p in r.problems)


async def test_the_filter_finds_the_nodes_that_differ() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        await pilot.press("slash", *"kind=interconnect")
        await pilot.pause()
        table = app.screen.query_one(NodeTable)
        wanted = {incident_node(app, "nvlink_degraded"), incident_node(app, "ib_slow")}
        assert set(table.order) == wanted
        app.screen.query_one("#filter", Input).value = "nvlink"
        await pilot.pause()
        # free text matches every problem's words: the NVLink CRC errors' node too
        assert set(table.order) == {incident_node(app, "nvlink_degraded"), incident_node(app, "nvlink_crc")}
