"""Drain and resume plans: exact argv, refusals, the jobs that keep running; and the audit log."""

from __future__ import annotations

import json
import shlex

import pytest

from gputop.core.health import Problem
from gputop.core.models import (
    NodeSample,
    Reachability,
    Severity,
    SlurmBaseState,
    SlurmJob,
    SlurmNode,
    SlurmState,
    XidEvent,
)
from gputop.core.node_actions import (
    MAX_REASON_CHARS,
    NodeActionPlan,
    Refused,
    plan_node_action,
    reason_template,
)
from tests.infra.slurm import RealSlurm, real_slurm  # noqa: F401 - the fixture, registered by importing it

CLUSTER = [f"gpu{i:03d}" for i in range(1, 9)]
NASTY = 'it\'s "bad"; rm -rf / $(reboot) `id` | tee — ünïcode [root@2026-01-01T00:00:00] NodeName=gpu9'


def slurm() -> SlurmState:
    nodes = {
        "gpu001": SlurmNode("gpu001", SlurmBaseState.MIXED),
        "gpu002": SlurmNode("gpu002", SlurmBaseState.IDLE, frozenset({"DRAIN"}), reason="old"),
        "gpu003": SlurmNode("gpu003", SlurmBaseState.IDLE),
    }
    jobs = (
        SlurmJob("41", "train", "ana", "gpu", "RUNNING", {"gpu001": (0, 1)}, nodes=("gpu001",)),
        SlurmJob("42", "wait", "bo", "gpu", "PENDING", {}, nodes=()),
    )
    return SlurmState(nodes, jobs, 0.0)


def test_a_drain_plan_is_the_exact_argv_with_the_reason_as_typed() -> None:
    plan = plan_node_action("drain", ["gpu003", "gpu001"], CLUSTER, NASTY, slurm())
    assert isinstance(plan, NodeActionPlan)
    assert plan.argv == ("scontrol", "update", "NodeName=gpu[001,003]", "State=DRAIN", f'Reason="{NASTY}"')
    assert plan.nodes == ("gpu001", "gpu003") and plan.needs_count_typed
    assert [j.job_id for j in plan.running_jobs] == ["41"]
    assert plan.already == ()
    assert shlex.split(plan.command_line) == list(plan.argv)  # shown quoted, never run through a shell


def test_resume_and_already_in_that_state() -> None:
    plan = plan_node_action("resume", ["gpu002", "gpu003"], CLUSTER, None, slurm())
    assert isinstance(plan, NodeActionPlan)
    assert plan.argv == ("scontrol", "update", "NodeName=gpu[002-003]", "State=RESUME")
    assert plan.already == ("gpu003",) and plan.reason is None
    drain = plan_node_action("drain", ["gpu002"], CLUSTER, "again", slurm())
    assert isinstance(drain, NodeActionPlan) and drain.already == ("gpu002",) and not drain.needs_count_typed


@pytest.mark.parametrize(
    ("action", "nodes", "reason", "why"),
    [
        ("drain", ["gpu001"], "", "a reason is required"),
        ("drain", ["gpu001"], "   \n", "a reason is required"),
        ("drain", ["gpu001"], None, "a reason is required"),
        ("drain", ["gpu001"], "x" * (MAX_REASON_CHARS + 1), "Slurm keeps at most"),
        ("drain", [], "why", "no nodes chosen"),
        ("resume", ["gpu001", "login01", "gpu[1-2]"], None, "not nodes of this cluster: gpu[1-2], login01"),
    ],
)
def test_refusals_say_why(action: str, nodes: list[str], reason: str | None, why: str) -> None:
    refused = plan_node_action(action, nodes, CLUSTER, reason, slurm())  # type: ignore[arg-type]
    assert isinstance(refused, Refused)
    assert why in refused.reason


def test_the_reason_template_carries_the_evidence() -> None:
    xid = XidEvent(1_800_000_000.0, 79, "0000:18:00.0", 3, "GPU has fallen off the bus")
    node = NodeSample("gpu004", Reachability.OK, 0.0, (), 8, xid_events=(xid,))
    assert reason_template(node, ()) == (
        "Xid 79 on GPU3 at 2027-01-15 08:00 UTC: reboot gpu004: a GPU reset will not bring GPU3 back"
    )
    hot = Problem(Severity.CRIT, "gpu004", 2, "temp", "GPU2 93 C")
    plain = NodeSample("gpu004", Reachability.OK, 0.0, (), 8)
    assert reason_template(plain, (hot,)) == "GPU2 93 C"
    assert reason_template(plain, ()) == ""


@pytest.mark.slurm
@pytest.mark.parametrize("reason", [NASTY, '"quoted at both ends"', '"only the start', 'only the end"'])
def test_a_planned_drain_reaches_real_slurm_exactly_as_typed(
    real_slurm: RealSlurm,  # noqa: F811
    reason: str,
) -> None:
    real_slurm.reset()
    node = real_slurm.nodes[1]
    plan = plan_node_action("drain", [node], real_slurm.nodes, reason, None)
    assert isinstance(plan, NodeActionPlan)
    real_slurm.run(list(plan.argv))
    try:
        listed = json.loads(real_slurm.run(["sinfo", "--json"]).stdout)["nodes"]
        (entry,) = [n for n in listed if n["name"] == node]
        assert entry["reason"] == reason
        resume = plan_node_action("resume", [node], real_slurm.nodes, None, None)
        assert isinstance(resume, NodeActionPlan)
        real_slurm.run(list(resume.argv))
        assert real_slurm.wait_for(lambda: real_slurm.node_state(node) == "idle", 10, what="resumed")
    finally:
        real_slurm.reset()
