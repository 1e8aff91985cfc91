"""The fake fleet for bench_collect: its process (gputop.sim.fake_fleet, started apart so the CPU figures
are gputop's alone), and the ssh_config it writes, read once."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

import asyncssh

from gputop.sources.ssh_connect import PREFERRED_CIPHERS

LAG_PROBE_S = 0.1  # the period of the fleet process's own event-loop lag probe
CLK_TCK = os.sysconf("SC_CLK_TCK")

# -- the fleet process ------------------------------------------------------------------------------------
# Serves the fleet until SIGTERM or until its stdin closes. Protocol on stdin: "window" -> one JSON line
# with the event-loop lag of its own 100 ms probe since the previous "window".
#
# The fleet answers gputop's commands only, and gputop never runs a non-streaming --query-gpu, so the
# fleet has no reply for one. For the exec-per-tick phase this process teaches it one (only when it does
# not already answer it): the same CSV lines, from the same formatter, that one interval of the stream
# carries, followed by exit status 0 -- what a real `nvidia-smi --query-gpu ... --format=csv` prints.
FLEET_CHILD = r"""
import asyncio, json, logging, shlex, signal, sys
logging.getLogger("asyncssh").setLevel(logging.WARNING)
from gputop.sources.commands import metrics_stream
from gputop.sim.fake_fleet import responder as R, server as S

nodes, state_dir, probe_s = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
S.raise_open_file_limit()  # a socket per connection (start_fleet raises it too)
ONCE = metrics_stream(1.0).argv[:-2]
ONCE_LINE = shlex.join(ONCE)
native = not isinstance(S.parse_command(ONCE_LINE), R.Unknown)
if not native:
    original_parse, original_answer = S.parse_command, R.Responder.answer

    def parse_command(line):
        command = original_parse(line)
        if isinstance(command, R.Unknown) and line == ONCE_LINE:
            return R.OneShot("query_gpu_once", ONCE)
        return command

    def answer(self, node, command):
        if command.name == "query_gpu_once":
            return self.failure(node, command.argv[0]) or R.Reply(self.stream_lines(node))
        return original_answer(self, node, command)

    S.parse_command = parse_command
    R.Responder.answer = answer

lags = []

async def probe():
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + probe_s
        await asyncio.sleep(probe_s)
        lags.append(loop.time() - due)

async def commands(stop):
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        if line.strip() == b"window":
            got = sorted(lags)
            lags.clear()
            p99 = got[min(len(got) - 1, max(0, int(0.99 * len(got) + 0.5) - 1))] if got else None
            print(json.dumps({"n": len(got), "p99": p99, "max": got[-1] if got else None}), flush=True)
    stop.set()

async def main():
    fleet = await S.start_fleet(nodes=nodes, port=0, state_dir=state_dir)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    tasks = [asyncio.ensure_future(probe()), asyncio.ensure_future(commands(stop))]
    print(json.dumps({
        "port": fleet.port,
        "config": str(fleet.config_path),
        "unresponsive": sorted(fleet.unresponsive_nodes),
        "exec_reply": "native" if native else "benchmark shim",
    }), flush=True)
    try:
        await stop.wait()
    finally:
        for task in tasks:
            task.cancel()
        await fleet.close()

asyncio.run(main())
"""


@dataclasses.dataclass
class FleetInfo:
    port: int
    config_path: Path
    unresponsive: frozenset[str]
    exec_reply: str


class FleetProcess:
    """The fake fleet in a child process, and what /proc says about it."""

    def __init__(self, nodes: int, state_dir: Path) -> None:
        self.log = tempfile.TemporaryFile(mode="w+b")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", FLEET_CHILD, str(nodes), str(state_dir), str(LAG_PROBE_S)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            bufsize=1,
        )
        self.info: FleetInfo | None = None

    def wait_ready(self) -> FleetInfo:
        line = self._stdout().readline()
        if not line:
            self.proc.wait(timeout=10)
            raise RuntimeError(f"the fleet process exited ({self.proc.returncode}):\n{self.stderr_tail()}")
        data = json.loads(line)
        self.info = FleetInfo(
            data["port"], Path(data["config"]), frozenset(data["unresponsive"]), data["exec_reply"]
        )
        return self.info

    def _stdout(self) -> IO[str]:
        assert self.proc.stdout is not None
        return self.proc.stdout

    def cpu_s(self) -> float:
        """utime + stime of the fleet process, from /proc/<pid>/stat."""
        with open(f"/proc/{self.proc.pid}/stat", encoding="ascii") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        # rest[0] is field 3 (state); utime and stime are fields 14 and 15
        return (int(rest[11]) + int(rest[12])) / CLK_TCK

    def lag_window(self) -> dict[str, Any]:
        """The fleet loop's lag since the previous call (its own 100 ms probe)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write("window\n")
        self.proc.stdin.flush()
        line = self._stdout().readline()
        return json.loads(line) if line else {"n": 0, "p99": None, "max": None}

    def stderr_tail(self) -> str:
        self.log.seek(0)
        return self.log.read()[-3000:].decode("utf-8", errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()
        self.log.close()


# -- the fleet's ssh_config, read once ----------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class HostEntry:
    hostname: str
    port: int
    user: str
    identity_file: str
    known_hosts: str


def read_fleet_ssh_config(path: Path) -> dict[str, HostEntry]:
    """The fleet's ssh_config (a Host block per node) read once: node -> where and as whom it logs in."""
    blocks: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, _, value = line.partition(" ")
        value = value.strip().strip('"')
        if key.lower() == "host":
            current = blocks.setdefault(value, {})
        elif current is not None:
            current[key.lower()] = value
    return {
        host: HostEntry(b["hostname"], int(b["port"]), b["user"], b["identityfile"], b["userknownhostsfile"])
        for host, b in blocks.items()
        if {"hostname", "port", "user", "identityfile", "userknownhostsfile"} <= b.keys()
    }


async def connect_entry(entry: HostEntry, timeout_s: float) -> Any:
    """A connection with the options the fleet's ssh_config gives a node (read once), gputop's own
    cipher order and, as gputop's node links, no keepalives: the baselines differ from gputop only in
    what they do with the connection."""
    return await asyncssh.connect(
        entry.hostname,
        entry.port,
        username=entry.user,
        client_keys=[entry.identity_file],
        known_hosts=entry.known_hosts,
        config=[],
        connect_timeout=timeout_s,
        encryption_algs=list(PREFERRED_CIPHERS),
    )
