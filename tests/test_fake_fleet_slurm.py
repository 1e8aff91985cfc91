"""The fake fleet's Slurm login node: Slurm 22.05's outputs played from the simulator, read by gputop's own
parsers, and the generated config reading them, so the fleet's drained, silent and idle-job incidents show
(its config turned Slurm off, and three of its advertised incidents never appeared)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import asyncssh
from textual.widgets import Input

from gputop.cluster_app import build_cluster_app
from gputop.config_file import load_config
from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.slurm_json import parse_sinfo_json, parse_squeue_json
from gputop.sim.fake_fleet import run_fleet
from gputop.sim.fake_fleet.slurm_login import LOGIN_USER, SlurmLogin, fold_indices
from gputop.sim.fake_fleet.state_dir import LOGIN_HOST
from gputop.sim.simulator import SimulatedCluster
from gputop.tui.screens.node_action import NodeActionScreen
from gputop.tui.widgets.node_table import NodeTable
from tests.test_tui_real_slurm import run_dialog, wait

T0 = 1_800_000_000.0
FIXTURES = Path(__file__).parent / "fixtures"


def login(nodes: int = 32) -> tuple[SimulatedCluster, SlurmLogin]:
    cluster = SimulatedCluster(nodes=nodes, gpus_per_node=8, gpu_model="H100", seed=42, start_time_s=T0)
    return cluster, SlurmLogin(cluster, "h100", lambda: T0 + 5, user="ops")


def incident(cluster: SimulatedCluster, kind: str) -> str:
    return next(i.node for i in cluster.incidents if i.kind == kind)


def test_indices_fold_as_slurm_writes_them() -> None:
    assert fold_indices([3, 0, 1, 2, 6]) == "0-3,6"
    assert fold_indices([5]) == "5"
    assert fold_indices([0, 2, 4, 5]) == "0,2,4-5"


def test_squeue_json_reads_back_as_the_simulators_jobs() -> None:
    cluster, slurm = login()
    status, out, err = slurm.run("squeue --json")
    assert (status, err) == (0, "")
    assert '"type": "openapi\\/v0.0.38"' in out  # 22.05's writer escapes '/'
    parsed = parse_squeue_json(out)
    assert not isinstance(parsed, ParseFailure), parsed
    state = cluster.result().slurm
    assert state is not None
    assert parsed.slurm_version == "22.05.8"
    assert [j.job_id for j in parsed.jobs] == [j.job_id for j in state.jobs]
    for read, simulated in zip(parsed.jobs, state.jobs, strict=True):
        assert (read.user, read.name, read.partition, read.state) == (
            simulated.user,
            simulated.name,
            simulated.partition,
            simulated.state,
        )
        assert dict(read.gpus_by_node) == dict(simulated.gpus_by_node)
        assert read.pending_reason == simulated.pending_reason
        assert read.gpus_requested == simulated.gpus_requested
    assert any(j.state == "PENDING" for j in parsed.jobs) and any(j.state == "RUNNING" for j in parsed.jobs)


def test_sinfo_json_carries_the_drain_the_silent_node_and_the_gpus_in_use() -> None:
    cluster, slurm = login()
    parsed = parse_sinfo_json(slurm.run("sinfo --json")[1])
    assert not isinstance(parsed, ParseFailure), parsed
    nodes = {node.name: node for node in parsed.nodes}
    assert sorted(nodes) == sorted(cluster.node_names)
    drained = nodes[incident(cluster, "drained")]
    assert drained.drained and drained.reason and "RMA requested" in drained.reason
    assert drained.reason_user and drained.reason_time_s
    assert "NOT_RESPONDING" in nodes[incident(cluster, "unresponsive")].flags
    state = cluster.result().slurm
    assert state is not None
    held = {name: sorted(i for job in state.jobs for i in job.gpus_by_node.get(name, ())) for name in nodes}
    for name, node in nodes.items():
        assert node.gpus_configured == 8
        assert sorted(node.gpu_indices_in_use or ()) == held[name], name


def test_scontrol_json_is_refused_in_22_05s_own_words() -> None:
    _, slurm = login()
    status, out, err = slurm.run("scontrol --json show node")
    real = (FIXTURES / "slurm-22.05-hostile" / "scontrol-json-show-node.stderr").read_text()
    assert (status, out, err) == (1, "", real)


def test_scontrol_update_drains_and_resumes_the_simulated_node() -> None:
    cluster, slurm = login()
    node = cluster.node_names[1]
    assert slurm.run(f"scontrol update NodeName={node} State=DRAIN Reason='hw check'") == (0, "", "")
    listed = {n.name: n for n in parse_sinfo_json(slurm.run("sinfo --json")[1]).nodes}  # type: ignore[union-attr]
    assert "DRAIN" in listed[node].flags and listed[node].reason == "hw check"
    assert listed[node].reason_user == "ops"
    assert (
        slurm.run(f"env SLURM_CONF=/etc/slurm/slurm.conf scontrol update NodeName={node} State=RESUME")[0]
        == 0
    )
    listed = {n.name: n for n in parse_sinfo_json(slurm.run("sinfo --json")[1]).nodes}  # type: ignore[union-attr]
    assert "DRAIN" not in listed[node].flags
    assert slurm.run("scontrol update NodeName=nope State=DRAIN Reason=x")[0] == 1


def test_other_commands_fail_as_a_shell_or_a_slurm_client_would() -> None:
    _, slurm = login()
    assert slurm.run("scontrol ping") == (0, "Slurmctld(primary) at fake-fleet-ctld is UP\n", "")
    assert slurm.run("nvidia-smi -L")[0] == 127
    status, _, err = slurm.run("sacct -a")
    assert status == 1 and "plays only what gputop runs" in err
    names = slurm.run("sinfo -h -N -o %N")[1].split()
    assert names == sorted(names) and len(names) == 32


async def test_the_generated_config_reads_slurm_over_ssh_and_a_drain_reaches_the_fleet(
    tmp_path: Path,
) -> None:
    async with run_fleet(nodes=32, port=0, state_dir=tmp_path / "fleet") as fleet:
        async with asyncssh.connect(
            LOGIN_HOST, config=[str(fleet.ssh_config_path)], known_hosts=str(fleet.known_hosts_path)
        ) as conn:
            done = await conn.run("squeue --json")
            assert done.exit_status == 0 and json.loads(str(done.stdout))["jobs"]
        config = load_config(fleet.config_path)
        config = dataclasses.replace(config, audit_log=str(tmp_path / "audit.jsonl"))
        app = build_cluster_app(config, config.clusters[0])
        app.settings.freeze_gc = False
        drained = incident(fleet.cluster, "drained")
        silent = incident(fleet.cluster, "unresponsive")
        async with app.run_test(size=(200, 50)) as pilot:

            def slurm_read() -> bool:
                return (
                    app.view is not None
                    and app.view.snapshot.slurm is not None
                    and bool(app.view.snapshot.slurm.jobs)
                )

            await wait(pilot, slurm_read, "Slurm read through the login node", tries=300)
            assert app.view is not None
            assert app.view.rows[drained].slurm_state == "drained"
            assert any("not responding" in p.message for p in app.view.rows[silent].problems)
            target = next(n for n in fleet.node_names if n not in {i.node for i in fleet.cluster.incidents})
            app.screen.query_one(NodeTable).select(target)
            await pilot.pause()
            await pilot.press("d")
            await pilot.pause()
            assert isinstance(app.screen, NodeActionScreen)
            app.screen.query_one("#reason", Input).value = "fleet drill"
            await pilot.pause()
            await run_dialog(pilot, app)
            node = fleet.cluster.result().slurm.nodes[target]  # type: ignore[union-attr]
            assert "DRAIN" in node.flags and node.reason == "fleet drill" and node.reason_user == LOGIN_USER
