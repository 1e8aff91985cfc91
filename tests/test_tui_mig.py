"""MIG on the demo, from the keyboard: the node screen's MIG pane, repartitioning the idle MIG GPU of the
drained node end to end (plan, run, each step's outcome, the re-read, the audit log), the refusals, the MIG
mode dialog, and read-only mode without any of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Button, DataTable, Input, OptionList, Static

from gputop.sim.demo import SimulatorSource
from gputop.tui.app import GputopApp
from gputop.tui.screens.mig_action import MigActionScreen
from gputop.tui.screens.mig_dialog import MigRepartitionScreen
from gputop.tui.screens.mig_mode_dialog import MigModeScreen
from gputop.tui.screens.node import NodeScreen
from gputop.tui.screens.node_action import NodeActionScreen
from gputop.tui.widgets.mig_pane import MigPane
from tests.test_tui_node_actions import app_with_audit
from tests.tui_helpers import wait_for_data

SIZE = (160, 50)


def incident(app: GputopApp, kind: str) -> tuple[str, int]:
    source = app.settings.sources[0]
    assert isinstance(source, SimulatorSource)
    found = next(i for i in source.cluster.incidents if i.kind == kind)
    assert found.gpu_index is not None
    return found.node, found.gpu_index


def idle_mig_gpu_on_a_drained_node(app: GputopApp) -> tuple[str, int]:
    assert app.view is not None and app.view.snapshot.slurm is not None
    slurm = app.view.snapshot.slurm
    for node in app.view.snapshot.nodes:
        state = slurm.nodes.get(node.name)
        if state is None or not state.drained:
            continue
        for gpu in node.gpus:
            if gpu.mig_enabled and not gpu.processes:
                return node.name, gpu.index
    raise AssertionError("the demo has no idle MIG GPU on a drained node")


async def open_gpu(pilot: Pilot[None], node: str, gpu: int) -> NodeScreen:
    app = pilot.app
    assert isinstance(app, GputopApp)
    app.open_node(node)
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, NodeScreen)
    table = screen.query_one("#gpus", DataTable)
    table.move_cursor(row=table.get_row_index(str(gpu)))
    await pilot.pause()
    return screen


async def open_dialog(pilot: Pilot[None], key: str) -> MigActionScreen:
    await pilot.press(key)
    await pilot.pause()
    dialog = pilot.app.screen
    assert isinstance(dialog, MigActionScreen)
    assert pilot.app.focused is dialog.query_one("#cancel", Button), "Cancel has the focus"
    return dialog


def text(dialog: MigActionScreen, selector: str) -> str:
    return str(dialog.query_one(selector, Static).render())


async def choose(pilot: Pilot[None], dialog: MigActionScreen, option_id: str) -> None:
    options = dialog.query_one("#choices", OptionList)
    options.focus()
    options.highlighted = options.get_option_index(option_id)
    await pilot.press("enter")
    await pilot.pause()


async def until(pilot: Pilot[None], done: object, tries: int = 200) -> None:
    for _ in range(tries):
        if done():  # type: ignore[operator]
            return
        await pilot.pause(0.05)
    raise AssertionError("timed out")


def audit(tmp_path: Path) -> list[dict[str, object]]:
    """The outcome records (each follows its step's intent), in the demo's own log."""
    log = tmp_path / "demo-audit.jsonl"
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    records = [json.loads(line) for line in lines]
    intents = [r for r in records if r["phase"] == "intent"]
    outcomes = [r for r in records if r["phase"] == "outcome"]
    assert [r["id"] for r in intents] == [r["id"] for r in outcomes], "every intent has its outcome"
    return outcomes


async def test_the_mig_pane_shows_the_incident_gpus_instances_and_slice_bar(tmp_path: Path) -> None:
    app = app_with_audit(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        node, gpu = incident(app, "mig")
        screen = await open_gpu(pilot, node, gpu)
        pane = screen.query_one(MigPane)
        lines = pane.text_lines()
        assert lines[0] == "MIG"
        head = next(i for i, line in enumerate(lines) if line.startswith(f"  GPU {gpu} "))
        assert "7 GPU instances" in lines[head]
        bar = lines[head + 1]
        assert bar.count("\u258f") == 8, "seven instances and the free slice"
        assert "free" in bar and "1g.10gb" in bar
        assert sum(1 for line in lines if line.lstrip().startswith("GI ") and "1g.10gb" in line) == 7
        assert any(line.lstrip().startswith("MIG devices:") and "MIG-" in line for line in lines)
        table = screen.query_one("#gpus", DataTable)
        assert str(table.get_cell(str(gpu), "util")) == "n/a", "not reported under MIG: never 0%"


async def test_repartition_the_idle_mig_gpu_of_the_drained_node_end_to_end(tmp_path: Path) -> None:
    app = app_with_audit(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        node, gpu = idle_mig_gpu_on_a_drained_node(app)
        screen = await open_gpu(pilot, node, gpu)
        dialog = await open_dialog(pilot, "m")
        assert isinstance(dialog, MigRepartitionScreen)
        assert "preconditions met" in text(dialog, "#checks")
        await choose(pilot, dialog, "preset:2x3g.40gb")
        assert dialog.query_one("#layout", Input).value == "2x3g.40gb"
        steps = text(dialog, "#steps")
        assert f"sudo -n nvidia-smi mig -i {gpu} -cgi 9:0 -C" in steps
        assert f"sudo -n nvidia-smi mig -i {gpu} -cgi 9:4 -C" in steps
        assert "in the demo simulator" in steps
        planned = dialog.planned.steps
        run = dialog.query_one("#run", Button)
        assert not run.disabled
        run.press()
        await until(pilot, lambda: dialog.phase == "done")
        steps = text(dialog, "#steps")
        assert steps.count("\u2713") == len(planned), steps
        assert "Re-read: the GPUs hold 2x3g.40gb, as planned." in text(dialog, "#verdict")
        records = audit(tmp_path)
        assert [r["argv"] for r in records] == [list(s.argv) for s in planned]
        assert {r["action"] for r in records} == {"mig"}
        assert {tuple(r["targets"]) for r in records} == {(f"{node}:GPU{gpu}",)}  # type: ignore[arg-type]
        assert all(r["exit_status"] == 0 and r["demo"] is True for r in records)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
        lines = screen.query_one(MigPane).text_lines()
        head = next(i for i, line in enumerate(lines) if line.startswith(f"  GPU {gpu} "))
        assert "2 GPU instances" in lines[head] and lines[head + 1].count("3g.40gb") == 2


async def test_a_step_that_fails_stops_the_run_and_the_re_read_says_what_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(MigActionScreen, "REREAD_WAIT_S", 0.5)
    app = app_with_audit(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        node, gpu = idle_mig_gpu_on_a_drained_node(app)
        await open_gpu(pilot, node, gpu)
        dialog = await open_dialog(pilot, "m")
        await choose(pilot, dialog, "preset:1x7g.80gb")
        planned = dialog.planned.steps
        source = app.settings.sources[0]
        assert isinstance(source, SimulatorSource)
        # Someone else creates an instance after the preview: the planned 7g.80gb has no room left.
        taken = ("sudo", "nvidia-smi", "mig", "-i", str(gpu), "-cgi", "19:0", "-C")
        assert source.cluster.nvidia_smi(node, taken)[0] == 0
        dialog.query_one("#run", Button).press()
        await until(pilot, lambda: dialog.phase == "done")
        steps = text(dialog, "#steps")
        assert steps.count("\u2717") == 1 and steps.count("\u2713") == 0
        assert steps.count("(not run)") == len(planned) - 1
        verdict = text(dialog, "#verdict")
        assert verdict.startswith("Re-read: the GPUs do not match the plan:"), verdict
        assert f"{node} GPU {gpu}: missing 7g.80gb at 0:8" in verdict
        assert f"{node} GPU {gpu}: unexpected 1g.10gb at 0:1" in verdict
        (record,) = audit(tmp_path)
        assert record["argv"] == list(planned[0].argv) and record["exit_status"] not in (0, None)


async def test_a_layout_that_cannot_fit_is_refused_with_its_reason(tmp_path: Path) -> None:
    app = app_with_audit(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        await open_gpu(pilot, *idle_mig_gpu_on_a_drained_node(app))
        dialog = await open_dialog(pilot, "m")
        dialog.query_one("#layout", Input).value = "3x3g.40gb"
        await pilot.pause()
        assert "Refused: 3x3g.40gb needs 9 compute slices" in text(dialog, "#checks")
        assert dialog.query_one("#run", Button).disabled
        await choose(pilot, dialog, "profile:1g.10gb")
        assert dialog.query_one("#layout", Input).value == "3x3g.40gb, 1x1g.10gb"
        await pilot.press("escape")
        assert audit(tmp_path) == []


async def test_a_busy_gpu_on_a_node_not_drained_is_refused_and_drain_is_offered(tmp_path: Path) -> None:
    app = app_with_audit(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        node, gpu = incident(app, "mig")
        await open_gpu(pilot, node, gpu)
        dialog = await open_dialog(pilot, "m")
        checks = text(dialog, "#checks")
        assert f"GPU {gpu} of {node} runs" in checks and "end them first" in checks
        assert f"drain {node} first" in checks
        await choose(pilot, dialog, "preset:7x1g.10gb")
        assert dialog.query_one("#run", Button).disabled
        drain = dialog.query_one("#drain", Button)
        assert drain.has_class("shown")
        drain.press()
        await pilot.pause()
        assert isinstance(app.screen, NodeActionScreen)
        assert app.screen.nodes == (node,) and app.screen.action_name == "drain"
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is dialog


async def test_mig_mode_on_several_gpus_warns_and_asks_for_the_count(tmp_path: Path) -> None:
    app = app_with_audit(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        node, mig_gpu = idle_mig_gpu_on_a_drained_node(app)
        assert app.view is not None
        sample = app.view.snapshot.node(node)
        assert sample is not None
        plain = [g.index for g in sample.gpus if g.mig_enabled is False][:2]
        assert len(plain) == 2, "the drained node has GPUs without MIG"
        screen = await open_gpu(pilot, node, plain[0])
        await pilot.press("space")
        table = screen.query_one("#gpus", DataTable)
        table.move_cursor(row=table.get_row_index(str(plain[1])))
        await pilot.press("space")
        assert screen.marked_gpus == set(plain)
        assert str(table.get_cell(str(plain[0]), "gpu")) == f"*{plain[0]}"
        dialog = await open_dialog(pilot, "M")
        assert isinstance(dialog, MigModeScreen) and dialog.enable
        assert text(dialog, "#title") == f"Turn MIG mode on: {node} GPUs {plain[0]}, {plain[1]}"
        assert "needs the GPU idle" in text(dialog, "#warning")
        steps = text(dialog, "#steps")
        for index in plain:
            assert f"sudo -n nvidia-smi -i {index} -mig 1" in steps
        run = dialog.query_one("#run", Button)
        assert run.disabled, "two GPUs: the count must be typed first"
        dialog.query_one("#count", Input).value = "2"
        await pilot.pause()
        assert not run.disabled
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen and audit(tmp_path) == []
        # Unmarked again, the MIG GPU under the cursor alone: the same key turns MIG off.
        for index in plain:
            table.move_cursor(row=table.get_row_index(str(index)))
            await pilot.press("space")
        assert not screen.marked_gpus and str(table.get_cell(str(plain[0]), "gpu")) == str(plain[0])
        table.move_cursor(row=table.get_row_index(str(mig_gpu)))
        await pilot.pause()
        dialog = await open_dialog(pilot, "M")
        assert isinstance(dialog, MigModeScreen) and not dialog.enable
        assert "jobs that name their UUIDs will not find them" in text(dialog, "#warning")


async def test_turning_mig_on_runs_audited_and_the_re_read_shows_the_mode(tmp_path: Path) -> None:
    app = app_with_audit(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        node, _mig_gpu = idle_mig_gpu_on_a_drained_node(app)
        assert app.view is not None
        sample = app.view.snapshot.node(node)
        assert sample is not None
        plain = next(g.index for g in sample.gpus if g.mig_enabled is False)
        await open_gpu(pilot, node, plain)
        dialog = await open_dialog(pilot, "M")
        dialog.query_one("#run", Button).press()
        await until(pilot, lambda: dialog.phase == "done")
        assert text(dialog, "#verdict") == f"Re-read: MIG mode is now on on GPU {plain}."
        (record,) = audit(tmp_path)
        assert record["argv"] == ["sudo", "-n", "nvidia-smi", "-i", str(plain), "-mig", "1"]
        assert record["targets"] == [f"{node}:GPU{plain}"] and record["exit_status"] == 0


@pytest.mark.parametrize("key", ["m", "M", "space"])
async def test_read_only_has_no_mig_keys(tmp_path: Path, key: str) -> None:
    app = app_with_audit(tmp_path, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        screen = await open_gpu(pilot, *incident(app, "mig"))
        for action in ("mig_layout", "mig_mode", "mark_gpu"):
            assert not screen.check_action(action, ())
        await pilot.press(key)
        await pilot.pause()
        assert app.screen is screen and not screen.marked_gpus
        bound = {b.binding.action for b in screen.active_bindings.values()}
        assert not {"mig_layout", "mig_mode", "mark_gpu"} & bound
