"""Dashboard benchmark: per-tick CPU, key-press latency, start-up time and memory on the simulator.

    python bench/bench_dashboard.py [--nodes 1000] [--quick] [--profile]

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
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

# Colour depth changes what a frame costs to encode: measure what a modern terminal gets, whatever the
# terminal this runs in. Set before Textual is imported, since it reads the environment then.
os.environ["COLORTERM"] = "truecolor"
os.environ.pop("NO_COLOR", None)

# gputop's UI package sets Textual's defaults (its frame rate) before Textual is first imported, as it
# does when gputop runs: import it first.
import gputop.tui  # noqa: F401, I001
from textual import events

from bench_report import Row, cpu_model, percentile, print_table, profile_text

from gputop.cli import build_demo_app
from gputop.clock import FrozenClock
from gputop.core.config import Config
from gputop.tui.app import GputopApp, ViewUpdated
from gputop.tui.screens.dashboard import DashboardScreen
from gputop.tui.widgets.cluster_map import ClusterMap
from gputop.tui.widgets.node_table import NodeTable
from dashboard_startup import GPUS_PER_NODE, RSS_TICKS, SCREEN_SIZE, measure_startup

KEY_INTERVAL_S = 0.050
KEY_TIMEOUT_S = 1.0

TARGET_TICK_UI_MS = 16.0
TARGET_KEY_P99_MS = 20.0
TARGET_KEY_MAX_MS = 50.0
TARGET_START_S = 0.3
TARGET_RSS_MB = 150.0


# -- helpers ----------------------------------------------------------------------------------------------
def bench_config(nodes: int) -> Config:
    base = Config.default()
    return dataclasses.replace(
        base,
        demo=dataclasses.replace(base.demo, nodes=nodes, gpus_per_node=GPUS_PER_NODE),
        # The benchmark drives every tick itself; the app's own poller ticks once at mount, then waits.
        poll=dataclasses.replace(base.poll, interval_s=3600.0),
    )


# -- paint probe ------------------------------------------------------------------------------------------
class PaintProbe:
    """Tells when a change has reached the screen.

    `arm(needs)` starts a wait; widgets report a change (`changed`) and the probe notes when their lines are
    rendered after it. The wait ends at the first frame handed to the display (`App._display`) in which
    every widget in `needs` has been rendered since its change. Headless Textual skips turning a frame
    into terminal output, so the probe does it here (and throws the text away): a real terminal pays it.
    """

    def __init__(self, app: GputopApp, table: NodeTable, node_map: ClusterMap) -> None:
        self.app = app
        self.needs: set[str] = set()
        self.changed: set[str] = set()
        self.painted: set[str] = set()
        self.future: asyncio.Future[tuple[float, float]] | None = None
        self.frames = 0
        self.encode_cpu_s = 0.0
        self.lines_cpu_s = {"table": 0.0, "map": 0.0}  # inside the widgets' own render_line
        self._install(table, "table")
        self._install(node_map, "map")
        original_display = app._display

        def display(screen: Any, renderable: Any) -> None:
            original_display(screen, renderable)
            if renderable is None or app._batch_count:
                return
            started = time.process_time()
            renderable.render_segments(app.console)
            self.encode_cpu_s += time.process_time() - started
            self.frames += 1
            future = self.future
            if future is not None and not future.done() and self.needs <= self.painted:
                future.set_result((time.perf_counter(), time.process_time()))

        app._display = display  # type: ignore[method-assign]

    def _install(self, widget: Any, name: str) -> None:
        original = widget.render_line

        spent = self.lines_cpu_s

        def render_line(y: int) -> Any:
            if name in self.changed:
                self.painted.add(name)
            started = time.process_time()
            strip = original(y)
            spent[name] += time.process_time() - started
            return strip

        widget.render_line = render_line

    def arm(self, needs: Iterable[str]) -> asyncio.Future[tuple[float, float]]:
        self.needs = set(needs)
        self.changed.clear()
        self.painted.clear()
        self.future = asyncio.get_running_loop().create_future()
        return self.future

    def need(self, name: str) -> None:
        self.needs.add(name)

    def change(self, name: str) -> None:
        self.changed.add(name)
        self.painted.discard(name)

    def disarm(self) -> None:
        self.future = None
        self.needs = set()


def wrap(obj: Any, name: str, wrapper: Callable[..., Any], figure: str) -> None:
    """Put ``wrapper(original, *args)`` in front of ``obj.name``; warn if the app no longer has it."""
    original = getattr(obj, name, None)
    if not callable(original):
        print(f"  warning: {type(obj).__name__}.{name} is gone; {figure} may be wrong", file=sys.stderr)
        return

    def wrapped(*args: Any) -> Any:
        return wrapper(original, *args)

    setattr(obj, name, wrapped)


def send_key(app: GputopApp, key: str) -> None:
    """What `Pilot.press` sends, without its wait for an idle CPU afterwards (which takes 40 ms or more and
    would set the key rate)."""
    char = key if len(key) == 1 else None
    event = events.Key(key, char)
    event.set_sender(app)
    assert app._driver is not None
    app._driver.send_message(event)


async def press(app: GputopApp, probe: PaintProbe, key: str, needs: Iterable[str]) -> float | None:
    """Seconds from sending ``key`` to the first frame that shows ``needs`` changed; None when no such
    frame comes within KEY_TIMEOUT_S."""
    future = probe.arm(needs)
    t0 = time.perf_counter()
    send_key(app, key)
    try:
        t1, _cpu = await asyncio.wait_for(future, KEY_TIMEOUT_S)
    except TimeoutError:
        return None
    finally:
        probe.disarm()
    return t1 - t0


class Harness:
    """The app under test, its widgets, and the hooks the measurements use."""

    def __init__(self, nodes: int) -> None:
        self.nodes = nodes
        self.clock = FrozenClock(time.time())
        self.app = build_demo_app(bench_config(nodes), clock=self.clock)
        self.captured: list[Any] = []
        self.apply_cpu_s: list[float] = []

    async def start(self, pilot: Any) -> None:
        app = self.app
        # 5 s per thousand nodes (the demo replays its past before the first view)
        for _ in range(500 * max(1, math.ceil(self.nodes / 1000))):
            if app.view is not None and isinstance(app.screen, DashboardScreen):
                break
            await pilot.pause(0.01)
        else:
            raise RuntimeError("the dashboard never showed its first view")
        app.poller.stop()
        await pilot.pause()
        screen = app.screen
        self.screen = screen
        self.table = screen.query_one(NodeTable)
        self.map = screen.query_one(ClusterMap)
        self.probe = PaintProbe(app, self.table, self.map)
        self._hook_changes()
        await pilot.pause()

    def _hook_changes(self) -> None:
        probe, table, node_map = self.probe, self.table, self.map

        def apply_view(original: Callable[..., None], view: Any) -> None:
            started = time.process_time()
            original(view)
            self.apply_cpu_s.append(time.process_time() - started)
            if table.repaints:
                probe.change("table")
            else:  # no cell of the table in sight changed: it draws nothing again, and is not waited for
                probe.needs.discard("table")
            probe.change("map")

        def move_to(original: Callable[..., None], index: int) -> None:
            before = table.cursor_name
            original(index)
            probe.change("table")
            if table.cursor_name != before:
                probe.need("map")  # the map follows the cursor: the key is done when both show it

        def select(original: Callable[..., None], name: str) -> None:
            before = node_map.selected
            original(name)
            if node_map.selected != before:
                probe.change("map")

        def set_metric(original: Callable[..., None], metric: Any) -> None:
            original(metric)
            probe.change("map")

        # The app looks these up on the objects, so wrapping the instances is enough.
        wrap(self.screen, "apply_view", apply_view, "figure 1b")
        wrap(table, "_move_to", move_to, "figure 2 (down/up)")
        wrap(node_map, "select", select, "figure 2 (down/up)")
        wrap(node_map, "set_metric", set_metric, "figure 2 (m)")

    def capture_views(self) -> None:
        """Ticks hand their view to the benchmark instead of posting it."""
        self.app.poller.on_view = self.captured.append

    def post_views(self) -> None:
        """Ticks post their view to the app, as in normal running."""
        self.app.poller.on_view = self.app._on_poller_view

    async def tick(self) -> tuple[float, float]:
        """One poller tick one simulated second later: (all CPU, merge+derive CPU)."""
        self.clock.advance(1.0)
        started = time.process_time()
        await self.app.poller.tick()
        return time.process_time() - started, self.app.poller.last_tick_cpu_s

    def send_key(self, key: str) -> None:
        send_key(self.app, key)


# -- 1. CPU per tick --------------------------------------------------------------------------------------
@dataclasses.dataclass
class TickResult:
    poll_cpu_s: list[float]
    merge_cpu_s: list[float]
    ui_cpu_s: list[float]
    apply_cpu_s: list[float]
    encode_cpu_s: list[float]
    map_cpu_s: list[float]
    table_cpu_s: list[float]
    ui_wall_s: list[float]
    timeouts: int
    # CPU after the frame until the old view was freed (the app frees a large one in slices, off the frame)
    release_cpu_s: list[float] = dataclasses.field(default_factory=list)


async def wait_for_release(app: GputopApp) -> float:
    """CPU from the painted frame until the app has freed the view it replaced (0 where it frees a view
    at once, inside the frame)."""
    release = getattr(app, "view_release", None)
    started = time.process_time()
    for _ in range(500):
        if release is None or not release.pending:
            break
        await asyncio.sleep(0.002)
    return time.process_time() - started if release is not None else 0.0


async def measure_ticks(
    h: Harness, ticks: int, warmup: int, profiler: cProfile.Profile | None = None
) -> TickResult:
    h.capture_views()
    probe = h.probe
    result = TickResult([], [], [], [], [], [], [], [], 0)
    for i in range(warmup + ticks):
        await asyncio.sleep(0.03)  # let the previous frame and its timers settle
        h.captured.clear()
        total, merge = await h.tick()
        view = h.captured[-1]
        future = probe.arm(("table", "map"))
        applied_before = len(h.apply_cpu_s)
        encode_before = probe.encode_cpu_s
        lines_before = dict(probe.lines_cpu_s)
        if profiler is not None:
            profiler.enable()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        h.app.post_message(ViewUpdated(view))
        try:
            wall1, cpu1 = await asyncio.wait_for(future, 2.0)
        except TimeoutError:
            result.timeouts += 1
            continue
        finally:
            if profiler is not None:
                profiler.disable()
            probe.disarm()
        release_cpu_s = await wait_for_release(h.app)
        if i < warmup:
            continue
        result.release_cpu_s.append(release_cpu_s)
        result.poll_cpu_s.append(total)
        result.merge_cpu_s.append(merge)
        result.ui_cpu_s.append(cpu1 - cpu0)
        result.ui_wall_s.append(wall1 - wall0)
        result.apply_cpu_s.append(sum(h.apply_cpu_s[applied_before:]))
        result.encode_cpu_s.append(probe.encode_cpu_s - encode_before)
        result.map_cpu_s.append(probe.lines_cpu_s["map"] - lines_before["map"])
        result.table_cpu_s.append(probe.lines_cpu_s["table"] - lines_before["table"])
    return result


# -- 2. key press to painted screen -----------------------------------------------------------------------
@dataclasses.dataclass
class KeyResult:
    latencies_s: list[float]
    cpu_s: list[float]
    frames: list[int]
    by_key: dict[str, list[float]]
    timeouts: int
    ticks: int
    tick_cpu_s: list[float]
    gc_runs: list[int]  # collections per generation during the run
    gc_pauses_s: list[list[float]]  # each collection's duration, per generation


def key_sequence(count: int) -> list[str]:
    keys: list[str] = []
    direction = "down"
    for i in range(count):
        if i % 10 == 9:
            keys.append("m")
        else:
            keys.append(direction)
            direction = "up" if direction == "down" else "down"
    return keys


async def measure_keys(
    h: Harness, duration_s: float, with_ticks: bool = True, profiler: cProfile.Profile | None = None
) -> KeyResult:
    h.post_views()
    probe = h.probe
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    tick_cpu: list[float] = []

    async def ticker() -> None:
        next_at = loop.time() + 1.0
        while not stopping.is_set():
            wait_s = max(0.0, next_at - loop.time())
            try:
                await asyncio.wait_for(stopping.wait(), wait_s)
                return
            except TimeoutError:
                pass
            tick_cpu.append((await h.tick())[0])
            next_at += 1.0

    # Start from the top of the table, so down/up pairs never hit its ends.
    h.table.action_jump(0)
    await asyncio.sleep(0.1)
    gc_before = [s["collections"] for s in gc.get_stats()]
    gc_pauses: list[list[float]] = [[], [], []]
    gc_started = [0.0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_started[0] = time.perf_counter()
        else:
            gc_pauses[info["generation"]].append(time.perf_counter() - gc_started[0])

    gc.callbacks.append(on_gc)
    ticker_task = asyncio.create_task(ticker()) if with_ticks else None
    latencies: list[float] = []
    cpu: list[float] = []
    frames: list[int] = []
    by_key: dict[str, list[float]] = {}
    timeouts = 0
    started = loop.time()
    keys = key_sequence(int(duration_s / KEY_INTERVAL_S) + 1)
    try:
        for n, key in enumerate(keys):
            due = started + n * KEY_INTERVAL_S
            if due - started >= duration_s:
                break
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            future = probe.arm(("table",) if key != "m" else ("map",))
            if profiler is not None:
                profiler.enable()
            frames_before = probe.frames
            t0, cpu0 = time.perf_counter(), time.process_time()
            h.send_key(key)
            try:
                t1, cpu1 = await asyncio.wait_for(future, KEY_TIMEOUT_S)
            except TimeoutError:
                timeouts += 1
                continue
            finally:
                if profiler is not None:
                    profiler.disable()
                probe.disarm()
            latencies.append(t1 - t0)
            cpu.append(cpu1 - cpu0)
            frames.append(probe.frames - frames_before)
            by_key.setdefault(key, []).append(t1 - t0)
    finally:
        stopping.set()
        if ticker_task is not None:
            await ticker_task
        gc.callbacks.remove(on_gc)
    gc_runs = [s["collections"] - before for s, before in zip(gc.get_stats(), gc_before, strict=True)]
    return KeyResult(latencies, cpu, frames, by_key, timeouts, len(tick_cpu), tick_cpu, gc_runs, gc_pauses)


# -- profiles ---------------------------------------------------------------------------------------------
FORMATS = {"ms": "{:.2f} ms", "s": "{:.3f} s", "MB": "{:.1f} MB", "x": "{:.2f}x", "frames": "{:.2f}"}


# -- report ---------------------------------------------------------------------------------------------
def ms(values: list[float], p: float | None = None) -> float:
    if not values:
        return math.nan
    return 1000 * (statistics.median(values) if p is None else percentile(values, p))


# -- main -----------------------------------------------------------------------------------------------
async def in_process(args: argparse.Namespace, ticks: int, key_s: float) -> tuple[TickResult, KeyResult, str]:
    h = Harness(args.nodes)
    profiles = ""
    async with h.app.run_test(size=SCREEN_SIZE) as pilot:
        await h.start(pilot)
        print(f"  1. {ticks} ticks, applied and painted one at a time ...", flush=True)
        tick_result = await measure_ticks(h, ticks, warmup=5)
        print(
            f"  2. keys every {KEY_INTERVAL_S * 1000:.0f} ms for {key_s:g} s, a tick every second ...",
            flush=True,
        )
        key_result = await measure_keys(h, key_s)
        if args.profile:
            print("  profiling (figures above were taken without the profiler) ...", flush=True)
            tick_profiler = cProfile.Profile()
            await measure_ticks(h, 20 if not args.quick else 8, warmup=2, profiler=tick_profiler)
            key_profiler = cProfile.Profile()
            await measure_keys(h, 4.0 if not args.quick else 2.0, with_ticks=False, profiler=key_profiler)
            profiles = profile_text(tick_profiler, "apply + repaint per tick", 18) + profile_text(
                key_profiler, "key press to painted frame (no ticks)", 18
            )
        h.app.exit()
    return tick_result, key_result, profiles


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000, help="simulated nodes, 8 GPUs each (default 1000)")
    parser.add_argument("--quick", action="store_true", help="fewer samples; under 40 s")
    parser.add_argument("--profile", action="store_true", help="also print cProfile tables of the UI paths")
    args = parser.parse_args(argv)
    if not 1 <= args.nodes <= 10000:
        parser.error("--nodes must be between 1 and 10000")
    ticks = 15 if args.quick else 80
    key_s = 5.0 if args.quick else 20.0
    startup_runs = 1 if args.quick else 5

    began = time.monotonic()
    print("gputop dashboard benchmark")
    print(f"  cpu:     {cpu_model()} ({os.cpu_count()} logical CPUs)")
    print(
        f"  python:  {platform.python_implementation()} {platform.python_version()} on {platform.platform()}"
    )
    import textual

    print(f"  textual: {textual.__version__}")
    print(
        f"  load:    {nodes_gpus(args.nodes)} on a {SCREEN_SIZE[0]}x{SCREEN_SIZE[1]} headless screen"
        f"{', quick' if args.quick else ''}"
    )
    print(flush=True)

    print(
        f"  3/4. start-up x{startup_runs} and memory after {RSS_TICKS} ticks, in fresh processes ...",
        flush=True,
    )
    apps, baselines, memory = measure_startup(args.nodes, startup_runs)
    tick_result, key_result, profiles = asyncio.run(in_process(args, ticks, key_s))

    t = tick_result
    both = [a + b + c for a, b, c in zip(t.poll_cpu_s, t.ui_cpu_s, t.release_cpu_s, strict=True)]
    sim = [a - b for a, b in zip(t.poll_cpu_s, t.merge_cpu_s, strict=True)]
    k = key_result
    start_app = statistics.median(r.first_s for r in apps)
    start_base = statistics.median(r.first_s for r in baselines)

    def mark(name: str) -> float:
        return statistics.median(r.marks_s.get(name, math.nan) for r in apps)

    rows = [
        Row(
            f"1b UI apply+repaint CPU/tick, median (n={len(t.ui_cpu_s)})",
            ms(t.ui_cpu_s),
            "ms",
            TARGET_TICK_UI_MS,
        ),
        Row("1b UI apply+repaint CPU/tick, p95", ms(t.ui_cpu_s, 95), "ms", TARGET_TICK_UI_MS),
        Row("   of which apply_view (median)", ms(t.apply_cpu_s), "ms"),
        Row("   of which ClusterMap.render_line (median)", ms(t.map_cpu_s), "ms"),
        Row("   of which NodeTable.render_line (median)", ms(t.table_cpu_s), "ms"),
        Row("   of which frame to terminal text (median)", ms(t.encode_cpu_s), "ms"),
        Row("   wall, post to painted frame (median)", ms(t.ui_wall_s), "ms"),
        Row("1c freeing the old view after the frame, in slices (median)", ms(t.release_cpu_s), "ms"),
        Row("1a poller CPU/tick, median", ms(t.poll_cpu_s), "ms"),
        Row("1a poller CPU/tick, p95", ms(t.poll_cpu_s, 95), "ms"),
        Row("   of which simulator step+result (median)", ms(sim), "ms"),
        Row("   of which merge+derive (median)", ms(t.merge_cpu_s), "ms"),
        Row("1a+1b+1c whole tick CPU, median", ms(both), "ms"),
        Row("1a+1b+1c whole tick CPU, p95", ms(both, 95), "ms"),
        Row(f"2 key to painted frame, p50 (n={len(k.latencies_s)})", ms(k.latencies_s), "ms"),
        Row("2 key to painted frame, p99", ms(k.latencies_s, 99), "ms", TARGET_KEY_P99_MS),
        Row(
            "2 key to painted frame, max",
            1000 * max(k.latencies_s, default=math.nan),
            "ms",
            TARGET_KEY_MAX_MS,
        ),
    ]
    rows += [
        Row("   CPU from key to painted frame, p50", ms(k.cpu_s), "ms"),
        Row(
            "   frames painted per key, mean", statistics.fmean(k.frames) if k.frames else math.nan, "frames"
        ),
    ]
    for key in ("down", "up", "m"):
        values = k.by_key.get(key, [])
        if values:
            rows.append(
                Row(
                    f"   '{key}' p50 / max (n={len(values)})",
                    ms(values),
                    "ms",
                    note=f"max {ms(values, 100):.2f} ms",
                )
            )
    rows += [
        Row(f"   keys lost (no frame within {KEY_TIMEOUT_S:g} s)", k.timeouts, ""),
        Row("   ticks during the key run", k.ticks, ""),
        Row(
            "   full (gen 2) collections during the key run",
            k.gc_runs[-1],
            "",
            note=f"gen 0/1: {k.gc_runs[0]}/{k.gc_runs[1]}",
        ),
        Row(
            "   longest gen 2 collection",
            ms(k.gc_pauses_s[2], 100),
            "ms",
            note=f"all gen 2: {1000 * sum(k.gc_pauses_s[2]):.1f} ms",
        ),
        Row("   longest gen 0/1 collection", ms(k.gc_pauses_s[0] + k.gc_pauses_s[1], 100), "ms"),
        Row(f"3 start to first painted frame, median of {len(apps)}", mark("frame"), "s", TARGET_START_S),
        Row(f"3 start to first frame with data, median of {len(apps)}", start_app, "s"),
        Row("   imports done (median)", mark("imports"), "s"),
        Row("   app built, simulator ready (median)", mark("built"), "s"),
        Row(f"   baseline: python -c 'import textual.app' (median of {len(baselines)})", start_base, "s"),
        Row("   start-up / baseline", start_app / start_base, "x"),
        Row(f"4 RSS after {memory.ticks} ticks", (memory.rss_kib or 0) / 1024, "MB", TARGET_RSS_MB),
        Row("   peak RSS (VmHWM)", (memory.hwm_kib or 0) / 1024, "MB"),
    ]
    if t.timeouts:
        rows.insert(5, Row("   ticks with no frame within 2 s", t.timeouts, ""))

    print()
    print_table(rows, FORMATS)
    print(f"\nbenchmark took {time.monotonic() - began:.1f} s")
    if profiles:
        print(profiles)
    return 0


def nodes_gpus(nodes: int) -> str:
    return f"{nodes} nodes x {GPUS_PER_NODE} GPUs ({nodes * GPUS_PER_NODE} GPUs)"


if __name__ == "__main__":
    sys.exit(main())
