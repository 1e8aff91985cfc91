"""What a round of slow facts costs gputop: through the node's fact shell, against an exec of ``sh -c``.

    python bench/bench_fact_rounds.py [--nodes 300] [--seconds 20] [--period 2]

The fake fleet runs in a separate process (as in bench_collect.py), so the CPU figures are gputop's alone.
Each node gets one persistent connection; then, in alternating phases of the same length, every node runs
a round of ``ibstat`` and the Xid log every ``--period`` seconds (spread at random):

- **fact shell**: the round written to the node's long-lived ``sh`` (gputop.sources.ssh_fact_shell), what
  gputop does;
- **exec**: the same script as one exec of ``sh -c``, read the same way: a channel opened, an exec
  request, the output, an exit status, an EOF and the closes, per round.

Both phases run twice, interleaved, and print CPU per round and the exec/shell ratio side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import random
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from bench_collect import FleetProcess, connect_entry, read_fleet_ssh_config
from bench_report import Row, cpu_model, print_table

from gputop.sources.commands import default_commands
from gputop.sources.fact_round import new_nonce, round_script, split_round_output
from gputop.sources.ssh_fact_shell import FactShell

FORMATS = {"ms": "{:.3f} ms", "%": "{:.1f} %", "x": "{:.2f}x", "/s": "{:.0f} /s"}
Round = Callable[[Any], Awaitable[None]]


def round_argvs() -> list[tuple[str, ...]]:
    commands = default_commands()
    return [commands["ibstat"].argv, commands["xid"].argv]


async def exec_round(conn: Any, argvs: Sequence[Sequence[str]]) -> None:
    """The round as one ``sh -c`` exec, its output split as the shell's is."""
    nonce = new_nonce()
    command_line = shlex.join(("sh", "-c", round_script(argvs, nonce)))
    done = await conn.run(command_line, encoding=None, timeout=10.0, check=False)
    steps = split_round_output(done.stdout or b"", done.stderr or b"", nonce, len(argvs))
    if steps[0].status != 0:
        raise RuntimeError(f"the exec round failed: {steps}")


async def phase(conns: list[Any], one_round: Round, seconds: float, period_s: float) -> tuple[float, int]:
    """(CPU seconds, rounds) of every node running ``one_round`` every ``period_s`` for ``seconds``."""
    rounds = 0
    stop_at = time.monotonic() + seconds

    async def node(conn: Any) -> None:
        nonlocal rounds
        await asyncio.sleep(random.uniform(0, period_s))  # noqa: S311 - spreading load, not secrets
        while time.monotonic() < stop_at:
            await one_round(conn)
            rounds += 1
            await asyncio.sleep(period_s)

    cpu_started = time.process_time()
    await asyncio.gather(*(node(conn) for conn in conns))
    return time.process_time() - cpu_started, rounds


async def run(nodes: int, seconds: float, period_s: float) -> int:
    state = Path(tempfile.mkdtemp(prefix="gputop-bench-rounds-"))
    fleet = FleetProcess(nodes + 1, state / "fleet")
    try:
        info = fleet.wait_ready()
        entries = read_fleet_ssh_config(info.config_path.parent / "ssh_config")
        names = [name for name in entries if name not in info.unresponsive][:nodes]
        conns = await asyncio.gather(*(connect_entry(entries[name], 30.0) for name in names))
        argvs = round_argvs()
        timeouts = [10.0] * len(argvs)
        shells = {id(conn): FactShell(conn) for conn in conns}

        async def shell_round(conn: Any) -> None:
            result = await shells[id(conn)].run(argvs, timeouts)
            if result.steps[0].status != 0:
                raise RuntimeError(f"the shell round failed: {result}")

        ways: dict[str, Round] = {
            "fact shell": shell_round,
            "exec of sh -c": functools.partial(exec_round, argvs=argvs),
        }
        for way in ways.values():  # warm-up: every shell started, every code path run once
            await asyncio.gather(*(way(conn) for conn in conns))
        per_round_ms: dict[str, list[float]] = {name: [] for name in ways}
        rate: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(2):
            for name, way in ways.items():
                cpu_s, rounds = await phase(conns, way, seconds, period_s)
                per_round_ms[name].append(1000 * cpu_s / max(rounds, 1))
                rate[name].append(rounds / seconds)
        for conn in conns:
            conn.close()
    finally:
        fleet.stop()
        shutil.rmtree(state, ignore_errors=True)

    python = sys.version.split()[0]
    print(f"cpu: {cpu_model()}; python {python}; {len(names)} nodes, a round every {period_s:g} s each")
    rows: list[Row] = []
    for name in ways:
        values = per_round_ms[name]
        rows.append(
            Row(
                f"{name}: gputop CPU per round (two phases of {seconds:g} s)",
                min(values),
                "ms",
                note=", ".join(f"{v:.3f}" for v in values) + f"; {sum(rate[name]) / 2:.0f} rounds/s",
            )
        )
    ratio = min(per_round_ms["exec of sh -c"]) / min(per_round_ms["fact shell"])
    rows.append(Row("exec / fact shell, CPU per round", ratio, "x"))
    print_table(rows, FORMATS)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--period", type=float, default=2.0, help="seconds between a node's rounds")
    args = parser.parse_args(argv)
    return asyncio.run(run(args.nodes, args.seconds, args.period))


if __name__ == "__main__":
    sys.exit(main())
