"""Drain and resume in the demo: gputop's planned argv, run by `SimulatedScontrol`, changes the simulated
Slurm as scontrol changes a real one, with scontrol's exit statuses and messages (Slurm 22.05)."""

from __future__ import annotations

import asyncio
import getpass
from collections.abc import Sequence

import pytest

from gputop.core.models import SlurmBaseState, SlurmNode, SlurmState
from gputop.core.node_actions import NodeAction, NodeActionPlan, plan_node_action
from gputop.sim.demo_actions import (
    INVALID_NODE_NAME,
    INVALID_NODE_STATE,
    NO_CHANGES,
    NO_ENTITY,
    REASON_REQUIRED,
    TOO_FEW_ARGUMENTS,
    SimulatedScontrol,
)
from gputop.sim.incidents import DRAIN_REASON
from gputop.sim.simulator import SimulatedCluster
from gputop.sources.slurm_runner import Completed, RunFailed, Runner

T0 = 1_700_000_000.0
USER = "oncall"
HOUR_S = 3600


def new_cluster() -> SimulatedCluster:
    return SimulatedCluster(start_time_s=T0)


def slurm(cluster: SimulatedCluster) -> SlurmState:
    state = cluster.result().slurm
    assert state is not None
    return state


def node(cluster: SimulatedCluster, name: str) -> SlurmNode:
    return slurm(cluster).nodes[name]


def run_argv(cluster: SimulatedCluster, argv: Sequence[str], *, user: str | None = USER) -> Completed:
    runner: Runner = SimulatedScontrol(lambda: cluster, user=user)
    return asyncio.run(runner.run(argv, {}, 30.0))


def plan(
    cluster: SimulatedCluster, action: NodeAction, nodes: Sequence[str], reason: str | None = None
) -> NodeActionPlan:
    planned = plan_node_action(action, nodes, cluster.node_names, reason, slurm(cluster))
    assert isinstance(planned, NodeActionPlan), planned
    return planned


def act(
    cluster: SimulatedCluster, action: NodeAction, nodes: Sequence[str], reason: str | None = None
) -> Completed:
    planned = plan(cluster, action, nodes, reason)
    done = run_argv(cluster, planned.argv)
    assert done.argv == planned.argv
    return done


def succeeded(done: Completed) -> bool:
    return done.exit_status == 0 and done.stdout == "" and done.stderr == ""


def advance(cluster: SimulatedCluster, seconds: int) -> None:
    start = round(cluster.now_s - T0)
    for k in range(start + 1, start + seconds + 1):
        cluster.advance_to(T0 + k)


def running_on(state: SlurmState, name: str) -> set[str]:
    return {job.job_id for job in state.jobs if job.state == "RUNNING" and name in job.gpus_by_node}


def idle_node(cluster: SimulatedCluster) -> str:
    return next(
        name
        for name, n in slurm(cluster).nodes.items()
        if n.base_state is SlurmBaseState.IDLE and not n.flags
    )


def busy_node_ending_first(cluster: SimulatedCluster) -> tuple[str, float]:
    """A node with jobs that all end within their time limits (no pinned incident job), the one whose last
    job must end soonest, and that bound."""
    state = slurm(cluster)
    best: tuple[float, str] | None = None
    for name in state.nodes:
        jobs = [job for job in state.jobs if job.state == "RUNNING" and name in job.gpus_by_node]
        if not jobs or any((job.time_limit_s or 0) > 2 * 86400 for job in jobs):
            continue
        ends = max((job.start_time_s or 0) + (job.time_limit_s or 0) for job in jobs)
        if best is None or ends < best[0]:
            best = (ends, name)
    assert best is not None
    return best[1], best[0]


# ---------------------------------------------------------------- drain


REASONS = (
    "Xid 79 on GPU4, fell off the bus",
    '"quoted at both ends"',
    "it's \"half quoted",
    '"',
    "a; rm -rf / $(reboot) `id` | tee && echo $HOME",
    "[root@2026-01-01T00:00:00] looks like a reason's user and time",
    "  padded  ",
    "GPU ausgefällt: température 95 °C, 温度过高 🔥",
    "Reason=nested State=RESUME NodeName=gpu001",
)


@pytest.mark.parametrize("reason", REASONS)
def test_drain_keeps_the_reason_exactly_as_typed(reason: str) -> None:
    cluster = new_cluster()
    name = idle_node(cluster)
    assert node(cluster, name).reason is None
    done = act(cluster, "drain", [name], reason)
    assert succeeded(done), done
    drained = node(cluster, name)
    assert drained.drained and drained.label == "drained"
    assert drained.reason == reason
    assert drained.reason_user == USER
    assert drained.reason_time_s == T0
    advance(cluster, 5)
    assert node(cluster, name).reason == reason  # kept, not a one-sample state


def test_drain_several_nodes_by_folded_nodeset() -> None:
    cluster = new_cluster()
    names = ["gpu002", "gpu004", "gpu005", "gpu006", "gpu010"]
    planned = plan(cluster, "drain", names, "rack B PDU swap")
    assert planned.argv[2] == "NodeName=gpu[002,004-006,010]"
    done = run_argv(cluster, planned.argv)
    assert succeeded(done)
    nodes = slurm(cluster).nodes
    for name in names:
        assert "DRAIN" in nodes[name].flags and nodes[name].reason == "rack B PDU swap"
    others = [n for name, n in nodes.items() if name not in names and n.reason == "rack B PDU swap"]
    assert others == []


def test_default_reason_user_is_the_local_account() -> None:
    cluster = new_cluster()
    name = idle_node(cluster)
    planned = plan(cluster, "drain", [name], "fan")
    assert succeeded(run_argv(cluster, planned.argv, user=None))
    assert node(cluster, name).reason_user == getpass.getuser()


def test_reason_time_is_the_simulated_time_in_whole_seconds() -> None:
    cluster = SimulatedCluster(start_time_s=T0 + 0.75)
    cluster.advance_to(T0 + 10.75)
    name = idle_node(cluster)
    assert succeeded(act(cluster, "drain", [name], "x"))
    assert node(cluster, name).reason_time_s == T0 + 10


def test_busy_node_is_draining_then_drained_when_its_jobs_end() -> None:
    cluster = new_cluster()
    name, last_end_s = busy_node_ending_first(cluster)
    before = running_on(slurm(cluster), name)
    assert before
    done = act(cluster, "drain", [name], "NVLink errors on GPU1")
    assert succeeded(done)
    state = slurm(cluster)
    draining = state.nodes[name]
    assert draining.draining and draining.label == "draining"
    assert draining.base_state in (SlurmBaseState.MIXED, SlurmBaseState.ALLOCATED)
    assert draining.reason == "NVLink errors on GPU1" and draining.reason_user == USER
    assert running_on(state, name) == before  # drain lets running jobs finish
    seen_draining = 0
    while round(cluster.now_s) < last_end_s + 2:
        advance(cluster, 30)
        state = slurm(cluster)
        current = state.nodes[name]
        assert running_on(state, name) <= before  # nothing new starts there
        if current.draining:
            seen_draining += 1
            continue
        assert current.drained and current.label == "drained"
        assert current.base_state is SlurmBaseState.IDLE
        assert current.reason == "NVLink errors on GPU1" and current.reason_time_s == T0
        break
    else:
        pytest.fail(f"{name} still draining after its jobs' time limits")
    assert seen_draining > 0 or not running_on(state, name)


def test_drain_an_already_drained_node_replaces_the_reason() -> None:
    cluster = new_cluster()
    name = idle_node(cluster)
    assert succeeded(act(cluster, "drain", [name], "first"))
    advance(cluster, 42)
    planned = plan(cluster, "drain", [name], "second")
    assert planned.already == (name,)
    done = run_argv(cluster, planned.argv, user="bob")
    assert succeeded(done)  # Slurm: exit 0, silent
    drained = node(cluster, name)
    assert drained.drained
    assert (drained.reason, drained.reason_user, drained.reason_time_s) == ("second", "bob", T0 + 42)


# ---------------------------------------------------------------- resume


def test_resume_clears_drain_and_reason() -> None:
    cluster = new_cluster()
    name, _ = busy_node_ending_first(cluster)
    base = node(cluster, name).base_state
    assert succeeded(act(cluster, "drain", [name], "check cables"))
    assert node(cluster, name).draining
    done = act(cluster, "resume", [name])
    assert done.argv[-1] == "State=RESUME"
    assert succeeded(done)
    resumed = node(cluster, name)
    assert "DRAIN" not in resumed.flags
    assert resumed.base_state is base
    assert (resumed.reason, resumed.reason_user, resumed.reason_time_s) == (None, None, None)
    assert not resumed.draining and not resumed.drained


def test_scripted_drained_node_resumes_and_takes_jobs_again() -> None:
    cluster = new_cluster()
    name = next(inc.node for inc in cluster.incidents if inc.kind == "drained")
    scripted = node(cluster, name)
    assert scripted.drained and scripted.reason == DRAIN_REASON
    assert running_on(slurm(cluster), name) == set()
    # Its GPU 0 waits in MIG mode, which Slurm cannot hand out as a whole GPU: back to one first, so the
    # node takes the whole-node jobs most of the queue asks for.
    assert cluster.nvidia_smi(name, ["nvidia-smi", "-i", "0", "-mig", "0"])[0] == 0
    assert succeeded(act(cluster, "resume", [name]))
    resumed = node(cluster, name)
    assert resumed.flags == frozenset() and resumed.reason is None
    for _ in range(HOUR_S // 60):
        advance(cluster, 60)
        if running_on(slurm(cluster), name):
            break
    else:
        pytest.fail(f"no job started on {name} within an hour of resuming it")
    assert node(cluster, name).base_state in (SlurmBaseState.MIXED, SlurmBaseState.ALLOCATED)


def test_resume_a_node_that_is_not_drained_fails_like_slurm() -> None:
    cluster = new_cluster()
    drained = next(inc.node for inc in cluster.incidents if inc.kind == "drained")
    healthy = idle_node(cluster)
    argv = ("scontrol", "update", f"NodeName={drained},{healthy}", "State=RESUME")
    before = node(cluster, healthy)
    done = run_argv(cluster, argv)
    assert done.exit_status == 1
    assert done.stdout == ""
    assert done.stderr == INVALID_NODE_STATE == "slurm_update error: Invalid node state specified\n"
    # As in Slurm, the drained node in the same command is resumed all the same.
    assert "DRAIN" not in node(cluster, drained).flags
    assert node(cluster, healthy) == before


def test_drain_and_resume_the_unresponsive_node_keeps_it_not_responding() -> None:
    cluster = new_cluster()
    name = next(inc.node for inc in cluster.incidents if inc.kind == "unresponsive")
    assert node(cluster, name).reason == "Not responding"
    assert succeeded(act(cluster, "drain", [name], "silent, power cycle"))
    drained = node(cluster, name)
    assert drained.flags == frozenset({"DRAIN", "NOT_RESPONDING"})
    assert drained.reason == "silent, power cycle"
    assert succeeded(act(cluster, "resume", [name]))
    resumed = node(cluster, name)
    assert resumed.flags == frozenset({"NOT_RESPONDING"}) and resumed.reason is None


# ---------------------------------------------------------------- scheduling


def test_no_job_starts_on_a_drained_node_for_an_hour() -> None:
    # Without the drain, some node gets a new job within the hour: that is the node to drain.
    control = new_cluster()
    at_start = slurm(control)
    started_on: dict[str, int] = {}
    for _ in range(HOUR_S // 30):
        advance(control, 30)
        for job in slurm(control).jobs:
            if job.state == "RUNNING" and job.start_time_s is not None and job.start_time_s > T0:
                for name in job.gpus_by_node:
                    started_on[name] = started_on.get(name, 0) + 1
    assert started_on
    name = max(started_on, key=lambda n: (started_on[n], n))
    assert at_start.nodes[name].flags == frozenset()

    cluster = new_cluster()
    assert succeeded(act(cluster, "drain", [name], "hold for the hour"))
    new_jobs_elsewhere = 0
    for _ in range(HOUR_S // 30):
        advance(cluster, 30)
        state = slurm(cluster)
        for job in state.jobs:
            if job.state == "RUNNING" and job.start_time_s is not None and job.start_time_s > T0:
                assert name not in job.gpus_by_node, f"job {job.job_id} started on drained {name}"
                new_jobs_elsewhere += 1
        assert "DRAIN" in state.nodes[name].flags
    assert new_jobs_elsewhere > 0  # the scheduler kept working around it


def test_same_actions_same_seed_same_cluster() -> None:
    def scripted() -> SimulatedCluster:
        cluster = new_cluster()
        advance(cluster, 10)
        assert succeeded(act(cluster, "drain", ["gpu002", "gpu014"], "x"))
        advance(cluster, 300)
        assert succeeded(act(cluster, "resume", ["gpu014"]))
        advance(cluster, 300)
        return cluster

    assert scripted().result() == scripted().result()


# ---------------------------------------------------------------- errors and parsing


def test_invalid_node_name_fails_like_slurm() -> None:
    cluster = new_cluster()
    before = slurm(cluster).nodes
    done = run_argv(cluster, ("scontrol", "update", "NodeName=nosuch", "State=DRAIN", 'Reason="x"'))
    assert done.exit_status == 1
    assert done.stdout == ""
    assert done.stderr == INVALID_NODE_NAME == "slurm_update error: Invalid node name specified\n"
    assert slurm(cluster).nodes == before


def test_invalid_name_in_a_list_still_changes_the_real_nodes() -> None:
    # Slurm 22.05 drains every node of the list that exists, then reports the one that does not.
    cluster = new_cluster()
    name = idle_node(cluster)
    done = run_argv(cluster, ("scontrol", "update", f"NodeName=nosuch,{name}", "State=DRAIN", "Reason=x"))
    assert (done.exit_status, done.stderr) == (1, INVALID_NODE_NAME)
    assert node(cluster, name).drained and node(cluster, name).reason == "x"


NODE = "NodeName=gpu001"
BAD_STATE = (
    "Invalid input: State={}\nRequest aborted\n"
    "Valid states are: NoResp DRAIN FAIL FUTURE RESUME POWER_DOWN POWER_UP UNDRAIN\n"
    "Not all states are valid given a node's prior state\n"
)


@pytest.mark.parametrize(
    ("argv", "stderr"),
    [
        (("scontrol", "update", NODE, "State=DRAIN"), REASON_REQUIRED),
        (("scontrol", "update", NODE, "State=DRAIN", 'Reason=""'), REASON_REQUIRED),
        (("scontrol", "update", NODE, "State=DRAIN", 'Reason="'), REASON_REQUIRED),
        (("scontrol", "update", NODE, "State=DRAIN", "Reason="), REASON_REQUIRED),
        (("scontrol", "update"), TOO_FEW_ARGUMENTS),
        (("scontrol", "update", NODE), NO_CHANGES),
        (("scontrol", "update", "Foo=bar"), NO_ENTITY),
        (("scontrol", "update", "No=gpu001", "State=DRAIN", "Reason=x"), NO_ENTITY),
        (("scontrol", "update", NODE, "State=BOGUS", "Reason=x"), BAD_STATE.format("BOGUS")),
        (("scontrol", "update", NODE, "State=DR", "Reason=x"), BAD_STATE.format("DR")),
        (("scontrol", "update", NODE, "State=DRAINX", "Reason=x"), BAD_STATE.format("DRAINX")),
        (("scontrol", "update", NODE, 'State="DRAIN"', "Reason=x"), BAD_STATE.format('"DRAIN"')),
        (("scontrol", "update", NODE, "State=DRAIN", "Reason=x", "State=BOGUS"), BAD_STATE.format("BOGUS")),
        (
            ("scontrol", "update", NODE, "State=DRAIN", "Reason=x", "extra"),
            "scontrol: error: Invalid input: extra  Request aborted\nslurm_update error: No error\n",
        ),
        (
            ("scontrol", "update", NODE, "State=DRAIN", "Reason", "x"),
            "scontrol: error: Invalid input: Reason  Request aborted\nslurm_update error: No error\n",
        ),
        (
            ("scontrol", "update", NODE, "State=DRAIN", "Reason=x", "Foo=bar"),
            "Update of this parameter is not supported: Foo=bar\nRequest aborted\n",
        ),
        (
            ("scontrol", "update", NODE, "States=DRAIN", "Reason=x"),
            "Update of this parameter is not supported: States=DRAIN\nRequest aborted\n",
        ),
        (("scontrol", "update", "NodeName=gpu[001", "State=DRAIN", "Reason=x"), INVALID_NODE_NAME),
        (("scontrol", "update", "NodeName=", "State=DRAIN", "Reason=x"), INVALID_NODE_NAME),
        (("scontrol", "update", "NodeName=GPU001", "State=DRAIN", "Reason=x"), INVALID_NODE_NAME),
        (("scontrol", "update", "NodeName=gpu1", "State=DRAIN", "Reason=x"), INVALID_NODE_NAME),
    ],
)
def test_malformed_commands_fail_with_scontrols_message(argv: tuple[str, ...], stderr: str) -> None:
    cluster = new_cluster()
    before = slurm(cluster).nodes
    done = run_argv(cluster, argv)
    assert (done.exit_status, done.stdout, done.stderr) == (1, "", stderr)
    assert done.argv == argv
    assert slurm(cluster).nodes == before


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (("scontrol",), "interactive scontrol"),
        (("scontrol", "show", "node", "gpu001"), "scontrol show"),
        (("scontrol", "update", NODE, "State=DOWN", "Reason=x"), "State=DOWN"),
        (("scontrol", "update", NODE, "State=undrain"), "State=UNDRAIN"),
        (("scontrol", "update", NODE, "Weight=5"), "Weight="),
        (("scontrol", "update", NODE, "Reason=only"), "a reason without State=DRAIN"),
        (("scontrol", "update", "PartitionName=train", "State=DOWN"), "PartitionName"),
    ],
)
def test_valid_but_unsimulated_commands_say_so(argv: tuple[str, ...], what: str) -> None:
    cluster = new_cluster()
    before = slurm(cluster).nodes
    done = run_argv(cluster, argv)
    assert done.exit_status == 1
    assert what in done.stderr and "not simulated" in done.stderr
    assert slurm(cluster).nodes == before


def test_down_without_reason_is_refused_like_drain() -> None:
    done = run_argv(new_cluster(), ("scontrol", "update", NODE, "State=DOWN"))
    assert (done.exit_status, done.stderr) == (1, REASON_REQUIRED)


@pytest.mark.parametrize(
    ("words", "drained", "reason"),
    [
        (("UPDATE", "NODENAME=gpu001", "STATE=DRAIN", "REASON=x"), "gpu001", "x"),
        (("update", "nodename=gpu001", "state=drain", "reason=x"), "gpu001", "x"),
        (("u", "Nod=gpu001", "S=Dra", "R=abbr"), "gpu001", "abbr"),
        (("update", "State=DRAIN", "Reason=x", "NodeName=gpu001"), "gpu001", "x"),
        (("update", "NodeName=gpu001", "State=DRAIN", "NodeName=gpu002", "Reason=x"), "gpu002", "x"),
        (("update", NODE, "State=DRAIN", "Reason=x", "Reason=y"), "gpu001", "y"),
        (("update", NODE, "State=DRAIN", "Reason==x"), "gpu001", "=x"),
        (("update", NODE, "State=DRAIN", "Reason=x=y"), "gpu001", "x=y"),
        (("update", NODE, "State=DRAIN", 'Reason="a"b"'), "gpu001", 'a"b'),
        (("update", NODE, "State=DRAIN", 'Reason="x'), "gpu001", "x"),
        (("update", NODE, "State=DRAIN", 'Reason=x"'), "gpu001", "x"),
        (("update", NODE, "State=DRAIN", 'Reason=""x""'), "gpu001", '"x"'),
        (("update", NODE, "State=DRAIN", "Reason='x'"), "gpu001", "'x'"),
        (("update", NODE, "State=DRAIN", "Reason= "), "gpu001", " "),
        (("update", "NodeName=gpu001,gpu001", "State=DRAIN", "Reason=x"), "gpu001", "x"),
    ],
)
def test_words_are_read_as_scontrol_reads_them(words: tuple[str, ...], drained: str, reason: str) -> None:
    cluster = new_cluster()
    done = run_argv(cluster, ("scontrol", *words))
    assert succeeded(done), done
    nodes = slurm(cluster).nodes
    assert "DRAIN" in nodes[drained].flags and nodes[drained].reason == reason
    assert [name for name, n in nodes.items() if n.reason == reason] == [drained]


def test_resume_state_may_be_abbreviated_and_ignores_a_reason() -> None:
    cluster = new_cluster()
    name = next(inc.node for inc in cluster.incidents if inc.kind == "drained")
    done = run_argv(cluster, ("scontrol", "update", f"NodeName={name}", "State=Res", "Reason=ignored"))
    assert succeeded(done)
    assert node(cluster, name).flags == frozenset() and node(cluster, name).reason is None


def test_node_name_all_drains_every_node() -> None:
    cluster = new_cluster()
    assert succeeded(run_argv(cluster, ("scontrol", "update", "NodeName=ALL", "State=DRAIN", "Reason=dc")))
    nodes = slurm(cluster).nodes
    assert len(nodes) == 32
    assert all("DRAIN" in n.flags and n.reason == "dc" for n in nodes.values())


@pytest.mark.parametrize("argv", [(), ("sinfo",), ("/usr/bin/squeue", "-h")])
def test_other_programs_do_not_run(argv: tuple[str, ...]) -> None:
    cluster = new_cluster()
    with pytest.raises(RunFailed) as failed:
        run_argv(cluster, argv)
    assert "not simulated in the demo" in failed.value.reason
    assert failed.value.retry is False


def test_scontrol_by_path_runs() -> None:
    cluster = new_cluster()
    name = idle_node(cluster)
    done = run_argv(cluster, ("/usr/bin/scontrol", "update", f"NodeName={name}", "State=DRAIN", "Reason=x"))
    assert succeeded(done) and node(cluster, name).drained


def test_cluster_not_built_yet_is_a_run_failure() -> None:
    def not_yet() -> SimulatedCluster:
        raise RuntimeError("the simulated cluster is built when the source starts")

    runner = SimulatedScontrol(not_yet, user=USER)
    with pytest.raises(RunFailed, match="not ready"):
        asyncio.run(runner.run(("scontrol", "update", NODE, "State=RESUME"), {}, 1.0))


def test_runner_protocol() -> None:
    runner = SimulatedScontrol(new_cluster)
    assert runner.where == "demo"
    assert runner.refresh() is None
    assert asyncio.run(runner.close()) is None


def test_simulator_refuses_unknown_nodes_without_changing_anything() -> None:
    cluster = new_cluster()
    before = slurm(cluster).nodes
    with pytest.raises(ValueError, match="nosuch"):
        cluster.drain(["gpu001", "nosuch"], "x", USER, T0)
    with pytest.raises(ValueError, match="nosuch"):
        cluster.resume(["nosuch"], T0)
    assert slurm(cluster).nodes == before
    assert cluster.resume(["gpu001"], T0) == ("gpu001",)
