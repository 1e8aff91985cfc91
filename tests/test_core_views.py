"""Model, health rules, rows, summary and the filter language, on hand-built samples."""

from __future__ import annotations

import dataclasses

import pytest

from gputop.core.config import Thresholds
from gputop.core.filter import FilterError, parse_filter
from gputop.core.health import assess_node, format_age, format_idle
from gputop.core.idle import IdleGpu
from gputop.core.metrics import HeatScale, Metric, heat_scales
from gputop.core.models import (
    ClusterSnapshot,
    GpuSample,
    IbPort,
    NodeSample,
    Reachability,
    Severity,
    SlurmBaseState,
    SlurmJob,
    SlurmNode,
    SlurmState,
    XidEvent,
)
from gputop.core.summary import NodeRow
from gputop.core.view import ViewStage
from tests.factories import gpu_sample

NOW = 1_800_000_000.0
T = Thresholds()


def stage() -> ViewStage:
    """The one derivation path; a reading over its threshold counts at once, as in one round of check."""
    return ViewStage(T, interval_s=1.0, judge_at_once=True)


def gpu(
    index: int, util: float | None = 50.0, temp: float = 60.0, mem_used: float = 1000.0, **kw: object
) -> GpuSample:
    return gpu_sample(index, util_pct=util, temp_c=temp, mem_used_mib=mem_used, **kw)


def node(name: str, gpus: tuple[GpuSample, ...] | None = None, **kw: object) -> NodeSample:
    fields: dict[str, object] = dict(
        name=name,
        reachability=Reachability.OK,
        sampled_at_s=NOW,
        gpus=gpus if gpus is not None else tuple(gpu(i) for i in range(8)),
        expected_gpu_count=8,
    )
    fields.update(kw)
    return NodeSample(**fields)  # type: ignore[arg-type]


def kinds(sample: NodeSample, slurm: SlurmNode | None = None) -> list[tuple[Severity, str]]:
    return [(p.severity, p.kind) for p in assess_node(sample, slurm, T, NOW)]


def test_healthy_node_has_no_problem() -> None:
    assert kinds(node("gpu001")) == []


def test_temperature_warn_and_crit_follow_thresholds() -> None:
    hot = node("gpu001", tuple(gpu(i, temp=86.0 if i == 3 else 60.0) for i in range(8)))
    assert kinds(hot) == [(Severity.WARN, "temp")]
    hotter = node("gpu001", tuple(gpu(i, temp=91.0 if i == 3 else 60.0) for i in range(8)))
    problems = assess_node(hotter, None, T, NOW)
    assert problems[0].severity is Severity.CRIT and problems[0].message == "GPU3 91 C"
    cooler_rules = dataclasses.replace(T, temp_warn_c=95.0, temp_crit_c=99.0)
    assert assess_node(hotter, None, cooler_rules, NOW) == ()


def test_missing_gpu_ecc_xid_ib_and_memory() -> None:
    gpus = tuple(
        gpu(i, ecc_uncorrected=2 if i == 1 else 0, mem_used=80_000.0 if i == 2 else 1000.0)
        for i in range(8)
        if i != 5
    )
    sample = node(
        "gpu002",
        gpus,
        xid_events=(XidEvent(NOW - 60, 79, "0000:18:00.0", 1, "GPU has fallen off the bus"),),
        ib_ports=(IbPort("mlx5_3", 1, "Down", "Disabled", None),),
    )
    problems = assess_node(sample, None, T, NOW)
    found = {(p.kind, p.gpu_index) for p in problems}
    assert ("missing", 5) in found
    assert ("ecc", 1) in found
    assert ("xid", 1) in found
    assert ("ib", None) in found
    assert ("mem", 2) in found
    # worst first
    assert [p.severity for p in problems] == sorted((p.severity for p in problems), key=lambda s: -s.rank)
    assert any(p.message == "GPU5 missing" for p in problems)


def test_application_xid_is_a_warning_hardware_xid_is_critical() -> None:
    app_fault = node("n1", xid_events=(XidEvent(NOW, 13, None, 0, "Graphics Exception"),))
    assert kinds(app_fault) == [(Severity.WARN, "xid")]
    hw_fault = node("n1", xid_events=(XidEvent(NOW, 48, None, 0, "DBE"),))
    assert kinds(hw_fault) == [(Severity.CRIT, "xid")]


def test_slurm_drained_and_not_responding() -> None:
    drained = SlurmNode("n1", SlurmBaseState.IDLE, frozenset({"DRAIN"}), reason="Xid 48 on GPU2")
    assert drained.label == "drained"
    problems = assess_node(node("n1"), drained, T, NOW)
    assert problems[0].message == "drained: Xid 48 on GPU2"
    draining = SlurmNode("n1", SlurmBaseState.MIXED, frozenset({"DRAIN"}))
    assert draining.label == "draining"
    silent = SlurmNode("n1", SlurmBaseState.ALLOCATED, frozenset({"NOT_RESPONDING"}))
    assert silent.label == "allocated*"
    assert kinds(node("n1"), silent) == [(Severity.CRIT, "slurm")]


def test_stale_and_down_nodes() -> None:
    stale = node("n1", reachability=Reachability.STALE, sampled_at_s=NOW - 20, error="no data for 20s")
    assert kinds(stale) == [(Severity.WARN, "stale")]
    down = node("n1", reachability=Reachability.DOWN, sampled_at_s=None, error="connection refused")
    problems = assess_node(down, None, T, NOW)
    assert problems[0].severity is Severity.CRIT
    assert "connection refused" in problems[0].message


def test_rows_summary_and_reuse() -> None:
    nodes = (
        node("gpu001"),
        node("gpu002", tuple(gpu(i, util=None, mig_enabled=True) for i in range(8))),
        node("gpu003", reachability=Reachability.DOWN, sampled_at_s=None, gpus=()),
    )
    snapshot = ClusterSnapshot.build("c", NOW, nodes)
    views = stage()
    view = views.derive(snapshot)
    row = view.rows["gpu001"]
    assert row.util_mean_pct == 50.0 and row.gpu_count == 8 and row.power_w == 2400.0
    assert view.rows["gpu002"].util_mean_pct is None  # MIG: not reported, not 0
    s = view.summary
    assert (s.nodes_ok, s.nodes_stale, s.nodes_down) == (2, 0, 1)
    assert s.util_mean_pct == 50.0  # the MIG node does not drag the mean to 0
    assert s.gpu_count == 16
    assert s.alerts_crit >= 1
    # an unchanged OK node keeps its row object; a new sample gets a new row
    nodes2 = (nodes[0], node("gpu002"), nodes[2])
    view2 = views.derive(ClusterSnapshot.build("c", NOW + 1, nodes2))
    assert view2.rows["gpu001"] is row
    assert view2.rows["gpu002"] is not view.rows["gpu002"]


def test_heat_scale_top_step_is_the_threshold() -> None:
    scales = heat_scales(temp_warn_c=85, mem_warn_pct=95, power_warn_pct=100)
    temp = scales[Metric.TEMP]
    assert temp.step(84.9) < 9
    assert temp.step(85) == 9
    assert temp.step(20) == 0
    assert HeatScale(0, 100).step(50) == 4
    assert scales[Metric.MEM].step(96) == 9
    assert Metric.UTIL.next() is Metric.MEM and Metric.POWER.next() is Metric.UTIL


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("temp>85", {"hot"}),
        ("temp>=60 !hot", {"idle", "mig", "drained"}),
        ("util<5", {"idle"}),
        ("state=down", {"down"}),
        ("slurm=drain", {"drained"}),
        ("sev=crit", {"hot", "down"}),
        ("gpus<8", {"down"}),
        ("HOT", {"hot"}),
        ("", {"hot", "idle", "mig", "down", "drained"}),
    ],
)
def test_filter_language(text: str, expected: set[str]) -> None:
    nodes = (
        node("hot", tuple(gpu(i, temp=92.0 if i == 0 else 60.0) for i in range(8))),
        node("idle", tuple(gpu(i, util=0.0) for i in range(8))),
        node("mig", tuple(gpu(i, util=None, mig_enabled=True) for i in range(8))),
        node("down", reachability=Reachability.DOWN, sampled_at_s=None, gpus=()),
        node("drained"),
    )
    slurm = SlurmState(
        nodes={"drained": SlurmNode("drained", SlurmBaseState.IDLE, frozenset({"DRAIN"}), reason="bad")},
        jobs=(),
        sampled_at_s=NOW,
    )
    view = stage().derive(ClusterSnapshot.build("c", NOW, nodes, slurm))
    node_filter = parse_filter(text)
    assert {r.name for r in view.rows.values() if node_filter(r)} == expected


def test_filter_nodeset_term() -> None:
    nodes = tuple(node(f"gpu{i:03d}") for i in range(1, 21))
    view = stage().derive(ClusterSnapshot.build("c", NOW, nodes))
    node_filter = parse_filter("gpu[001-003,010]")
    assert sorted(r.name for r in view.rows.values() if node_filter(r)) == [
        "gpu001",
        "gpu002",
        "gpu003",
        "gpu010",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("temp>hot", "compares with a number"),
        ("colour=red", "unknown field"),
        ("state>1", "takes = or !="),
        ("temp>", "a value must follow >"),  # half typed: not a name search that empties the table
        ("slurm=", "a value must follow ="),
        ("gpu[001-", "not a node set"),
    ],
)
def test_filter_errors_name_the_term(text: str, message: str) -> None:
    with pytest.raises(FilterError, match=message):
        parse_filter(text)


def test_format_age() -> None:
    assert format_age(5) == "5s"
    assert format_age(600) == "10m"
    assert format_age(3 * 3600) == "3h"
    assert format_age(3 * 86400) == "3d"
    assert format_age(-4) == "0s"


def test_a_node_that_answers_but_reports_a_broken_driver_is_critical() -> None:
    lost = node("n1", error="GPU 0000:18:00.0 lost: unable to determine the device handle")
    assert kinds(lost) == [(Severity.CRIT, "collect")]
    hiccup = node("n1", error="metrics stream ended (nvidia-smi exit status 0)")
    assert kinds(hiccup) == [(Severity.WARN, "collect")]


def test_a_node_that_never_answered_is_down_not_eight_gpus_missing() -> None:
    never = node("n1", reachability=Reachability.DOWN, sampled_at_s=None, gpus=(), error="connection refused")
    assert kinds(never) == [(Severity.CRIT, "down")]


# --- allocated-but-idle GPUs ------------------------------------------------------------------------------


def idle_gpu(index: int, idle_s: float = 12 * 60, job_id: str = "4812035", user: str = "ana") -> IdleGpu:
    return IdleGpu("gpu001", index, job_id, user, NOW - idle_s, idle_s)


def test_idle_gpus_are_a_warning_that_names_gpu_duration_job_and_user() -> None:
    problems = assess_node(node("gpu001"), None, T, NOW, idle_gpus=(idle_gpu(3),))
    assert [(p.severity, p.kind, p.gpu_index, p.message) for p in problems] == [
        (Severity.WARN, "idle", 3, "GPU3 idle 12 min in job 4812035 (ana)")
    ]
    # one problem per job: its GPUs folded, the shortest idle time, hours past two hours
    many = (
        *(idle_gpu(i, idle_s=3 * 3600 + i) for i in (0, 1, 2, 3, 5)),
        idle_gpu(6, idle_s=700, job_id="4812040", user="bob"),
    )
    messages = [p.message for p in assess_node(node("gpu001"), None, T, NOW, idle_gpus=many)]
    assert messages == ["GPU0-3,5 idle 3.0 h in job 4812035 (ana)", "GPU6 idle 11 min in job 4812040 (bob)"]
    assert assess_node(node("gpu001"), None, T, NOW) == ()  # nothing without the argument
    assert format_idle(119 * 60 + 59) == "119 min" and format_idle(150 * 60) == "2.5 h"


def test_rows_carry_idle_problems_and_are_rebuilt_only_when_they_read_differently() -> None:
    """A job's GPU held idle, through the view stage's own idle tracker: its row says so, is kept while
    the words stay the same, and is rebuilt when they change."""
    start = NOW - 12 * 60
    job = SlurmJob("4812035", "train", "ana", "gpu", "RUNNING", {"gpu001": (3,)}, start_time_s=start - 60)
    slurm = SlurmState(nodes={}, jobs=(job,), sampled_at_s=start)
    idle = node("gpu001", tuple(gpu(i, util=0.0 if i == 3 else 50.0) for i in range(8)))
    busy = node("gpu001")
    other = node("gpu002")
    views = stage()

    def at(t: float, gpu001: NodeSample) -> dict[str, NodeRow]:
        return dict(views.derive(ClusterSnapshot.build("c", t, (gpu001, other), slurm)).rows)

    plain = at(start, busy)
    assert plain["gpu001"].idle_gpu_count == 0
    for minute in range(13):  # GPU3 at 0 % from start on, seen every minute
        rows = at(start + 60 * minute, idle)
    row = rows["gpu001"]
    assert row.idle_gpu_count == 1 and row.severity is Severity.WARN
    assert row.worst_problem == "GPU3 idle 12 min in job 4812035 (ana)"
    assert rows["gpu002"] is plain["gpu002"]  # the other node's row is never rebuilt
    # ten more seconds idle: the words are the same, so is the row
    assert at(NOW + 10, idle)["gpu001"] is row
    # a minute more: the words move, the row is new
    later = at(NOW + 60, idle)["gpu001"]
    assert later is not row and later.worst_problem.startswith("GPU3 idle 13 min")
    # busy again: the flag goes, with its problem
    view = views.derive(ClusterSnapshot.build("c", NOW + 70, (busy, other), slurm))
    assert view.rows["gpu001"].problems == () and view.rows["gpu001"].idle_gpu_count == 0
    assert view.summary.alerts_warn == 0


def test_the_view_stage_derives_job_rows() -> None:
    job = SlurmJob("7", "train", "ana", "gpu", "RUNNING", {"gpu001": (0, 1)}, start_time_s=NOW - 60)
    slurm = SlurmState(nodes={}, jobs=(job,), sampled_at_s=NOW)
    views = stage()
    view = views.derive(ClusterSnapshot.build("c", NOW, (node("gpu001"),), slurm))
    assert set(view.jobs) == {"7"} and view.jobs["7"].util_mean_pct == 50.0
    again = views.derive(view.snapshot)
    assert again.jobs["7"] is view.jobs["7"]
    assert stage().derive(ClusterSnapshot.build("c", NOW, (node("gpu001"),))).jobs == {}


def test_node_filter_idle_term() -> None:
    start = NOW - 11 * 60
    jobs = (
        SlurmJob("1", "a", "ana", "gpu", "RUNNING", {"gpu001": (0, 1)}, start_time_s=start - 60),
        SlurmJob("2", "b", "bob", "gpu", "RUNNING", {"gpu002": (5,)}, start_time_s=start - 60),
    )
    slurm_nodes = {"gpu003": SlurmNode("gpu003", SlurmBaseState.IDLE)}
    slurm = SlurmState(nodes=slurm_nodes, jobs=jobs, sampled_at_s=start)
    nodes = (
        node("gpu001", tuple(gpu(i, util=0.0 if i in (0, 1) else 50.0) for i in range(8))),
        node("gpu002", tuple(gpu(i, util=0.0 if i == 5 else 50.0) for i in range(8))),
        node("gpu003"),
    )
    views = stage()
    for minute in range(12):
        view = views.derive(ClusterSnapshot.build("c", start + 60 * minute, nodes, slurm))

    def names(text: str) -> set[str]:
        node_filter = parse_filter(text)
        return {r.name for r in view.rows.values() if node_filter(r)}

    assert names("idle") == {"gpu001", "gpu002"}  # GPUs held idle, not Slurm's idle state
    assert names("IDLE") == {"gpu001", "gpu002"}
    assert names("!idle") == {"gpu003"}
    assert names("idle>=2") == {"gpu001"}
    assert names("slurm=idle") == {"gpu003"}


def test_each_metrics_reader_reads_what_of_reads() -> None:
    from gputop.core.metrics import Metric
    from gputop.core.models import GpuSample

    gpu = GpuSample(
        0, "GPU-0", "H100", None, 37.0, 5.0, 40000.0, 80000.0, 61.0, 350.0, 700.0, 1980.0, 1980.0, 0, False
    )
    assert (
        [Metric(m).reader(gpu) for m in Metric]
        == [Metric(m).of(gpu) for m in Metric]
        == [37.0, 50.0, 61.0, 50.0]
    )


def test_cells_for_another_metric_are_worked_out_once_and_carried_over() -> None:
    """The map's codes have one owner: the view gives any metric's, and after a switch the next view
    keeps the same tuples for the nodes that did not move (the map's change signal)."""
    views = stage()
    hot = node("gpu001", tuple(gpu(i, temp=88.0 if i == 2 else 60.0) for i in range(8)))
    cool = node("gpu002")
    first = views.derive(ClusterSnapshot.build("c", NOW, (hot, cool)))
    assert first.cells_metric is Metric.UTIL
    temp = first.cells_for(Metric.TEMP)
    assert first.cells_for(Metric.TEMP) is temp  # worked out once
    assert temp["gpu001"][2] == 9 and temp["gpu001"][0] < 9  # the flagged GPU alone takes the top step
    assert first.cells_known(Metric.MEM) is None
    views.cell_metric = Metric.TEMP  # what the app does on a switch
    second = views.derive(
        ClusterSnapshot.build("c", NOW + 1, (hot, node("gpu002", tuple(gpu(i, temp=70.0) for i in range(8)))))
    )
    assert second.cells_metric is Metric.TEMP and second.cells_for(Metric.TEMP) is second.cells
    assert second.cells["gpu001"] is temp["gpu001"]  # same row: the same tuple
    assert second.cells["gpu002"] is not temp["gpu002"]


def test_only_the_core_works_out_cell_codes() -> None:
    import ast
    from pathlib import Path

    import gputop

    root = Path(gputop.__file__).parent
    callers = {
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        for found in ast.walk(ast.parse(path.read_text()))
        if isinstance(found, ast.Name | ast.Attribute)
        and "cell_codes" in (getattr(found, "id", None), getattr(found, "attr", None))
    }
    assert callers and all(c.startswith("core/") for c in callers), callers


def test_a_cell_takes_the_step_its_scale_gives_at_every_value_boundaries_included() -> None:
    from gputop.core.heatmap import cell_codes

    scale = HeatScale(low=0.0, warn=100.0)
    odd_scale = HeatScale(low=17.5, warn=83.0)
    values = [v / 4 for v in range(-8, 420)] + [1e-9, 99.999999, 100.0, 17.5, 83.0, 82.99999]
    for scale_used in (scale, odd_scale):
        for value in values:
            one = node("n1", gpus=(gpu(0, util=value),), expected_gpu_count=1)
            codes = cell_codes(one, (), Metric.UTIL, scale_used)
            assert codes == (scale_used.step(value),), value
