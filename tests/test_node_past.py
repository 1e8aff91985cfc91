"""A node's past from its store, for the chart where gputop's own history does not reach over the window:
when the store is asked, the query that asks for one node only, and the steps as a history the chart
reads as it reads gputop's own."""

from __future__ import annotations

import asyncio

import numpy as np
import orjson
import pytest

from gputop.clock import FrozenClock
from gputop.core.config import OWN_HISTORY_MB, STORE_HISTORY_MB, HistoryConfig, PollConfig, Thresholds
from gputop.core.dcgm_join import host_of
from gputop.core.history_store import HistoryStore
from gputop.core.node_past import MAX_POINTS, NodePast, chart_step_s, past_from_steps, wants_store
from gputop.poller import Poller
from gputop.sources.prometheus_history import READINGS, node_steps, of_host
from gputop.sources.store_answers import StoreError
from gputop.tui.store_past import RETRY_S, StorePast
from tests.factories import gpu_sample, node_sample


def _history_of(minutes: int, now_s: float, fine_minutes: float = 15.0) -> HistoryStore:
    history = HistoryStore(interval_s=60.0, fine_minutes=fine_minutes, coarse_hours=24.0)
    for minute in range(minutes, 0, -1):
        history.append(now_s - 60.0 * minute, (node_sample("gpu001", gpus=2),), {}, 60.0)
    return history


def test_the_store_is_asked_only_where_gputop_s_own_rows_do_not_reach_over_the_window() -> None:
    now_s = 1_700_000_040.0
    assert wants_store(None, 300.0, now_s)
    fresh = _history_of(2, now_s)
    assert wants_store(fresh, 300.0, now_s)  # two minutes of a 5-minute chart
    hour = _history_of(60, now_s)
    assert not wants_store(hour, 300.0, now_s) and not wants_store(hour, 3600.0, now_s)
    assert wants_store(hour, 86400.0, now_s)  # an hour of a day
    # the rows reach back no further than the windows kept: an old start does not count
    assert hour.reach_s(86400.0, now_s + 10 * 86400) >= 10 * 86400


def test_a_window_is_read_in_at_most_max_points_steps_never_finer_than_the_store_s_interval() -> None:
    assert chart_step_s(300.0, 15.0) == 15.0
    assert chart_step_s(86400.0, 15.0) == 120.0 and 86400.0 / chart_step_s(86400.0, 15.0) <= MAX_POINTS
    assert chart_step_s(3600.0, 2.5) == 5.0


def test_the_steps_become_a_history_the_chart_reads_with_their_gaps() -> None:
    step_s = 120.0
    now_s = 1_700_000_000.0
    times = [now_s - 86400.0 + step_s * k for k in range(1, 720) if not 300 <= k < 310]  # 20 minutes missing
    steps = [
        (t, node_sample("gpu001", gpus=tuple(gpu_sample(i, temp_c=40.0 + i) for i in range(2))))
        for t in times
    ]
    past = past_from_steps("gpu001", 86400.0, step_s, now_s, steps)
    series = past.history.series("gpu001", 1, "temp_c", 86400.0, now_s)
    assert len(series) == len(times) and np.all(series.values == 41.0)
    assert series.gap_after().sum() == 1  # the 20 missing minutes, and only they
    assert past.history.node_gpus("gpu001") == [0, 1]
    assert not wants_store(past.history, 86400.0, now_s)


async def test_one_node_s_past_is_asked_for_that_node_and_keeps_its_series_alone() -> None:
    asked: list[dict[str, str]] = []
    labels = [
        {"Hostname": "gpu001.cluster.example", "gpu": "0"},
        {"Hostname": "GPU001", "gpu": "1"},
        {"Hostname": "gpu0011", "gpu": "0"},  # a longer name the store's regex would not give; kept out
        {"Hostname": "other", "instance": "gpu001:9400", "gpu": "2"},  # another host's series
    ]

    async def post(form: dict[str, str], metric: str) -> bytes:
        asked.append(form)
        result = [{"metric": lab, "values": [[1000.0, "50"], [1120.0, "51"]]} for lab in labels]
        return orjson.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})

    past = await node_steps(post, "gpu001", None, 240.0, 120.0, 1200.0)
    assert [at_s for at_s, _ in past] == [1000.0, 1120.0]
    assert all(set(joined.nodes) == {"gpu001"} for _, joined in past)
    assert [g.index for g in past[0][1].nodes["gpu001"].sample.gpus] == [0, 1]
    assert len(asked) == len(READINGS) and asked[0]["step"] == "120" and asked[0]["start"] == "1080.000"
    query = asked[0]["query"]
    assert 'Hostname=~"(?i)\\\\s*gpu001([.:].*)?"' in query and 'instance=~"' in query
    assert of_host("M", "gpu001", "node").count("=~") == 1  # a site's own host label: that one only
    with pytest.raises(ValueError, match="not a host name"):
        await node_steps(post, 'x"} or vector(1) or {a="', None, 240.0, 120.0, 1200.0)


def test_the_pattern_matches_what_host_of_gives_the_host() -> None:
    """The store's regex (RE2, anchored; Python's re reads these the same) is broad enough for every
    spelling `host_of` reads as the host."""
    import re

    pattern = re.compile(r"(?i)\s*gpu001([.:].*)?")
    for value in ("gpu001", "GPU001", "gpu001.example.com", " gpu001", "gpu001:9400"):
        assert host_of({"Hostname": value}) == "gpu001" or value.endswith(":9400")
        assert pattern.fullmatch(value), value
    assert host_of({"instance": "gpu001:9400"}) == "gpu001"
    assert not pattern.fullmatch("gpu0011") and not pattern.fullmatch("xgpu001")


def test_steps_missing_for_longer_than_a_late_one_are_a_gap() -> None:
    step_s = 60.0
    now_s = 1_700_000_000.0
    steps = [(now_s - 600.0 + step_s * k, node_sample("gpu001", gpus=1)) for k in range(10)]
    past = past_from_steps("gpu001", 600.0, step_s, now_s, steps[:2] + steps[3:5] + steps[7:])
    series = past.history.series("gpu001", 0, "util_pct", 600.0, now_s)
    # one step missing reads as a late one (as gputop's own ticks do); three are a gap
    assert len(series) == 7 and series.gap_after().tolist() == [False, False, False, True, False, False]


class _Store:
    """A source with a node's past, or an error, after ``delay_s``."""

    def __init__(self, error: str = "") -> None:
        self.error = error
        self.asked: list[tuple[str, float]] = []

    async def node_past(self, node: str, window_s: float) -> NodePast | None:
        self.asked.append((node, window_s))
        await asyncio.sleep(0)
        if self.error:
            raise StoreError(self.error)
        if node != "gpu001":
            return None
        steps = [(1000.0 + 60.0 * k, node_sample(node, gpus=1)) for k in range(5)]
        return past_from_steps(node, window_s, 60.0, 1300.0, steps)


async def test_the_chart_says_where_its_lines_come_from_and_why_the_store_could_not_give_them() -> None:
    drawn: list[int] = []
    store = _Store()
    keeper = StorePast([object(), store], lambda: drawn.append(1))
    own = _history_of(60, 1300.0)
    assert keeper.for_chart("gpu001", 3600.0, own, 1300.0) == (own, "")  # gputop's own reaches
    assert keeper.for_chart("gpu001", 86400.0, own, 1300.0) == (own, "reading the store's past")
    await asyncio.sleep(0.01)
    assert drawn == [1]
    history, said = keeper.for_chart("gpu001", 86400.0, own, 1300.0)
    assert said == "from the store" and history is not own and history is not None
    assert store.asked == [("gpu001", 86400.0)]
    keeper.for_chart("gpu001", 86400.0, own, 1360.0)  # a step later: read again, the old past drawn meanwhile
    await asyncio.sleep(0.01)
    assert len(store.asked) == 2
    # a node no store has: gputop's own, asked once
    assert keeper.for_chart("gpu002", 86400.0, own, 1360.0)[1] == "reading the store's past"
    await asyncio.sleep(0.01)
    assert keeper.for_chart("gpu002", 86400.0, own, 1360.0) == (own, "")
    failing = _Store("cannot reach http://127.0.0.1:1: \x1b[31mrefused")
    keeper = StorePast([failing], lambda: None)
    keeper.for_chart("gpu001", 86400.0, own, 1300.0)
    await asyncio.sleep(0.01)
    history, said = keeper.for_chart("gpu001", 86400.0, own, 1301.0)
    assert history is own and said.startswith("the store's past could not be read: cannot reach")
    assert "\x1b" not in said  # made safe for the terminal
    assert len(failing.asked) == 1  # not asked again at once
    keeper.for_chart("gpu001", 86400.0, own, 1300.0 + RETRY_S)
    await asyncio.sleep(0.01)
    assert len(failing.asked) == 2


@pytest.mark.parametrize(
    ("source_name", "memory_mb", "bound_mb"),
    [("prometheus", None, STORE_HISTORY_MB), ("ssh", None, OWN_HISTORY_MB), ("prometheus", 200.0, 200.0)],
)
def test_the_history_s_default_bound_is_smaller_where_a_store_keeps_the_past(
    source_name: str, memory_mb: float | None, bound_mb: float
) -> None:
    # a store's source is one that can give a node's past
    can_give_past = {"node_past": _Store.node_past} if source_name == "prometheus" else {}
    source = type("Source", (), {"name": source_name, **can_give_past})()
    poller = Poller(
        cluster="c",
        sources=[source],  # type: ignore[list-item]
        clock=FrozenClock(0.0),
        poll=PollConfig(),
        thresholds=Thresholds(),
        on_view=lambda _view: None,
        history=HistoryConfig(memory_mb=memory_mb),
    )
    store = poller.stage.store()
    assert store is not None and store.budget_bytes == int(bound_mb * 1024 * 1024)
