"""The Slurm queue's pure core: allocated-but-idle tracking, job rows, the queue filter and sort."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType

import pytest

from gputop.core.config import Thresholds
from gputop.core.filter import FilterError
from gputop.core.idle import DEFAULT_MAX_STEP_S, IDLE_HYSTERESIS_PCT, IdleState, IdleTracker
from gputop.core.job_filter import parse_job_filter
from gputop.core.jobs import (
    DESCENDING_KEYS,
    SORT_KEYS,
    JobRow,
    job_id_key,
    job_rows,
    job_rows_steps,
    sort_job_rows,
)
from gputop.core.models import ClusterSnapshot, GpuSample, NodeSample, Reachability, SlurmJob, SlurmState
from gputop.core.view import ViewStage
from gputop.sim.simulator import SimulatedCluster
from tests.factories import gpu_sample

T0 = 1_800_000_000.0


def gpu(index: int, util: float | None) -> GpuSample:
    return gpu_sample(
        index, util_pct=util, sm_clock_mhz=None, sm_clock_max_mhz=None, mig_enabled=util is None
    )


def node(
    name: str, utils: Sequence[float | None], reachability: Reachability = Reachability.OK
) -> NodeSample:
    return NodeSample(name, reachability, T0, tuple(gpu(i, u) for i, u in enumerate(utils)), len(utils))


def job(job_id: str, gpus: Mapping[str, tuple[int, ...]] | None = None, **kw: object) -> SlurmJob:
    fields: dict[str, object] = dict(
        job_id=job_id,
        name="train",
        user="ana",
        partition="gpu",
        state="RUNNING" if gpus else "PENDING",
        gpus_by_node=dict(gpus or {}),
    )
    fields.update(kw)
    return SlurmJob(**fields)  # type: ignore[arg-type]


def snap(t: float, nodes: Sequence[NodeSample], jobs: Sequence[SlurmJob]) -> ClusterSnapshot:
    return ClusterSnapshot.build("c", t, tuple(nodes), SlurmState(nodes={}, jobs=tuple(jobs), sampled_at_s=t))


def one_gpu_run(
    utils: Sequence[float | None], step_s: float = 10.0, minutes: float = 10.0
) -> list[IdleState]:
    """GPU0 of n1, held by job 1, at each utilization in turn, one snapshot every step_s."""
    tracker = IdleTracker(5.0, minutes)
    held = job("1", {"n1": (0,)})
    return [tracker.update(snap(T0 + k * step_s, [node("n1", [u])], [held])) for k, u in enumerate(utils)]


# --- idle tracking ------------------------------------------------------------------------------------------


def test_utilization_hovering_at_the_threshold_does_not_flap() -> None:
    states = one_gpu_run([4.0, 6.0, 4.0, 6.0, 5.5, 4.0, 6.0, 6.0])
    assert all(("n1", 0) in s.gpus for s in states)
    assert {s.since("n1", 0) for s in states} == {T0}  # one idle stretch, never restarted
    assert [s.gpus["n1", 0].idle_s for s in states] == [10.0 * k for k in range(8)]


def test_hysteresis_band_entry_and_exit() -> None:
    top = 5.0 + IDLE_HYSTERESIS_PCT
    states = one_gpu_run([6.0, 4.9, top, top + 0.1, 7.0, 4.0])
    idle = [("n1", 0) in s.gpus for s in states]
    # 6 is not under 5; 4.9 is; the top of the band keeps it; above it leaves; 7 does not re-enter
    assert idle == [False, True, True, False, False, True]
    assert states[-1].since("n1", 0) == T0 + 50.0  # a new stretch starts at its first idle snapshot


def test_flagged_only_after_the_configured_minutes() -> None:
    states = one_gpu_run([0.0] * 22, step_s=30.0, minutes=10.0)
    flagged_at = [k for k, s in enumerate(states) if ("n1", 0) in s.flagged]
    assert flagged_at[0] == 20  # 20 steps of 30 s = 10 min observed
    assert flagged_at == [20, 21]
    last = states[-1]
    assert last.flagged_by_job == {"1": 1}
    assert [(g.node, g.index, g.job_id, g.user) for g in last.flagged_by_node["n1"]] == [
        ("n1", 0, "1", "ana")
    ]
    assert states[19].flagged_by_job == {} and states[19].flagged_by_node == {}


def test_mig_or_unreported_utilization_is_never_idle() -> None:
    states = one_gpu_run([None] * 30, step_s=60.0, minutes=1.0)
    assert all(not s.gpus and not s.flagged and not s.wasted_s for s in states)
    # and a GPU that was idle loses that state when its figure goes missing
    states = one_gpu_run([0.0, 0.0, None, 0.0])
    assert [("n1", 0) in s.gpus for s in states] == [True, True, False, True]
    assert states[-1].since("n1", 0) == T0 + 30.0


@pytest.mark.parametrize("reachability", [Reachability.STALE, Reachability.DOWN])
def test_a_stale_or_down_node_is_not_counted(reachability: Reachability) -> None:
    tracker = IdleTracker(5.0, 0.5)
    held = job("1", {"n1": (0, 1)})
    fresh = node("n1", [0.0, 0.0])
    silent = dataclasses.replace(fresh, reachability=reachability)
    tracker.update(snap(T0, [fresh], [held]))
    state = tracker.update(snap(T0 + 40, [fresh], [held]))
    assert state.flagged == {("n1", 0), ("n1", 1)}
    assert state.wasted_s == {"1": 80.0}
    state = tracker.update(snap(T0 + 50, [silent], [held]))
    assert not state.gpus and not state.flagged
    assert state.wasted_s == {"1": 80.0}  # kept while the job runs, but nothing added for unseen time
    state = tracker.update(snap(T0 + 60, [fresh], [held]))
    assert state.since("n1", 0) == T0 + 60  # its idle clock starts again with the data
    assert not state.flagged and state.wasted_s == {"1": 80.0}


def test_wasted_gpu_seconds_accumulate_per_job_and_a_long_gap_is_capped() -> None:
    tracker = IdleTracker(5.0, 10.0)
    ana = job("1", {"n1": (0, 1, 2)})
    bob = job("2", {"n1": (3,)}, user="bob")
    busy = node("n1", [0.0, 1.0, 80.0, 2.0])  # ana: two idle GPUs, one busy; bob: one idle
    for k in range(4):
        state = tracker.update(snap(T0 + 10 * k, [busy], [ana, bob]))
    assert state.wasted_s == {"1": 2 * 30.0, "2": 30.0}
    assert state.wasted_gpu_hours("1") == pytest.approx(60.0 / 3600)
    # an hour without a snapshot (suspended laptop): at most DEFAULT_MAX_STEP_S is charged
    state = tracker.update(snap(T0 + 30 + 3600, [busy], [ana, bob]))
    assert state.wasted_s == {"1": 2 * (30.0 + DEFAULT_MAX_STEP_S), "2": 30.0 + DEFAULT_MAX_STEP_S}
    assert state.gpus["n1", 0].idle_s == 30.0 + DEFAULT_MAX_STEP_S
    assert state.since("n1", 0) == T0  # the stretch goes on; only the unseen time is not counted
    # a poller that ticks slowly passes a larger cap
    slow = IdleTracker(5.0, 10.0, max_step_s=300.0)
    slow.update(snap(T0, [busy], [bob]))
    assert slow.update(snap(T0 + 240, [busy], [bob])).wasted_s == {"2": 240.0}
    assert slow.update(snap(T0 + 840, [busy], [bob])).wasted_s == {"2": 540.0}


def test_wasted_stays_after_the_job_gets_busy() -> None:
    states = one_gpu_run([0.0, 0.0, 0.0, 90.0, 90.0])
    assert states[-1].wasted_s == {"1": 20.0}
    assert not states[-1].gpus


def test_ended_jobs_are_dropped_and_a_new_job_on_the_gpu_starts_again() -> None:
    tracker = IdleTracker(5.0, 10.0)
    old = job("1", {"n1": (0,)})
    idle = node("n1", [0.0])
    tracker.update(snap(T0, [idle], [old]))
    state = tracker.update(snap(T0 + 10, [idle], [old]))
    assert state.wasted_s == {"1": 10.0}
    completing = dataclasses.replace(old, state="COMPLETING")
    state = tracker.update(snap(T0 + 20, [idle], [completing]))
    assert state.wasted_s == {"1": 10.0} and not state.gpus  # still listed: kept, but no longer counted
    state = tracker.update(snap(T0 + 30, [idle], [dataclasses.replace(old, state="COMPLETED")]))
    assert state.wasted_s == {}
    tracker.update(snap(T0 + 40, [idle], [old]))
    new = job("2", {"n1": (0,)}, user="bob")
    state = tracker.update(snap(T0 + 50, [idle], [new]))  # job 1 left the listing; job 2 got its GPU
    assert "1" not in state.wasted_s
    assert state.gpus["n1", 0].job_id == "2" and state.since("n1", 0) == T0 + 50
    assert state.gpus["n1", 0].idle_s == 0.0


def test_only_running_jobs_hold_gpus_and_slurm_must_be_there() -> None:
    tracker = IdleTracker(5.0, 10.0)
    idle = node("n1", [0.0, 0.0])
    waiting = job("1", {"n1": (0,)}, state="CONFIGURING")
    state = tracker.update(snap(T0, [idle], [waiting]))
    assert not state.gpus
    nothing = ClusterSnapshot.build("c", T0 + 10, (idle,))
    state = tracker.update(nothing)
    assert state.gpus == {} and state.taken_at_s == T0 + 10
    # a GPU that no job holds is not "allocated but idle"
    state = tracker.update(snap(T0 + 20, [idle], [job("2", {"n1": (1,)})]))
    assert set(state.gpus) == {("n1", 1)}


def test_time_comes_only_from_the_snapshots() -> None:
    tracker = IdleTracker(5.0, 10.0)
    held = job("1", {"n1": (0,)})
    first = snap(T0, [node("n1", [0.0])], [held])
    state = tracker.update(first)
    assert tracker.update(first) is state  # the same snapshot again changes nothing
    later = tracker.update(snap(T0 + 5, [node("n1", [0.0])], [held]))
    back = tracker.update(snap(T0 + 2, [node("n1", [0.0])], [held]))  # a clock stepped back: no negative time
    assert later.wasted_s == back.wasted_s == {"1": 5.0}


def test_a_gpu_two_jobs_claim_counts_for_the_first_only() -> None:
    tracker = IdleTracker(5.0, 10.0)
    jobs = [job("1", {"n1": (0,)}), job("2", {"n1": (0,)})]
    for k in range(3):
        state = tracker.update(snap(T0 + 10 * k, [node("n1", [0.0])], jobs))
    assert state.wasted_s == {"1": 20.0}


def test_gpus_are_found_by_index_when_one_is_missing() -> None:
    tracker = IdleTracker(5.0, 10.0)
    gpus = (gpu(0, 90.0), gpu(2, 0.0))  # GPU1 fell off the bus
    sample = NodeSample("n1", Reachability.OK, T0, gpus, 3)
    state = tracker.update(snap(T0, [sample], [job("1", {"n1": (1, 2)})]))
    assert set(state.gpus) == {("n1", 2)}


def test_the_simulated_idle_job_is_flagged_after_ten_minutes() -> None:
    sim = SimulatedCluster(nodes=32, seed=7, start_time_s=T0)
    incident = next(i for i in sim.incidents if i.kind == "idle_job")
    mig = next(i for i in sim.incidents if i.kind == "mig")
    views = ViewStage(Thresholds(), interval_s=30.0)
    flagged_before: frozenset[tuple[str, int]] = frozenset()
    for k in range(23):  # 0 .. 11 min, in the simulator's 30-step catch-ups
        t = T0 + 30.0 * k
        sim.advance_to(t)
        result = sim.result()
        snapshot = ClusterSnapshot.build("demo", t, result.nodes, result.slurm)
        view = views.derive(snapshot)
        assert view.idle is not None
        state = view.idle
        if k == 19:
            flagged_before = state.flagged
    assert not any(name == incident.node for name, _ in flagged_before)  # 9.5 min observed: not yet
    assert {i for name, i in state.flagged if name == incident.node} == set(range(8))
    assert not any(name == mig.node and i == mig.gpu_index for name, i in state.gpus)
    assert view is not None
    problems = [p for p in view.rows[incident.node].problems if p.kind == "idle"]
    assert len(problems) == 1 and problems[0].message.startswith("GPU0-7 idle 1")
    assert "(dmitri)" in problems[0].message
    idle_job_id = next(iter(state.flagged_by_node[incident.node])).job_id
    row = view.jobs[idle_job_id]
    assert row.idle_gpus == 8 and row.util_mean_pct is not None and row.util_mean_pct < 5
    assert sort_job_rows(view.jobs, "wasted")[0] == idle_job_id


# --- job rows -----------------------------------------------------------------------------------------------


def _queue() -> tuple[ClusterSnapshot, IdleState]:
    nodes = [
        node("gpu001", [0.0, 0.0, 50.0, 70.0]),
        node("gpu002", [90.0, None, 0.0, 0.0]),
        node("gpu003", [0.0, 0.0, 0.0, 0.0], Reachability.STALE),
    ]
    jobs = [
        job(
            "100", {"gpu001": (0, 1), "gpu002": (1,)}, user="ana", start_time_s=T0 - 3600, time_limit_s=7200.0
        ),
        job("101", {"gpu001": (2, 3)}, user="bob", name="llama-sft", partition="train", start_time_s=T0 - 60),
        job("102", {"gpu002": (2, 3)}, user="chen", nodelist="gpu002"),
        job("103", {"gpu003": (0, 1)}, user="ana"),
        job("104", state="PENDING", gpus_requested=16, pending_reason="Priority", user="dmitri"),
        job(
            "105_[1-20]",
            state="PENDING",
            gpus_requested=1,
            pending_reason="QOSMaxGpuPerUserLimit",
            user="farah",
        ),
        job("99", {"gpu002": (1,)}, user="eva", partition="infer"),  # only a MIG GPU: no utilization
        job("105_3", {"gpu002": (0,)}, user="bob", partition="train", elapsed_s=100.0),
    ]
    tracker = IdleTracker(5.0, 0.25)
    tracker.update(snap(T0 - 20, nodes, jobs))
    state = tracker.update(snap(T0, nodes, jobs))
    return snap(T0, nodes, jobs), state


def test_job_row_figures() -> None:
    snapshot, state = _queue()
    rows = job_rows(snapshot, state)
    assert list(rows) == [j.job_id for j in snapshot.slurm.jobs]  # type: ignore[union-attr]
    ana = rows["100"]
    assert ana.gpus == 3
    assert ana.util_mean_pct == 0.0  # GPUs 0 and 1 at 0 %; the MIG GPU does not count
    assert ana.idle_gpus == 2 and ana.wasted_gpu_hours == pytest.approx(40.0 / 3600)
    assert ana.elapsed_s == 3600.0 and ana.time_limit_s == 7200.0
    assert ana.nodes_text == "gpu[001-002]"
    assert (ana.job_id, ana.user, ana.partition, ana.state, ana.reason) == (
        "100",
        "ana",
        "gpu",
        "RUNNING",
        "",
    )
    assert rows["101"].util_mean_pct == 60.0 and rows["101"].idle_gpus == 0
    assert rows["102"].nodes_text == "gpu002"
    stale = rows["103"]
    assert stale.util_mean_pct is None and stale.idle_gpus == 0 and stale.wasted_gpu_hours == 0.0
    pending = rows["104"]
    assert (pending.gpus, pending.util_mean_pct, pending.elapsed_s, pending.nodes_text) == (
        16,
        None,
        None,
        "",
    )
    assert pending.reason == "Priority"
    assert rows["99"].util_mean_pct is None and rows["99"].gpus == 1
    assert rows["105_3"].elapsed_s == 100.0  # Slurm's figure when no start time is given


def test_job_rows_without_slurm_or_idle_state() -> None:
    snapshot, _ = _queue()
    assert job_rows(ClusterSnapshot.build("c", T0, snapshot.nodes)) == {}
    rows = job_rows(snapshot, None)
    assert rows["100"].idle_gpus == 0 and rows["100"].wasted_gpu_hours == 0.0


def test_job_rows_reuse_the_previous_row_object() -> None:
    snapshot, state = _queue()
    first = job_rows(snapshot, state)
    again = job_rows(snapshot, state, first)
    assert all(again[k] is first[k] for k in first)
    # a new tick: pending rows and rows whose figures did not move stay; running rows' elapsed moves
    later_nodes = list(snapshot.nodes)
    later_nodes[0] = node("gpu001", [0.0, 0.0, 50.0, 90.0])  # job 101's utilization changes
    later = ClusterSnapshot.build("c", T0 + 1, tuple(later_nodes), snapshot.slurm)
    rows = job_rows(later, state, first)
    assert rows["104"] is first["104"] and rows["105_[1-20]"] is first["105_[1-20]"]
    assert rows["101"] is not first["101"] and rows["101"].util_mean_pct == 70.0
    assert rows["100"] is not first["100"] and rows["100"].elapsed_s == 3601.0
    assert rows["99"] is first["99"] and rows["103"] is first["103"]  # nothing of theirs moved
    assert rows["105_3"].elapsed_s == 101.0  # Slurm's elapsed, aged by the time since Slurm was read
    # Slurm read again: equal jobs as new objects keep their rows (and the first job object)
    reread = SlurmState(
        nodes={},
        jobs=tuple(dataclasses.replace(j) for j in snapshot.slurm.jobs),
        sampled_at_s=T0,  # type: ignore[union-attr]
    )
    rows2 = job_rows(dataclasses.replace(snapshot, slurm=reread), state, first)
    assert all(rows2[k] is first[k] for k in first)
    # a job that changed (now held in a different state) gets a new row
    changed = tuple(
        dataclasses.replace(j, pending_reason="Resources") if j.job_id == "104" else j
        for j in snapshot.slurm.jobs  # type: ignore[union-attr]
    )
    rows3 = job_rows(
        dataclasses.replace(snapshot, slurm=dataclasses.replace(reread, jobs=changed)), state, first
    )
    assert rows3["104"] is not first["104"] and rows3["104"].reason == "Resources"
    # idle figures that change give a new row, too
    less_idle = dataclasses.replace(state, flagged_by_job={"100": 2})
    rows4 = job_rows(snapshot, less_idle, first)
    assert rows4["102"] is not first["102"] and rows4["102"].idle_gpus == 0
    assert rows4["101"] is first["101"]


# --- filter -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", {"100", "101", "102", "103", "104", "105_[1-20]", "99", "105_3"}),
        ("user=ana", {"100", "103"}),
        ("user=ANA|bob", {"100", "103", "101", "105_3"}),
        ("user!=ana", {"101", "102", "104", "105_[1-20]", "99", "105_3"}),
        ("user=an", set()),  # users match exactly
        ("partition=train", {"101", "105_3"}),
        ("part=infer", {"99"}),
        ("state=pending", {"104", "105_[1-20]"}),
        ("state=run", {"100", "101", "102", "103", "99", "105_3"}),
        ("state=PD", {"104", "105_[1-20]"}),
        ("state!=r", {"104", "105_[1-20]"}),
        ("node=gpu002", {"100", "102", "99", "105_3"}),
        ("node=gpu[001,003]", {"100", "101", "103"}),
        ("idle", {"100", "102"}),
        ("!idle state=r", {"101", "103", "99", "105_3"}),
        ("gpus>4", {"104"}),
        ("gpus<=1", {"105_[1-20]", "99", "105_3"}),
        ("util<5", {"100", "102"}),
        ("util>=60", {"101", "105_3"}),
        ("idle>=2", {"100", "102"}),
        ("wasted>0", {"100", "102"}),
        ("elapsed>30m", {"100"}),
        ("elapsed<2", {"101", "105_3"}),  # minutes
        ("elapsed>=1h", {"100"}),
        ("limit>1.5h", {"100"}),
        ("name=llama", {"101"}),
        ("reason=qos", {"105_[1-20]"}),
        ("id=105", {"105_[1-20]", "105_3"}),
        ("id=105_3", {"105_3"}),
        ("id=10", set()),
        ("llama", {"101"}),  # plain text: name
        ("priority", {"104"}),  # reason
        ("dmitri", {"104"}),  # user
        ("infer", {"99"}),  # partition
        ("105_", {"105_[1-20]", "105_3"}),  # id
        ("user=bob part=train !105_3", {"101"}),
    ],
)
def test_job_filter_terms(text: str, expected: set[str]) -> None:
    snapshot, state = _queue()
    rows = job_rows(snapshot, state)
    job_filter = parse_job_filter(text)
    assert {r.job_id for r in rows.values() if job_filter(r)} == expected
    assert {r.job_id for r in job_filter.select(rows)} == expected
    assert [r.job_id for r in job_filter.select(rows.values())] == [r for r in rows if r in expected]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpus>many", "gpus compares with a number, not 'many'"),
        ("elapsed>soon", "compares with a duration such as 90m"),
        ("colour=red", "unknown field 'colour'"),
        ("user>ana", "user takes = or !=, not >"),
        ("state=runing", "no Slurm job state starts with 'runing'"),
        ("node=gpu[001-", "not a node or node set"),
        ("user=", "user needs a value"),
        ("user=|", "user needs a value"),
        ("!", "negates the term after it"),
        ("idle !wasted>x", "wasted compares with a number"),
    ],
)
def test_job_filter_errors_name_the_term(text: str, message: str) -> None:
    with pytest.raises(FilterError, match=message.replace("[", r"\[")):
        parse_job_filter(text)


def test_job_filter_keeps_its_text() -> None:
    assert parse_job_filter("  user=ana idle ").text == "user=ana idle"


# --- sort ---------------------------------------------------------------------------------------------------


def test_job_ids_sort_numerically_with_array_tasks_after_their_job() -> None:
    ids = ["123_10", "99", "123", "125+1", "124", "123_[11-20]", "123_4", "abc", "125+0", "1000"]
    assert sorted(ids, key=job_id_key) == [
        "99",
        "123",
        "123_4",
        "123_10",
        "123_[11-20]",
        "124",
        "125+0",
        "125+1",
        "1000",
        "abc",
    ]


def _rows_for_sort() -> dict[str, JobRow]:
    snapshot, state = _queue()
    return job_rows(snapshot, state)


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("id", ["99", "100", "101", "102", "103", "104", "105_3", "105_[1-20]"]),
        ("user", ["100", "103", "101", "105_3", "102", "104", "99", "105_[1-20]"]),
        ("partition", ["100", "102", "103", "104", "105_[1-20]", "99", "101", "105_3"]),
        ("state", ["104", "105_[1-20]", "99", "100", "101", "102", "103", "105_3"]),
        ("gpus", ["104", "100", "101", "102", "103", "99", "105_3", "105_[1-20]"]),
        ("elapsed", ["100", "105_3", "101", "99", "102", "103", "104", "105_[1-20]"]),
        ("util", ["100", "102", "101", "105_3", "99", "103", "104", "105_[1-20]"]),
        ("wasted", ["100", "102", "99", "101", "103", "104", "105_3", "105_[1-20]"]),
        ("reason", ["104", "105_[1-20]", "99", "100", "101", "102", "103", "105_3"]),
        ("nodes", ["101", "100", "99", "102", "105_3", "103", "104", "105_[1-20]"]),  # by first node
    ],
)
def test_sort_by_each_key(key: str, expected: list[str]) -> None:
    assert sort_job_rows(_rows_for_sort(), key) == expected


def test_sort_reverse_keeps_missing_values_last_and_ties_in_id_order() -> None:
    rows = _rows_for_sort()
    assert sort_job_rows(rows, "id", reverse=True) == list(reversed(sort_job_rows(rows, "id")))
    # least wasted first; the jobs with no utilization still come last
    assert sort_job_rows(rows, "wasted", reverse=True)[:3] == ["99", "101", "103"]
    by_util = ["105_3", "101", "100", "102", "99", "103", "104", "105_[1-20]"]
    assert sort_job_rows(rows, "util", reverse=True) == by_util
    assert sort_job_rows(list(rows.values()), "gpus") == sort_job_rows(rows, "gpus")


def test_sort_keys_and_unknown_key() -> None:
    assert set(SORT_KEYS) == {
        *("id", "user", "partition", "state", "gpus", "elapsed", "util", "wasted", "reason", "nodes")
    }
    assert "wasted" in DESCENDING_KEYS
    with pytest.raises(ValueError, match="unknown sort key 'colour'"):
        sort_job_rows(_rows_for_sort(), "colour")


# --- speed --------------------------------------------------------------------------------------------------


def _bench_module() -> ModuleType:
    path = Path(__file__).resolve().parent.parent / "bench" / "bench_jobs.py"
    spec = importlib.util.spec_from_file_location("bench_jobs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_jobs"] = module
    spec.loader.exec_module(module)
    return module


# 10x the medians measured with bench/bench_jobs.py (20,000 jobs, 2,000 running on 1,000 x 8 GPUs) on a
# shared 2.x GHz Xeon: generous for a slow CI machine, far below what an accidental O(n^2) would cost.
BOUNDS_MS = {
    "IdleTracker.update": 40.0,
    "job_rows, previous view": 90.0,
    "job_rows, after a Slurm re-read": 150.0,
    "filter+sort: 'state=pending user=user07', by wasted": 25.0,
    "filter+sort: no filter, by id": 15.0,
    "filter+sort: no filter, by user": 70.0,
    "filter+sort: no filter, by reason": 70.0,
}


def test_twenty_thousand_jobs_stay_fast() -> None:
    bench = _bench_module()
    cluster = bench.build_cluster(nodes=1000, running=2000, pending=18000)
    timings = bench.measure(cluster, runs=3)
    assert timings.rows == 20_000 and timings.running == 2_000
    slow = {name: ms for name, ms in timings.median_ms.items() if name in BOUNDS_MS and ms > BOUNDS_MS[name]}
    assert slow == {}, f"slower than 10x the measured median: {slow}"


def test_the_position_key_places_a_row_where_the_sort_would() -> None:
    from gputop.core.jobs import job_position_key

    rows = _rows_for_sort()
    for key in SORT_KEYS:
        for reverse in (False, True):
            by_sort = sort_job_rows(rows, key, reverse=reverse)
            descending = (key in DESCENDING_KEYS) != reverse
            by_key = [r.job_id for r in sorted(rows.values(), key=job_position_key(key, descending))]
            assert by_key == by_sort, (key, reverse)
    with pytest.raises(ValueError, match="unknown sort key"):
        job_position_key("colour", False)


def test_the_queue_takes_each_jobs_mean_utilization_from_the_idle_tracker_unchanged() -> None:
    """The idle tracker reads every held GPU each tick and keeps each job's mean: the queue's rows use it,
    and it is the mean the rows would work out themselves, job by job."""
    sim = SimulatedCluster(nodes=64, start_time_s=1_700_000_000.0)
    sim.advance_to(sim.start_time_s + 30)
    result = sim.result()
    snapshot = ClusterSnapshot.build("c", sim.now_s, result.nodes, result.slurm)
    idle = IdleTracker(5.0, 10.0).update(snapshot)
    assert idle.util_by_job, "running jobs have a mean"
    with_tracker, on_their_own = job_rows(snapshot, idle), job_rows(snapshot)
    assert with_tracker.keys() == on_their_own.keys()
    for job_id, row in with_tracker.items():
        assert row.util_mean_pct == on_their_own[job_id].util_mean_pct, job_id
    assert sum(row.util_mean_pct is not None for row in with_tracker.values()) == len(idle.util_by_job)


def test_job_rows_in_slices_are_the_rows_worked_out_at_once() -> None:
    snapshot, state = _queue()
    steps = job_rows_steps(snapshot, state, None, jobs_per_slice=2)
    slices = 0
    while True:
        try:
            next(steps)
            slices += 1
        except StopIteration as done:
            sliced = done.value
            break
    jobs = len(snapshot.slurm.jobs)  # type: ignore[union-attr]
    assert slices == jobs // 2
    assert sliced == job_rows(snapshot, state)
