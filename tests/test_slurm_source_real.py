"""The Slurm source against a real Slurm (tests/infra/slurm.py), read locally and over a real sshd.

The tests share the session's cluster (node01..node04, 8 H100 GRES each) and leave it as they found it:
no jobs, every daemon running, every node idle.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from gputop.core.config import ClusterConfig, SshConfig
from gputop.core.models import SlurmState
from gputop.core.parsers.slurm import (
    SQUEUE_JSON_ARGV,
)
from gputop.sources.slurm import (
    ReadFailed,
    SlurmSource,
    nodes_from_slurm,
)
from tests.infra import slurm as infra
from tests.infra.slurm import (  # noqa: F401 - fixtures, registered by importing them
    RealSlurm,
    real_slurm,
    slurm_client_conf,
)
from tests.infra.sshd import RealSshd, real_sshd  # noqa: F401 - the fixture, registered by importing it
from tests.test_slurm_source import (  # the helpers both files use
    FakeRunner,
    cluster,
    fixture,
    loopback_answers,
    ok,
    source_with,
)

# --- the real Slurm ----------------------------------------------------------------------------------------


@pytest.fixture
def slurm(real_slurm: RealSlurm) -> Iterator[RealSlurm]:  # noqa: F811
    real_slurm.reset()
    yield real_slurm
    real_slurm.reset()


@pytest.fixture
async def source(slurm: RealSlurm) -> AsyncIterator[SlurmSource]:
    reading = SlurmSource(cluster(nodes=slurm.nodes, timeout_s=20), time.time, env=slurm.env)
    yield reading
    await reading.close()


async def read_until(
    source: SlurmSource, check: Callable[[SlurmState], object], timeout_s: float = 30.0
) -> SlurmState:
    deadline = time.monotonic() + timeout_s
    state = await source.read_once()
    while not check(state):
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen within {timeout_s:g}s; last state: {state}")
        await asyncio.sleep(0.2)
        state = await source.read_once()
    return state


def running_job(slurm: RealSlurm, job_id: str) -> None:
    slurm.wait_for(lambda: slurm.job_state(job_id) == "RUNNING", 30, what=f"job {job_id} RUNNING")


def indices_from_scontrol(slurm: RealSlurm, job_id: str) -> dict[str, tuple[int, ...]]:
    """What `scontrol show job -d` says, read with a regex here rather than gputop's parser."""
    import re

    from gputop.core.nodeset import expand_nodeset

    text = slurm.run(["scontrol", "show", "job", "-d", job_id]).stdout
    found: dict[str, tuple[int, ...]] = {}
    for nodes, idx in re.findall(r"Nodes=(\S+) .*?GRES=\S*\(IDX:([0-9,-]+)\)", text):
        numbers: list[int] = []
        for part in idx.split(","):
            low, _, high = part.partition("-")
            numbers.extend(range(int(low), int(high or low) + 1))
        for node in expand_nodeset(nodes):
            found[node] = tuple(numbers)
    return found


@pytest.mark.slurm
async def test_real_slurm_nodes_start_idle_with_their_gpus(source: SlurmSource, slurm: RealSlurm) -> None:
    state = await source.read_once()
    assert state.error is None, state.error
    assert sorted(state.nodes) == list(slurm.nodes)
    for node in state.nodes.values():
        assert node.label == "idle"
        assert node.gpus_configured == 8 and node.gpus_allocated == 0
        assert node.partitions == (slurm.partition,)
    assert [job for job in state.jobs if job.state in ("RUNNING", "PENDING")] == []
    assert state.sampled_at_s is not None and abs(state.sampled_at_s - time.time()) < 30


@pytest.mark.slurm
async def test_real_slurm_job_shows_running_on_its_node_and_gpus(
    source: SlurmSource, slurm: RealSlurm
) -> None:
    job_id = slurm.submit(gpus=2, name="two-gpus")
    wide_id = slurm.submit(gpus=3, nodes=2, name="two-nodes")
    running_job(slurm, job_id)
    running_job(slurm, wide_id)
    state = await read_until(
        source,
        lambda s: {j.job_id for j in s.jobs if j.state == "RUNNING" and j.gpus_by_node} >= {job_id, wide_id},
    )
    jobs = {job.job_id: job for job in state.jobs}

    two = jobs[job_id]
    assert two.name == "two-gpus" and two.user == "root" and two.partition == slurm.partition
    (node,) = two.nodes
    assert dict(two.gpus_by_node) == indices_from_scontrol(slurm, job_id)
    assert len(two.gpus_by_node[node]) == 2
    for index in two.gpus_by_node[node]:
        assert state.job_on_gpu(node, index) is two
    assert two.start_time_s is not None and abs(two.start_time_s - time.time()) < 60  # UTC, read exactly

    wide = jobs[wide_id]
    assert len(wide.nodes) == 2 and set(wide.gpus_by_node) == set(wide.nodes)
    assert dict(wide.gpus_by_node) == indices_from_scontrol(slurm, wide_id)
    for name, indices in wide.gpus_by_node.items():
        assert len(indices) == 3
        assert set(indices) <= set(state.nodes[name].gpu_indices_in_use or ())
        assert all(state.job_on_gpu(name, i) is wide for i in indices)
    free = [n for n in slurm.nodes if n not in (*two.nodes, *wide.nodes)]
    assert all(state.job_on_gpu(n, i) is None for n in free for i in range(8))


@pytest.mark.slurm
async def test_real_slurm_drain_shows_the_exact_reason_user_and_time(
    source: SlurmSource, slurm: RealSlurm
) -> None:
    reason = "xid 79: GPU 3 fell off the bus; on-call: don't resume (ticket #42)"
    before = time.time()
    slurm.run(["scontrol", "update", "NodeName=node02", "State=DRAIN", f"Reason={reason}"])
    state = await read_until(source, lambda s: s.nodes["node02"].drained)
    node = state.nodes["node02"]
    assert node.label == "drained"
    assert node.reason == reason
    assert node.reason_user == "root"
    (listed,) = [
        n for n in json.loads(slurm.run(["sinfo", "--json"]).stdout)["nodes"] if n["name"] == "node02"
    ]
    assert node.reason_time_s == float(listed["reason_changed_at"])  # the controller's own epoch second
    assert int(before) - 1 <= (node.reason_time_s or 0) <= time.time() + 1
    assert [state.nodes[n].label for n in ("node01", "node03", "node04")] == ["idle"] * 3


@pytest.mark.slurm
async def test_real_slurm_killed_slurmd_shows_not_responding(source: SlurmSource, slurm: RealSlurm) -> None:
    await read_until(source, lambda s: s.nodes["node04"].label == "idle")
    slurm.kill_slurmd("node04")
    state = await read_until(
        source, lambda s: "NOT_RESPONDING" in s.nodes["node04"].flags, slurm.dead_node_noticed_within_s + 10
    )
    assert state.nodes["node04"].label.endswith("*")
    assert state.error is None
    assert "NOT_RESPONDING" not in state.nodes["node03"].flags


@pytest.mark.slurm
async def test_real_slurm_controller_stopped_is_an_error_over_the_last_state(
    source: SlurmSource, slurm: RealSlurm
) -> None:
    job_id = slurm.submit(gpus=1, name="outlives-ctld")
    running_job(slurm, job_id)
    good = await read_until(source, lambda s: any(j.job_id == job_id and j.gpus_by_node for j in s.jobs))
    controller = slurm.processes["slurmctld"]
    controller.terminate()
    controller.wait(infra.STOP_TIMEOUT_S)
    try:
        down = await source.read_once()
        assert down.error is not None
        assert down.error.startswith("Slurm controller not answering: Slurmctld(primary) at ")
        assert " is DOWN (" in down.error, "scontrol ping says why JSON's error document has no words"
        assert down.nodes == good.nodes and down.jobs == good.jobs
        assert down.sampled_at_s == good.sampled_at_s
        assert (await source.collect(time.time())).slurm is down
    finally:
        slurm.processes["slurmctld"] = infra._spawn(
            slurm, [slurm.programs["slurmctld"], "-D", "-f", str(slurm.conf_path)], "slurmctld"
        )
        slurm.wait_for(
            lambda: slurm.run(["sinfo", "-h"], check=False).returncode == 0, 30, what="slurmctld back"
        )
    back = await read_until(source, lambda s: s.error is None)
    assert back.sampled_at_s is not None and good.sampled_at_s is not None
    assert back.sampled_at_s > good.sampled_at_s


@pytest.mark.slurm
async def test_real_slurm_nodes_from_slurm_lists_the_partition(slurm: RealSlurm) -> None:
    names = await nodes_from_slurm(cluster(nodes_from_slurm=slurm.partition), env=slurm.env)
    assert names == slurm.nodes
    with pytest.raises(ReadFailed, match="no nodes in partition 'nosuch'"):
        await nodes_from_slurm(cluster(nodes_from_slurm="nosuch"), env=slurm.env)


# --- the real Slurm, read over the real sshd ------------------------------------------------------------


def over_ssh(sshd: RealSshd, slurm: RealSlurm, host: str) -> ClusterConfig:
    return cluster(
        nodes=slurm.nodes,
        run_on=host,
        timeout_s=20,
        ssh=SshConfig(
            config_file=str(sshd.ssh_config), known_hosts=str(sshd.known_hosts), connect_timeout_s=5
        ),
    )


@pytest.mark.slurm
async def test_real_slurm_read_over_ssh_on_a_login_node(
    slurm: RealSlurm,
    real_sshd: RealSshd,  # noqa: F811
    slurm_client_conf: Path,  # noqa: F811
) -> None:
    """run_on: a host. The sshd's sessions run /bin/sh with the real Slurm client on PATH; the client's
    configuration travels as `env SLURM_CONF=...` in front of each command (no AcceptEnv needed)."""
    login = over_ssh(real_sshd, slurm, "node01")
    env = {"SLURM_CONF": str(slurm_client_conf)}
    assert await nodes_from_slurm(dataclasses.replace(login, nodes_from_slurm="all"), env=env) == slurm.nodes

    job_id = slurm.submit(gpus=2, name="over-ssh")
    running_job(slurm, job_id)
    source = SlurmSource(login, time.time, env=env)
    try:
        state = await read_until(source, lambda s: any(j.job_id == job_id and j.gpus_by_node for j in s.jobs))
        assert state.error is None
        (job,) = [j for j in state.jobs if j.job_id == job_id]
        assert dict(job.gpus_by_node) == indices_from_scontrol(slurm, job_id)
        assert sorted(state.nodes) == list(slurm.nodes)
        connection = source.runner._conn  # type: ignore[attr-defined]
        assert connection is not None
        await source.read_once()
        assert source.runner._conn is connection  # type: ignore[attr-defined]  # one persistent connection
    finally:
        await source.close()

    missing = SlurmSource(login, time.time)  # without SLURM_CONF the login node has no client configuration
    try:
        state = await missing.read_once()
        assert state.error is not None and state.error.startswith("no Slurm configuration on node01")
    finally:
        await missing.close()


def test_a_missing_program_that_is_not_slurms_gets_no_slurm_hint() -> None:
    from gputop.sources.slurm_runner import not_found_reason

    assert not_found_reason("nvidia-smi", "gpu042") == "nvidia-smi not found on gpu042"
    assert not_found_reason("sudo", None) == "sudo not found"
    assert not_found_reason("/usr/bin/scontrol", None).endswith("a Slurm login node? set slurm.run_on")


async def test_a_large_queue_is_read_without_holding_up_the_event_loop() -> None:
    """10,000 jobs of squeue --json (35 MB): read on the loop, keys would wait over a second."""
    doc = json.loads(fixture("squeue.json"))
    running = next(job for job in doc["jobs"] if job["job_state"] == "RUNNING")
    doc["jobs"] = [dict(running, job_id=1000 + i) for i in range(10_000)]
    answers = loopback_answers()
    answers[SQUEUE_JSON_ARGV] = ok(SQUEUE_JSON_ARGV, json.dumps(doc, indent=2))
    source = source_with(FakeRunner(answers))
    stalls: list[float] = []
    reading = True

    async def ticker() -> None:
        while reading:
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            stalls.append(time.perf_counter() - before - 0.005)

    # As the app does once started (gputop.gc_tuning): what exists before the read is frozen, so a full
    # collection during it walks what the read made, not every object the whole test session holds
    # (hundreds of milliseconds on a busy machine, which would be the test's pause, not the read's).
    gc.collect()
    gc.freeze()
    try:
        task = asyncio.create_task(ticker())
        started = time.perf_counter()
        state = await source.read_once()
        took_s = time.perf_counter() - started
        reading = False
        await task
    finally:
        gc.unfreeze()
    assert state.error is None and len(state.jobs) == 10_000
    assert max(stalls) < 0.3, f"the loop stood still {max(stalls) * 1000:.0f} ms during a {took_s:.1f} s read"
