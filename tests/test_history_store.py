"""The history store (gputop.core.history_store): every tick for the fine window, per-minute mean and max
beyond it; gaps stay gaps; a node that leaves keeps its past and gets its column back; the windows
follow the config; the sparkline and the trends the node table draws."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from gputop.core.config import HistoryConfig, Thresholds
from gputop.core.history_store import HistoryStore
from gputop.core.history_trends import Trends, sparkline
from gputop.core.models import ClusterSnapshot, NodeSample, Reachability
from gputop.core.view import ViewStage
from tests.factories import gpu_sample, node_sample

T0 = 1_800_000_000.0  # a whole minute


def node(name: str, util: float, gpus: int = 2, **overrides: object) -> NodeSample:
    samples = tuple(gpu_sample(i, util_pct=util + i, temp_c=40.0 + i, power_w=300.25) for i in range(gpus))
    return node_sample(name, samples, **overrides)


def feed(
    store: HistoryStore, start_s: float, seconds: int, nodes: list[NodeSample], step_s: float = 1.0
) -> None:
    for i in range(seconds):
        store.append(start_s + i * step_s, nodes, {}, step_s)


def test_every_tick_is_kept_at_its_resolution() -> None:
    store = HistoryStore(interval_s=1.0)
    feed(store, T0, 10, [node("a", 50.0)])
    util = store.series("a", 1, "util_pct", 300, T0 + 9)
    assert util.times_s.tolist() == [T0 + i for i in range(10)]
    assert util.values.tolist() == [51.0] * 10
    power = float(store.series("a", 0, "power_w", 300, T0 + 9).values[0])
    assert math.isclose(power, 300.2, abs_tol=0.01)  # 0.1 W steps
    assert store.series("a", 1, "temp_c", 300, T0 + 9).values.tolist() == [41.0] * 10


def test_a_node_down_is_a_gap_not_a_zero_and_keeps_its_past() -> None:
    store = HistoryStore(interval_s=1.0)
    feed(store, T0, 5, [node("a", 50.0), node("b", 20.0)])
    down = dataclasses.replace(node("b", 20.0), reachability=Reachability.DOWN)
    feed(store, T0 + 5, 5, [node("a", 50.0), down])
    feed(store, T0 + 10, 5, [node("a", 50.0)])  # gone from the cluster
    feed(store, T0 + 15, 5, [node("a", 50.0), node("b", 30.0)])  # back: the same column
    values = store.series("b", 0, "util_pct", 300, T0 + 19).values
    assert values[:5].tolist() == [20.0] * 5
    assert np.isnan(values[5:15]).all()
    assert values[15:].tolist() == [30.0] * 5
    assert sorted(store.columns) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]


def test_a_pause_is_a_gap_in_time() -> None:
    store = HistoryStore(interval_s=1.0)
    feed(store, T0, 5, [node("a", 50.0)])
    feed(store, T0 + 600, 5, [node("a", 50.0)])  # gputop suspended for ten minutes
    series = store.series("a", 0, "util_pct", 900, T0 + 604)
    assert series.gap_after().tolist() == [False] * 4 + [True] + [False] * 4
    replayed = HistoryStore(interval_s=1.0)
    feed(replayed, T0, 5, [node("a", 50.0)], step_s=30.0)  # a past replayed every 30 s: no gaps
    assert not replayed.series("a", 0, "util_pct", 900, T0 + 120).gap_after().any()


def test_minutes_keep_mean_and_max_and_the_coarse_window_reaches_back() -> None:
    store = HistoryStore(interval_s=1.0, fine_minutes=1, coarse_hours=1)
    for minute in range(3):
        for second in range(60):
            util = 10.0 * (minute + 1) + (20.0 if second == 30 else 0.0)
            store.append(T0 + minute * 60 + second, [node("a", util, gpus=1)], {}, 1.0)
    store.append(T0 + 180, [node("a", 0.0, gpus=1)], {}, 1.0)  # closes the third minute
    hour = store.series("a", 0, "util_pct", 3600, T0 + 180)
    assert hour.times_s.tolist() == [T0, T0 + 60, T0 + 120]
    assert hour.values.tolist() == [10.0, 20.0, 30.0]  # 59 readings of 10 and one of 30: 10.3, rounded
    assert hour.maxima is not None and hour.maxima.tolist() == [30.0, 40.0, 50.0]
    # memory and the clock keep their means alone (a day of maxima would cost 47 MB at 1,000 nodes)
    memory = store.series("a", 0, "mem_used_mib", 3600, T0 + 180)
    assert len(memory) == 3 and memory.maxima is None
    assert store.series("a", 0, "temp_c", 3600, T0 + 180).maxima is not None
    fine = store.series("a", 0, "util_pct", 60, T0 + 180)
    assert len(fine) <= math.ceil(60 * 1.25) and fine.times_s[-1] == T0 + 180


def test_the_windows_follow_the_config() -> None:
    stage = ViewStage(Thresholds(), interval_s=2.0, history=HistoryConfig(fine_minutes=5, coarse_hours=2))
    assert stage.history_store is None  # made with the first snapshot: numpy loads after the first frame
    stage.derive(ClusterSnapshot.build("c", T0, (node("a", 1.0),)))
    store = stage.history_store
    assert store is not None
    assert store.fine.rows == math.ceil(5 * 60 / 2.0 * 1.25) and store.coarse_mean.rows == 120
    assert ViewStage(Thresholds(), interval_s=1.0).history_store is None  # a round of check keeps none


def test_the_view_stage_feeds_it_with_problem_counts() -> None:
    stage = ViewStage(Thresholds(), interval_s=1.0, judge_at_once=True, history=HistoryConfig())
    hot = node_sample("hot", tuple(gpu_sample(i, temp_c=95.0) for i in range(2)))
    for i in range(3):
        stage.derive(ClusterSnapshot.build("c", T0 + i, (hot, node("cool", 10.0))))
    store = stage.history_store
    assert store is not None
    crit, warn = store.problem_counts("hot", 300, T0 + 2)
    assert crit.values.tolist() == [2.0] * 3 and warn.values.tolist() == [0.0] * 3
    assert store.problem_counts("cool", 300, T0 + 2)[0].values.tolist() == [0.0] * 3


def test_trends_and_sparklines() -> None:
    store = HistoryStore(interval_s=1.0)
    for i in range(300):
        store.append(T0 + i, [node("a", 0.0 if i < 150 else 99.0, gpus=1)], {}, 1.0)
    trends = Trends(store, "util_pct", 300.0, 8)
    values = trends.of("a")
    assert values is not None and len(values) == 8
    assert sparkline(values, 0, 100) == "▁▁▁▁████"
    assert trends.of("nobody") is None
    assert sparkline(np.array([np.nan, 0.0, 50.0, 100.0], dtype=np.float32), 0, 100) == " ▁▅█"


def test_a_node_listing_a_gpu_twice_or_garbage_values_does_not_break_it() -> None:
    store = HistoryStore(interval_s=1.0)
    twice = node_sample("x", (gpu_sample(0, util_pct=10.0), gpu_sample(0, util_pct=20.0)))
    odd = node_sample("y", (gpu_sample(0, util_pct=-5.0, temp_c=1e9, power_w=None),))
    feed(store, T0, 3, [twice, odd])
    assert store.series("x", 0, "util_pct", 60, T0 + 2).values.tolist() == [20.0] * 3
    assert store.series("y", 0, "util_pct", 60, T0 + 2).values.tolist() == [0.0] * 3  # clipped
    assert store.series("y", 0, "temp_c", 60, T0 + 2).values.tolist() == [254.0] * 3
    assert np.isnan(store.series("y", 0, "power_w", 60, T0 + 2).values).all()
    store.append(T0 + 1, [odd], {}, 1.0)  # a tick from the past (a clock stepped back): ignored
    assert len(store.series("y", 0, "util_pct", 60, T0 + 2)) == 3


def test_a_fleet_too_large_for_the_windows_keeps_fewer_rows_within_the_memory_bound() -> None:
    """The rings stay within `budget_mb` as the fleet grows (80,000 GPUs would take 0.7 GB for the ticks
    and 1.4 GB for a day of minutes): fewer rows, the newest kept in order and in their columns, and the
    windows say what is kept."""
    store = HistoryStore(interval_s=1.0, budget_mb=32)
    small = [node(f"a{n:03}", float(n % 50), gpus=8) for n in range(100)]
    feed(store, T0, 1200, small)  # round the ring of 1,125 ticks
    assert (store.fine_window_s, store.coarse_window_s) == (900.0, 86400.0)  # 100 nodes: all fits
    assert store.kept_bytes() <= 32 * 1024 * 1024
    large = small + [node(f"b{n:03}", 7.0, gpus=8) for n in range(300)]
    now_s = T0 + 1200
    feed(store, now_s, 1, large)
    assert store.kept_bytes() <= 32 * 1024 * 1024
    assert 300.0 < store.fine_window_s < 900.0 and 3600.0 < store.coarse_window_s < 86400.0
    util = store.series("a007", 1, "util_pct", store.fine_window_s, now_s)
    kept_rows = store.fine.rows
    # the newest ticks, in order
    assert util.times_s.tolist() == [now_s - i for i in reversed(range(len(util)))]
    assert kept_rows * 0.75 < len(util) <= kept_rows and util.values.tolist() == [8.0] * len(util)
    new = store.series("b299", 0, "util_pct", 300, now_s).values  # gaps before it came
    assert np.isnan(new[:-1]).all() and new[-1:].tolist() == [7.0]
    feed(store, now_s + 1, kept_rows + 20, large)  # round the smaller ring
    now_s += kept_rows + 20
    util = store.series("a007", 1, "util_pct", store.fine_window_s, now_s)
    assert util.times_s.tolist() == [now_s - i for i in reversed(range(len(util)))]
    assert 0 < len(util) <= kept_rows and util.values.tolist() == [8.0] * len(util)
    assert store.series("a007", 1, "util_pct", 3600, now_s).values.tolist()[:2] == [8.0, 8.0]


def test_a_stores_samples_held_between_its_refreshes_are_one_row_that_spans_them() -> None:
    """Between a store's refreshes the view stage gets the very same samples every tick: one row per
    refresh (80,000 GPUs would fill the ticks' memory with copies), each standing for the time since the
    last, so the chart draws no gap; a new minute still gets its row, and its mean."""
    stage = ViewStage(Thresholds(), interval_s=1.0, history=HistoryConfig())
    first = (node("a", 10.0), node("b", 20.0))
    second = (node("a", 30.0), node("b", 20.0))
    for second_s in range(70):
        nodes = first if second_s < 15 else second
        stage.derive(ClusterSnapshot.build("c", T0 + second_s, nodes))
    store = stage.history_store
    assert store is not None
    util = store.series("a", 0, "util_pct", 300, T0 + 69)
    assert util.times_s.tolist() == [T0, T0 + 15, T0 + 60]  # the refreshes, and the new minute
    assert util.values.tolist() == [10.0, 30.0, 30.0]
    assert util.spans_s is not None and util.spans_s.tolist() == [1.0, 15.0, 45.0]
    assert not util.gap_after().any()
    assert store.series("a", 0, "util_pct", 3600, T0 + 69).values.tolist() == [20.0]  # the minute's mean
    assert store.fine.written == 3
    # a tick with the same readings after a pause of its own (gputop suspended) is still a gap
    stage.derive(ClusterSnapshot.build("c", T0 + 600, (node("a", 30.0), node("b", 20.0))))
    assert store.series("a", 0, "util_pct", 900, T0 + 600).gap_after().tolist() == [False, False, True]
