"""The map's cells of many nodes at once (numpy) are exactly `cell_codes` node by node: on the demo with its
incidents, at every boundary of the heat scale, and on random nodes with every oddity a source can give."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, replace

import pytest

from gputop.core import cell_columns
from gputop.core.cell_columns import CellColumns, all_cell_codes
from gputop.core.config import Thresholds
from gputop.core.heatmap import COLUMNS_FROM_NODES, CellCodes, cell_codes, cells_of
from gputop.core.map_zoom import Reduce, node_cells
from gputop.core.metrics import HeatScale, Metric, heat_scales
from gputop.core.models import ClusterSnapshot, NodeSample, Reachability, Severity
from gputop.core.problem import Problem
from gputop.core.summary import ClusterView
from gputop.core.view import ViewStage
from gputop.sim.simulator import SimulatedCluster
from tests.factories import gpu_sample, node_sample
from tests.test_tracker_slices import run

T0 = 1_780_000_000.0
SCALES = heat_scales(83.0, 95.0, 90.0)


@dataclass(frozen=True)
class Row:
    """What `cell_codes` reads of a row."""

    problems: tuple[Problem, ...] = ()
    idle_gpu_indices: frozenset[int] = frozenset()


def one_by_one(
    nodes: list[NodeSample], rows: Mapping[str, Row], metric: Metric, scale: HeatScale
) -> dict[str, CellCodes]:
    return {
        n.name: cell_codes(n, rows[n.name].problems, metric, scale, rows[n.name].idle_gpu_indices)
        for n in nodes
        if n.name in rows
    }


def assert_same(nodes: list[NodeSample], rows: Mapping[str, Row], metric: Metric, scale: HeatScale) -> None:
    expected = one_by_one(nodes, rows, metric, scale)
    got = all_cell_codes(nodes, rows, metric, scale)  # type: ignore[arg-type]  # what it reads of a row
    assert list(got) == list(expected)  # the nodes' order
    for name, codes in expected.items():
        assert got[name] == codes, (name, metric)
        assert type(got[name]) is tuple


def test_the_demo_with_its_incidents_every_metric() -> None:
    cluster = SimulatedCluster(nodes=300, gpus_per_node=8, seed=42, start_time_s=T0)
    stage = ViewStage(Thresholds(), interval_s=60.0)
    for minute in range(14):  # past the idle minutes, so jobs' idle GPUs are marked
        now_s = T0 + 60.0 * minute
        cluster.advance_to(now_s)
        result = cluster.result()
        nodes = list(result.nodes)
        # the poller's ageing, as it would find two nodes gone quiet
        nodes[5] = replace(nodes[5], reachability=Reachability.STALE)
        nodes[6] = replace(nodes[6], reachability=Reachability.DOWN)
        view = stage.derive(ClusterSnapshot.build("demo", now_s, tuple(nodes), result.slurm), span_s=60.0)
    nodes = list(view.snapshot.nodes)
    # the demo has nodes the long way takes: critical, idle in a job
    assert any(row.problems for row in view.rows.values())
    assert any(row.idle_gpu_indices for row in view.rows.values())
    for metric in Metric:
        expected = {
            n.name: cell_codes(
                n, view.rows[n.name].problems, metric, view.scales[metric], view.rows[n.name].idle_gpu_indices
            )
            for n in nodes
        }
        assert all_cell_codes(nodes, view.rows, metric, view.scales[metric]) == expected
        assert view.cells_for(metric) == expected  # what the map asks, through `cells_of`
    assert len(nodes) >= COLUMNS_FROM_NODES  # so the view went through the columns


@pytest.mark.parametrize("metric", list(Metric))
def test_every_boundary_of_the_scale(metric: Metric) -> None:
    field = {
        Metric.UTIL: "util_pct",
        Metric.TEMP: "temp_c",
        Metric.MEM: "mem_used_mib",
        Metric.POWER: "power_w",
    }
    whole = {Metric.MEM: 80000.0, Metric.POWER: 700.0}.get(metric, 100.0)
    scale = SCALES[metric]
    # every step boundary, a hair either side, outside the scale, and many in between
    percents = [scale.low + (scale.warn - scale.low) * k / 9 for k in range(10)]
    percents += [p + d for p in percents for d in (-1e-9, 1e-9)] + [v / 4 for v in range(-8, 440)]
    values = [p * whole / 100.0 if metric in (Metric.MEM, Metric.POWER) else p for p in percents]
    nodes = [
        node_sample(f"n{k}", (gpu_sample(0, **{field[metric]: value}),), expected_gpu_count=1)
        for k, value in enumerate(values)
    ]
    assert_same(nodes, {n.name: Row() for n in nodes}, metric, scale)


def random_node(rng: random.Random, name: str) -> NodeSample:
    count = rng.choice([8, 8, 8, 8, 4, 1, 0])
    indices = list(range(count))
    oddity = rng.random()
    if oddity < 0.05 and count > 1:
        rng.shuffle(indices)
    elif oddity < 0.08 and count > 1:
        indices[-1] = indices[0]  # the same index twice
    elif oddity < 0.11 and count > 1:
        indices[-1] = count + 2  # a gap
    elif oddity < 0.13 and count:
        indices[0] = -1  # a GPU without an index

    def maybe(value: float) -> float | None:
        return None if rng.random() < 0.05 else value

    gpus = tuple(
        gpu_sample(
            i,
            util_pct=maybe(rng.choice([0.0, 100.0, rng.uniform(0, 100)])),
            temp_c=maybe(rng.uniform(20, 100)),
            mem_used_mib=maybe(rng.uniform(0, 81559)),
            mem_total_mib=rng.choice([81559.0, 81559.0, 0.0, None]),
            power_w=maybe(rng.uniform(50, 720)),
            power_limit_w=rng.choice([700.0, 700.0, 0.0, None]),
            mig_enabled=rng.random() < 0.1,
        )
        for i in indices
    )
    return node_sample(
        name,
        gpus,
        reachability=rng.choice([Reachability.OK] * 8 + [Reachability.STALE, Reachability.DOWN]),
        expected_gpu_count=rng.choice([None, count, count, 8, 2]),
        not_exported=rng.choice([frozenset()] * 8 + [frozenset({"util_pct"}), frozenset({"power_w"})]),
    )


def random_row(rng: random.Random, node: NodeSample) -> Row:
    problems: tuple[Problem, ...] = ()
    if rng.random() < 0.15:
        severity = rng.choice([Severity.CRIT, Severity.WARN])
        kind = rng.choice(["temp", "mem", "xid"])
        problems = (Problem(severity, node.name, rng.choice([None, 0, 3]), kind, "x"),)
    idle = frozenset(rng.sample(range(8), 2)) if rng.random() < 0.1 else frozenset()
    return Row(problems, idle)


@pytest.mark.parametrize("seed", range(6))
def test_random_nodes_every_oddity(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [random_node(rng, f"n{k:04d}") for k in range(400)]
    rows = {n.name: random_row(rng, n) for n in nodes if rng.random() < 0.97}  # a few without a row
    for metric in Metric:
        assert_same(nodes, rows, metric, SCALES[metric])


@pytest.mark.parametrize("seed", range(3))
def test_in_small_slices_the_same_codes(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # a refresh of 10,000 changed nodes is split and coded a slice at a time; slices of a few nodes here
    # cross every boundary: between plain nodes of one size, of several sizes, and among the others
    monkeypatch.setattr(cell_columns, "NODES_PER_SLICE", 7)
    monkeypatch.setattr(cell_columns, "OTHERS_PER_SLICE", 3)
    rng = random.Random(seed)
    nodes = [random_node(rng, f"n{k:04d}") for k in range(120)]
    rows = {n.name: random_row(rng, n) for n in nodes if rng.random() < 0.97}
    steps = CellColumns.steps(nodes, rows)  # type: ignore[arg-type]
    split, yields = run(steps)
    assert yields >= 120 // 7
    for metric in Metric:
        codes, yields = run(split.codes_steps(metric, SCALES[metric]))
        assert yields >= len(split.names) // 7
        expected = one_by_one(nodes, rows, metric, SCALES[metric])
        assert list(codes) == list(expected) and codes == expected, metric
    # every node the same size: cut a slice of nodes at a time without their spans
    same = [
        node_sample(f"a{k}", tuple(gpu_sample(i, util_pct=float(k + i)) for i in range(8))) for k in range(50)
    ]
    plain = {n.name: Row() for n in same}
    split = CellColumns(same, plain)  # type: ignore[arg-type]
    assert split.spans is None
    codes, _ = run(split.codes_steps(Metric.UTIL, SCALES[Metric.UTIL]))
    assert codes == one_by_one(same, plain, Metric.UTIL, SCALES[Metric.UTIL])


def test_every_node_the_same_size_or_not() -> None:
    # plain nodes of one size are cut in one pass; of several sizes, one by one: both give each its own
    same = [node_sample(f"a{k}", 8) for k in range(50)]
    mixed = [node_sample(f"b{k}", 4 if k % 3 else 8) for k in range(50)]
    for nodes in (same, mixed):
        rows = {n.name: Row() for n in nodes}
        assert_same(nodes, rows, Metric.UTIL, SCALES[Metric.UTIL])
        got = all_cell_codes(nodes, rows, Metric.UTIL, SCALES[Metric.UTIL])  # type: ignore[arg-type]
        assert [len(got[n.name]) for n in nodes] == [len(n.gpus) for n in nodes]


def test_few_nodes_go_node_by_node() -> None:
    nodes = [node_sample(f"n{k}", 8) for k in range(3)]
    rows = {n.name: Row() for n in nodes}
    assert cells_of(nodes, rows, Metric.TEMP, SCALES[Metric.TEMP]) == one_by_one(  # type: ignore[arg-type]
        nodes, rows, Metric.TEMP, SCALES[Metric.TEMP]
    )


def expected_cells(view: ClusterView, metric: Metric) -> dict[str, CellCodes]:
    return {
        n.name: cell_codes(
            n, view.rows[n.name].problems, metric, view.scales[metric], view.rows[n.name].idle_gpu_indices
        )
        for n in view.snapshot.nodes
    }


def test_a_large_view_carries_every_metric_and_keeps_the_unchanged_nodes_tuples() -> None:
    cluster = SimulatedCluster(nodes=COLUMNS_FROM_NODES + 44, gpus_per_node=8, seed=3, start_time_s=T0)
    stage = ViewStage(Thresholds(), interval_s=1.0)
    result = cluster.result()
    first = stage.derive(ClusterSnapshot.build("c", T0, result.nodes, result.slurm))
    # every other metric worked out beside the stage's, so a switch is a lookup
    assert set(first.more_cells) == set(Metric) - {Metric.UTIL}
    for metric in Metric:
        assert first.cells_known(metric) == expected_cells(first, metric)
    # the next tick: one node changes, the rest are the same samples (a store's source between refreshes)
    nodes = list(result.nodes)
    hot = nodes[10]
    nodes[10] = replace(hot, gpus=tuple(g._replace(temp_c=80.0, util_pct=3.0) for g in hot.gpus))
    # enough changed nodes for the columns: the others are copies that are equal but new
    for k in range(20, 20 + COLUMNS_FROM_NODES):
        nodes[k] = replace(nodes[k])
    second = stage.derive(ClusterSnapshot.build("c", T0 + 1, tuple(nodes), result.slurm))
    assert set(second.more_cells) == set(Metric) - {Metric.UTIL}
    same_rows = [name for name, row in second.rows.items() if row is first.rows[name]]
    assert len(same_rows) > 10  # the untouched nodes kept their rows
    for metric in Metric:
        cells = second.cells_known(metric)
        assert cells is not None and cells == expected_cells(second, metric)
        if metric in (Metric.UTIL, Metric.TEMP):
            assert cells[hot.name] != first.cells_for(metric)[hot.name]
        for name in same_rows:
            assert cells[name] is first.cells_for(metric)[name]  # the map sees nothing moved


def test_a_few_changed_nodes_of_a_large_view_keep_every_metric_known() -> None:
    # between a store's refreshes one node ages or a rule's minutes run out: the other metrics' cells go
    # on, with that node's worked again, so a switch of the map's metric stays a lookup
    cluster = SimulatedCluster(nodes=COLUMNS_FROM_NODES + 44, gpus_per_node=8, seed=3, start_time_s=T0)
    stage = ViewStage(Thresholds(), interval_s=1.0)
    result = cluster.result()
    first = stage.derive(ClusterSnapshot.build("c", T0, result.nodes, result.slurm))
    nodes = list(result.nodes)
    hot = nodes[10]
    nodes[10] = replace(hot, gpus=tuple(g._replace(temp_c=99.0, util_pct=3.0) for g in hot.gpus))
    second = stage.derive(ClusterSnapshot.build("c", T0 + 1, tuple(nodes), result.slurm))
    assert set(second.more_cells) == set(Metric) - {Metric.UTIL}
    for metric in Metric:
        cells = second.cells_known(metric)
        assert cells is not None and cells == expected_cells(second, metric)
        assert list(cells) == list(second.rows)
    assert second.cells_for(Metric.TEMP)[hot.name] != first.cells_for(Metric.TEMP)[hot.name]
    # each node's one cell is worked out again for this view, from its own cells
    names = [n.name for n in second.snapshot.nodes]
    for metric in Metric:
        assert second.node_codes_for(metric, Reduce.WORST) == node_cells(
            second.cells_for(metric), names, Reduce.WORST
        )


def test_a_switch_of_metric_between_two_slices_of_a_view_labels_its_cells_right() -> None:
    # the user presses 'm' while a refresh's view is derived a slice at a time: the view's cells are
    # those of the metric it names, and every other metric's are known and right
    cluster = SimulatedCluster(nodes=COLUMNS_FROM_NODES + 44, gpus_per_node=8, seed=3, start_time_s=T0)
    result = cluster.result()
    snapshot = ClusterSnapshot.build("c", T0, result.nodes, result.slurm)
    slices = sum(1 for _ in ViewStage(Thresholds(), interval_s=1.0).steps(snapshot))
    for switch_at in range(slices // 2, slices, max(1, slices // 12)):
        stage = ViewStage(Thresholds(), interval_s=1.0)
        steps = stage.steps(snapshot)
        for _ in range(switch_at):
            next(steps)
        stage.cell_metric = Metric.TEMP
        view, _ = run(steps)
        assert view.cells_metric is Metric.UTIL  # the metric the view began with
        assert view.cells == expected_cells(view, Metric.UTIL), switch_at
        for metric in Metric:
            assert view.cells_known(metric) == expected_cells(view, metric), (switch_at, metric)


def test_other_metrics_wait_for_a_switch_where_the_unchanged_nodes_are_not_known() -> None:
    cluster = SimulatedCluster(nodes=COLUMNS_FROM_NODES + 144, gpus_per_node=8, seed=3, start_time_s=T0)
    stage = ViewStage(Thresholds(), interval_s=1.0)
    result = cluster.result()
    nodes = list(result.nodes)
    first = stage.derive(
        ClusterSnapshot.build("c", T0, tuple(nodes[:100]), result.slurm)
    )  # a small first view
    second = stage.derive(ClusterSnapshot.build("c", T0 + 1, tuple(nodes), result.slurm))
    # the first 100 nodes' rows are the same objects, the others are new: the split covers only the new
    # ones, so the other metrics are worked out on first ask, and still right
    assert sum(row is first.rows.get(name) for name, row in second.rows.items()) == 100
    assert not second.more_cells
    for metric in Metric:
        assert second.cells_for(metric) == expected_cells(second, metric)


def test_a_view_where_nothing_moved_hands_on_the_same_cells() -> None:
    # a store's source between refreshes: the same samples again
    cluster = SimulatedCluster(nodes=COLUMNS_FROM_NODES + 44, gpus_per_node=8, seed=3, start_time_s=T0)
    stage = ViewStage(Thresholds(), interval_s=1.0)
    result = cluster.result()
    first = stage.derive(ClusterSnapshot.build("c", T0, result.nodes, result.slurm))
    second = stage.derive(ClusterSnapshot.build("c", T0 + 1, result.nodes, result.slurm))
    assert all(second.rows[name] is row for name, row in first.rows.items())
    assert second.rows is first.rows  # the table knows at once too
    assert second.summary is first.summary
    assert second.cells is first.cells  # the map knows at once that no node moved
    for metric in Metric:
        assert second.cells_known(metric) is first.cells_known(metric)
    # each node's one cell, worked out beside the cells at the first view, is handed on as it is
    assert set(first.node_codes) == {(metric, Reduce.WORST) for metric in Metric}
    assert second.node_codes is first.node_codes
    names = [n.name for n in first.snapshot.nodes]
    for metric in Metric:
        expected = node_cells(first.cells_for(metric), names, Reduce.WORST)
        assert second.node_codes_for(metric, Reduce.WORST) == expected
    # one node changes: a new mapping, right for every node
    nodes = list(result.nodes)
    nodes[3] = replace(nodes[3], gpus=tuple(g._replace(util_pct=1.0) for g in nodes[3].gpus))
    third = stage.derive(ClusterSnapshot.build("c", T0 + 2, tuple(nodes), result.slurm))
    assert third.cells is not second.cells
    assert third.cells == expected_cells(third, Metric.UTIL)
    assert third.rows is not second.rows and third.rows[nodes[3].name].source is nodes[3]


def test_a_store_s_hosts_that_do_not_export_a_field_go_the_column_way() -> None:
    """On the store path every host lacks some field: its nodes are still plain (one numpy pass), and a
    metric whose field it lacks is NOT_EXPORTED there, as node by node."""
    from gputop.core.cell_columns import CellColumns
    from gputop.core.heatmap import NOT_EXPORTED

    lacking = [frozenset({"power_limit_w", "sm_clock_max_mhz"}), frozenset({"util_pct"}), frozenset()]
    nodes = [
        node_sample(
            f"n{k:03d}",
            tuple(
                gpu_sample(
                    i,
                    util_pct=None if "util_pct" in lacking[k % 3] else 50.0,
                    power_limit_w=None if "power_limit_w" in lacking[k % 3] else 700.0,
                    mig_enabled=i == 7 and k % 5 == 0,
                )
                for i in range(8)
            ),
            expected_gpu_count=8,
            not_exported=lacking[k % 3],
        )
        for k in range(300)
    ]
    rows = {n.name: Row() for n in nodes}
    assert CellColumns(nodes, rows).others == []  # type: ignore[arg-type]
    for metric in Metric:
        assert_same(nodes, rows, metric, SCALES[metric])
    power = all_cell_codes(nodes, rows, Metric.POWER, SCALES[Metric.POWER])  # type: ignore[arg-type]
    assert power["n000"][0] == NOT_EXPORTED and power["n002"][0] != NOT_EXPORTED
