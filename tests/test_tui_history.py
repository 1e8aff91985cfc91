"""History in the dashboard: the node table's 5-minute utilization trend, and the node screen's chart
(c switches the metric, w the window), at a normal size and at 80x24."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from gputop.core.config import Thresholds
from gputop.core.summary import node_row
from gputop.core.table_export import table_csv
from gputop.tui.screens.node import NodeScreen
from gputop.tui.widgets.alert_table import AlertTable
from gputop.tui.widgets.cluster_strip import ClusterStrip
from gputop.tui.widgets.history_chart import HistoryChart
from gputop.tui.widgets.job_table import JobTable
from gputop.tui.widgets.node_table import NodeTable
from tests.factories import node_sample
from tests.tui_helpers import demo_app, wait_for_data


def chart_text(chart: HistoryChart) -> str:
    return str(chart.render())


async def test_the_table_shows_a_trend_and_the_node_screen_a_chart_that_switches() -> None:
    app = demo_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for_data(pilot)
        table = app.screen.query_one(NodeTable)
        header = table.render_line(0).text
        assert "Util 5m" in header
        idle_row = next(i for i, key in enumerate(table.order) if key == "gpu015")  # the idle job's node
        table.go_to("gpu015")
        await pilot.pause()
        line = table.render_line(idle_row - table.scroll_offset.y + 1).text
        assert "▁▁▁▁" in line  # idle for the whole replayed past
        await pilot.press("enter")
        await pilot.pause(0.3)
        screen = app.screen
        assert isinstance(screen, NodeScreen)
        chart = screen.query_one(HistoryChart)
        text = chart_text(chart)
        assert "utilization % over the last 5 min" in text and "minutes before now" in text
        assert "⠀" in text or any(0x2800 < ord(ch) <= 0x28FF for ch in text)  # braille points drawn
        await pilot.press("c")
        assert "temperature C over the last 5 min" in chart_text(chart)
        await pilot.press("w")
        assert "temperature C over the last 1 h" in chart_text(chart)
        # the demo's replayed hour: the chart's readings reach back nearly an hour at the first frame
        store = app.poller.stage.history_store
        assert store is not None
        now_s = app.clock.now()
        series = store.node_mean("gpu003", "temp_c", 3600.0, now_s)
        assert series.times_s[0] <= now_s - 55 * 60 and not np.isnan(series.values).all()
        assert not series.gap_after().any()  # replayed a minute apart: no gap between them
        await pilot.press("w", "w")
        assert "over the last 5 min" in chart_text(chart)


async def test_the_chart_fits_80_by_24() -> None:
    app = demo_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_data(pilot)
        await pilot.press("enter")
        await pilot.pause(0.3)
        chart = app.screen.query_one(HistoryChart)
        assert chart.size.width >= 60 and chart.size.height >= 10
        assert "utilization % over the last 5 min" in chart_text(chart)


async def test_h_shows_the_cluster_strip_and_e_exports_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = demo_app()
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_for_data(pilot)
        strip = app.screen.query_one(ClusterStrip)
        assert not strip.display or not strip.has_class("shown")
        await pilot.press("H")
        await pilot.pause(0.2)
        lines = str(strip.render()).splitlines()
        assert [line.split()[0] for line in lines] == ["util", "power", "problems"]
        assert any(ch in lines[0] for ch in "▁▂▃▄▅▆▇█") and lines[0].rstrip().endswith("%")
        await pilot.press("slash", *"gpu00", "enter")
        await pilot.pause(0.2)
        await pilot.press("E")
        await pilot.pause(0.2)
    (written,) = tmp_path.glob("gputop-demo-*.csv")
    rows = list(csv.DictReader(written.read_text().splitlines()))
    assert {r["node"] for r in rows} == {f"gpu00{i}" for i in range(1, 10)}
    assert rows[0]["util_mean_pct"] and rows[0]["severity"] == "crit"


def test_exported_text_cannot_pose_as_a_formula() -> None:
    row = dataclasses.replace(
        node_row(node_sample('=HYPERLINK("http://x")', 2), None, Thresholds(), 0.0), slurm_state="-drain"
    )
    out = list(csv.reader(table_csv([row]).splitlines()))
    assert out[0][:3] == ["node", "state", "gpus"]
    assert out[1][0] == '\'=HYPERLINK("http://x")' and out[1][11] == "'-drain"


async def test_the_queue_and_the_alerts_show_how_things_moved() -> None:
    app = demo_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for_data(pilot)
        await pilot.press("J")
        await pilot.pause(0.3)
        jobs = app.screen.query_one(JobTable)
        header = jobs.render_line(0).text
        assert "Util/life" in header
        lines = [jobs.render_line(y).text for y in range(1, 20)]
        # a running job whose GPUs report utilization (not a MIG GPU's "n/a") has its life's sparkline
        running = [line for line in lines if " running " in line and " n/a " not in line]
        assert running and all(any(ch in line for ch in "▁▂▃▄▅▆▇█") for line in running)
        assert not any(ch in line for line in lines if " pending " in line for ch in "▁▂▃▄▅▆▇█")
        await pilot.press("escape", "A")
        await pilot.pause(0.3)
        alerts = app.screen.query_one(AlertTable)
        assert "Last 15m" in alerts.render_line(0).text
        rows = [alerts.render_line(y).text for y in range(1, len(alerts.order) + 1)]
        hot = [row for row in rows if " temp " in row]
        assert hot and any(ch in hot[0] for ch in "▁▂▃▄▅▆▇█")  # the hot GPU's temperature
