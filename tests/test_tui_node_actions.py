"""Drain and resume from the keyboard, on the demo simulator: the dialog, its guards, the audit log."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from textual.widgets import Button, Input, Static

from gputop.cli import build_demo_app
from gputop.clock import FrozenClock
from gputop.core.config import Config
from gputop.tui.app import GputopApp
from gputop.tui.screens.help import HelpScreen
from gputop.tui.screens.node_action import NodeActionScreen
from gputop.tui.widgets.node_table import NodeTable
from tests.tui_helpers import FROZEN_EPOCH_S, wait_for_data

SIZE = (160, 50)
NASTY = 'it\'s "bad"; $(reboot) `id` — ü'


def app_with_audit(tmp_path: Path, read_only: bool = False) -> GputopApp:
    base = Config.default()
    config = dataclasses.replace(
        base, demo=dataclasses.replace(base.demo, nodes=32, seed=42), audit_log=str(tmp_path / "audit.jsonl")
    )
    app = build_demo_app(config, clock=FrozenClock(FROZEN_EPOCH_S), read_only=read_only)
    app.settings.freeze_gc = False
    return app


def text_of(screen: NodeActionScreen, selector: str) -> str:
    return str(screen.query_one(selector, Static).render())


async def wait_for_slurm(pilot: object, app: GputopApp, node: str, flag: str) -> bool:
    for _ in range(100):
        app.action_refresh()
        await pilot.pause(0.05)  # type: ignore[attr-defined]
        slurm = app.view.snapshot.slurm if app.view else None
        if slurm is not None and node in slurm.nodes and flag in slurm.nodes[node].flags:
            return True
    return False


async def test_drain_one_node_with_a_nasty_reason_then_resume_it(tmp_path: Path) -> None:
    app = app_with_audit(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        table = app.screen.query_one(NodeTable)
        node = table.cursor_name
        assert node is not None
        await pilot.press("d")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, NodeActionScreen)
        assert app.focused is dialog.query_one("#cancel", Button), "Cancel has the focus"
        reason = dialog.query_one("#reason", Input)
        reason.value = ""
        await pilot.pause()
        assert "a reason is required" in text_of(dialog, "#refused")
        assert dialog.query_one("#run", Button).disabled
        reason.value = NASTY
        await pilot.pause()
        run = dialog.query_one("#run", Button)
        assert not run.disabled
        assert f"NodeName={node}" in text_of(dialog, "#command") and "State=DRAIN" in text_of(
            dialog, "#command"
        )
        run.press()
        for _ in range(100):
            await pilot.pause(0.02)
            if dialog.outcome is not None:
                break
        assert dialog.outcome is not None and dialog.outcome.ok, dialog.outcome
        assert text_of(dialog, "#outcome").startswith("done")
        # on disk before the outcome was shown: the intent, then the outcome
        # the demo's pretend actions are kept apart from the record of real ones
        assert not (tmp_path / "audit.jsonl").exists()
        demo_log = (tmp_path / "demo-audit.jsonl").read_text()
        intent, record = [json.loads(line) for line in demo_log.splitlines()]
        assert (intent["phase"], record["phase"], record["result"]) == ("intent", "outcome", "done")
        assert record["argv"] == [
            "scontrol",
            "update",
            f"NodeName={node}",
            "State=DRAIN",
            f'Reason="{NASTY}"',
        ]
        assert record["targets"] == [node] and record["exit_status"] == 0 and record["demo"] is True
        await pilot.press("escape")
        assert await wait_for_slurm(pilot, app, node, "DRAIN")
        assert app.view is not None and app.view.snapshot.slurm is not None
        assert app.view.snapshot.slurm.nodes[node].reason == NASTY

        await pilot.press("R")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, NodeActionScreen)
        assert "State=RESUME" in text_of(dialog, "#command")
        # why it was drained and what is still wrong, and (still CRIT) the count to type
        context = text_of(dialog, "#context")
        assert f"{node} drained by " in context and NASTY in context and "CRIT " in context, context
        run = dialog.query_one("#run", Button)
        assert run.disabled, "a node with CRIT problems is not resumed on a single key"
        dialog.query_one("#count", Input).value = "1"
        await pilot.pause()
        assert not run.disabled
        run.press()
        for _ in range(100):
            await pilot.pause(0.02)
            if dialog.outcome is not None:
                break
        assert dialog.outcome is not None and dialog.outcome.ok
        await pilot.press("escape")
        for _ in range(100):
            app.action_refresh()
            await pilot.pause(0.05)
            slurm = app.view.snapshot.slurm if app.view else None
            if slurm is not None and "DRAIN" not in slurm.nodes[node].flags:
                break
        else:
            raise AssertionError("the node was not resumed")
        assert len((tmp_path / "demo-audit.jsonl").read_text(encoding="utf-8").splitlines()) == 4


async def test_many_marked_nodes_ask_for_the_count_and_cancel_runs_nothing(tmp_path: Path) -> None:
    app = app_with_audit(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        table = app.screen.query_one(NodeTable)
        await pilot.press("space", "space", "space")
        assert len(table.marked) == 3
        await pilot.press("d")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, NodeActionScreen)
        assert str(dialog.query_one("#title", Static).render()) == "Drain 3 nodes"
        dialog.query_one("#reason", Input).value = "maintenance window"
        await pilot.pause()
        run = dialog.query_one("#run", Button)
        assert run.disabled, "three nodes: the count must be typed first"
        dialog.query_one("#count", Input).value = "2"
        await pilot.pause()
        assert run.disabled
        dialog.query_one("#count", Input).value = "3"
        await pilot.pause()
        assert not run.disabled
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, NodeActionScreen)
        assert not (tmp_path / "demo-audit.jsonl").exists(), "cancelled: nothing ran, nothing logged"
        await pilot.press("asterisk")
        assert table.marked == frozenset(table.order), "* marks every node shown"
        await pilot.press("asterisk")
        assert table.marked == frozenset()


async def test_read_only_has_no_acting_keys(tmp_path: Path) -> None:
    app = app_with_audit(tmp_path, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        await pilot.press("space", "d", "R")
        await pilot.pause()
        assert not isinstance(app.screen, NodeActionScreen)
        assert app.screen.query_one(NodeTable).marked == frozenset()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        help_text = " ".join(str(w.render()) for w in app.screen.query(Static))
        assert "Drain" not in help_text and "Resume" not in help_text


async def test_a_drain_of_several_nodes_shows_what_it_will_do_from_the_start(tmp_path: Path) -> None:
    """Two marked nodes: the dialog showed 'Drain 2 nodes', an empty reason and nothing else until a
    reason was typed; keys typed while Cancel had the focus were lost."""
    app = app_with_audit(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        table = app.screen.query_one(NodeTable)
        first, second = table.order[0], table.order[1]
        await pilot.press("space", "space", "d")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, NodeActionScreen)
        nodes = text_of(dialog, "#nodes")
        assert first in nodes or "[" in nodes, nodes
        reason = dialog.query_one("#reason", Input).value
        assert f"({first})" in reason and f"({second})" in reason, "each node's evidence, folded"
        command = text_of(dialog, "#command")
        assert "State=DRAIN" in command and "NodeName=" in command
        assert text_of(dialog, "#jobs").startswith(("jobs that keep running", "no running jobs"))
        dialog.query_one("#reason", Input).value = ""
        await pilot.pause()
        assert "(type a reason)" in text_of(dialog, "#command"), "what it will run, reason to come"
        assert app.focused is dialog.query_one("#cancel", Button)
        await pilot.press("h", "w", "space", "f", "a", "u", "l", "t")
        await pilot.pause()
        assert dialog.query_one("#reason", Input).value == "hw fault", "typed keys reach the reason"


def test_several_nodes_reasons_fold_into_one() -> None:
    from gputop.core.node_actions import MAX_REASON_CHARS, folded_reason

    assert folded_reason({"gpu001": "GPU3 91 C"}) == "GPU3 91 C"
    assert folded_reason({"gpu001": "Xid 79", "gpu003": "Xid 79", "gpu002": "GPU3 91 C", "gpu004": ""}) == (
        "Xid 79 (gpu[001,003]); GPU3 91 C (gpu002)"
    )
    many = folded_reason({f"gpu{i:03d}": f"problem number {i} " + "x" * 40 for i in range(100)})
    assert len(many) <= MAX_REASON_CHARS and many.endswith("more")
