"""A node's past read from a real VictoriaMetrics when its chart's window reaches further back than gputop's
own history: the source's range queries for one node, and the node screen drawing a day from the store,
saying so, and saying why where the store cannot answer."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest

from gputop.cluster_app import build_cluster_app
from gputop.core.config import ClusterConfig, Config, PrometheusConfig
from gputop.core.models import Reachability
from gputop.core.nodeset import expand_nodeset
from gputop.sim.dcgm_text import ExporterStyle, exposition
from gputop.sim.simulator import SimulatedCluster
from gputop.sources.prometheus import PrometheusSource, StoreError
from gputop.tui.screens.node import NodeScreen
from gputop.tui.widgets.history_chart import HistoryChart
from tests.infra.stores import VICTORIA_METRICS, victoria_metrics, vm_import

pytestmark = pytest.mark.skipif(
    not os.path.exists(VICTORIA_METRICS),
    reason="VictoriaMetrics is not installed (Debian package victoria-metrics)",
)
HOURS_S = 3 * 3600.0
EVERY_S = 120.0


def _three_hours(now_s: float) -> tuple[str, dict[float, dict[str, list[float]]]]:
    """Four nodes' readings every two minutes for the last three hours, in dcgm-exporter's format (the
    second node's site spells its host label `hostname`), and each node's GPU temperatures by time."""
    sim = SimulatedCluster(nodes=4, gpus_per_node=8, seed=7, start_time_s=now_s - HOURS_S - 5)
    texts, temps = [], {}
    at_s = now_s - HOURS_S
    while at_s <= now_s:
        sim.advance_to(at_s)
        answering = [n for n in sim.result().nodes if n.reachability is Reachability.OK]
        at_ms = int(at_s * 1000)
        texts.append(exposition(answering[:1], ExporterStyle(), at_ms))
        texts.append(
            exposition(answering[1:], ExporterStyle(host_label="hostname", uuid_label="uuid"), at_ms)
        )
        temps[at_s] = {n.name: [g.temp_c for g in n.gpus] for n in answering}
        at_s += EVERY_S
    return "".join(texts), temps


def _cluster(url: str) -> ClusterConfig:
    nodes = "gpu[001-004]"
    return ClusterConfig(
        name="prom",
        nodeset=nodes,
        node_names=expand_nodeset(nodes),
        # no SSH to the node on screen: these nodes are only in the store
        prometheus=PrometheusConfig(url=url, ssh_on_node_screen=False),
    )


async def test_a_node_s_day_is_read_from_the_store_for_that_node_alone(tmp_path: Path) -> None:
    now_s = time.time()
    text, temps = _three_hours(now_s)
    with victoria_metrics(tmp_path) as store:
        vm_import(store, text)
        source = PrometheusSource(_cluster(store.url), time.time)
        await source.start()
        try:
            await source.collect(time.time())
            for name in ("gpu001", "gpu002"):  # Hostname, hostname
                past = await source.node_past(name, 86400.0)
                assert past is not None and past.step_s == 120.0
                series = past.history.series(name, 3, "temp_c", 86400.0, time.time())
                # the store's three hours, no more (a day's window: no row before the first reading)
                assert (
                    series.times_s[0] >= now_s - HOURS_S
                    and series.times_s[0] <= now_s - HOURS_S + 2 * EVERY_S
                )
                assert len(series) >= 85 and not np.isnan(series.values).any()
                # each step holds the newest reading at or before it, as the store gave it (to 1 C)
                imported = sorted(temps)
                for at_s, value in zip(series.times_s, series.values, strict=True):
                    newest = max(t for t in imported if t <= at_s + 0.001)
                    assert value == round(temps[newest][name][3]), (at_s, newest)
                assert past.history.node_gpus(name) == list(range(8))
                assert set(past.history.node_columns) <= {name}
            assert await source.node_past("gpu999", 86400.0) is None  # not a node of this store's
        finally:
            await source.close()
        # the store gone: the reason, never a hang
        source = PrometheusSource(_cluster(store.url), time.time)
        await source.start()
        await source.collect(time.time())
    try:
        with pytest.raises(StoreError, match="cannot reach"):
            await source.node_past("gpu001", 86400.0)
    finally:
        await source.close()


async def test_the_node_screen_draws_a_day_from_the_store_and_says_so(tmp_path: Path) -> None:
    now_s = time.time()
    text, _temps = _three_hours(now_s)
    with victoria_metrics(tmp_path) as store:
        vm_import(store, text)
        config = Config.default()
        app = build_cluster_app(config, _cluster(store.url))
        app.settings.freeze_gc = False
        async with app.run_test(size=(160, 50)) as pilot:
            deadline = time.monotonic() + 30
            while app.view is None and time.monotonic() < deadline:
                await pilot.pause(0.05)
            assert app.view is not None
            await app.push_screen(NodeScreen("gpu002"))
            await pilot.pause(0.3)
            chart = app.screen.query_one(HistoryChart)
            # an hour: the store's last hour was read at start, and gputop's own rows draw it
            await pilot.press("w")
            assert "over the last 1 h  (c: metric" in str(chart.render())
            await pilot.press("w")
            title = ""
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                await pilot.pause(0.1)
                title = str(chart.render())
                if "from the store" in title:
                    break
            assert "utilization % over the last 24 h, from the store" in title
            assert any(0x2800 < ord(ch) <= 0x28FF for ch in title)  # the day's lines, in braille
            # the chart's lines reach back three hours: the store's whole past
            screen = app.screen
            assert isinstance(screen, NodeScreen)
            past = screen._store_past._past
            assert past is not None and past.node == "gpu002"
            series = past.history.node_mean("gpu002", "util_pct", 86400.0, time.time())
            assert series.times_s[0] <= now_s - HOURS_S + 2 * EVERY_S
