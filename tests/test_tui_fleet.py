"""The real app watching the fake fleet over SSH: nodes appear, and a node made to fail says why while
the others keep updating."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from gputop.cluster_app import build_cluster_app
from gputop.config_file import load_config
from gputop.core.models import Reachability
from gputop.core.summary import ClusterView
from gputop.sim.fake_fleet import Fault, run_fleet
from gputop.tui.app import GputopApp
from gputop.tui.screens.node import NodeScreen
from gputop.tui.widgets.node_table import NodeTable
from gputop.tui.widgets.status_header import StatusHeader


async def until(app: GputopApp, check: Callable[[ClusterView], bool], timeout_s: float = 15.0) -> ClusterView:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        view = app.view
        if view is not None and check(view):
            return view
        await asyncio.sleep(0.05)
    raise AssertionError("the app never showed what was expected")


async def test_app_watches_the_fleet_and_names_a_failing_node(tmp_path: Path) -> None:
    async with run_fleet(nodes=8, port=0, state_dir=tmp_path / "fleet") as fleet:
        config = load_config(fleet.config_path)
        poll = dataclasses.replace(config.poll, interval_s=0.3, backoff_initial_s=0.2, backoff_max_s=1.0)
        config = dataclasses.replace(config, poll=poll)
        app = build_cluster_app(config, config.clusters[0])
        up = [n for n in fleet.node_names if n not in fleet.unresponsive_nodes]
        async with app.run_test(size=(200, 50)) as pilot:
            view = await until(app, lambda v: all(v.snapshot.by_name[n].gpus for n in up))
            table = app.screen.query_one(NodeTable)
            await pilot.pause()
            assert sorted(table.order) == sorted(fleet.node_names)
            header = str(app.screen.query_one(StatusHeader).render())
            assert config.clusters[0].name in header and "DEMO" not in header
            for silent in fleet.unresponsive_nodes:
                assert view.rows[silent].reachability is Reachability.DOWN

            victim = up[0]
            fleet.faults.set(victim, Fault.DRIVER_ERROR)
            before = {n: view.snapshot.by_name[n].sampled_at_s or 0 for n in up[1:]}
            view = await until(app, lambda v: "lost" in v.rows[victim].worst_problem)
            view = await until(
                app, lambda v: all((v.snapshot.by_name[n].sampled_at_s or 0) > before[n] for n in up[1:])
            )
            await pilot.pause()
            row_text = next(
                table.render_line(y).text
                for y in range(1, table.size.height)
                if table.render_line(y).text.startswith(victim)
            )
            assert "lost" in row_text
            app.open_node(victim)
            await pilot.pause()
            assert isinstance(app.screen, NodeScreen)
            details = str(app.screen.query_one("#details-text").render())
            assert "unable to determine the device handle" in details


async def test_fleet_deviations_show_on_the_table_and_the_node_screen_over_ssh(tmp_path: Path) -> None:
    """16 fake nodes (the fewest holding the interconnect incidents): once topology, NVLink and ibstat have
    been read over SSH, the node whose GPU5 lost 6 NVLinks and the one with a slow port say so."""
    async with run_fleet(nodes=16, port=0, state_dir=tmp_path / "fleet") as fleet:
        config = load_config(fleet.config_path)
        poll = dataclasses.replace(config.poll, interval_s=0.3, slow_facts_interval_s=2.0)
        config = dataclasses.replace(config, poll=poll)
        app = build_cluster_app(config, config.clusters[0])
        degraded = next(i.node for i in fleet.cluster.incidents if i.kind == "nvlink_degraded")
        slow = next(i.node for i in fleet.cluster.incidents if i.kind == "ib_slow")

        def said(view: ClusterView, node: str) -> list[str]:
            return [p.message for p in view.rows[node].problems if p.kind == "interconnect"]

        async with app.run_test(size=(200, 50)) as pilot:
            view = await until(app, lambda v: bool(said(v, degraded)) and bool(said(v, slow)), timeout_s=30)
            assert said(view, degraded) == ["GPU5 has 12 of 18 NVLinks active"]
            assert said(view, slow) == ["mlx5_3 at 200 Gb/s, peers at 400"]
            await pilot.press("slash", *"kind=interconnect")
            await pilot.pause()
            assert set(app.screen.query_one(NodeTable).order) == {degraded, slow}
            app.open_node(degraded)
            await pilot.pause()
            assert isinstance(app.screen, NodeScreen)
            details = str(app.screen.query_one("#details-text").render())
            assert "GPU5 has 12 of 18 NVLinks active" in details
