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
import math
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncssh
from bench_report import Row, cpu_model, percentile, print_table, profile_text
from collect_exec import INTERVAL_S, ExecLink, ExecPerTickSource
from collect_fleet import FleetInfo, FleetProcess, connect_entry, read_fleet_ssh_config
from collect_measure import (
    STOP_GRACE_S,
    FactCounter,
    LagProbe,
    Stopped,
    TickRecorder,
    Window,
    cancel_leftovers,
    measure_window,
    proc_status_kib,
    stop_poller,
)

from gputop.clock import SystemClock
from gputop.config_file import load_config
from gputop.core.config import ClusterConfig, Config
from gputop.poller import Poller
from gputop.sources.ssh import SshSource, raise_open_file_limit
from gputop.sources.ssh_stream import run_line_stream

GPUS_PER_NODE = 8
# The first run of every slow fact lands within 5 s of a node connecting (NodeLink._fact_rounds spreads
# them): the steady-state window starts this long after the last node's first sample.
STREAM_SETTLE_S = 6.0
# The cycle of slow facts a window must hold for its CPU figure to be the steady one: the slow interval
# (a minute), whose rounds the 30 s facts join every other time and the 5-minute ones every fifth.
REGULAR_ROUND_S = 60.0
EXEC_SETTLE_S = 3.0
CONNECT_LIMIT_S = 60.0
PROFILE_MAX_S = 15.0

TARGET_AGE_P95_S = 2.0
TARGET_CPU_PCT = 15.0
TARGET_RSS_MB = 250.0
TARGET_EXEC_OVER_STREAM = 4.0
FLEET_SATURATED_PCT = 90.0  # the fleet is one asyncio loop: one core is all it can use
FLEET_LAG_SATURATED_S = 1.0  # a whole interval: its replies slip by a tick
MACHINE_SATURATED_PCT = 95.0
OTHERS_BUSY_PCT = 25.0  # other processes (tests, builds) this busy make the figures noisy


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
