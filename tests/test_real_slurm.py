"""The test Slurm (tests/infra/slurm.py) is a real one: what gputop will read and do, done by hand here.

Every test shares the session's cluster (node01..node04, 8 H100 GRES each) and leaves it as it found it:
no jobs, every slurmd running, every node idle.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.infra import procnet, procs
from tests.infra import slurm as infra
from tests.infra.slurm import RealSlurm, real_slurm  # noqa: F401 - the fixture, registered by importing it

pytestmark = pytest.mark.slurm

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def slurm(real_slurm: RealSlurm) -> Iterator[RealSlurm]:  # noqa: F811
    real_slurm.reset()
    yield real_slurm
    real_slurm.reset()


def show(slurm: RealSlurm, *what: str) -> str:
    return slurm.run(["scontrol", "show", *what]).stdout


def running(slurm: RealSlurm, job_id: str) -> str:
    slurm.wait_for(lambda: slurm.job_state(job_id) == "RUNNING", 30, what=f"job {job_id} RUNNING")
    node = slurm.run(["squeue", "-h", "-j", job_id, "-o", "%N"]).stdout.strip()
    assert node in slurm.nodes
    return node


def test_the_cluster_comes_up_with_idle_gpu_nodes_on_loopback(slurm: RealSlurm) -> None:
    assert slurm.nodes == ("node01", "node02", "node03", "node04")
    assert slurm.env == {"SLURM_CONF": str(slurm.conf_path)}
    assert slurm.node_states() == dict.fromkeys(slurm.nodes, "idle")
    gres = slurm.run(["sinfo", "-h", "-N", "-o", "%N %G"]).stdout.split()
    assert gres == [x for node in slurm.nodes for x in (node, "gpu:h100:8")]
    assert slurm.run(["sinfo", "-h", "-o", "%P"]).stdout.split() == [f"{slurm.partition}*"]
    for node in slurm.nodes:
        text = show(slurm, "node", node)
        assert "Gres=gpu:h100:8" in text
        assert re.search(r"\bState=IDLE\s", text), text
    listeners = slurm.listeners()
    assert f"127.0.0.1:{slurm.ctld_port}" in listeners
    assert {f"127.0.0.1:{port}" for port in slurm.node_ports.values()} <= set(listeners)
    assert slurm.non_loopback_listeners() == []


def test_a_gpu_job_runs_and_every_view_shows_its_gpus(slurm: RealSlurm) -> None:
    job_id = slurm.submit(gpus=2, name="two-gpus")
    node = running(slurm, job_id)
    detail = show(slurm, "job", "-d", job_id)
    assert re.search(rf"Nodes={node} .*GRES=gpu:h100:2\(IDX:[0-9,-]+\)", detail), detail
    assert "JobName=two-gpus" in detail

    jobs = json.loads(slurm.run(["squeue", "--json"]).stdout)["jobs"]
    (job,) = [j for j in jobs if str(j["job_id"]) == job_id]
    assert job["job_state"] == "RUNNING"
    assert job["nodes"] == node
    assert job["name"] == "two-gpus"
    assert [re.sub(r"\(IDX:.*\)", "", g) for g in job["gres_detail"]] == ["gpu:h100:2"]

    nodes = {n["name"]: n for n in json.loads(slurm.run(["sinfo", "--json"]).stdout)["nodes"]}
    assert set(nodes) == set(slurm.nodes)
    assert nodes[node]["gres"] == "gpu:h100:8"
    assert nodes[node]["gres_used"].startswith("gpu:h100:2(IDX:")
    assert nodes[node]["state"] == "mixed"
    idle = next(n for n in slurm.nodes if n != node)
    assert nodes[idle]["gres_used"].startswith("gpu:h100:0")


def test_a_drain_reason_passed_as_an_argument_arrives_exactly(slurm: RealSlurm, tmp_path: Path) -> None:
    canary = tmp_path / "shell-ran"
    reason = f'on-call: "ECC" isn\'t ok; $(touch {canary}) `touch {canary}` — ü Ω ✓ 日本'
    slurm.run(["scontrol", "update", "NodeName=node02", "State=DRAIN", f"Reason={reason}"])

    assert slurm.node_state("node02") == "drained"
    assert slurm.run(["sinfo", "-h", "-N", "-n", "node02", "-o", "%E"]).stdout.rstrip("\n") == reason
    text = show(slurm, "node", "node02")
    assert re.search(r"\bState=IDLE\+DRAIN\s", text), text
    assert f"   Reason={reason} [root@" in text
    (node,) = [n for n in json.loads(slurm.run(["sinfo", "--json"]).stdout)["nodes"] if n["name"] == "node02"]
    assert "DRAIN" in node["state_flags"]
    assert node["reason"] == reason
    assert not canary.exists()
    others = slurm.node_states()
    assert [others[n] for n in slurm.nodes if n != "node02"] == ["idle"] * 3

    slurm.run(["scontrol", "update", "NodeName=node02", "State=RESUME"])
    slurm.wait_idle(["node02"], timeout_s=10)
    assert slurm.run(["sinfo", "-h", "-N", "-n", "node02", "-o", "%E"]).stdout.strip() == "none"


def test_scontrol_strips_one_quote_at_each_end_of_a_reason(slurm: RealSlurm) -> None:
    slurm.run(["scontrol", "update", "NodeName=node01", "State=DRAIN", 'Reason="ends quoted"'])
    assert slurm.run(["sinfo", "-h", "-N", "-n", "node01", "-o", "%E"]).stdout.strip() == "ends quoted"


def test_a_busy_node_is_draining_until_its_job_ends(slurm: RealSlurm) -> None:
    job_id = slurm.submit(gpus=1, nodelist="node03")
    assert running(slurm, job_id) == "node03"
    # scontrol says MIXED (1 of 64 CPUs); sinfo's state may say "allocated" for a long while (a stale cache)
    assert re.search(r"\bState=MIXED\s", show(slurm, "node", "node03"))
    assert slurm.node_state("node03") in ("mixed", "allocated")
    slurm.run(["scontrol", "update", "NodeName=node03", "State=DRAIN", "Reason=job still running"])
    assert slurm.node_state("node03") == "draining"
    assert re.search(r"\bState=MIXED\+DRAIN\s", show(slurm, "node", "node03"))
    assert slurm.job_state(job_id) == "RUNNING"  # draining never stops a job

    slurm.run(["scancel", job_id])
    slurm.wait_for(lambda: slurm.node_state("node03") == "drained", 15, what="node03 drained")
    slurm.run(["scontrol", "update", "NodeName=node03", "State=RESUME"])
    slurm.wait_idle(["node03"], timeout_s=10)


def test_a_killed_slurmd_shows_not_responding_and_comes_back(slurm: RealSlurm) -> None:
    started = time.monotonic()
    slurm.kill_slurmd("node04")
    assert not slurm.slurmd_alive("node04")
    state = slurm.wait_for(
        lambda: (s := slurm.node_state("node04")).endswith("*") and s,
        slurm.dead_node_noticed_within_s,
        what="node04 not responding",
    )
    noticed_s = time.monotonic() - started
    assert state in ("idle*", "down*")
    assert "NOT_RESPONDING" in show(slurm, "node", "node04")
    assert noticed_s < slurm.dead_node_noticed_within_s
    others = slurm.node_states()
    assert [others[n] for n in slurm.nodes if n != "node04"] == ["idle"] * 3

    slurm.start_slurmd("node04")
    slurm.wait_idle(["node04"], timeout_s=15)
    assert "NOT_RESPONDING" not in show(slurm, "node", "node04")


def test_stop_leaves_no_process_and_no_listener(real_slurm: RealSlurm, tmp_path: Path) -> None:  # noqa: F811
    """A second cluster, beside the session's: it has ports of its own, and stopping it stops a running
    job's slurmstepd too."""
    second = infra.start_slurm(tmp_path / "second", nodes=2, gpus=4, gpu_type="a100")
    try:
        assert not set(second.node_ports.values()) & set(real_slurm.node_ports.values())
        assert second.node_states() == {"node01": "idle", "node02": "idle"}
        assert second.run(["sinfo", "-h", "-N", "-o", "%G"]).stdout.split() == ["gpu:a100:4"] * 2
        running(second, second.submit(gpus=4))
        # RUNNING comes a moment before slurmstepd has started the job's own process
        deadline = time.monotonic() + 10
        while True:
            pids = infra._cluster_pids(second.base_dir)
            comms = {procs.comm(pid) for pid in pids}
            if "sleep" in comms or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert {"munged", "slurmctld", "slurmd", "slurmstepd", "sleep"} <= comms
        ports = {second.ctld_port, *second.node_ports.values()}
    finally:
        infra.stop_slurm(second)
    assert [pid for pid in pids if procs.alive(pid)] == []
    assert not ports & set(procnet.listening_ports() or {})
    assert real_slurm.node_states() == dict.fromkeys(real_slurm.nodes, "idle")


def test_daemons_in_a_private_uts_namespace_bind_to_loopback(tmp_path: Path) -> None:
    """Where the host name does not resolve to 127.x, the daemons run with the host name localhost."""
    try:
        slurm = infra.start_slurm(tmp_path, nodes=1, private_hostname=True)
    except infra.SlurmUnavailable as err:
        pytest.skip(str(err))
    try:
        assert (slurm.hostname, slurm.private_hostname) == ("localhost", True)
        assert "SlurmctldHost=localhost(127.0.0.1)" in slurm.conf_path.read_text()
        assert slurm.node_states() == {"node01": "idle"}
        assert slurm.non_loopback_listeners() == []
        assert running(slurm, slurm.submit(gpus=1)) == "node01"
    finally:
        infra.stop_slurm(slurm)


def test_the_command_line_starts_a_cluster_that_outlives_it(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("must run as root")
    base = tmp_path / "by-hand"

    def command(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tests.infra.slurm_cli", *argv],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    up = command("up", str(base), "--nodes", "2")
    if up.returncode == 2:
        pytest.skip(up.stderr.strip())
    try:
        assert up.returncode == 0, up.stderr
        conf = base / "etc" / "slurm.conf"
        assert up.stdout == f"export SLURM_CONF={conf}\n"
        sinfo = subprocess.run(
            ["sinfo", "-h", "-N", "-o", "%N %T"],
            env={**os.environ, "SLURM_CONF": str(conf)},
            capture_output=True,
            text=True,
            check=True,
        )
        assert sinfo.stdout.split() == ["node01", "idle", "node02", "idle"]
        pids = infra._cluster_pids(base)
        assert len(pids) >= 4  # munged, slurmctld, two slurmd
        again = command("up", str(base))
        assert again.returncode == 0
        assert "already running" in again.stderr
        assert again.stdout == up.stdout
    finally:
        down = command("down", str(base))
    assert down.returncode == 0, down.stderr
    assert [pid for pid in pids if procs.alive(pid)] == []
    assert infra._cluster_pids(base) == set()
