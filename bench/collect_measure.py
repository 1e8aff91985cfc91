"""What bench_collect measures while gputop's pipeline runs, and how it stops it: the machine's and the
process's CPU, the event loop's lag, garbage collections, each tick's figures over a window, stopping
the poller and its leftover tasks, and counting the slow facts gputop runs."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import math
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

from collect_fleet import CLK_TCK, LAG_PROBE_S, FleetProcess

from gputop.core.summary import ClusterView
from gputop.gc_tuning import freeze_after_start
from gputop.poller import Poller
from gputop.sources.commands import CommandSpec
from gputop.sources.ssh_node import NodeLink

# Longer than SshSource.close() takes to give up on tasks by itself (5 rounds of 1 s), so the
# benchmark steps in only when close() would otherwise never return.
STOP_GRACE_S = 15.0
STOP_LIMIT_S = 120.0

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
