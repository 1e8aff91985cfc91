"""run_line_stream over the fake fleet's SSH server: lines as they come, the cut last line, deadlines,
and a callback that breaks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from gputop.sim.fake_fleet import Fault, Faults, Fleet, run_fleet
from gputop.sources.commands import metrics_stream
from gputop.sources.ssh_stream import StreamSilent, run_line_stream

STREAM = metrics_stream(0.2)


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    async with run_fleet(
        nodes=16, port=0, state_dir=tmp_path / "fleet", faults=Faults(die_after_intervals=2, slow_delay_s=1.0)
    ) as f:
        yield f


def calm(fleet: Fleet) -> str:
    """A node with no simulated incident (one of them never finishes its handshake)."""
    busy = {incident.node for incident in fleet.cluster.incidents}
    return next(name for name in fleet.node_names if name not in busy)


def connect(fleet: Fleet, node: str) -> Any:
    return asyncssh.connect(
        node,
        config=[str(fleet.ssh_config_path)],
        known_hosts=str(fleet.known_hosts_path),
        connect_timeout=5,
    )


async def test_whole_lines_arrive_in_bursts_and_the_exit_status_comes_back(fleet: Fleet) -> None:
    bursts: list[tuple[list[bytes], bool]] = []
    async with connect(fleet, calm(fleet)) as conn:
        status = await run_line_stream(
            conn, "nvidia-smi -L", lambda lines, ended: bursts.append((lines, ended)), 5
        )
    lines = [line for burst, _ in bursts for line in burst]
    assert status == 0
    assert len(lines) == 8 and all(line.startswith(b"GPU ") for line in lines)
    assert bursts[-1][1] is True  # the output ended on a line boundary


async def test_a_stream_cut_mid_line_hands_over_the_cut_line_last(fleet: Fleet) -> None:
    node = calm(fleet)
    fleet.faults.set(node, Fault.DIE_MIDSTREAM)
    lines: list[bytes] = []
    async with connect(fleet, node) as conn:
        status = await run_line_stream(conn, STREAM.command_line, lambda got, _ended: lines.extend(got), 5)
    assert lines[-1] == b"0, GPU-"  # what the dying nvidia-smi printed last, without its newline
    assert len(lines) == 1 + 2 * 8  # two whole intervals of eight GPUs before it
    assert status is None  # killed: no exit status


async def test_silence_for_the_timeout_raises_and_closes_the_channel(fleet: Fleet) -> None:
    node = calm(fleet)
    fleet.faults.set(node, Fault.STALL_COMMAND)
    async with connect(fleet, node) as conn:
        started = asyncio.get_running_loop().time()
        with pytest.raises(StreamSilent) as silent:
            await run_line_stream(conn, STREAM.command_line, lambda _lines, _ended: None, 0.5)
        assert (silent.value.silent_s, silent.value.printed) == (0.5, False)
        waited_s = asyncio.get_running_loop().time() - started
        fleet.faults.set(node)  # healthy again: the same connection still runs commands
        done = await asyncio.wait_for(conn.run("nvidia-smi -L", check=False), 5)
    assert 0.5 <= waited_s < 2.0
    assert done.exit_status == 0


async def test_a_slow_first_output_is_waited_for_longer_than_a_pause_between_lines(fleet: Fleet) -> None:
    node = calm(fleet)
    fleet.faults.set(node, Fault.SLOW)  # every command answers 1 s late
    lines: list[bytes] = []
    async with connect(fleet, node) as conn:
        with pytest.raises(StreamSilent) as silent:
            await run_line_stream(conn, "nvidia-smi -L", lambda got, _ended: lines.extend(got), 0.5)
        assert silent.value.printed is False and not lines
        status = await run_line_stream(conn, "nvidia-smi -L", lambda got, _ended: lines.extend(got), 0.5, 3.0)
    assert status == 0 and len(lines) == 8


async def test_a_callback_that_raises_ends_the_stream_with_its_error(fleet: Fleet) -> None:
    calls = 0

    def broken(_lines: list[bytes], _ended: bool) -> None:
        nonlocal calls
        calls += 1
        raise ValueError("the parser broke")

    async with connect(fleet, calm(fleet)) as conn:
        with pytest.raises(ValueError, match="the parser broke"):
            await asyncio.wait_for(run_line_stream(conn, STREAM.command_line, broken, 5), 5)
    assert calls == 1  # the stream stopped at the first failure
