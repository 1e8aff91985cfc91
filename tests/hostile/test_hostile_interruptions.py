"""Every action interrupted at each step: the link dropped while the command runs, Escape and Cancel
while it runs, SIGTERM (once, and twice), SIGHUP (the terminal closed), a full disk. The audit log always
holds the intent, and the outcome as far as it is known; the terminal is given back.

The signal tests run gputop itself in a pseudo-terminal, on the demo, with the simulator's scontrol made
slow enough to be interrupted (tests/hostile/slow_demo.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Button, Input

from gputop.actions.audit import AuditLog
from gputop.actions.execute import execute
from gputop.actions.mig import run_steps
from gputop.config_file import load_config
from gputop.core.mig_plan import ModeStep
from gputop.core.node_actions import NodeActionPlan, plan_node_action
from gputop.sim.fake_fleet import Fault, run_fleet
from gputop.sources.slurm_runner import SshRunner
from gputop.sources.ssh import link_settings
from gputop.tui.app import GputopApp
from gputop.tui.screens.node_action import NodeActionScreen
from tests.test_tui_node_actions import SIZE, app_with_audit
from tests.tui_helpers import wait_for_data

SLOW_DEMO = Path(__file__).parent / "slow_demo.py"
RESTORE_SCREEN = b"\x1b[?1049l"  # leave the alternate screen: the terminal is the user's again


def records(path: Path) -> list[dict[str, object]]:
    return (
        [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []
    )


async def wait_for_records(path: Path, count: int, timeout_s: float = 10.0) -> list[dict[str, object]]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = records(path)
        if len(found) >= count:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"{count} records not written within {timeout_s}s: {records(path)}")


# --- the link drops while the command runs -------------------------------------------------------------


@pytest.mark.parametrize("action", ["drain", "mig"])
async def test_a_link_that_drops_while_the_command_runs_is_an_unknown_outcome(
    tmp_path: Path, action: str
) -> None:
    log = tmp_path / "audit.jsonl"
    async with run_fleet(nodes=4, port=0, state_dir=tmp_path / "fleet") as fleet:
        config = load_config(fleet.config_path)
        node = fleet.node_names[0]
        fleet.faults.set(node, Fault.STALL_COMMAND)  # the command starts and is still running...
        runner = SshRunner(node, link_settings(config.clusters[0], config.poll))
        audit = AuditLog(log, cluster="fleet")
        reread_asked: list[tuple[str, ...]] = []

        async def reread(nodes: tuple[str, ...]) -> dict[str, str]:
            reread_asked.append(nodes)
            return dict.fromkeys(nodes, "drained (reason: x)")

        if action == "drain":
            plan = plan_node_action("drain", [node], fleet.node_names, "Xid 79", None)
            assert isinstance(plan, NodeActionPlan)
            running = asyncio.create_task(execute(plan, runner, audit, timeout_s=30, reread=reread))
        else:
            step = ModeStep(0, ("nvidia-smi", "-i", "0", "-mig", "1"), "MIG on")
            running = asyncio.create_task(run_steps([step], runner, audit, node=node, timeout_s=30))
        try:
            await wait_for_records(log, 1)
            await asyncio.sleep(0.3)  # ...the command has been sent
            assert fleet.drop_connections() >= 1  # ...when the network fails
            outcome = await asyncio.wait_for(running, 15)
        finally:
            await runner.close()
    intent, done, *rest = records(log)
    assert (intent["phase"], done["phase"], done["id"]) == ("intent", "outcome", intent["id"])
    assert done["result"] == "unknown" and done["exit_status"] is None, done
    if action == "drain":
        assert outcome.result == "unknown" and reread_asked == [(node,)]
        assert rest and rest[0]["phase"] == "reread" and rest[0]["states"] == {node: "drained (reason: x)"}
    else:
        assert outcome.outcomes[0].result == "unknown" and not outcome.ok


# --- signals, in a real pseudo-terminal ------------------------------------------------------------------


def _take_the_terminal() -> None:
    # In the child, a session leader now: the pty becomes its controlling terminal, as in a terminal
    # window, so that closing it sends SIGHUP.
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class Terminal:
    """gputop on the demo in a pseudo-terminal of 160x45; what it writes is kept."""

    def __init__(self, tmp_path: Path, delay_s: float) -> None:
        self.audit = tmp_path / "demo-audit.jsonl"  # the demo's actions, beside the configured log
        config = tmp_path / "config.yaml"
        config.write_text(f"audit_log: {json.dumps(str(tmp_path / 'audit.jsonl'))}\n", encoding="utf-8")
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 45, 160, 0, 0))
        env = {**os.environ, "TERM": "xterm-256color", "GPUTOP_DEMO_SCONTROL_DELAY_S": str(delay_s)}
        env.pop("GPUTOP_CONFIG", None)
        self.process = subprocess.Popen(
            [sys.executable, str(SLOW_DEMO), "--demo", "--demo-nodes", "8", "--config", str(config)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
            preexec_fn=_take_the_terminal,
            cwd=Path(__file__).parent.parent.parent,
        )
        os.close(slave)
        self.output = bytearray()
        self._stop = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.output += data

    def hang_up(self) -> None:
        """Closes the terminal, as a closed window or a dropped SSH session does: the kernel sends
        SIGHUP, and what gputop writes after that goes nowhere."""
        self._stop.set()
        self._reader.join(5)
        os.close(self.master)

    def type(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def wait_for(self, text: bytes, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        start = len(self.output)
        while time.monotonic() < deadline:
            if text in self.output[max(0, start - 4096) :]:
                return
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not shown within {timeout_s}s")

    def start_a_drain(self) -> None:
        self.wait_for(b"Node")  # the table is drawn
        time.sleep(1.0)
        self.type(b"d")
        self.wait_for(b"Cancel")
        time.sleep(0.3)
        self.type(b"\t")  # from Cancel to the run button
        time.sleep(0.3)
        self.type(b"\r")
        self.wait_for(b"running")


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Callable[..., Terminal]]:
    opened: list[Terminal] = []

    def open_one(delay_s: float = 4.0) -> Terminal:
        opened.append(Terminal(tmp_path, delay_s))
        return opened[-1]

    yield open_one
    for one in opened:
        if one.process.poll() is None:
            one.process.kill()
            one.process.wait(10)
        with contextlib.suppress(OSError):  # closed already by the test that closes the terminal
            os.close(one.master)


def test_sigterm_while_a_drain_runs_waits_for_it_records_it_and_gives_the_terminal_back(
    terminal: Callable[..., Terminal],
) -> None:
    shell = terminal()
    shell.start_a_drain()
    shell.process.send_signal(signal.SIGTERM)
    assert shell.process.wait(30) == 128 + signal.SIGTERM
    intent, outcome = records(shell.audit)
    assert (intent["phase"], outcome["phase"], outcome["result"]) == ("intent", "outcome", "done")
    time.sleep(0.2)
    assert b"SIGTERM: gputop stops once drain" in shell.output
    assert RESTORE_SCREEN in shell.output[-2000:], "the alternate screen was left"


def test_a_second_sigterm_ends_gputop_at_once_and_the_outcome_is_unknown(
    terminal: Callable[..., Terminal],
) -> None:
    shell = terminal(delay_s=20.0)
    shell.start_a_drain()
    shell.process.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    shell.process.send_signal(signal.SIGTERM)
    assert shell.process.wait(15) == 128 + signal.SIGTERM
    intent, outcome = records(shell.audit)
    assert outcome["id"] == intent["id"] and outcome["result"] == "unknown"
    assert outcome["why"] == "gputop was stopped while the command ran"
    time.sleep(0.2)
    assert RESTORE_SCREEN in shell.output[-2000:]


def test_the_terminal_closing_while_a_drain_runs_still_records_its_outcome(
    terminal: Callable[..., Terminal],
) -> None:
    shell = terminal()
    shell.start_a_drain()
    shell.hang_up()
    shell.process.wait(30)
    intent, outcome = records(shell.audit)
    assert (outcome["phase"], outcome["id"], outcome["result"]) == ("outcome", intent["id"], "done")


# --- Escape and Cancel while the command runs; an audit log that cannot be written -----------------------


@pytest.fixture
def held_scontrol(monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """The demo's scontrol, answering only once the returned event is set."""
    from gputop.sim import demo_actions

    release = asyncio.Event()
    answer = demo_actions.SimulatedScontrol.run

    async def held(self: object, argv: object, env: object, timeout_s: float) -> object:
        await release.wait()
        return await answer(self, argv, env, timeout_s)  # type: ignore[arg-type]

    monkeypatch.setattr(demo_actions.SimulatedScontrol, "run", held)
    return release


async def open_a_drain(pilot: Pilot[None], app: GputopApp) -> NodeActionScreen:
    await wait_for_data(pilot)
    await pilot.press("d")
    await pilot.pause()
    dialog = app.screen
    assert isinstance(dialog, NodeActionScreen)
    dialog.query_one("#reason", Input).value = "maintenance"
    await pilot.pause()
    return dialog


async def start_a_held_drain(pilot: Pilot[None], app: GputopApp) -> NodeActionScreen:
    dialog = await open_a_drain(pilot, app)
    dialog.query_one("#run", Button).press()
    await pilot.pause(0.2)
    return dialog


async def test_escape_and_cancel_wait_while_the_command_runs(
    tmp_path: Path, held_scontrol: asyncio.Event
) -> None:
    release = held_scontrol
    app = app_with_audit(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await start_a_held_drain(pilot, app)
        assert dialog.running and dialog.query_one("#cancel", Button).disabled
        await pilot.press("escape")
        dialog.action_cancel()
        await pilot.pause(0.2)
        assert app.screen is dialog, "closing now would leave the outcome unseen"
        assert [r["phase"] for r in records(tmp_path / "demo-audit.jsonl")] == ["intent"]
        release.set()
        for _ in range(100):
            await pilot.pause(0.02)
            if dialog.outcome is not None:
                break
        assert dialog.outcome is not None and dialog.outcome.ok
        assert [r["phase"] for r in records(tmp_path / "demo-audit.jsonl")] == ["intent", "outcome"]
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is not dialog


async def test_a_drain_dialog_says_at_once_that_the_audit_log_cannot_be_written(tmp_path: Path) -> None:
    app = app_with_audit(tmp_path)
    (tmp_path / "demo-audit.jsonl").mkdir()  # a directory where the (demo's) log should be
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_a_drain(pilot, app)
        refused = str(dialog.query_one("#refused").render())
        log = tmp_path / "demo-audit.jsonl"
        assert f"the audit log {log} cannot be written: it is a directory" in refused
        assert "gputop does not act without a record" in refused
        assert dialog.query_one("#run").disabled


async def test_q_while_the_command_runs_waits_for_its_outcome_then_quits(
    tmp_path: Path, held_scontrol: asyncio.Event
) -> None:
    release = held_scontrol
    app = app_with_audit(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await start_a_held_drain(pilot, app)
        await app.action_quit()
        await pilot.pause(0.3)
        assert app.is_running and app.stopping.in_flight
        assert any(n.message.startswith("q: gputop stops once drain") for n in app._notifications)
        release.set()
        for _ in range(100):
            if not app.is_running:
                break
            await asyncio.sleep(0.05)
        assert not app.is_running
    assert [r["phase"] for r in records(tmp_path / "demo-audit.jsonl")] == ["intent", "outcome"]
    assert app.return_code == 0
