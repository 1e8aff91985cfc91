"""`gputop check` and `gputop snapshot --json` as cron and monitoring run them: the real entry point in a
subprocess, on the demo, on the fake fleet over SSH (with nodes that hang), with a bad config, and with an
NVML that never answers; exit statuses, the JSON shape, the deadline, and no Textual."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

from gputop.core.config import ClusterConfig, Config, PrometheusConfig, SlurmConfig, SshConfig
from gputop.core.models import Severity
from gputop.core.nodeset import fold_nodes
from gputop.headless.command import default_timeout_s
from gputop.headless.verdict import ExitStatus, Finding, status_of
from gputop.sim.fake_fleet import Fault, Fleet, run_fleet
from gputop.sim.simulator import SimulatedCluster

# Python's start and the imports, plus closing connections: what a round may take beyond its --timeout.
MARGIN_S = 3.0

# What each simulator incident shows up as (the MIG GPU is a configuration, not a problem).
INCIDENT_KINDS = {
    "hot_gpu": {"temp"},
    "ecc_xid": {"ecc", "xid"},
    "unresponsive": {"slurm", "stale"},
    "idle_job": {"idle"},
    "drained": {"slurm"},
    "ib_down": {"ib"},
    "missing_gpu": {"missing"},
    "nvlink_degraded": {"interconnect"},
    "ib_slow": {"interconnect"},
}

HEADER_KEYS = {
    "schema",
    "cluster",
    "demo",
    "taken_at_s",
    "timeout_s",
    "elapsed_s",
    "status",
    "host_keys_verified",
    "summary",
}
SUMMARY_KEYS = {
    "nodes",
    "nodes_answering",
    "nodes_stale",
    "nodes_down",
    "gpus",
    "util_mean_pct",
    "power_w",
    "crit",
    "warn",
}
PROBLEM_KEYS = {"severity", "node", "gpu", "kind", "message", "action"}
NODE_KEYS = {
    "name",
    "reachability",
    "sampled_at_s",
    "error",
    "severity",
    "slurm_state",
    "expected_gpu_count",
    "gpus",
    "ib_ports",
    "ib_failures",
    "xid_events",
    "facts_read",
    "fact_errors",
    "problems",
}
GPU_KEYS = {
    "index",
    "uuid",
    "name",
    "pci_bus_id",
    "util_pct",
    "mem_util_pct",
    "mem_used_mib",
    "mem_total_mib",
    "temp_c",
    "power_w",
    "power_limit_w",
    "sm_clock_mhz",
    "sm_clock_max_mhz",
    "ecc_uncorrected",
    "mig_enabled",
    "throttle_reasons",
    "processes",
    "job_id",
    "idle_s",
    "idle_flagged",
}
JOB_KEYS = {
    "job_id",
    "name",
    "user",
    "partition",
    "state",
    "pending_reason",
    "nodes",
    "gpus_by_node",
    "gpus",
    "util_mean_pct",
    "idle_gpus",
    "wasted_gpu_hours",
    "submit_time_s",
    "start_time_s",
    "elapsed_s",
    "time_limit_s",
}
SLURM_NODE_KEYS = {
    "name",
    "state",
    "base_state",
    "flags",
    "reason",
    "reason_user",
    "reason_time_s",
    "partitions",
    "gpus_configured",
    "gpus_allocated",
    "gpu_indices_in_use",
}


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUTOP_", "XDG_"))}
    env["HOME"] = str(tmp_path / "home")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    env.update(extra)
    return env


def gputop(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *args],
        cwd=tmp_path,
        env=clean_env(tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def gputop_async(tmp_path: Path, *args: str) -> tuple[int, str, str, float]:
    """The command in a subprocess while this loop keeps serving the fake fleet; also its wall time."""
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gputop",
        *args,
        cwd=tmp_path,
        env=clean_env(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode(), time.monotonic() - started


# -- the demo ----------------------------------------------------------------------------------------------


def test_check_on_the_demo_prints_every_incident_worst_first_and_exits_crit(tmp_path: Path) -> None:
    done = gputop(tmp_path, "check", "--demo")
    assert done.returncode == 2, done.stderr
    lines = done.stdout.splitlines()
    assert (
        "CRIT gpu007 GPU4 Xid 79: GPU has fallen off the bus; action: drain gpu007, then reboot gpu007: "
        "a GPU reset will not bring GPU4 back"
    ) in lines
    assert "WARN gpu015 GPU0-7 idle 59 min in job 4812011 (dmitri)" in lines  # the replayed hour counts
    words = [line.split()[0] for line in lines[1:]]
    assert words == sorted(words, key=lambda w: w != "CRIT") and set(words) == {"CRIT", "WARN"}
    # the status line first, as monitoring systems read it, with its performance data
    assert lines[0].startswith("gputop check: CRIT: ")
    crit, warn = words.count("CRIT"), words.count("WARN")
    assert lines[0].endswith(
        f" on 31 of 32 nodes answering (demo) | crit={crit} warn={warn} nodes=32 answering=31"
    )


def test_check_json_on_the_demo_names_the_simulators_incidents(tmp_path: Path) -> None:
    done = gputop(tmp_path, "check", "--demo", "--json")
    assert done.returncode == 2, done.stderr
    document = json.loads(done.stdout)
    assert set(document) == HEADER_KEYS | {"exit_status", "problems"}
    assert set(document["summary"]) == SUMMARY_KEYS
    assert (document["schema"], document["status"], document["exit_status"]) == (1, "crit", 2)
    assert document["cluster"] == "demo" and document["demo"] is True
    problems = document["problems"]
    assert all(set(p) == PROBLEM_KEYS for p in problems)
    kinds_by_node: dict[str, set[str]] = {}
    for problem in problems:
        kinds_by_node.setdefault(problem["node"], set()).add(problem["kind"])
    incidents = SimulatedCluster(nodes=32, seed=42, start_time_s=0.0).incidents
    for incident in incidents:
        expected = INCIDENT_KINDS.get(incident.kind, set())
        assert expected <= kinds_by_node.get(incident.node, set()), incident
    fell_off = next(p for p in problems if p["message"].endswith("Xid 79: GPU has fallen off the bus"))
    assert fell_off == {
        "severity": "crit",
        "node": "gpu007",
        "gpu": 4,
        "kind": "xid",
        "message": ANY,
        "action": "drain gpu007, then reboot gpu007: a GPU reset will not bring GPU4 back",
    }
    severities = [p["severity"] for p in problems]
    assert severities == sorted(severities, key=lambda s: s != "crit")
    summary = document["summary"]
    assert summary["crit"] == sum(p["severity"] == "crit" for p in problems)
    assert summary["warn"] == sum(p["severity"] == "warn" for p in problems)


def test_snapshot_json_has_every_node_gpu_job_and_the_documented_keys(tmp_path: Path) -> None:
    done = gputop(tmp_path, "snapshot", "--json", "--demo", "--demo-nodes", "16")
    assert done.returncode == 0, done.stderr  # a snapshot was taken; its status says what it found
    document = json.loads(done.stdout)
    assert set(document) == HEADER_KEYS | {"problems", "source_errors", "nodes", "slurm"}
    assert document["schema"] == 1 and document["status"] == "crit"
    assert set(document["summary"]) == SUMMARY_KEYS
    assert document["source_errors"] == []
    nodes = {node["name"]: node for node in document["nodes"]}
    assert len(nodes) == 16
    for node in nodes.values():
        assert set(node) == NODE_KEYS
        assert all(set(gpu) == GPU_KEYS for gpu in node["gpus"])
        assert all(set(p) == PROBLEM_KEYS for p in node["problems"])

    idle_node = next(
        i.node for i in SimulatedCluster(nodes=16, start_time_s=0.0).incidents if i.kind == "idle_job"
    )
    idle_gpus = nodes[idle_node]["gpus"]
    job_id = idle_gpus[0]["job_id"]
    assert all(g["idle_flagged"] and g["idle_s"] >= 600 and g["job_id"] == job_id for g in idle_gpus)
    assert nodes[idle_node]["severity"] == "warn"

    slurm = document["slurm"]
    assert set(slurm) == {"sampled_at_s", "error", "nodes", "jobs"}
    assert all(set(node) == SLURM_NODE_KEYS for node in slurm["nodes"])
    assert all(set(job) == JOB_KEYS for job in slurm["jobs"])
    idle_job = next(job for job in slurm["jobs"] if job["job_id"] == job_id)
    assert idle_job["idle_gpus"] == 8 and idle_job["wasted_gpu_hours"] > 1.0
    assert idle_job["gpus_by_node"] == {idle_node: list(range(8))}


def test_snapshot_without_json_is_a_usage_error_with_status_3(tmp_path: Path) -> None:
    done = gputop(tmp_path, "snapshot", "--demo")
    assert done.returncode == 3
    assert done.stderr.startswith("usage: gputop snapshot") and "--json" in done.stderr


def test_neither_command_imports_textual(tmp_path: Path) -> None:
    probe = (
        "import sys, contextlib, io\n"
        "from gputop.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    statuses = [main(['check', '--demo']), main(['snapshot', '--json', '--demo'])]\n"
        "print(statuses)\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=clean_env(tmp_path), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    statuses, modules = done.stdout.splitlines()
    assert statuses == "[2, 0]"
    loaded = set(modules.split())
    assert "gputop.headless.round" in loaded
    leaked = sorted(m for m in loaded if m.split(".")[0] in ("textual", "rich") or m.startswith("gputop.tui"))
    assert leaked == []


# -- could not check ---------------------------------------------------------------------------------------


def test_a_bad_config_is_unknown_with_the_reason_on_stderr_and_a_line_on_stdout(tmp_path: Path) -> None:
    config = tmp_path / "gputop.yaml"
    config.write_text("clusters:\n  - name: hopper\n    nodes: gpu[001-004]\n    ssh:\n      usr: ops\n")
    done = gputop(tmp_path, "check", "--config", str(config))
    assert done.returncode == 3
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[0] == "gputop: bad config"
    assert f"{config}:5" in done.stderr and "usr" in done.stderr and "user" in done.stderr
    assert done.stdout.startswith(f"gputop check: UNKNOWN: bad config: {config}:5")

    as_json = gputop(tmp_path, "check", "--json", "--config", str(config))
    assert as_json.returncode == 3
    document = json.loads(as_json.stdout)
    assert document["status"] == "unknown" and document["exit_status"] == 3
    assert document["error"].startswith("bad config\n")

    snapshot = gputop(tmp_path, "snapshot", "--json", "--config", str(config))
    assert (snapshot.returncode, snapshot.stdout) == (3, "")  # nothing a consumer could take for a snapshot
    assert snapshot.stderr.startswith("gputop: bad config")


def test_no_config_an_unknown_cluster_and_bad_options_are_unknown(tmp_path: Path) -> None:
    done = gputop(tmp_path, "check")
    assert done.returncode == 3 and done.stderr.startswith("gputop: no config found")

    config = tmp_path / "gputop.yaml"
    config.write_text("clusters:\n  - name: hopper\n    nodes: gpu[001-004]\n")
    done = gputop(tmp_path, "check", "--config", str(config), "--cluster", "ampere")
    assert done.returncode == 3 and "no cluster named 'ampere'" in done.stderr

    for args in (["--timeout", "0"], ["--demo", "--demo-nodes", "0"], ["--frobnicate"]):
        done = gputop(tmp_path, "check", *args)
        assert done.returncode == 3, args  # argparse's own 2 would read as CRIT
        assert "Traceback" not in done.stderr


def test_exit_status_is_the_worst_problem_and_unknown_when_nothing_answered() -> None:
    def found(severity: Severity) -> Finding:
        return Finding(severity, "gpu001", None, "temp", "GPU0 86 C")

    assert status_of([], heard_from_cluster=True) is ExitStatus.OK
    assert status_of([found(Severity.WARN)], heard_from_cluster=True) is ExitStatus.WARN
    assert status_of([found(Severity.WARN), found(Severity.CRIT)], heard_from_cluster=True) is ExitStatus.CRIT
    assert status_of([], heard_from_cluster=False) is ExitStatus.UNKNOWN
    assert [int(s) for s in ExitStatus] == [0, 1, 2, 3]


def test_the_default_timeout_lets_each_part_fail_on_its_own_terms() -> None:
    config = Config.default()  # poll.node_deadline_s 5, ssh.connect_timeout_s 10, slurm command timeout 10
    assert default_timeout_s(config, None) == 5  # the demo
    quiet = SlurmConfig(enabled=False)
    assert default_timeout_s(config, ClusterConfig(name="a", node_names=("n1",), slurm=quiet)) == 15
    local = ClusterConfig(name="a", node_names=("n1",), local=True)
    assert default_timeout_s(config, local) == 10  # Slurm's command timeout, read on this machine
    remote = SlurmConfig(run_on="login1")
    slow_ssh = SshConfig(connect_timeout_s=30)
    assert default_timeout_s(config, ClusterConfig(name="a", node_names=("n1",), slurm=remote)) == 20
    assert default_timeout_s(config, ClusterConfig(name="a", node_names=("n1",), ssh=slow_ssh)) == 35
    store = PrometheusConfig(url="http://vm:8428", timeout_s=20)  # the last hour, then a refresh
    assert default_timeout_s(config, ClusterConfig(name="a", prometheus=store, slurm=quiet)) == 45


def test_an_nvml_that_never_answers_cannot_hold_the_check_past_its_timeout(tmp_path: Path) -> None:
    """A GPU driver call can block for good; the thread cannot be stopped, so the command leaves it."""
    fake = tmp_path / "fake_nvml"
    fake.mkdir()
    (fake / "pynvml.py").write_text(
        "import time\nclass NVMLError(Exception):\n    pass\ndef nvmlInit():\n    time.sleep(120)\n"
    )
    config = tmp_path / "gputop.yaml"
    config.write_text(
        "clusters:\n  - name: here\n    nodes: node1\n    local: true\n    slurm:\n      enabled: false\n"
    )
    started = time.monotonic()
    done = gputop(tmp_path, "check", "--config", str(config), "--timeout", "1", PYTHONPATH=str(fake))
    assert time.monotonic() - started < 1 + MARGIN_S
    assert done.returncode == 3, done.stdout + done.stderr
    assert "WARN nvml: no answer within 1s" in done.stdout.splitlines()
    assert done.stdout.splitlines()[0] == (
        "gputop check: UNKNOWN: nothing answered within 1s (here) | crit=0 warn=1 nodes=0 answering=0"
    )


# -- the fake fleet over SSH ---------------------------------------------------------------------------------


def subset_config(fleet: Fleet, path: Path, nodes: list[str], identity_file: Path | None = None) -> Path:
    """A config for some of the fleet's nodes, through the ssh_config and keys the fleet wrote."""
    key = identity_file or fleet.client_key_path
    path.write_text(
        "clusters:\n"
        "  - name: subset\n"
        f"    nodes: {json.dumps(fold_nodes(nodes))}\n"
        "    gpus_per_node: 8\n"
        "    ssh:\n"
        f"      config_file: {json.dumps(str(fleet.ssh_config_path))}\n"
        f"      known_hosts: {json.dumps(str(fleet.known_hosts_path))}\n"
        f"      identity_files: [{json.dumps(str(key))}]\n"
        "    slurm:\n"
        "      enabled: false\n"
    )
    return path


async def test_check_over_ssh_names_hung_nodes_within_the_timeout_and_a_healthy_set_is_ok(
    tmp_path: Path,
) -> None:
    stalled = {"gpu001": Fault.STALL_COMMAND, "gpu013": Fault.STALL_HANDSHAKE}
    faults: dict[str, list[Fault | str]] = {node: [fault] for node, fault in stalled.items()}
    async with run_fleet(nodes=16, port=0, state_dir=tmp_path / "fleet", faults=faults) as fleet:
        status, out, err, took_s = await gputop_async(
            tmp_path, "check", "--json", "--config", str(fleet.config_path), "--timeout", "4"
        )
        assert took_s < 4 + MARGIN_S, err
        assert status == 2, err
        document: dict[str, Any] = json.loads(out)
        problems = document["problems"]
        down = {p["node"]: p["message"] for p in problems if p["kind"] == "down"}
        assert down["gpu001"] == "down: connected, but no metrics within 4s"
        assert down["gpu013"] == "down: no answer within 4s (SSH connection not established)"
        assert set(down) == {*stalled, *fleet.unresponsive_nodes}
        # the slow facts were read in the round: the Xid log of the GPU that fell off the bus
        xid_node = next(i.node for i in fleet.cluster.incidents if i.kind == "ecc_xid")
        assert any(
            p["node"] == xid_node and p["message"].endswith("Xid 79: GPU has fallen off the bus")
            for p in problems
        )
        assert document["summary"]["nodes_answering"] == 16 - len(down)

        troubled = {i.node for i in fleet.cluster.incidents} | set(stalled)
        healthy = [n for n in fleet.node_names if n not in troubled]
        assert len(healthy) >= 2
        config = subset_config(fleet, tmp_path / "healthy.yaml", healthy)
        status, out, err, took_s = await gputop_async(tmp_path, "check", "--config", str(config))
        assert status == 0, out + err
        count = len(healthy)
        assert out == (
            f"gputop check: OK: no problems on {count} of {count} nodes answering (subset)"
            f" | crit=0 warn=0 nodes={count} answering={count}\n"
        )
        assert took_s < 4 + MARGIN_S  # everything answered: no waiting for the 15 s default

        # Every node failing the same way says more about gputop's access than the cluster: UNKNOWN.
        config = subset_config(fleet, tmp_path / "no-key.yaml", healthy, tmp_path / "missing_key")
        status, out, err, took_s = await gputop_async(tmp_path, "check", "--config", str(config))
        assert status == 3, out + err
        lines = out.splitlines()
        assert lines[0].startswith("gputop check: UNKNOWN: nothing answered within 15s (subset) | crit=")
        assert [line.split()[:3] for line in lines[1:]] == [["CRIT", node, "down:"] for node in healthy]
        assert took_s < 4 + MARGIN_S


async def test_check_and_snapshot_say_when_host_keys_are_not_verified(tmp_path: Path) -> None:
    async with run_fleet(nodes=16, port=0, state_dir=tmp_path / "fleet") as fleet:
        troubled = {i.node for i in fleet.cluster.incidents} | set(fleet.unresponsive_nodes)
        healthy = [n for n in fleet.node_names if n not in troubled][:2]
        checked = subset_config(fleet, tmp_path / "checked.yaml", healthy)
        lax = tmp_path / "lax.yaml"
        lax.write_text(checked.read_text().replace("    ssh:\n", "    ssh:\n      verify_host_keys: false\n"))
        status, out, err, _ = await gputop_async(tmp_path, "check", "--config", str(lax))
        assert status == 0, out + err
        assert out.splitlines()[0].endswith(
            "(subset; host keys NOT verified (ssh.verify_host_keys is false))"
            " | crit=0 warn=0 nodes=2 answering=2"
        )
        status, out, err, _ = await gputop_async(tmp_path, "snapshot", "--json", "--config", str(lax))
        assert json.loads(out)["host_keys_verified"] is False, err
        status, out, err, _ = await gputop_async(tmp_path, "check", "--json", "--config", str(checked))
        assert json.loads(out)["host_keys_verified"] is True, err
    demo = gputop(tmp_path, "check", "--json", "--demo", "--demo-nodes", "2")
    assert json.loads(demo.stdout)["host_keys_verified"] is None, demo.stderr


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (("snapshot", "--demo", "--demo-nodes", "1000", "--json"), 0),
        (("check", "--demo", "--demo-nodes", "1000", "--json"), 2),
        (("check", "--demo", "--demo-nodes", "1000"), 2),
        (("parse", "--list"), 0),
    ],
)
def test_a_reader_that_closes_early_gets_the_commands_status_and_no_traceback(
    tmp_path: Path, args: tuple[str, ...], status: int
) -> None:
    """``gputop check --json | head -c 10``: a BrokenPipeError traceback and exit 1."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte: every write fails
    done = subprocess.run(
        [sys.executable, "-m", "gputop", *args],
        stdout=write_end,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_env(tmp_path),
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    os.close(write_end)
    assert done.stderr == "" and done.returncode == status, (done.returncode, done.stderr[-2000:])


@pytest.mark.parametrize("as_json", [False, True])
def test_check_with_a_bad_option_says_unknown_on_stdout_in_the_format_asked_for(
    tmp_path: Path, as_json: bool
) -> None:
    done = gputop(tmp_path, "check", *(["--json"] if as_json else []), "--bogus")
    assert done.returncode == 3
    assert "unrecognized arguments: --bogus" in done.stderr
    if as_json:
        assert json.loads(done.stdout) == {
            "schema": 1,
            "status": "unknown",
            "exit_status": 3,
            "error": "gputop check: unrecognized arguments: --bogus",
        }
    else:
        assert done.stdout == "gputop check: UNKNOWN: bad options: unrecognized arguments: --bogus\n"


def test_a_pipe_in_any_line_cannot_pose_as_performance_data() -> None:
    from gputop.headless.report import finding_line
    from gputop.headless.verdict import Finding

    finding = Finding(Severity.WARN, "gpu001", None, "drain", "drained: psu|fan swap")
    assert finding_line(finding) == "WARN gpu001 drained: psu\u00a6fan swap"
