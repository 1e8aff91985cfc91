"""Every WARN or CRIT colour comes from the core's verdict: the node table's cells, the node screen's GPU
cells and the map's top step follow the problem list, with the rule's sustain time and hysteresis."""

from __future__ import annotations

import dataclasses

from rich.style import Style
from textual.app import App

from gputop.core.config import Thresholds
from gputop.core.heatmap import CRIT_FLAG
from gputop.core.metrics import HEAT_STEPS, Metric
from gputop.core.models import (
    ClusterSnapshot,
    Reachability,
    Severity,
    SlurmBaseState,
    SlurmNode,
    SlurmState,
)
from gputop.core.problem import Problem, gpu_kind_severities, kind_severity
from gputop.core.summary import ClusterView
from gputop.core.view import ViewStage
from gputop.tui.palette import Palette
from gputop.tui.screens.node import gpu_cells
from gputop.tui.widgets.node_table import COLUMN_BY_KEY
from tests.factories import gpu_sample, node_sample

NOW = 1_800_000_000.0
T = Thresholds()  # temperature: WARN 85 C for 30 s, clears under 82 C
TOP = HEAT_STEPS - 1
PALETTE = dataclasses.replace(
    Palette.from_app(App()),
    severity={
        Severity.OK: Style(color="green"),
        Severity.WARN: Style(color="yellow"),
        Severity.CRIT: Style(color="red"),
    },
)


def view_at(stage: ViewStage, at_s: float, temp_c: float) -> ClusterView:
    gpus = tuple(gpu_sample(i, temp_c=temp_c if i == 3 else 50.0) for i in range(8))
    node = node_sample("gpu001", gpus, sampled_at_s=at_s, expected_gpu_count=8)
    return stage.derive(ClusterSnapshot.build("c", at_s, (node,)))


def shown(view: ClusterView) -> tuple[Severity | None, Severity | None, Style | None, int]:
    """(table's temperature colour, its severity per the core, node screen's GPU3 temperature style,
    the map's GPU3 heat step) for node gpu001."""
    row = view.rows["gpu001"]
    _text, table_severity = COLUMN_BY_KEY["temp"].cell(row, None)
    node = view.snapshot.by_name["gpu001"]
    cells = gpu_cells(node.gpus[3], "gpu001", None, gpu_kind_severities(row.problems), PALETTE)
    style = cells["temp"].style
    return (
        table_severity,
        kind_severity(row.problems, "temp"),
        style if isinstance(style, Style) else None,
        view.cells["gpu001"][3] % CRIT_FLAG,
    )


def test_temperature_colours_follow_the_sustained_verdict_and_its_hysteresis() -> None:
    stage = ViewStage(T, interval_s=1.0)
    stage.cell_metric = Metric.TEMP
    # 88 C just now: past the threshold, not yet for temp_sustain_s. No problem, so no colour anywhere,
    # and the map stays a step below its top.
    assert shown(view_at(stage, NOW, 88.0)) == (None, None, None, TOP - 1)
    # 31 s later it counts: every cell says WARN with the problem list
    table, core, style, step = shown(view_at(stage, NOW + 31, 88.0))
    assert table is core is Severity.WARN
    assert style == PALETTE.severity[Severity.WARN]
    assert step == TOP
    # 83 C: under the threshold but within the hysteresis, still a problem: still coloured, still the top
    table, core, style, step = shown(view_at(stage, NOW + 32, 83.0))
    assert table is core is Severity.WARN and style == PALETTE.severity[Severity.WARN] and step == TOP
    # 70 C: cleared everywhere at once, the map back on its scale
    assert shown(view_at(stage, NOW + 33, 70.0)) == (None, None, None, stage.scales[Metric.TEMP].step(70.0))


def test_table_state_gpus_and_slurm_cells_take_the_problems_severity() -> None:
    stage = ViewStage(T, interval_s=1.0, judge_at_once=True)
    down = node_sample(
        "gpu001", 8, reachability=Reachability.DOWN, sampled_at_s=NOW - 600, expected_gpu_count=8
    )
    short = node_sample("gpu002", 7, sampled_at_s=NOW, expected_gpu_count=8)
    drained_quiet = SlurmNode(
        name="gpu003",
        base_state=SlurmBaseState.IDLE,
        flags=frozenset({"DRAIN", "NOT_RESPONDING"}),
        reason="bad fan",
    )
    drained = node_sample("gpu003", 8, sampled_at_s=NOW, expected_gpu_count=8)
    slurm = SlurmState(nodes={"gpu003": drained_quiet}, jobs=(), sampled_at_s=NOW)
    view = stage.derive(ClusterSnapshot.build("c", NOW, (down, short, drained), slurm))

    def cell(name: str, key: str) -> Severity | None:
        return COLUMN_BY_KEY[key].cell(view.rows[name], None)[1]

    def problem(name: str, kind: str) -> Problem:
        return next(p for p in view.rows[name].problems if p.kind == kind)

    assert cell("gpu001", "state") is problem("gpu001", "down").severity is Severity.CRIT
    assert cell("gpu002", "gpus") is problem("gpu002", "missing").severity is Severity.CRIT
    assert cell("gpu002", "state") is None
    # drained and not responding: the core calls it a warning (the drain says it is out of service), and
    # so does the cell, where it used to say CRIT on its own
    assert cell("gpu003", "slurm") is problem("gpu003", "slurm").severity is Severity.WARN
    assert cell("gpu003", "temp") is None and cell("gpu003", "mem") is None
