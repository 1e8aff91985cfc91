"""The auto-drain policy's decisions (gputop.core.drain_policy) on views built from samples and Slurm
states: what it drains and with which reason, what it leaves alone, its circuit breaker, its resumes, and
its state read back from the file's document. The same policy on a real Slurm: tests/test_policy_slurm.py."""

from __future__ import annotations

import dataclasses

from gputop.core.config import PolicyConfig, Thresholds
from gputop.core.drain_policy import DrainPolicy, PolicyState, drain_reason
from gputop.core.event_history import EventHistory
from gputop.core.models import (
    ClusterSnapshot,
    NodeSample,
    Reachability,
    SlurmBaseState,
    SlurmNode,
    SlurmState,
    XidEvent,
)
from gputop.core.summary import ClusterView
from gputop.core.view import ViewStage
from tests.factories import node_sample

T0 = 1_800_000_000.0
ACTING = PolicyConfig(dry_run=False, max_drains_per_hour=10, max_partition_pct=100.0)


def xid(code: int, gpu: int = 4, at_s: float = T0 - 60, words: str = "") -> XidEvent:
    what = words or "GPU has fallen off the bus."
    line = f"NVRM: Xid (PCI:0000:{0x18 + gpu:02x}:00): {code}, pid=1234, {what}"
    return XidEvent(at_s, code, f"0000:{0x18 + gpu:02x}:00.0", gpu, line)


def slurm_node(
    name: str,
    state: SlurmBaseState = SlurmBaseState.IDLE,
    flags: frozenset[str] = frozenset(),
    reason: str | None = None,
    partitions: tuple[str, ...] = ("gpu",),
    user: str | None = None,
) -> SlurmNode:
    return SlurmNode(name, state, flags, reason, user, None, partitions)


class Cluster:
    """A view stage fed by hand: nodes with Xid events, and Slurm's view of them."""

    def __init__(self, count: int = 10) -> None:
        self.names = [f"gpu{i:02d}" for i in range(1, count + 1)]
        self.events: dict[str, tuple[XidEvent, ...]] = {}
        self.slurm: dict[str, SlurmNode] = {name: slurm_node(name) for name in self.names}
        self.unreachable: set[str] = set()
        self.stage = ViewStage(Thresholds(), interval_s=1.0, judge_at_once=True)
        self.now_s = T0

    def node(self, name: str) -> NodeSample:
        sample = node_sample(name, sampled_at_s=self.now_s, xid_events=self.events.get(name, ()))
        if name in self.unreachable:
            sample = dataclasses.replace(sample, reachability=Reachability.DOWN, gpus=(), error="no route")
        return sample

    def drain(self, name: str, reason: str, user: str = "root") -> None:
        self.slurm[name] = dataclasses.replace(
            self.slurm[name], flags=frozenset({"DRAIN"}), reason=reason, reason_user=user
        )

    def resume(self, name: str) -> None:
        self.slurm[name] = dataclasses.replace(self.slurm[name], flags=frozenset(), reason=None)

    def view(self, advance_s: float = 1.0) -> ClusterView:
        self.now_s += advance_s
        slurm = SlurmState(dict(self.slurm), (), self.now_s)
        nodes = tuple(self.node(name) for name in self.names)
        return self.stage.derive(ClusterSnapshot.build("c", self.now_s, nodes, slurm))

    def apply(self, policy: DrainPolicy, advance_s: float = 1.0) -> list[tuple[str, str, str]]:
        """One tick: the decisions, with drains and resumes done in this fake Slurm as a runner would."""
        decided = policy.decide(self.view(advance_s), self.now_s)
        for decision in decided:
            if decision.verdict == "drain" and not decision.dry_run:
                self.drain(decision.node, decision.reason)
                policy.drained(decision)
            elif decision.verdict == "drain":
                policy.drained(decision)
            elif decision.verdict == "resume":
                if not decision.dry_run:
                    self.resume(decision.node)
                policy.resumed(decision)
        return [(d.verdict, d.node, d.why) for d in decided]


def test_a_node_whose_gpu_fell_off_the_bus_is_drained_with_the_evidence_and_what_to_do() -> None:
    cluster = Cluster()
    cluster.events["gpu03"] = (xid(79),)
    policy = DrainPolicy(ACTING)
    decisions = policy.decide(cluster.view(), cluster.now_s)
    assert [(d.verdict, d.node, d.cause) for d in decisions] == [("drain", "gpu03", "xid:79")]
    reason = decisions[0].reason
    assert reason.startswith("gputop: GPU4 Xid 79: GPU has fallen off the bus at ")
    assert reason.endswith("UTC: reboot gpu03: a GPU reset will not bring GPU4 back")
    assert "action class reboot" in decisions[0].why


def test_problems_outside_the_drain_classes_drain_nothing() -> None:
    cluster = Cluster()
    cluster.events["gpu01"] = (xid(13, words="Graphics Exception"),)  # the job's: restart it
    cluster.events["gpu02"] = (xid(63, words="Row remapping event"),)  # informational
    policy = DrainPolicy(ACTING)
    assert policy.decide(cluster.view(), cluster.now_s) == []
    only_jobs = DrainPolicy(dataclasses.replace(ACTING, drain_classes=("job",)))
    assert [(d.verdict, d.node) for d in only_jobs.decide(cluster.view(), cluster.now_s)] == [
        ("drain", "gpu01")
    ]


def test_someone_elses_drain_and_a_down_node_are_left_alone_and_said_once() -> None:
    cluster = Cluster()
    for name in ("gpu01", "gpu02"):
        cluster.events[name] = (xid(79),)
    cluster.drain("gpu01", "RMA ticket 4411", user="alice")
    cluster.slurm["gpu02"] = dataclasses.replace(cluster.slurm["gpu02"], base_state=SlurmBaseState.DOWN)
    policy = DrainPolicy(ACTING)
    first = cluster.apply(policy)
    assert [(v, n) for v, n, _ in first] == [("skip", "gpu01"), ("skip", "gpu02")]
    assert "already drained by alice: RMA ticket 4411; not the policy's: left alone" in first[0][2]
    assert first[1][2].startswith("down in Slurm")
    assert cluster.apply(policy) == []  # the same decision is not said again each tick
    assert cluster.slurm["gpu01"].reason == "RMA ticket 4411"


def test_the_hourly_limit_opens_the_breaker_until_a_person_resets_it() -> None:
    cluster = Cluster()
    for name in ("gpu01", "gpu02", "gpu03"):
        cluster.events[name] = (xid(79),)
    policy = DrainPolicy(dataclasses.replace(ACTING, max_drains_per_hour=2))
    decided = cluster.apply(policy)
    assert [(v, n) for v, n, _ in decided] == [("drain", "gpu01"), ("drain", "gpu02"), ("breaker", "gpu03")]
    assert "2 drains in the last hour, the limit is 2" in decided[2][2]
    assert policy.state.breaker_open
    cluster.events["gpu04"] = (xid(79),)
    later = cluster.apply(policy, advance_s=2 * 3600)  # an hour later the breaker is still open
    assert [(v, n) for v, n, _ in later] == [("skip", "gpu04")]
    assert later[0][2].startswith("circuit breaker open: 2 drains in the last hour")
    assert "DRAIN" not in cluster.slurm["gpu03"].flags
    assert policy.reset_breaker() is not None
    assert [(v, n) for v, n, _ in cluster.apply(policy)] == [("drain", "gpu03"), ("drain", "gpu04")]


def test_the_partition_limit_counts_the_policys_drains_only() -> None:
    cluster = Cluster(count=10)
    cluster.drain("gpu10", "someone's maintenance")  # not the policy's: does not count
    for name in ("gpu01", "gpu02", "gpu03"):
        cluster.events[name] = (xid(79),)
    policy = DrainPolicy(dataclasses.replace(ACTING, max_partition_pct=20.0))
    decided = cluster.apply(policy)
    assert [(v, n) for v, n, _ in decided] == [("drain", "gpu01"), ("drain", "gpu02"), ("breaker", "gpu03")]
    assert "3 of partition gpu's 10 nodes drained by the policy (30%), the limit is 20%" in decided[2][2]


def test_its_own_drain_is_resumed_after_the_problem_has_been_clear_for_the_configured_minutes() -> None:
    cluster = Cluster()
    cluster.events["gpu05"] = (xid(79),)
    policy = DrainPolicy(dataclasses.replace(ACTING, resume_after_clear_min=10.0), history=EventHistory())
    assert [v for v, _, _ in cluster.apply(policy)] == ["drain"]
    cluster.events["gpu05"] = ()  # the node was rebooted: its log is clean
    assert cluster.apply(policy) == []
    cluster.unreachable.add("gpu05")  # a node that does not answer is not clear: the clock starts again
    assert cluster.apply(policy, advance_s=9 * 60) == []
    cluster.unreachable.clear()
    assert cluster.apply(policy) == []  # clear from here
    assert cluster.apply(policy, advance_s=9 * 60) == []
    decided = cluster.apply(policy, advance_s=61)
    assert [(v, n) for v, n, _ in decided] == [("resume", "gpu05")]
    assert decided[0][2] == "no Xid 79 problem for 10 min"
    assert "DRAIN" not in cluster.slurm["gpu05"].flags


def test_a_node_drained_twice_for_one_cause_in_a_week_is_held_for_a_person() -> None:
    cluster = Cluster()
    history = EventHistory()
    cluster.stage.history = history
    policy = DrainPolicy(dataclasses.replace(ACTING, resume_after_clear_min=1.0), history=history)
    cluster.events["gpu05"] = (xid(79, at_s=cluster.now_s),)
    assert [v for v, _, _ in cluster.apply(policy)] == ["drain"]
    cluster.events["gpu05"] = ()
    cluster.apply(policy)
    assert [v for v, _, _ in cluster.apply(policy, advance_s=61)] == ["resume"]
    cluster.events["gpu05"] = (xid(79, at_s=cluster.now_s + 3600),)  # back a day later
    decided = policy.decide(cluster.view(advance_s=86400), cluster.now_s)
    assert [d.verdict for d in decided] == ["drain"]
    assert decided[0].reason.endswith("; drained 2x for this within a week: inspect before resuming")
    cluster.drain("gpu05", decided[0].reason)
    policy.drained(decided[0])
    view = cluster.view()
    redrain = [p for p in view.rows["gpu05"].problems if p.kind == "redrain"]
    assert [(p.severity.value, p.message) for p in redrain] == [
        ("crit", "drained 2x for Xid 79 within 7 days")
    ]
    assert redrain[0].action.startswith("inspect gpu05 before it runs jobs again")
    cluster.events["gpu05"] = ()
    cluster.apply(policy)
    held = cluster.apply(policy, advance_s=120)
    assert [(v, n) for v, n, _ in held] == [("hold", "gpu05")]
    assert "needs a person's inspection, not resumed" in held[0][2]
    assert "DRAIN" in cluster.slurm["gpu05"].flags


def test_a_drain_someone_else_resumed_is_no_longer_the_policys() -> None:
    cluster = Cluster()
    cluster.events["gpu02"] = (xid(79),)
    policy = DrainPolicy(ACTING)
    cluster.apply(policy)
    cluster.resume("gpu02")
    cluster.events["gpu02"] = ()
    decided = cluster.apply(policy)
    assert [(v, n) for v, n, _ in decided] == [("release", "gpu02")]
    assert "resumed by someone else" in decided[0][2]
    assert policy.state.own == {}


def test_a_drain_whose_outcome_was_never_written_is_settled_by_what_slurm_shows() -> None:
    cluster = Cluster()
    for name in ("gpu01", "gpu02"):
        cluster.events[name] = (xid(79),)
    policy = DrainPolicy(ACTING)
    decided = policy.decide(cluster.view(), cluster.now_s)
    for decision in decided:
        policy.drained(decision, confirmed=False)  # the intent is on disk; then gputop was killed
    cluster.drain("gpu01", decided[0].reason)  # scontrol had done it for gpu01, not yet for gpu02
    restarted = DrainPolicy(ACTING, PolicyState.from_document(policy.state.to_document()))  # type: ignore[arg-type]
    settled = restarted.decide(cluster.view(), cluster.now_s)
    assert restarted.state.own["gpu01"].confirmed
    assert [(d.verdict, d.node) for d in settled] == [("release", "gpu02"), ("drain", "gpu02")]
    assert "was not made" in settled[0].why


def test_dry_run_decides_the_same_and_counts_its_pretend_drains_against_the_limits() -> None:
    cluster = Cluster()
    for name in ("gpu01", "gpu02", "gpu03"):
        cluster.events[name] = (xid(79),)
    policy = DrainPolicy(PolicyConfig(dry_run=True, max_drains_per_hour=2, max_partition_pct=100.0))
    decided = cluster.apply(policy)
    assert [(v, n) for v, n, _ in decided] == [("drain", "gpu01"), ("drain", "gpu02"), ("breaker", "gpu03")]
    assert all("DRAIN" not in node.flags for node in cluster.slurm.values())
    assert cluster.apply(policy) == []  # nothing repeated: its pretend drains are not "released"


def test_without_slurms_state_it_decides_nothing() -> None:
    cluster = Cluster()
    cluster.events["gpu01"] = (xid(79),)
    view = cluster.view()
    blind = dataclasses.replace(view, snapshot=dataclasses.replace(view.snapshot, slurm=None))
    assert DrainPolicy(ACTING).decide(blind, cluster.now_s) == []


def test_the_state_document_reads_back_and_a_broken_one_is_refused() -> None:
    state = PolicyState(breaker_why="2 drains in the last hour", breaker_since_s=T0)
    state.drain_times_s = [T0]
    back = PolicyState.from_document(state.to_document())
    assert isinstance(back, PolicyState)
    assert (back.breaker_why, back.breaker_since_s, back.drain_times_s) == (state.breaker_why, T0, [T0])
    assert PolicyState.from_document([]) == "not a JSON object"
    assert "format version 99" in str(PolicyState.from_document({"version": 99}))
    assert "own_drains" in str(PolicyState.from_document({"version": 1, "own_drains": ["x"]}))


def test_the_reason_holds_no_control_character_and_fits_slurm() -> None:
    cluster = Cluster()
    cluster.events["gpu01"] = (xid(79, words="GPU has fallen off the bus.\x1b[31m" + "x" * 2000),)
    (problem,) = [p for p in cluster.view().rows["gpu01"].problems if p.kind == "xid"]
    reason = drain_reason(dataclasses.replace(problem, message=problem.message + "\x1b[2J\n" + "y" * 2000))
    assert "\x1b" not in reason and "\n" not in reason
    assert len(reason) <= 1000
