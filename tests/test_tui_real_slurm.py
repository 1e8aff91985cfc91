"""The app on a real Slurm: a node drained from the dialog, with a reason full of shell metacharacters,
is drained in real sinfo with exactly that reason, and resumed the same way; a killed slurmd shows."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from textual.widgets import Button, Input, Static

from gputop.cluster_app import build_cluster_app
from gputop.config_file import load_config
from gputop.sim.fake_fleet import Fault, run_fleet
from gputop.tui.app import GputopApp
from gputop.tui.screens.node_action import NodeActionScreen
from gputop.tui.screens.queue import QueueScreen
from gputop.tui.widgets.alert_table import AlertTable
from gputop.tui.widgets.job_table import JobTable
from gputop.tui.widgets.node_table import NodeTable
from tests.infra.slurm import (  # noqa: F401 - fixtures, registered by importing them
    RealSlurm,
    real_slurm,
    slurm_client_conf,
)
from tests.infra.sshd import (  # noqa: F401 - fixtures, registered by importing them
    RealSshd,
    real_sshd_as_root,
    real_sshd_unprivileged,
)

pytestmark = pytest.mark.slurm

SIZE = (160, 50)
NASTY = '"Xid 79"; rm -rf / $(reboot) `id` | tee — ü'


def app_for(tmp_path: Path, ssh: str = "", slurm: str = "") -> GputopApp:
    """The app on the real Slurm's nodes (read from sinfo), with Slurm read and acted on locally, or
    through an sshd given its ``ssh:`` and ``slurm:`` settings."""
    config_path = tmp_path / "gputop.yaml"
    config_path.write_text(
        f"audit_log: {json.dumps(str(tmp_path / 'audit.jsonl'))}\n"
        "poll:\n  interval_s: 0.5\n"
        "clusters:\n"
        "  - name: real\n"
        "    nodes_from_slurm: all\n"
        f"    ssh:\n      connect_timeout_s: 1\n{ssh}"
        f"    slurm:\n      poll_interval_s: 0.5\n{slurm}",
        encoding="utf-8",
    )
    config = load_config(config_path)
    app = build_cluster_app(config, config.clusters[0])
    app.settings.freeze_gc = False
    return app


@pytest.fixture
def slurm_app(real_slurm: RealSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GputopApp:  # noqa: F811
    real_slurm.reset()
    for name, value in real_slurm.env.items():
        monkeypatch.setenv(name, value)
    return app_for(tmp_path)


def through(sshd: RealSshd, client_conf: Path, tmp_path: Path) -> GputopApp:
    """Slurm read and acted on over SSH on node01 of ``sshd``, with host keys checked."""
    ssh = (
        f"      config_file: {json.dumps(str(sshd.ssh_config))}\n"
        f"      known_hosts: {json.dumps(str(sshd.known_hosts))}\n"
    )
    slurm = f"      run_on: node01\n      env: [{json.dumps(f'SLURM_CONF={client_conf}')}]\n"
    return app_for(tmp_path, ssh, slurm)


def outcomes(tmp_path: Path) -> list[dict[str, object]]:
    """The audit log's outcome records, each checked against the intent written before it."""
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    intents = [r for r in records if r["phase"] == "intent"]
    done = [r for r in records if r["phase"] == "outcome"]
    assert [r["id"] for r in intents] == [r["id"] for r in done] and records[0]["phase"] == "intent"
    return done


async def wait(pilot: object, check: object, what: str, tries: int = 150) -> None:
    for _ in range(tries):
        if check():  # type: ignore[operator]
            return
        await pilot.pause(0.1)  # type: ignore[attr-defined]
    raise AssertionError(f"not seen: {what}")


async def run_dialog(pilot: object, app: GputopApp) -> None:
    dialog = app.screen
    assert isinstance(dialog, NodeActionScreen)
    counts = dialog.query("#count")
    if counts:  # several nodes, or a resume of a node with CRIT problems (these have no GPU source)
        counts.first(Input).value = str(len(set(dialog.nodes)))
        await pilot.pause()  # type: ignore[attr-defined]
    dialog.query_one("#run", Button).press()
    await wait(pilot, lambda: dialog.outcome is not None, "the action's outcome")
    assert dialog.outcome is not None and dialog.outcome.ok, dialog.outcome
    await pilot.press("escape")  # type: ignore[attr-defined]


async def test_drain_and_resume_a_real_node_from_the_dialog(
    slurm_app: GputopApp,
    real_slurm: RealSlurm,  # noqa: F811
    tmp_path: Path,
) -> None:
    app = slurm_app
    node = real_slurm.nodes[1]
    async with app.run_test(size=SIZE) as pilot:
        await wait(pilot, lambda: app.view is not None and app.view.snapshot.slurm is not None, "Slurm")
        table = app.screen.query_one(NodeTable)
        table.select(node)
        await pilot.pause()
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, NodeActionScreen)
        app.screen.query_one("#reason", Input).value = NASTY
        await pilot.pause()
        await run_dialog(pilot, app)
        listed = json.loads(real_slurm.run(["sinfo", "--json"]).stdout)["nodes"]
        (entry,) = [n for n in listed if n["name"] == node]
        assert entry["reason"] == NASTY
        assert real_slurm.node_state(node) == "drained"

        def shown_drained() -> bool:
            slurm = app.view.snapshot.slurm if app.view else None
            return slurm is not None and node in slurm.nodes and slurm.nodes[node].drained

        await wait(pilot, shown_drained, "drained on screen")
        assert app.view is not None and app.view.rows[node].slurm_state == "drained"
        assert app.view.snapshot.slurm is not None and app.view.snapshot.slurm.nodes[node].reason == NASTY

        await pilot.press("R")
        await pilot.pause()
        await run_dialog(pilot, app)
        assert "drain" not in real_slurm.node_state(node)
        await wait(pilot, lambda: not shown_drained(), "resumed on screen")
        records = outcomes(tmp_path)
        assert [r["action"] for r in records] == ["drain", "resume"]
        assert all(r["exit_status"] == 0 and r["result"] == "done" and r["where"] == "local" for r in records)


async def test_an_unknown_node_is_refused_in_the_dialog_and_scontrol_errors_are_shown_verbatim(
    slurm_app: GputopApp,
    real_slurm: RealSlurm,  # noqa: F811
    tmp_path: Path,
) -> None:
    app = slurm_app
    async with app.run_test(size=SIZE) as pilot:
        await wait(pilot, lambda: app.view is not None and app.view.snapshot.slurm is not None, "Slurm")
        app.open_node_action("drain", ["gpu999"])
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, NodeActionScreen)
        assert dialog.query_one("#run", Button).disabled
        assert "not nodes of this cluster: gpu999" in str(dialog.query_one("#refused").render())
        await pilot.press("escape")
        # a node Slurm knows but that is not drained: resume fails in Slurm, and says so
        node = real_slurm.nodes[2]
        app.open_node_action("resume", [node])
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, NodeActionScreen)
        dialog.query_one("#count", Input).value = "1"  # it has no GPU source here: down, so CRIT
        await pilot.pause()
        dialog.query_one("#run", Button).press()
        await wait(pilot, lambda: dialog.outcome is not None, "the outcome")
        assert dialog.outcome is not None and dialog.outcome.exit_status == 1
        assert "Invalid node state specified" in dialog.outcome.output
        assert "Invalid node state specified" in str(dialog.query_one("#outcome").render())
        (record,) = outcomes(tmp_path)
        assert record["exit_status"] == 1 and "Invalid node state specified" in record["output"]


async def drain_from_the_table(pilot: object, app: GputopApp, node: str, reason: str) -> NodeActionScreen:
    await wait(pilot, lambda: app.view is not None and app.view.snapshot.slurm is not None, "Slurm")
    app.screen.query_one(NodeTable).select(node)
    await pilot.pause()  # type: ignore[attr-defined]
    await pilot.press("d")  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    dialog = app.screen
    assert isinstance(dialog, NodeActionScreen)
    dialog.query_one("#reason", Input).value = reason
    await pilot.pause()  # type: ignore[attr-defined]
    dialog.query_one("#run", Button).press()
    await wait(pilot, lambda: dialog.outcome is not None, "the action's outcome")
    return dialog


async def test_drain_and_resume_through_the_real_sshd_on_the_controller(
    real_slurm: RealSlurm,  # noqa: F811
    real_sshd_as_root: RealSshd,  # noqa: F811
    slurm_client_conf: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    """An administrator's login to the controller: scontrol runs there, the reason crosses SSH as one
    quoted word and arrives exactly."""
    real_slurm.reset()
    app = through(real_sshd_as_root, slurm_client_conf, tmp_path)
    node = real_slurm.nodes[3]
    async with app.run_test(size=SIZE) as pilot:
        dialog = await drain_from_the_table(pilot, app, node, NASTY)
        assert dialog.outcome is not None and dialog.outcome.ok, dialog.outcome
        await pilot.press("escape")
        listed = json.loads(real_slurm.run(["sinfo", "--json"]).stdout)["nodes"]
        (entry,) = [n for n in listed if n["name"] == node]
        assert entry["reason"] == NASTY and real_slurm.node_state(node) == "drained"

        def shown_drained() -> bool:
            slurm = app.view.snapshot.slurm if app.view else None
            return slurm is not None and node in slurm.nodes and slurm.nodes[node].drained

        await wait(pilot, shown_drained, "drained on screen, read over SSH")
        await pilot.press("R")
        await pilot.pause()
        await run_dialog(pilot, app)
        assert "drain" not in real_slurm.node_state(node)
        await wait(pilot, lambda: not shown_drained(), "resumed on screen")
    records = outcomes(tmp_path)
    assert [(r["action"], r["exit_status"], r["where"]) for r in records] == [
        ("drain", 0, "node01"),
        ("resume", 0, "node01"),
    ]


async def test_a_login_that_is_not_a_slurm_admin_is_refused_and_says_so(
    real_slurm: RealSlurm,  # noqa: F811
    real_sshd_unprivileged: RealSshd,  # noqa: F811
    slurm_client_conf: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    real_slurm.reset()
    app = through(real_sshd_unprivileged, slurm_client_conf, tmp_path)
    node = real_slurm.nodes[3]
    async with app.run_test(size=SIZE) as pilot:
        dialog = await drain_from_the_table(pilot, app, node, "Xid 79 on GPU3")
        assert dialog.outcome is not None and not dialog.outcome.ok
        # Slurm's own words: 22.05 says "Invalid user id" to a user who is not an operator, later
        # versions "Access/permission denied"
        output = dialog.outcome.output
        assert output.startswith("slurm_update error: "), output
        assert any(words in output for words in ("Invalid user id", "Access/permission denied")), output
        assert output in str(dialog.query_one("#outcome").render())
    assert "drain" not in real_slurm.node_state(node), "nothing changed"
    (record,) = outcomes(tmp_path)
    assert record["exit_status"] != 0 and record["where"] == "node01"


async def test_real_jobs_in_the_queue_pane_with_the_gpus_slurm_gave_them(
    slurm_app: GputopApp,
    real_slurm: RealSlurm,  # noqa: F811
) -> None:
    """Jobs submitted with sbatch --gres=gpu:N: the queue lists them, running and pending, and the job line
    names the very GPUs `scontrol show job -d` gives (read here with a regex, not gputop's parser)."""
    running = real_slurm.submit(gpus=3, name="queue-pane-3")
    real_slurm.wait_for(lambda: real_slurm.job_state(running) == "RUNNING", 30, what="the job running")
    # every GPU of every node, while 3 are taken: pending, with Slurm's reason
    pending = real_slurm.submit(gpus=8, nodes=len(real_slurm.nodes), name="whole-cluster")
    text = real_slurm.run(["scontrol", "show", "job", "-d", running]).stdout
    ((node, idx),) = re.findall(r"Nodes=(\S+) .*?GRES=\S*\(IDX:([0-9,-]+)\)", text)
    app = slurm_app
    async with app.run_test(size=SIZE) as pilot:
        await wait(pilot, lambda: app.view is not None and {running, pending} <= set(app.view.jobs), "jobs")
        await pilot.press("J")
        await pilot.pause()
        queue = app.screen
        assert isinstance(queue, QueueScreen)
        table = queue.query_one(JobTable)
        table.go_to(running)
        await pilot.pause()
        line = str(queue.query_one("#job-line", Static).render())
        assert f"job {running}" in line and "running" in line and f"{node}: GPU {idx}" in line, line
        assert app.view is not None
        row = app.view.jobs[running]
        assert row.gpus == 3 and row.job.name == "queue-pane-3"
        assert app.view.jobs[pending].job.state == "PENDING"
        # Slurm says Reason=None until its scheduler has looked at the job
        await wait(
            pilot,
            lambda: app.view is not None and app.view.jobs[pending].job.pending_reason == "Resources",
            "the pending reason",
        )
        await pilot.press("slash", *"state=pending")
        await pilot.pause()
        assert pending in table.order and running not in table.order


async def test_a_fault_over_ssh_is_an_alert_and_its_node_is_drained_from_it_in_real_slurm(
    real_slurm: RealSlurm,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The real Slurm's nodes are played by fake-fleet nodes over SSH (host key checked): one GPU falls off
    the bus there; the alerts pane lists it; d drains that node with the alert's words, and real sinfo
    holds exactly that reason."""
    real_slurm.reset()
    for name, value in real_slurm.env.items():
        monkeypatch.setenv(name, value)
    nodes = real_slurm.nodes
    async with run_fleet(nodes=len(nodes), port=0, state_dir=tmp_path / "fleet") as fleet:
        # Slurm's names for the fleet's nodes: each Host block logs in as the fleet node it plays
        fleet_config = fleet.ssh_config_path.read_text(encoding="utf-8")
        for slurm_name, fleet_name in zip(nodes, fleet.node_names, strict=True):
            fleet_config = fleet_config.replace(f"Host {fleet_name}\n", f"Host {slurm_name}\n")
        ssh_config = tmp_path / "ssh_config"
        ssh_config.write_text(fleet_config, encoding="utf-8")
        victim_fleet, victim = fleet.node_names[1], nodes[1]
        fleet.faults.set(victim_fleet, Fault.FALLEN_OFF_BUS)
        ssh = (
            f"      config_file: {json.dumps(str(ssh_config))}\n"
            f"      known_hosts: {json.dumps(str(fleet.known_hosts_path))}\n"
        )
        app = app_for(tmp_path, ssh)
        async with app.run_test(size=SIZE) as pilot:

            def xid_alert() -> str | None:
                alerts = app.poller.alert_book.state.alerts
                # the simulator's own incidents may add another Xid on this node: the fault's is 79
                return next(
                    (
                        k
                        for k, a in alerts.items()
                        if a.node == victim and a.key.kind == "xid" and a.key.subject == "79"
                    ),
                    None,
                )

            await wait(pilot, lambda: xid_alert() is not None, "the Xid 79 alert", tries=300)
            await pilot.press("A")
            await pilot.pause()
            table = app.screen.query_one(AlertTable)
            key = xid_alert()
            assert key is not None and key in table.order
            table.go_to(key)
            await pilot.pause()
            await pilot.press("d")
            await pilot.pause()
            dialog = app.screen
            assert isinstance(dialog, NodeActionScreen) and dialog.nodes == (victim,)
            reason = dialog.query_one("#reason", Input).value
            assert "Xid 79" in reason and "(since " in reason, reason
            dialog.query_one("#run", Button).press()
            await wait(pilot, lambda: dialog.outcome is not None, "the drain's outcome")
            assert dialog.outcome is not None and dialog.outcome.ok, dialog.outcome
    listed = json.loads(real_slurm.run(["sinfo", "--json"]).stdout)["nodes"]
    (entry,) = [n for n in listed if n["name"] == victim]
    assert entry["reason"] == reason
    assert real_slurm.node_state(victim) == "drained"
