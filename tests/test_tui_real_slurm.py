"""The app on a real Slurm: a node drained from the dialog, with a reason full of shell metacharacters,
is drained in real sinfo with exactly that reason, and resumed the same way; a killed slurmd shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import Button, Input

from gputop.cluster_app import build_cluster_app
from gputop.config_file import load_config
from gputop.tui.app import GputopApp
from gputop.tui.screens.node_action import NodeActionScreen
from gputop.tui.widgets.node_table import NodeTable
from tests.infra.slurm import RealSlurm, real_slurm  # noqa: F401 - the fixture, registered by importing it

pytestmark = pytest.mark.slurm

SIZE = (160, 50)
NASTY = '"Xid 79"; rm -rf / $(reboot) `id` | tee — ü'


@pytest.fixture
def slurm_app(real_slurm: RealSlurm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GputopApp:  # noqa: F811
    real_slurm.reset()
    for name, value in real_slurm.env.items():
        monkeypatch.setenv(name, value)
    config_path = tmp_path / "gputop.yaml"
    config_path.write_text(
        f"audit_log: {json.dumps(str(tmp_path / 'audit.jsonl'))}\n"
        "poll:\n  interval_s: 0.5\n"
        "clusters:\n"
        "  - name: real\n"
        "    nodes_from_slurm: all\n"
        "    ssh:\n      connect_timeout_s: 1\n"
        "    slurm:\n      poll_interval_s: 0.5\n",
        encoding="utf-8",
    )
    config = load_config(config_path)
    app = build_cluster_app(config, config.clusters[0])
    app.settings.freeze_gc = False
    return app


async def wait(pilot: object, check: object, what: str, tries: int = 150) -> None:
    for _ in range(tries):
        if check():  # type: ignore[operator]
            return
        await pilot.pause(0.1)  # type: ignore[attr-defined]
    raise AssertionError(f"not seen: {what}")


async def run_dialog(pilot: object, app: GputopApp) -> None:
    dialog = app.screen
    assert isinstance(dialog, NodeActionScreen)
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
        records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
        assert [r["action"] for r in records] == ["drain", "resume"]
        assert all(r["exit_status"] == 0 and r["where"] == "local" for r in records)


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
        dialog.query_one("#run", Button).press()
        await wait(pilot, lambda: dialog.outcome is not None, "the outcome")
        assert dialog.outcome is not None and dialog.outcome.exit_status == 1
        assert "Invalid node state specified" in dialog.outcome.output
        assert "Invalid node state specified" in str(dialog.query_one("#outcome").render())
        (record,) = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
        assert record["exit_status"] == 1 and "Invalid node state specified" in record["output"]
