"""The dashboard benchmark's start-up and memory figures, each from a fresh process: time to the first
painted frame (beside a bare Textual app's), and RSS after some ticks."""

from __future__ import annotations

import dataclasses
import math
import os
import subprocess
import sys
import time

SCREEN_SIZE = (200, 50)  # columns, lines: the headless terminal of every dashboard benchmark
GPUS_PER_NODE = 8
RSS_TICKS = 30  # ticks before the memory figure is read

# -- 3 and 4. start-up and memory, in fresh processes -----------------------------------------------
CHILD = r"""
import sys, time
marks = {"interpreter": time.monotonic()}
mode = sys.argv[1]
if mode == "baseline":
    import textual.app
    print("FIRST", time.monotonic(), flush=True)
    sys.exit(0)
nodes, ticks = int(sys.argv[2]), int(sys.argv[3])
import asyncio, dataclasses
from gputop.cli import build_demo_app
from gputop.clock import FrozenClock
from gputop.core.config import Config
import gputop.tui.app
from gputop.tui.widgets.cluster_map import ClusterMap
from gputop.tui.widgets.node_table import NodeTable
marks["imports"] = time.monotonic()
base = Config.default()
config = dataclasses.replace(
    base,
    demo=dataclasses.replace(base.demo, nodes=nodes, gpus_per_node=@GPUS@),
    poll=dataclasses.replace(base.poll, interval_s=3600.0),
)
clock = FrozenClock(time.time())
app = build_demo_app(config, clock=clock)
marks["built"] = time.monotonic()
first = None
original_display = app._display

def display(screen, renderable):
    global first
    original_display(screen, renderable)
    if renderable is not None and "frame" not in marks:
        renderable.render_segments(app.console)
        marks["frame"] = time.monotonic()  # the first frame of any content: header, empty panes
    if first is not None or renderable is None or app._batch_count or app.view is None:
        return
    try:
        node_map, table = screen.query_one(ClusterMap), screen.query_one(NodeTable)
    except Exception:
        return
    # Both widgets drop their cached lines when a view arrives: lines cached again means drawn with data.
    if node_map._view is None or table._view is None or not node_map._lines or not table._lines:
        return
    renderable.render_segments(app.console)  # what a real terminal would be sent
    first = time.monotonic()

app._display = display

def rss_kib():
    found = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0])
    return found

async def main():
    async with app.run_test(size=(@WIDTH@, @HEIGHT@)) as pilot:
        while first is None:
            await asyncio.sleep(0.005)
        print("FIRST", first, flush=True)
        for name, value in marks.items():
            print("MARK", name, value, flush=True)
        if ticks:
            app.poller.stop()
            for _ in range(ticks):
                clock.advance(1.0)
                await app.poller.tick()
                await pilot.pause()
            await pilot.pause()
            found = rss_kib()
            print("RSS", found["VmRSS"], found["VmHWM"], app.poller._tick, flush=True)
        app.exit()

asyncio.run(main())
"""
CHILD = (
    CHILD.replace("@GPUS@", str(GPUS_PER_NODE))
    .replace("@WIDTH@", str(SCREEN_SIZE[0]))
    .replace("@HEIGHT@", str(SCREEN_SIZE[1]))
)


@dataclasses.dataclass
class ChildRun:
    first_s: float  # from just before Popen to the first frame with data
    marks_s: dict[str, float]
    rss_kib: int | None = None
    hwm_kib: int | None = None
    ticks: int | None = None


def run_child(args: list[str], timeout_s: float = 60.0) -> ChildRun:
    env = dict(os.environ, COLORTERM="truecolor", PYTHONUNBUFFERED="1")
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise RuntimeError(f"start-up child {args} took over {timeout_s:g}s") from None
    if proc.returncode != 0:
        raise RuntimeError(f"start-up child {args} failed ({proc.returncode}):\n{err[-3000:]}")
    run = ChildRun(math.nan, {})
    for line in out.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "FIRST":
            run.first_s = float(parts[1]) - started
        elif parts[0] == "MARK":
            run.marks_s[parts[1]] = float(parts[2]) - started
        elif parts[0] == "RSS":
            run.rss_kib, run.hwm_kib, run.ticks = int(parts[1]), int(parts[2]), int(parts[3])
    if math.isnan(run.first_s):
        raise RuntimeError(f"start-up child {args} never reported a frame:\n{out[-2000:]}\n{err[-2000:]}")
    return run


def measure_startup(nodes: int, runs: int) -> tuple[list[ChildRun], list[ChildRun], ChildRun]:
    apps, baselines = [], []
    # the simulator steps every node each tick: 10,000 nodes take some 10 times as long as 1,000
    timeout_s = 60.0 * max(1.0, nodes / 1000)
    for _ in range(runs):
        baselines.append(run_child(["baseline"]))
        apps.append(run_child(["app", str(nodes), "0"], timeout_s))
    memory = run_child(["app", str(nodes), str(RSS_TICKS)], timeout_s)
    return apps, baselines, memory
