"""Collection benchmark: gputop's SSH pipeline against 1,000 fake nodes, headless, next to exec-per-tick.

    python bench/bench_collect.py [--nodes 1000] [--seconds 60] [--quick] [--profile]
                                  [--no-exec] [--connect-limit S]

The fake fleet (gputop.sim.fake_fleet) runs in a separate process, so the CPU figures are gputop's
alone. This process runs the real pipeline without a UI: SshSource (one persistent connection and one
streaming nvidia-smi per node, the slow facts on their own cadences) under a Poller ticking every second.
After the streaming phase the same fleet is polled the other common way, one non-streaming
`nvidia-smi --query-gpu` exec per node per second over persistent connections, for the same duration.

Every figure comes from one run and is printed beside its target; a ratio under 1 is within target.
A missed target does not fail the run: the exit status is non-zero only when the benchmark itself breaks.
See bench/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import dataclasses
import gc
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import asyncssh
from bench_report import Row, cpu_model, percentile, print_table, profile_text

from gputop.clock import SystemClock
from gputop.config_file import load_config
from gputop.core.config import ClusterConfig, Config
from gputop.core.models import GpuSample, NodeSample, SourceResult
from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.query_gpu import parse_query_gpu
from gputop.core.summary import ClusterView
from gputop.gc_tuning import freeze_after_start
from gputop.poller import Poller
from gputop.sources.commands import CommandSpec
from gputop.sources.ssh import SshSource, node_sample, raise_open_file_limit
from gputop.sources.ssh_connect import PREFERRED_CIPHERS
from gputop.sources.ssh_node import NodeLink
from gputop.sources.ssh_stream import run_line_stream

GPUS_PER_NODE = 8
INTERVAL_S = 1.0
# The first run of every slow fact lands within 5 s of a node connecting (NodeLink._fact_rounds spreads
# them): the steady-state window starts this long after the last node's first sample.
STREAM_SETTLE_S = 6.0
# The cycle of slow facts a window must hold for its CPU figure to be the steady one: the slow interval
# (a minute), whose rounds the 30 s facts join every other time and the 5-minute ones every fifth.
REGULAR_ROUND_S = 60.0
EXEC_SETTLE_S = 3.0
CONNECT_LIMIT_S = 60.0
LAG_PROBE_S = 0.1
PROFILE_MAX_S = 15.0
# Longer than SshSource.close() takes to give up on tasks by itself (5 rounds of 1 s), so the
# benchmark steps in only when close() would otherwise never return.
STOP_GRACE_S = 15.0
STOP_LIMIT_S = 120.0

TARGET_AGE_P95_S = 2.0
TARGET_CPU_PCT = 15.0
TARGET_RSS_MB = 250.0
TARGET_EXEC_OVER_STREAM = 4.0
FLEET_SATURATED_PCT = 90.0  # the fleet is one asyncio loop: one core is all it can use
FLEET_LAG_SATURATED_S = 1.0  # a whole interval: its replies slip by a tick
MACHINE_SATURATED_PCT = 95.0
OTHERS_BUSY_PCT = 25.0  # other processes (tests, builds) this busy make the figures noisy

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


# -- measuring ----------------------------------------------------------------------------------------------


def machine_cpu_s() -> tuple[float, float, float]:
    """(busy, total, irq) CPU seconds of the whole machine, all cores, from /proc/stat: busy is all but
    idle and iowait; irq is interrupts, softirqs (loopback traffic is handled there) and hypervisor steal,
    time no process's own figures include."""
    with open("/proc/stat", encoding="ascii") as f:
        values = [int(v) for v in f.readline().split()[1:]] + [0] * 8
    user, nice, system, idle, iowait, irq, softirq, steal = values[:8]
    total = user + nice + system + idle + iowait + irq + softirq + steal  # guest time is counted in user
    return (total - idle - iowait) / CLK_TCK, total / CLK_TCK, (irq + softirq + steal) / CLK_TCK


def proc_status_kib(field: str) -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return float(line.split()[1])
    return math.nan


class LagProbe:
    """This process's event-loop lag: how late a 100 ms sleep wakes up."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + LAG_PROBE_S
            await asyncio.sleep(LAG_PROBE_S)
            self.lags.append(loop.time() - due)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


class GcWatch:
    """Garbage collections while active: how many of each generation, and how long they paused the loop."""

    def __init__(self) -> None:
        self.active = False
        self.pauses_s: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self._started = 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self.active:
            self.pauses_s[info["generation"]].append(time.perf_counter() - self._started)

    def close(self) -> None:
        gc.callbacks.remove(self._callback)


def freeze_gc_like_the_app() -> None:
    """What GputopApp does after its first view (gputop.tui.app._freeze_gc), so collections cost here
    what they cost there."""
    freeze_after_start()


class TickRecorder:
    """The poller's `on_view`: per tick, the age of each answering node's newest sample."""

    def __init__(self, poller_ref: list[Poller], answering: frozenset[str]) -> None:
        self.poller_ref = poller_ref
        self.answering = answering
        self.active = False
        self.ages: list[float] = []
        self.missing = 0  # (node, tick) pairs in the window with no sample yet
        self.fresh = 0  # (node, tick) pairs whose sample is newer than at the previous tick
        self.ticks = 0
        self.tick_cpu_s: list[float] = []
        self.node_ticks = 0
        self.gc_frozen = False
        self._previous: dict[str, float | None] = {}

    def reset(self) -> None:
        self.ages.clear()
        self.missing = self.fresh = self.ticks = self.node_ticks = 0
        self.tick_cpu_s.clear()

    def __call__(self, view: ClusterView) -> None:
        now = time.time()
        previous = self._previous
        if not self.gc_frozen:
            self.gc_frozen = True
            asyncio.get_running_loop().call_soon(freeze_gc_like_the_app)
        if not self.active:
            for node in view.snapshot.nodes:
                previous[node.name] = node.sampled_at_s
            return
        self.ticks += 1
        self.tick_cpu_s.append(self.poller_ref[0].last_tick_cpu_s)
        answering = self.answering
        ages = self.ages
        for node in view.snapshot.nodes:
            name = node.name
            if name not in answering:
                continue
            self.node_ticks += 1
            sampled = node.sampled_at_s
            if sampled is None:
                self.missing += 1
            else:
                ages.append(now - sampled)
                if previous.get(name) != sampled:
                    self.fresh += 1
            previous[name] = sampled


@dataclasses.dataclass
class Window:
    """One steady-state window: CPU of this process, of the fleet and of the machine, and the ticks in it."""

    wall_s: float = 0.0
    cpu_s: float = 0.0
    fleet_cpu_s: float = 0.0
    machine_busy_s: float = 0.0
    machine_total_s: float = 0.0
    machine_irq_s: float = 0.0
    ages: list[float] = dataclasses.field(default_factory=list)
    missing: int = 0
    fresh: int = 0
    node_ticks: int = 0
    ticks: int = 0
    tick_cpu_s: list[float] = dataclasses.field(default_factory=list)
    lags: list[float] = dataclasses.field(default_factory=list)
    fleet_lag: dict[str, Any] = dataclasses.field(default_factory=dict)
    gc_pauses_s: dict[int, list[float]] = dataclasses.field(default_factory=dict)

    @property
    def cpu_pct(self) -> float:
        return 100 * self.cpu_s / self.wall_s if self.wall_s else math.nan

    @property
    def fleet_cpu_pct(self) -> float:
        return 100 * self.fleet_cpu_s / self.wall_s if self.wall_s else math.nan

    @property
    def others_pct(self) -> float:
        """CPU of everything else on the machine, % of one core."""
        if not self.wall_s:
            return math.nan
        others_s = self.machine_busy_s - self.machine_irq_s - self.cpu_s - self.fleet_cpu_s
        return max(0.0, 100 * others_s / self.wall_s)  # clock-tick rounding can leave it a little below 0

    @property
    def irq_pct(self) -> float:
        return 100 * self.machine_irq_s / self.wall_s if self.wall_s else math.nan

    @property
    def machine_pct(self) -> float:
        """Busy share of all cores, 0..100."""
        return 100 * self.machine_busy_s / self.machine_total_s if self.machine_total_s else math.nan


async def measure_window(
    seconds: float, fleet: FleetProcess, recorder: TickRecorder, probe: LagProbe
) -> Window:
    fleet.lag_window()  # start the fleet's lag window
    recorder.reset()
    probe.lags.clear()
    gc_watch = GcWatch()
    gc_watch.active = True
    recorder.active = True
    fleet0 = fleet.cpu_s()
    busy0, total0, irq0 = machine_cpu_s()
    wall0 = time.monotonic()
    cpu0 = time.process_time()
    await asyncio.sleep(seconds)
    cpu1 = time.process_time()
    wall1 = time.monotonic()
    busy1, total1, irq1 = machine_cpu_s()
    fleet1 = fleet.cpu_s()
    recorder.active = False
    gc_watch.active = False
    gc_watch.close()
    return Window(
        wall_s=wall1 - wall0,
        cpu_s=cpu1 - cpu0,
        fleet_cpu_s=fleet1 - fleet0,
        machine_busy_s=busy1 - busy0,
        machine_total_s=total1 - total0,
        machine_irq_s=irq1 - irq0,
        ages=list(recorder.ages),
        missing=recorder.missing,
        fresh=recorder.fresh,
        node_ticks=recorder.node_ticks,
        ticks=recorder.ticks,
        tick_cpu_s=list(recorder.tick_cpu_s),
        lags=list(probe.lags),
        fleet_lag=fleet.lag_window(),
        gc_pauses_s={g: list(p) for g, p in gc_watch.pauses_s.items()},
    )


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


# -- stopping ---------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Stopped:
    """How a source's close() went."""

    close_s: float = math.nan  # poller.stop() until its run() (which closes the source) returned
    recancelled: int = 0  # tasks cancelled, still running after a grace period, cancelled again by us
    left_running: int = 0  # of the source's own tasks, still running when close() had returned
    others: dict[str, int] = dataclasses.field(default_factory=dict)  # every other task still alive then


async def stop_poller(
    poller: Poller, task: asyncio.Task[None], tasks: Sequence[asyncio.Task[Any]]
) -> Stopped:
    """Stops the poller, whose run() then closes its sources, waits for it, and says what close() left.

    On Python 3.11 a task awaiting `asyncio.wait_for` can swallow its cancellation (when the awaited
    thing finishes in the same loop iteration) and keep running. A close() that waits for its tasks can
    then wait forever: tasks of ``tasks`` cancelled and still running after a grace period are cancelled
    again. A close() that stops waiting leaves them running: they are counted, and every task still
    alive besides this one is cancelled until it ends, so nothing of this phase runs into the next."""
    stopped = Stopped()
    started = time.monotonic()
    poller.stop()
    again: set[asyncio.Task[Any]] = set()
    while True:
        done, _ = await asyncio.wait({task}, timeout=STOP_GRACE_S)
        if done:
            break
        if time.monotonic() - started > STOP_LIMIT_S:
            raise RuntimeError("the poller did not stop: its source's close() never returned")
        stuck = [t for t in tasks if not t.done() and t.cancelling()]
        again.update(stuck)
        for t in stuck:
            t.cancel()
    stopped.close_s = time.monotonic() - started
    task.result()
    stopped.recancelled = len(again)
    stopped.left_running = sum(1 for t in tasks if not t.done())
    stopped.others = await cancel_leftovers(exclude=set(tasks))
    return stopped


def task_chain(task: asyncio.Task[Any]) -> str:
    """Where a task waits: its coroutine chain, innermost last."""
    names = []
    coro: Any = task.get_coro()
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None:
            names.append(f"{frame.f_code.co_name}:{frame.f_lineno}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return " > ".join(names) or repr(task.get_coro())


async def cancel_leftovers(exclude: set[asyncio.Task[Any]] | None = None) -> dict[str, int]:
    """Cancels every task still alive besides this one (asyncio.run would, but only once, and would then
    wait forever on a task that swallows it); returns where those not in ``exclude`` were waiting."""
    current = asyncio.current_task()
    left = [t for t in asyncio.all_tasks() if t is not current and not t.done()]
    where: dict[str, int] = {}
    for t in left:
        if exclude is None or t not in exclude:
            chain = task_chain(t)
            where[chain] = where.get(chain, 0) + 1
    for _ in range(20):
        left = [t for t in left if not t.done()]
        if not left:
            break
        for t in left:
            t.cancel()
        await asyncio.wait(left, timeout=1.0)
    return where


# -- counting the slow facts gputop runs ------------------------------------------------------------------
class FactCounter:
    """Counts the slow-fact commands the links run, the rounds they run in (a wrapper on each live
    link's `_run_round`: the facts due together run as one script in the node's fact shell), and the
    execs of nodes that run no script (one exec a fact)."""

    def __init__(self) -> None:
        self.active = False
        self.runs: dict[str, int] = {}
        self.rounds = 0
        self.execs = 0

    def install(self, links: Iterable[NodeLink]) -> None:
        counter = self
        for link in links:
            original = getattr(link, "_run_round", None)
            if not callable(original):
                print(
                    "  warning: NodeLink._run_round is gone; slow-fact counts will be zero", file=sys.stderr
                )
                return

            async def run_round(
                conn: Any,
                shell: Any,
                specs: list[CommandSpec],
                _original: Any = original,
                _link: NodeLink = link,
            ) -> None:
                if counter.active:
                    for spec in specs:
                        counter.runs[spec.name] = counter.runs.get(spec.name, 0) + 1
                    if _link._scripts:
                        counter.rounds += 1
                    else:
                        counter.execs += len(specs)
                await _original(conn, shell, specs)

            link._run_round = run_round  # type: ignore[method-assign]


# -- the exec-per-tick baseline -----------------------------------------------------------------------------
class ExecLink:
    """One node polled the exec way: a persistent connection, one non-streaming --query-gpu per tick.
    Holds what `node_sample` reads from a NodeLink, so the samples are built exactly as gputop's are."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.conn: Any = None
        self.gpus: tuple[GpuSample, ...] = ()
        self.processes_by_uuid: dict[str, Any] = {}  # the exec way runs no processes fact
        self.gpus_processes: dict[str, Any] | None = self.processes_by_uuid
        self.sampled_at_s: float | None = None
        self.facts: dict[str, Any] = {}
        self.fact_errors: dict[str, str] = {}
        self.derived: dict[str, tuple[Any, Any]] = {}
        self.error: str | None = None
        self.version = 0
        self.facts_version = 0  # the exec way runs no slow facts
        self.connected = False  # what node_sample says of a node before its first sample


class ExecStats:
    def __init__(self) -> None:
        self.active = False
        self.done = 0
        self.failed = 0
        self.skipped = 0  # intervals missed because the previous exec was still running
        self.latencies_s: list[float] = []
        self.parse_cpu_s = 0.0
        self.errors: dict[str, int] = {}

    def reset(self) -> None:
        self.done = self.failed = self.skipped = 0
        self.latencies_s.clear()
        self.parse_cpu_s = 0.0
        self.errors.clear()


class ExecPerTickSource:
    """The approach of all-smi's SSH mode and gpustat-web: every node, every tick, one exec of the
    non-streaming `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`, parsed by gputop's
    parser; `collect` hands the poller the latest result of each node, like SshSource."""

    def __init__(
        self, cluster: ClusterConfig, links: Sequence[ExecLink], command_line: str, fields: Sequence[str]
    ) -> None:
        self.name = f"exec:{cluster.name}"
        self.cluster = cluster
        self.links = list(links)
        self.command_line = command_line
        self.fields = tuple(fields)
        self.stats = ExecStats()
        self._tasks: list[asyncio.Task[None]] = []
        self._samples: dict[str, tuple[int, NodeSample]] = {}

    async def start(self) -> None:
        # Rounds: every node's exec starts at the same moment each interval, as a poller's tick would.
        first_at = asyncio.get_running_loop().time() + 0.05
        self._tasks = [asyncio.create_task(self._loop(link, first_at)) for link in self.links]

    async def _loop(self, link: ExecLink, due: float) -> None:
        loop = asyncio.get_running_loop()
        stats = self.stats
        while True:
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            started = loop.time()
            try:
                result = await link.conn.run(self.command_line, encoding=None, timeout=5.0, check=False)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # a failed exec is the node's error, as in any poller
                self._failed(link, f"{type(err).__name__}: {err}")
            else:
                if stats.active:
                    stats.latencies_s.append(loop.time() - started)
                self._read(link, result)
            due += INTERVAL_S
            now = loop.time()
            if due < now:  # the exec took longer than an interval: skip to the next round
                missed = int((now - due) / INTERVAL_S) + 1
                due += missed * INTERVAL_S
                if stats.active:
                    stats.skipped += missed

    def _read(self, link: ExecLink, result: Any) -> None:
        stats = self.stats
        cpu0 = time.process_time()
        out = result.stdout or b""
        text = out.decode("utf-8", errors="replace") if isinstance(out, bytes) else out
        parsed = parse_query_gpu(text, self.fields) if result.exit_status == 0 else None
        if stats.active:
            stats.parse_cpu_s += time.process_time() - cpu0
        if parsed is None or isinstance(parsed, ParseFailure):
            reason = (
                f"exit status {result.exit_status}: {text.strip()[:80]}" if parsed is None else parsed.reason
            )
            self._failed(link, reason)
            return
        link.gpus = parsed.gpus
        link.sampled_at_s = time.time()
        link.error = None
        link.version += 1
        if stats.active:
            stats.done += 1

    def _failed(self, link: ExecLink, reason: str) -> None:
        if self.stats.active:
            self.stats.failed += 1
            self.stats.errors[reason] = self.stats.errors.get(reason, 0) + 1
        if link.error != reason:
            link.error = reason
            link.version += 1

    async def collect(self, now_s: float) -> SourceResult:
        return SourceResult(nodes=tuple(self._sample(link) for link in self.links))

    def _sample(self, link: ExecLink) -> NodeSample:
        cached = self._samples.get(link.name)
        if cached is not None and cached[0] == link.version:
            return cached[1]
        sample = node_sample(link, self.cluster.gpus_per_node)  # type: ignore[arg-type]
        self._samples[link.name] = (link.version, sample)
        return sample

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for link in self.links:
            if link.conn is not None:
                link.conn.close()
        await asyncio.gather(
            *(link.conn.wait_closed() for link in self.links if link.conn is not None), return_exceptions=True
        )


# -- the run ------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class StreamResult:
    connect_s: float = math.nan  # start() to the last answering node's first sample
    connect_half_s: float = math.nan  # ... to half of them
    connect_90_s: float = math.nan  # ... to 90 % of them
    connected_s: float = math.nan  # start() to the last answering node's connection up
    never: int = 0  # answering nodes with no sample within CONNECT_LIMIT_S
    connect_cpu_s: float = 0.0
    connect_wall_s: float = math.nan
    window: Window = dataclasses.field(default_factory=Window)
    facts: dict[str, int] = dataclasses.field(default_factory=dict)
    fact_rounds: int = 0
    fact_execs: int = 0
    fact_every_s: dict[str, float] = dataclasses.field(default_factory=dict)  # each slow fact's cadence
    rss_mb: float = math.nan
    hwm_mb: float = math.nan
    not_ok: int = 0  # answering nodes not OK at the end of the window
    profile: str = ""
    stopped: Stopped = dataclasses.field(default_factory=Stopped)


@dataclasses.dataclass
class ExecResult:
    connect_s: float = math.nan
    connect_failed: int = 0
    window: Window = dataclasses.field(default_factory=Window)
    done: int = 0
    failed: int = 0
    skipped: int = 0
    latencies_s: list[float] = dataclasses.field(default_factory=list)
    parse_cpu_s: float = 0.0
    errors: dict[str, int] = dataclasses.field(default_factory=dict)
    rss_mb: float = math.nan
    hwm_mb: float = math.nan
    stopped: Stopped = dataclasses.field(default_factory=Stopped)


def bench_config(config: Config) -> tuple[ClusterConfig, Config]:
    config = dataclasses.replace(config, poll=dataclasses.replace(config.poll, interval_s=INTERVAL_S))
    return config.clusters[0], config


def recorded_poller(
    cluster: ClusterConfig, config: Config, clock: SystemClock, source: Any, watched: frozenset[str]
) -> tuple[Poller, TickRecorder]:
    """A Poller over ``source`` whose every view is recorded for the nodes in ``watched``."""
    holder: list[Poller] = []
    recorder = TickRecorder(holder, watched)
    poller = Poller(
        cluster=cluster.name,
        sources=[source],
        clock=clock,
        poll=config.poll,
        thresholds=config.thresholds,
        on_view=recorder,
    )
    holder.append(poller)
    return poller, recorder


async def stream_phase(
    config: Config,
    fleet: FleetProcess,
    info: FleetInfo,
    seconds: float,
    profile_s: float,
    connect_limit_s: float,
) -> StreamResult:
    cluster, config = bench_config(config)
    answering = frozenset(cluster.node_names) - info.unresponsive
    clock = SystemClock()
    source = SshSource(cluster, config.poll, clock.now)
    poller, recorder = recorded_poller(cluster, config, clock, source, answering)
    probe = LagProbe()
    probe.start()
    facts = FactCounter()
    result = StreamResult()

    cpu0 = time.process_time()
    t0 = time.monotonic()
    task = asyncio.create_task(poller.run())  # Poller.run calls source.start() first
    while not source.links:
        await asyncio.sleep(0)
    facts.install(source.links.values())
    waiting = set(answering)
    unconnected = set(waiting)
    total = len(answering)
    while (waiting or unconnected) and time.monotonic() - t0 < connect_limit_s:
        await asyncio.sleep(0.02)
        now = time.monotonic() - t0
        if unconnected:
            up = {n for n in unconnected if source.links[n].connected or source.links[n].sampled_at_s}
            unconnected -= up
            if not unconnected:
                result.connected_s = now
        if waiting:
            waiting = {n for n in waiting if source.links[n].sampled_at_s is None}
            sampled = total - len(waiting)
            if math.isnan(result.connect_half_s) and 2 * sampled >= total:
                result.connect_half_s = now
            if math.isnan(result.connect_90_s) and 10 * sampled >= 9 * total:
                result.connect_90_s = now
            if not waiting:
                result.connect_s = now
    result.never = len(waiting)
    result.connect_wall_s = time.monotonic() - t0
    result.connect_cpu_s = time.process_time() - cpu0
    streaming = len(answering) - result.never
    print(
        f"  {streaming} of {total} answering nodes streaming after {result.connect_wall_s:.2f} s"
        f"{'' if not result.never else f' (gave up waiting on {result.never})'}"
        f"; settling {STREAM_SETTLE_S:g} s (first slow facts), then measuring {seconds:g} s ...",
        flush=True,
    )
    await asyncio.sleep(STREAM_SETTLE_S)
    facts.active = True
    result.window = await measure_window(seconds, fleet, recorder, probe)
    facts.active = False
    result.facts = dict(facts.runs)
    result.fact_rounds = facts.rounds
    result.fact_execs = facts.execs
    result.fact_every_s = {n: c.interval_s for n, c in source.commands.items() if not c.stream}
    result.rss_mb = proc_status_kib("VmRSS") / 1024
    result.hwm_mb = proc_status_kib("VmHWM") / 1024
    view = poller.view
    if view is not None:
        result.not_ok = sum(
            1 for n in view.snapshot.nodes if n.name in answering and n.reachability.value != "ok"
        )
    if profile_s > 0:
        print(f"  profiling the streaming pipeline for {profile_s:g} s (figures above taken without) ...")
        profiler = cProfile.Profile()
        profiler.enable()
        await asyncio.sleep(profile_s)
        profiler.disable()
        result.profile = profile_text(profiler, f"streaming pipeline, {profile_s:g} s", 25)
    link_tasks = list(source._tasks)
    await probe.stop()
    result.stopped = await stop_poller(poller, task, link_tasks)
    return result


def one_shot_query(template: SshSource) -> tuple[str, list[str]]:
    """(the command line, its fields) of gputop's stream query without its loop option: one sample."""
    spec = next(c for c in template.commands.values() if c.stream)
    argv = list(spec.argv)
    if "-lms" in argv:
        del argv[argv.index("-lms") : argv.index("-lms") + 2]
    fields = next(a.removeprefix("--query-gpu=").split(",") for a in argv if a.startswith("--query-gpu="))
    return " ".join(argv), fields  # nvidia-smi's arguments need no quoting


async def exec_phase(config: Config, fleet: FleetProcess, info: FleetInfo, seconds: float) -> ExecResult:
    cluster, config = bench_config(config)
    clock = SystemClock()
    result = ExecResult()
    # Persistent connections with the options the fleet's ssh_config gives each node, read once (what
    # connects gputop's way costs is the streaming phase's figure, not this one's), under the same
    # handshake cap; the unresponsive node is left out, since its handshake never completes.
    hosts = read_fleet_ssh_config(Path(os.path.expanduser(cluster.ssh.config_file)))
    template = SshSource(cluster, config.poll, clock.now)
    command_line, fields = one_shot_query(template)
    handshakes = asyncio.Semaphore(cluster.ssh.max_concurrent_handshakes)
    names = [n for n in cluster.node_names if n not in info.unresponsive]
    links = [ExecLink(n) for n in names]

    settings = template.settings

    async def connect(link: ExecLink) -> None:
        entry = hosts[link.name]
        try:
            async with handshakes:
                link.conn = await connect_entry(entry, settings.connect_timeout_s)
            link.connected = True
        except Exception as err:  # counted, and the node shows the error
            link.error = f"connect: {type(err).__name__}: {err}"

    t0 = time.monotonic()
    await asyncio.gather(*(connect(link) for link in links))
    result.connect_s = time.monotonic() - t0
    live = [link for link in links if link.conn is not None]
    result.connect_failed = len(links) - len(live)

    source = ExecPerTickSource(cluster, live, command_line, fields)
    poller, recorder = recorded_poller(cluster, config, clock, source, frozenset(link.name for link in live))
    probe = LagProbe()
    probe.start()
    print(
        f"  {len(live)} connections open after {result.connect_s:.2f} s; exec every {INTERVAL_S:g} s on each,"
        f" settling {EXEC_SETTLE_S:g} s, then measuring {seconds:g} s ...",
        flush=True,
    )
    task = asyncio.create_task(poller.run())
    await asyncio.sleep(EXEC_SETTLE_S)
    source.stats.reset()
    source.stats.active = True
    result.window = await measure_window(seconds, fleet, recorder, probe)
    source.stats.active = False
    s = source.stats
    result.done, result.failed, result.skipped = s.done, s.failed, s.skipped
    result.latencies_s, result.parse_cpu_s, result.errors = list(s.latencies_s), s.parse_cpu_s, dict(s.errors)
    result.rss_mb = proc_status_kib("VmRSS") / 1024
    result.hwm_mb = proc_status_kib("VmHWM") / 1024
    tasks = list(source._tasks)
    await probe.stop()
    result.stopped = await stop_poller(poller, task, tasks)
    return result


# -- the floors: the transport alone, streaming or exec per tick, nothing done with the output --------------
async def floor_phase(
    config: Config, fleet: FleetProcess, info: FleetInfo, seconds: float, *, exec_per_tick: bool = False
) -> float:
    """What the transport alone costs on this machine, % of one core: gputop's streaming command on a
    persistent connection per node, its output read and thrown away; or (``exec_per_tick``) the exec
    phase's one-shot query run on each node every interval, its output thrown away. gputop's own figure
    less the streaming floor is what gputop adds (parsing, samples, the poller, slow facts)."""
    cluster, _ = bench_config(config)
    hosts = read_fleet_ssh_config(Path(os.path.expanduser(cluster.ssh.config_file)))
    template = SshSource(cluster, config.poll, time.time)
    spec = next(c for c in template.commands.values() if c.stream)
    once, _fields = one_shot_query(template)
    handshakes = asyncio.Semaphore(cluster.ssh.max_concurrent_handshakes)
    conns: list[Any] = []
    loop = asyncio.get_running_loop()
    first_at = loop.time() + EXEC_SETTLE_S

    async def stream(name: str) -> None:
        entry = hosts[name]
        async with handshakes:
            conn = await connect_entry(entry, cluster.ssh.connect_timeout_s)
        conns.append(conn)
        if not exec_per_tick:
            while True:  # gputop's own reader, its lines dropped
                await run_line_stream(conn, spec.command_line, lambda _lines, _ended: None, spec.timeout_s)
        due = first_at
        while True:  # every node's exec at the same moment each interval, as in the exec phase
            await asyncio.sleep(max(0.0, due - loop.time()))
            await conn.run(once, encoding=None, timeout=5.0, check=False)
            due += INTERVAL_S * max(1, math.ceil((loop.time() - due) / INTERVAL_S))

    names = [n for n in cluster.node_names if n not in info.unresponsive]
    tasks = [asyncio.create_task(stream(n)) for n in names]
    await asyncio.sleep(EXEC_SETTLE_S + 5)
    cpu0, wall0 = time.process_time(), time.monotonic()
    await asyncio.sleep(seconds)
    pct = 100 * (time.process_time() - cpu0) / (time.monotonic() - wall0)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for conn in conns:
        conn.close()
    return pct


FORMATS = {
    "ms": "{:.1f} ms",
    "s": "{:.2f} s",
    "MB": "{:.1f} MB",
    "%": "{:.1f} %",
    "x": "{:.2f}x",
    "/s": "{:.0f} /s",
    "": "{:g}",
}


# -- report ---------------------------------------------------------------------------------------------
def ms(values: Sequence[float], p: float) -> float:
    return 1000 * percentile(values, p) if values else math.nan


def gc_row(w: Window) -> Row:
    young = w.gc_pauses_s.get(0, []) + w.gc_pauses_s.get(1, [])
    full = w.gc_pauses_s.get(2, [])
    return Row(
        "   longest garbage collection (gc frozen after the first view, as the app does)",
        ms(young + full, 100),
        "ms",
        note=(
            f"gen 0/1: {len(young)} ({1000 * sum(young):.0f} ms in all),"
            f" gen 2: {len(full)} ({1000 * sum(full):.0f} ms)"
        ),
    )


def cadences(every_s: dict[str, float]) -> str:
    """The slow facts by cadence, shortest first: "processes every 10 s; ibstat, xid every 30 s; ..."."""
    by_cadence: dict[float, list[str]] = {}
    for name, interval_s in every_s.items():
        by_cadence.setdefault(interval_s, []).append(name)
    return "; ".join(f"{', '.join(names)} every {s:g} s" for s, names in sorted(by_cadence.items()))


def print_stopped(what: str, stopped: Stopped, tasks: int) -> None:
    if stopped.recancelled:
        print(
            f"  {what} was still waiting after {STOP_GRACE_S:g} s on {stopped.recancelled} cancelled"
            " tasks that kept running (asyncio.wait_for on Python 3.11 swallows a cancel that lands as"
            " the awaited read completes): the benchmark cancelled them again; left to itself, close()"
            " would never return."
        )
    if stopped.left_running:
        print(
            f"  {what} returned after {stopped.close_s:.1f} s with {stopped.left_running} of its {tasks} node"
            " tasks still running (they would stream on, unwatched): the benchmark cancelled them, and:"
        )
    if stopped.others:
        if not stopped.left_running:
            print(f"  {what} returned after {stopped.close_s:.1f} s; tasks still alive then, cancelled:")
        for chain, count in sorted(stopped.others.items(), key=lambda kv: -kv[1])[:6]:
            print(f"    x{count}: {chain}")


def saturation(name: str, w: Window, cores: int) -> list[str]:
    """Whether the fleet kept up during a window, and whether the machine was quiet enough to trust it."""
    lag = w.fleet_lag.get("p99")
    fleet = []
    if w.fleet_cpu_pct >= FLEET_SATURATED_PCT:
        fleet.append(f"its CPU was {w.fleet_cpu_pct:.0f} % of its one core")
    if lag is not None and lag >= FLEET_LAG_SATURATED_S:
        fleet.append(f"its loop lag p99 was {1000 * lag:.0f} ms")
    noise = []
    if w.machine_pct >= MACHINE_SATURATED_PCT:
        noise.append(f"the machine was {w.machine_pct:.0f} % busy over its {cores} cores")
    if w.others_pct >= OTHERS_BUSY_PCT:
        noise.append(f"other processes took {w.others_pct:.0f} % of a core")
    measured = (
        f"CPU {w.fleet_cpu_pct:.0f} % of a core, loop lag p99 {1000 * (lag or 0):.0f} ms; "
        f"machine {w.machine_pct:.0f} % busy over {cores} cores"
    )
    if fleet:
        lines = [
            f"  {name}: the fleet may NOT have kept up ({'; '.join(fleet)}): this phase's figures are suspect"
        ]
    else:
        lines = [f"  {name}: the fleet kept up ({measured})"]
    if noise:
        lines.append(f"  {name}: {'; '.join(noise)}: figures are noisy, rerun on a quiet machine")
    return lines


def report(
    args: argparse.Namespace,
    info: FleetInfo,
    nodes: int,
    s: StreamResult,
    e: ExecResult | None,
    floor_pct: float = math.nan,
    exec_floor_pct: float = math.nan,
) -> None:
    w = s.window
    cores = os.cpu_count() or 1
    answering = nodes - len(info.unresponsive)
    fact_runs = sum(s.facts.values())
    rows = [
        Row(
            f"connect: start() to first sample from all {answering} answering nodes",
            s.connect_s,
            "s",
            note="" if not s.never else f"{s.never} still without one after {s.connect_wall_s:.0f} s",
        ),
        Row("   start() to first sample from 50 % of them", s.connect_half_s, "s"),
        Row("   start() to first sample from 90 % of them", s.connect_90_s, "s"),
        Row("   start() to all answering nodes connected", s.connected_s, "s"),
        Row("   gputop CPU during connect, % of a core", 100 * s.connect_cpu_s / s.connect_wall_s, "%"),
        Row(
            f"sample age at each tick, p50 (n={len(w.ages)}, {w.ticks} ticks)",
            percentile(w.ages, 50),
            "s",
        ),
        Row("sample age at each tick, p95", percentile(w.ages, 95), "s", TARGET_AGE_P95_S),
        Row("   max", max(w.ages, default=math.nan), "s"),
        Row(
            "   nodes with a newer sample than at the previous tick",
            100 * w.fresh / w.node_ticks if w.node_ticks else math.nan,
            "%",
        ),
        Row("   (node, tick) pairs with no sample", w.missing, ""),
        Row("   answering nodes not OK at the end", s.not_ok, ""),
        Row(f"gputop CPU, streaming, % of one core ({w.wall_s:.0f} s)", w.cpu_pct, "%", TARGET_CPU_PCT),
        Row("   poller tick CPU (last_tick_cpu_s, spans its yields), median", ms(w.tick_cpu_s, 50), "ms"),
        Row(
            "   slow-fact commands run in the window",
            fact_runs / w.wall_s if w.wall_s else 0,
            "/s",
            note=", ".join(f"{k} {v}" for k, v in sorted(s.facts.items())) or "none",
        ),
        Row(
            "   rounds they ran in (facts due together, one script in the node's shell)",
            s.fact_rounds / w.wall_s if w.wall_s else 0,
            "/s",
            note=f"and {s.fact_execs / w.wall_s:.0f} execs/s of nodes without a fact shell"
            if s.fact_execs and w.wall_s
            else "",
        ),
        Row("   event-loop lag (100 ms timer), p99", ms(w.lags, 99), "ms"),
        Row("   event-loop lag, max", ms(w.lags, 100), "ms"),
        gc_row(w),
        Row("   fleet CPU (other process), % of one core", w.fleet_cpu_pct, "%"),
        Row("   fleet event-loop lag, p99", 1000 * (w.fleet_lag.get("p99") or math.nan), "ms"),
        Row(f"   machine busy, % of all {cores} cores", w.machine_pct, "%"),
        Row("   other processes on the machine, % of one core", w.others_pct, "%"),
        Row("   irq + softirq + steal, % of one core", w.irq_pct, "%"),
        Row("RSS after the streaming window", s.rss_mb, "MB", TARGET_RSS_MB),
        Row("   peak RSS (VmHWM) so far", s.hwm_mb, "MB"),
        Row("SshSource.close(): poller.stop() until run() returned", s.stopped.close_s, "s"),
        Row("   node tasks still running when it returned", s.stopped.left_running, ""),
    ]
    if e is not None:
        x = e.window
        rate = e.done / x.wall_s if x.wall_s else math.nan
        ratio = x.cpu_pct / w.cpu_pct if w.cpu_pct else math.nan
        rows += [
            Row(
                f"exec per tick: {answering - e.connect_failed} connections opened (config read once)",
                e.connect_s,
                "s",
                note=f"{e.connect_failed} failed" if e.connect_failed else "",
            ),
            Row(f"exec per tick: gputop-side CPU, % of one core ({x.wall_s:.0f} s)", x.cpu_pct, "%"),
            Row(
                "exec/stream CPU ratio (how much cheaper streaming is)",
                ratio,
                "x",
                TARGET_EXEC_OVER_STREAM,
                at_least=True,
            ),
            Row("   execs completed", rate, "/s", note=f"of {answering - e.connect_failed}/s asked"),
            Row(
                "   execs failed / intervals skipped (exec still running)",
                e.failed,
                "",
                note=f"skipped {e.skipped}",
            ),
            Row("   exec round trip, p50", ms(e.latencies_s, 50), "ms"),
            Row("   exec round trip, p95", ms(e.latencies_s, 95), "ms"),
            Row("   parse CPU (parse_query_gpu), % of one core", 100 * e.parse_cpu_s / x.wall_s, "%"),
            Row("   poller tick CPU (last_tick_cpu_s, spans its yields), median", ms(x.tick_cpu_s, 50), "ms"),
            Row("   sample age at each tick, p50", percentile(x.ages, 50), "s"),
            Row("   sample age at each tick, p95", percentile(x.ages, 95), "s"),
            Row("   event-loop lag (100 ms timer), p99", ms(x.lags, 99), "ms"),
            gc_row(x),
            Row("   fleet CPU (other process), % of one core", x.fleet_cpu_pct, "%"),
            Row("   fleet event-loop lag, p99", 1000 * (x.fleet_lag.get("p99") or math.nan), "ms"),
            Row(f"   machine busy, % of all {cores} cores", x.machine_pct, "%"),
            Row("   other processes on the machine, % of one core", x.others_pct, "%"),
            Row("   irq + softirq + steal, % of one core", x.irq_pct, "%"),
            Row("RSS at the end of the run", e.rss_mb, "MB", note=f"peak {e.hwm_mb:.1f} MB"),
            Row("floor: the same stream read and thrown away, % of one core", floor_pct, "%"),
            Row("   gputop streaming over the floor", w.cpu_pct / floor_pct, "x"),
            Row("   exec per tick over the floor", x.cpu_pct / floor_pct, "x"),
            Row("exec floor: the exec phase's execs, output thrown away, % of one core", exec_floor_pct, "%"),
            Row("   exec floor over the streaming floor (transports alone)", exec_floor_pct / floor_pct, "x"),
        ]
    print()
    print_table(rows, FORMATS)
    print()
    print("notes:")
    print("  the fleet ran in another process; its CPU is not in gputop's figures, only shown beside them.")
    silent = ", ".join(sorted(info.unresponsive)) or "none"
    print(
        f"  left out of every figure: the fleet's simulated unresponsive node ({silent}), whose SSH"
        " handshake never completes; gputop keeps retrying it with backoff during the streaming phase."
    )
    print(f"  one-shot --query-gpu replies in the exec phase: {info.exec_reply}.")
    if s.never:
        print(
            f"  {s.never} answering nodes had not delivered a sample when the benchmark stopped waiting; the"
            " steady-state window began anyway, so its figures include their connects."
        )
    print(
        f"  streaming CPU includes gputop's slow facts ({cadences(s.fact_every_s)});"
        " the exec phase runs only the --query-gpu exec."
    )
    regular_s = [every_s for every_s in s.fact_every_s.values() if every_s <= REGULAR_ROUND_S]
    if regular_s and w.wall_s < max(regular_s):
        print(
            f"  the streaming window ({w.wall_s:.0f} s) is shorter than the slow facts' {max(regular_s):g} s:"
            " it holds only some nodes' rounds, or none, so its CPU figure leaves part of their cost out."
        )
    print_stopped("SshSource.close()", s.stopped, answering + len(info.unresponsive))
    if e is not None:
        print_stopped("the exec phase's close()", e.stopped, answering - e.connect_failed)
    for line in saturation("streaming phase", w, cores):
        print(line)
    if e is not None:
        for line in saturation("exec phase", e.window, cores):
            print(line)
        asked = answering - e.connect_failed
        if e.window.wall_s and e.done / e.window.wall_s < 0.95 * asked:
            print(
                f"  the exec phase completed {e.done / e.window.wall_s:.0f} execs/s of {asked}/s asked: its"
                " CPU figure understates what one exec per node per second costs."
            )
        for reason, count in sorted(e.errors.items(), key=lambda kv: -kv[1])[:5]:
            print(f"  exec error x{count}: {reason}")


async def run(args: argparse.Namespace, nodes: int, seconds: float) -> int:
    state_dir = Path(tempfile.mkdtemp(prefix="gputop-bench-collect-"))
    fleet = FleetProcess(nodes, state_dir / "fleet")
    try:
        began = time.monotonic()
        info = fleet.wait_ready()
        print(
            f"  fleet: pid {fleet.proc.pid}, port {info.port}, ready after {time.monotonic() - began:.1f} s; "
            f"unresponsive node(s) left out: {', '.join(sorted(info.unresponsive)) or 'none'}",
            flush=True,
        )
        config = load_config(info.config_path)
        profile_s = min(seconds, PROFILE_MAX_S) if args.profile else 0.0
        print(f"  streaming phase: SshSource + Poller every {INTERVAL_S:g} s ...", flush=True)
        stream = await stream_phase(config, fleet, info, seconds, profile_s, args.connect_limit)
        exec_result = None
        floor_pct = exec_floor_pct = math.nan
        if not args.no_exec:
            print("  exec phase: one --query-gpu exec per node per tick ...", flush=True)
            exec_result = await exec_phase(config, fleet, info, seconds)
            print("  floor phase: the same stream per node, read and thrown away ...", flush=True)
            floor_pct = await floor_phase(config, fleet, info, seconds)
            print("  exec floor phase: the exec phase's execs, their output thrown away ...", flush=True)
            exec_floor_pct = await floor_phase(config, fleet, info, seconds, exec_per_tick=True)
        leftovers = await cancel_leftovers()
        report(args, info, nodes, stream, exec_result, floor_pct, exec_floor_pct)
        for chain, count in sorted(leftovers.items(), key=lambda kv: -kv[1])[:6]:
            print(f"  still running at the end, cancelled: x{count}: {chain}")
        if stream.profile:
            print(stream.profile)
        if fleet.proc.poll() is not None:
            print(f"the fleet process died during the run:\n{fleet.stderr_tail()}", file=sys.stderr)
            return 1
        return 0
    finally:
        fleet.stop()
        shutil.rmtree(state_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, help="fake nodes, 8 GPUs each (default 1000; 200 with --quick)")
    parser.add_argument(
        "--seconds", type=float, help="length of each measured window (default 60; 10 with --quick)"
    )
    parser.add_argument("--quick", action="store_true", help="200 nodes for 10 s")
    parser.add_argument(
        "--profile",
        action="store_true",
        help=f"after the measured streaming window, profile the pipeline for up to {PROFILE_MAX_S:g} s more",
    )
    parser.add_argument("--no-exec", action="store_true", help="skip the exec-per-tick comparison")
    parser.add_argument(
        "--connect-limit",
        type=float,
        default=CONNECT_LIMIT_S,
        metavar="S",
        help=f"stop waiting for the last nodes' first samples after S seconds (default {CONNECT_LIMIT_S:g})",
    )
    args = parser.parse_args(argv)
    nodes = args.nodes if args.nodes is not None else (200 if args.quick else 1000)
    seconds = args.seconds if args.seconds is not None else (10.0 if args.quick else 60.0)
    if not 2 <= nodes <= 5000:
        parser.error("--nodes must be between 2 and 5000")
    if not 1 <= seconds <= 600:
        parser.error("--seconds must be between 1 and 600")
    fd_limit = raise_open_file_limit()

    began = time.monotonic()
    print("gputop collection benchmark")
    print(f"  cpu:      {cpu_model()} ({os.cpu_count()} logical CPUs), load {os.getloadavg()[0]:.2f}")
    print(
        f"  python:   {platform.python_implementation()} {platform.python_version()} on {platform.platform()}"
    )
    print(f"  asyncssh: {asyncssh.__version__}; open-file limit {fd_limit}")
    print(
        f"  load:     {nodes} fake nodes x {GPUS_PER_NODE} GPUs over SSH on loopback,"
        f" poll every {INTERVAL_S:g} s,"
        f" {seconds:g} s per measured window{', quick' if args.quick else ''}"
    )
    print(flush=True)
    try:
        status = asyncio.run(run(args, nodes, seconds))
    except KeyboardInterrupt:
        return 130
    print(f"\nbenchmark took {time.monotonic() - began:.1f} s")
    return status


if __name__ == "__main__":
    sys.exit(main())
