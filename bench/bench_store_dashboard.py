"""The dashboard on the store path: gputop running as a user runs it against a real VictoriaMetrics that
holds N nodes x 8 GPUs of dcgm-exporter series, its poller ticking on its own (every second) and the
store's source refreshing on its own cadence (15 s), while keys are pressed every 50 ms.

    python bench/bench_store_dashboard.py [--nodes 10000] [--seconds 60] [--quiet-seconds 30]

The series are loaded through VictoriaMetrics' import path before gputop starts (10,000 scrape targets
are more than this machine runs), one set of readings for every 15 s of the run, each a simulator step
later than the one before, so every refresh brings new values, as a real fleet's would.

What it prints, beside the issue's targets:
- UI CPU per view (apply + repaint, on the event loop's thread), for the views a refresh brings and for
  the ticks between refreshes, which change only the data's age;
- key press to painted frame, over the whole run (refreshes, their decoding in the worker process and the
  views they bring included);
- each refresh's wall time;
- then, with no keys pressed for --quiet-seconds (30; from a refresh's end to a later one's), gputop's
  share of a core: its process (ticks every second, refreshes, their views) and its decoding worker;
- RSS at the end, and the peak of the process that decodes the store's answers.
- how long a node's 24-hour chart waits for its past from the store (range queries for that node).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import dataclasses
import gc
import math
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # tests.infra.stores

# Before Textual is imported (bench_dashboard sets the terminal's colours and gputop's UI defaults).
from bench_dashboard import (  # noqa: E402
    KEY_INTERVAL_S,
    SCREEN_SIZE,
    TARGET_KEY_P99_MS,
    TARGET_TICK_UI_MS,
    PaintProbe,
    key_sequence,
    press,
)
from bench_report import Row, cpu_model, percentile, print_table  # noqa: E402

from gputop.cluster_app import build_cluster_app  # noqa: E402
from gputop.core.config import ClusterConfig, Config, PrometheusConfig  # noqa: E402
from gputop.core.models import Reachability  # noqa: E402
from gputop.sim.dcgm_text import exposition  # noqa: E402
from gputop.sim.simulator import SimulatedCluster  # noqa: E402
from gputop.sources.prometheus import PrometheusSource  # noqa: E402
from gputop.tui.screens.dashboard import DashboardScreen  # noqa: E402
from gputop.tui.widgets.cluster_map import ClusterMap  # noqa: E402
from gputop.tui.widgets.node_table import NodeTable  # noqa: E402
from tests.infra.stores import victoria_metrics, vm_import  # noqa: E402

CADENCE_S = 15.0
TARGET_REFRESH_WALL_MS = 1000.0
TARGET_CORE_PCT = 25.0
TARGET_RSS_MB = 500.0
IMPORT_CHUNK_NODES = 1000
VISIBLE_AFTER_S = 10.0
STARTUP_ALLOWANCE_S = 90.0  # from gputop's start to its first view with data (the past hour, a refresh)


def load(store: Any, nodes: int, seconds: float) -> tuple[int, float, float]:
    """A set of readings for every 15 s of the run, stamped from a moment far enough ahead that all of
    them are in before it comes (importing a set is slower than 15 s at 10,000 nodes); waits for that
    moment. Returns (answering nodes, seconds spent importing, the first set's time)."""
    steps = math.ceil((STARTUP_ALLOWANCE_S + seconds) / CADENCE_S) + 1
    started = time.perf_counter()
    # how long a set takes, from one chunk stamped two hours back (out of the past hour gputop reads)
    pilot = SimulatedCluster(nodes=min(nodes, IMPORT_CHUNK_NODES), gpus_per_node=8, seed=1, start_time_s=0)
    pilot_s = time.perf_counter()
    vm_import(store, exposition(pilot.result().nodes, time_ms=int((time.time() - 7200) * 1000)))
    per_step_s = 5.0 + 1.5 * (time.perf_counter() - pilot_s) * max(1.0, nodes / IMPORT_CHUNK_NODES)
    first_s = time.time() + steps * per_step_s
    cluster = SimulatedCluster(nodes=nodes, gpus_per_node=8, seed=42, start_time_s=first_s - 2)
    answering = 0
    for step in range(steps):
        at_s = first_s + step * CADENCE_S
        cluster.advance_to(at_s)
        sample = [n for n in cluster.result().nodes if n.reachability is Reachability.OK]
        answering = len(sample)
        for at in range(0, len(sample), IMPORT_CHUNK_NODES):
            vm_import(store, exposition(sample[at : at + IMPORT_CHUNK_NODES], time_ms=int(at_s * 1000)))
        spent_s = time.perf_counter() - started
        print(f"  readings {step + 1}/{steps} loaded ({spent_s:.0f} s)", flush=True)
        if step == 0 and time.time() + (steps - 1) * spent_s > first_s:
            raise RuntimeError(
                f"one set of readings took {spent_s:.0f} s to import: the rest would not be in before their"
                " time; run with fewer --nodes or --seconds"
            )
    load_s = time.perf_counter() - started
    # the store shows a sample some seconds after its time: start when the first set is as old as a
    # scrape's usually is
    wait_s = first_s + VISIBLE_AFTER_S - time.time()
    if wait_s < VISIBLE_AFTER_S:
        raise RuntimeError("the readings were not all in before their time")
    print(f"  waiting {wait_s:.0f} s for the first readings' time", flush=True)
    time.sleep(wait_s)
    return answering, load_s, first_s


@dataclasses.dataclass
class Views:
    """UI CPU (event loop thread) from a view's arrival to its painted frame, by kind of view."""

    refresh_ms: list[float] = dataclasses.field(default_factory=list)
    between_ms: list[float] = dataclasses.field(default_factory=list)
    refresh_apply_ms: list[float] = dataclasses.field(default_factory=list)  # apply_view alone


def hook_views(app: Any, screen: Any, views: Views) -> None:
    """Times each view on this thread: from the dashboard taking it to the first frame painted after."""
    original_apply = screen.apply_view
    pending: list[tuple[float, bool]] = []
    shown: list[Any] = [app.view]

    def apply_view(view: Any) -> None:
        started = time.thread_time()
        before = shown[0]
        original_apply(view)
        applied_ms = (time.thread_time() - started) * 1000
        shown[0] = view
        changed = (
            before is None
            or sum(row is not before.rows.get(name) for name, row in view.rows.items()) > len(view.rows) // 2
        )
        if changed:
            views.refresh_apply_ms.append(applied_ms)
        pending.append((started, changed))

    screen.apply_view = apply_view
    original_display = app._display

    def display(on_screen: Any, renderable: Any) -> None:
        original_display(on_screen, renderable)
        if renderable is None or app._batch_count or not pending:
            return
        while pending:
            started, changed = pending.pop(0)
            spent_ms = (time.thread_time() - started) * 1000
            (views.refresh_ms if changed else views.between_ms).append(spent_ms)

    app._display = display


async def run(args: argparse.Namespace, url: str) -> dict[str, Any]:
    prometheus = PrometheusConfig(url=url, flavor="victoriametrics", interval_s=CADENCE_S)
    cluster = ClusterConfig(name="bench", prometheus=prometheus)
    config = dataclasses.replace(Config.default(), clusters=(cluster,))
    if args.history_mb is not None:
        history = dataclasses.replace(config.history, memory_mb=args.history_mb)
        config = dataclasses.replace(config, history=history)
    app = build_cluster_app(config, cluster)
    views = Views()
    found: dict[str, Any] = {"views": views}
    async with app.run_test(size=SCREEN_SIZE) as pilot:
        started = time.monotonic()
        said: set[str] = set()
        while app.view is None or not isinstance(app.screen, DashboardScreen) or not app.view.rows:
            if time.monotonic() - started > 600:
                raise RuntimeError("no view with data within 10 minutes")
            for why in app.poller.source_errors:
                if why not in said:
                    said.add(why)
                    print(f"  {time.monotonic() - started:.1f} s: {why}", flush=True)
            await pilot.pause(0.05)
        found["first_view_s"] = time.monotonic() - started
        screen = app.screen
        table, node_map = screen.query_one(NodeTable), screen.query_one(ClusterMap)
        probe = PaintProbe(app, table, node_map)
        hook_views(app, screen, views)

        def move_to(original: Any, index: int) -> None:
            original(index)
            probe.change("table")

        def set_metric(original: Any, metric: Any) -> None:
            original(metric)
            probe.change("map")

        for widget, name, wrapper in ((table, "_move_to", move_to), (node_map, "set_metric", set_metric)):
            original = getattr(widget, name)
            setattr(widget, name, lambda *a, o=original, w=wrapper: w(o, *a))
        source = next(s for s in app.poller.sources if isinstance(s, PrometheusSource))
        refreshes: list[tuple[float, float]] = []  # wall s, answers s
        last_wall = source.last_refresh_wall_s
        table.action_jump(0)
        await pilot.pause(0.2)
        latencies: list[float] = []
        by_key: dict[str, list[float]] = {}
        timeouts = 0
        loop = asyncio.get_running_loop()
        keys_started = loop.time()
        gc_pauses: list[tuple[int, float]] = []  # generation, seconds
        gc_started = [0.0]

        def on_gc(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                gc_started[0] = time.perf_counter()
            else:
                gc_pauses.append((info["generation"], time.perf_counter() - gc_started[0]))

        gc.callbacks.append(on_gc)
        # the event loop's longest stalls: a heartbeat every 10 ms, and how late it woke
        stalls: list[tuple[float, float]] = []  # (seconds into the keys, seconds late)
        beating = [True]

        last_beat = [time.monotonic()]
        watcher = StallWatcher(threading.get_ident(), last_beat)

        async def heartbeat() -> None:
            while beating[0]:
                before = loop.time()
                last_beat[0] = time.monotonic()
                await asyncio.sleep(0.01)
                late = loop.time() - before - 0.01
                if late > 0.05:
                    stalls.append((loop.time() - keys_started, late))

        beat = asyncio.create_task(heartbeat())
        watcher.start()
        refresh_ends: list[float] = []
        timeline: list[tuple[float, str, float]] = []  # (s into the keys, key, latency s)
        for n, key in enumerate(key_sequence(int(args.seconds / KEY_INTERVAL_S))):
            delay = keys_started + n * KEY_INTERVAL_S - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if source.last_refresh_wall_s is not last_wall and source.last_refresh_wall_s is not None:
                refresh_ends.append(loop.time() - keys_started)
                last_wall = source.last_refresh_wall_s
                refreshes.append((last_wall, source.last_answers_wall_s or 0.0))
            pressed_at_s = loop.time() - keys_started
            latency_s = await press(app, probe, key, ("table",) if key != "m" else ("map",))
            if latency_s is None:
                timeouts += 1
                continue
            latencies.append(latency_s)
            timeline.append((pressed_at_s, key, latency_s))
            by_key.setdefault(key, []).append(latency_s)
        beating[0] = False
        await beat
        watcher.stop()
        # No keys: what gputop costs a user who only watches (ticks every second, the store's refreshes,
        # their views), gputop's process and its decoding worker together. The worker's CPU is reported
        # when a refresh's decoding ends, so the stretch runs from one refresh's end to a later one's.
        if args.quiet_seconds > 0:
            await _until_refresh_ends(source)
            cpu_s, worker_s, started_s = time.process_time(), source.worker_cpu_s, time.monotonic()
            refreshed = 0
            while time.monotonic() - started_s < args.quiet_seconds or not refreshed:
                await _until_refresh_ends(source)
                refreshed += 1
            found["quiet"] = (
                time.monotonic() - started_s,
                time.process_time() - cpu_s,
                source.worker_cpu_s - worker_s,
                refreshed,
            )
        found["stalled_in"] = watcher.where.most_common(12)
        gc.callbacks.remove(on_gc)
        found.update(
            gc_pauses=gc_pauses,
            stalls=stalls,
            refresh_ends=refresh_ends,
            timeline=timeline,
            latencies=latencies,
            by_key=by_key,
            timeouts=timeouts,
            refreshes=refreshes,
            nodes_ok=sum(1 for n in app.view.snapshot.nodes if n.reachability is Reachability.OK),
        )
        found["rss_mb"], found["hwm_mb"] = rss_mb()
        found["worker_hwm_mb"] = getattr(source, "worker_peak_rss_mb", 0.0)
        found["node_past"] = await node_past_wall(source, app)
        found["history_full"] = await fill_history(app, pilot)
        app.exit()
    return found


async def node_past_wall(source: Any, app: Any) -> tuple[float, int] | None:
    """How long a node's chart waits for its day from the store (what the node screen asks where gputop's
    own rows do not reach over the window): (seconds, steps read); None where nothing was read."""
    node = next((n.name for n in app.view.snapshot.nodes if n.reachability is Reachability.OK), None)
    if node is None:
        return None
    started = time.perf_counter()
    past = await source.node_past(node, 86400.0)
    if past is None:
        return None
    return time.perf_counter() - started, len(past.history.series(node, 0, "util_pct", 86400.0, time.time()))


async def fill_history(app: Any, pilot: Any) -> tuple[float, int, int, float] | None:
    """The RSS once the history holds every row its memory bound allows: a run of a minute or two has
    written a few of them, and a row's memory is taken when it is first written. Rows of the last view's
    readings, a minute apart, so every ring is written through. (RSS MB, tick rows, minute rows, the
    history's MB.)"""
    store = app.poller.stage.store()
    if store is None:
        return None
    view = app.view
    at_s = view.snapshot.taken_at_s
    for minute in range(1, max(store.fine.rows, store.coarse_mean.rows) + 2):
        store.append(at_s + minute * 60.0, view.snapshot.nodes, view.rows, 60.0)
    await pilot.pause(1.0)
    return rss_mb()[0], store.fine.rows, store.coarse_mean.rows, store.kept_bytes() / 2**20


async def _until_refresh_ends(source: PrometheusSource) -> None:
    last = source.last_refresh_wall_s
    while source.last_refresh_wall_s is last:
        await asyncio.sleep(0.05)


class StallWatcher(threading.Thread):
    """Where the event loop is while it stalls: every 5 ms, when its heartbeat is more than STALL_S old,
    the innermost gputop (or else Textual) function on its thread's stack is counted."""

    STALL_S = 0.02  # a key's whole budget

    def __init__(self, loop_thread: int, last_beat: list[float]) -> None:
        super().__init__(daemon=True)
        self.loop_thread = loop_thread
        self.last_beat = last_beat
        self.where: collections.Counter[str] = collections.Counter()
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.wait(0.005):
            if time.monotonic() - self.last_beat[0] < self.STALL_S:
                continue
            frame = sys._current_frames().get(self.loop_thread)
            self.where[_innermost(frame)] += 1

    def stop(self) -> None:
        self._stopped.set()
        self.join()


def _innermost(frame: Any) -> str:
    """The innermost frame of gputop's code on the stack, else of Textual's, else the innermost."""
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    for part in ("/gputop/", "/textual/"):
        for one in frames:
            if part in one.f_code.co_filename:
                name = one.f_code.co_filename.split(part, 1)[1]
                return f"{part.strip('/')}/{name}:{one.f_code.co_name}"
    return frames[0].f_code.co_name if frames else "?"


def renice(pid: int, nice: int) -> None:
    """Every thread of ``pid`` (a Go program's threads each have their own nice value on Linux)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        os.setpriority(os.PRIO_PROCESS, int(task.name), nice)


def rss_mb() -> tuple[float, float]:
    values = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(value.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def node_past_rows(read: tuple[float, int] | None) -> list[Row]:
    if read is None:
        return []
    wall_s, steps = read
    return [
        Row(f"a node's 24 h chart from the store, wall ({steps} steps held readings)", wall_s * 1000, "ms")
    ]


def history_rows(full: tuple[float, int, int, float] | None) -> list[Row]:
    if full is None:
        return []
    rss, tick_rows, minute_rows, history_mb = full
    return [
        Row("RSS with the history full", rss, "MB", TARGET_RSS_MB),
        Row(f"   the history's bound ({tick_rows} tick rows, {minute_rows} minute rows)", history_mb, "MB"),
    ]


def ms(values: list[float], p: float | None = None) -> float:
    if not values:
        return math.nan
    return statistics.median(values) if p is None else percentile(values, p)


def quiet_span_s(args: argparse.Namespace) -> float:
    """How long the no-keys stretch may last: its seconds, rounded out to refreshes at both ends."""
    return args.quiet_seconds + 2 * CADENCE_S if args.quiet_seconds > 0 else 0.0


def quiet_rows(quiet: tuple[float, float, float, int] | None) -> list[Row]:
    """gputop's share of a core with no keys pressed: its process and the decoding worker."""
    if quiet is None:
        return []
    wall_s, cpu_s, worker_s, refreshed = quiet
    print(
        f"  no keys for {wall_s:.0f} s, {refreshed} refreshes: {cpu_s:.2f} s of gputop's CPU, "
        f"{worker_s:.2f} s of its worker's"
    )
    return [
        Row(
            "share of a core with no keys pressed",
            (cpu_s + worker_s) / wall_s * 100,
            "%",
            TARGET_CORE_PCT,
            note="gputop's process and its worker",
        ),
        Row("   of which the decoding worker's", worker_s / wall_s * 100, "%"),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60.0, help="how long keys are pressed")
    parser.add_argument(
        "--store-nice",
        type=int,
        default=10,
        help="VictoriaMetrics' nice value once loaded (0: as gputop's); a site's store runs elsewhere",
    )
    parser.add_argument(
        "--quiet-seconds",
        type=float,
        default=30.0,
        help="then this long or more with no keys, refresh end to refresh end: gputop's share of a core",
    )
    parser.add_argument(
        "--history-mb", type=float, default=None, help="history.memory_mb (default: the config's default)"
    )
    args = parser.parse_args()
    print(
        f"store-path dashboard benchmark: {args.nodes} nodes x 8 GPUs in VictoriaMetrics, "
        f"{SCREEN_SIZE[0]}x{SCREEN_SIZE[1]}; {cpu_model()}",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as workdir, victoria_metrics(Path(workdir)) as store:
        answering, load_s, _first_s = load(store, args.nodes, args.seconds + quiet_span_s(args))
        print(f"  {answering} nodes' readings loaded in {load_s:.0f} s; starting gputop", flush=True)
        if args.store_nice:
            renice(store.process.pid, args.store_nice)
            print(
                f"  VictoriaMetrics runs at nice {args.store_nice}, as if on a machine of its own", flush=True
            )
        found = asyncio.run(run(args, store.url))
    views: Views = found["views"]
    latencies_ms = [s * 1000 for s in found["latencies"]]
    refresh_walls = [wall * 1000 for wall, _answers in found["refreshes"]]
    answers = [a * 1000 for _wall, a in found["refreshes"]]
    print(
        f"  first view with data after {found['first_view_s']:.1f} s; {found['nodes_ok']} nodes answering "
        f"at the end; {len(found['refreshes'])} refreshes during the keys"
    )
    gen2 = [pause * 1000 for generation, pause in found["gc_pauses"] if generation == 2]
    young = [pause * 1000 for generation, pause in found["gc_pauses"] if generation < 2]
    print(f"  refreshes noticed at (s into the keys): {[round(t, 1) for t in found['refresh_ends']]}")
    worst = sorted(found["stalls"], key=lambda stall: -stall[1])[:8]
    stalls = [(round(at_s, 1), round(late_s * 1000)) for at_s, late_s in worst]
    print(f"  the event loop's longest stalls (s into the keys, ms late): {stalls}")
    slowest = sorted(found["timeline"], key=lambda press: -press[2])[:16]
    said = [(round(at_s, 2), key, round(latency_s * 1000)) for at_s, key, latency_s in sorted(slowest)]
    print(f"  the slowest keys (s into the keys, key, ms): {said}")
    print(
        f"  where the event loop was while stalled over {StallWatcher.STALL_S * 1000:.0f} ms (5 ms samples):"
    )
    for place, count in found["stalled_in"]:
        print(f"    {count:5d}  {place}")
    rows = [
        Row(f"UI CPU per refresh view, median (n={len(views.refresh_ms)})", ms(views.refresh_ms), "ms"),
        Row("UI CPU per refresh view, max", max(views.refresh_ms, default=math.nan), "ms"),
        Row("   of which the screen's apply_view (median)", ms(views.refresh_apply_ms), "ms"),
        Row(
            f"UI CPU per tick between refreshes, median (n={len(views.between_ms)})",
            ms(views.between_ms),
            "ms",
            TARGET_TICK_UI_MS,
        ),
        Row(
            "UI CPU per tick, mean over the run",
            statistics.fmean(views.refresh_ms + views.between_ms) if views.between_ms else math.nan,
            "ms",
            TARGET_TICK_UI_MS,
        ),
        Row(f"key to painted frame, p50 (n={len(latencies_ms)})", ms(latencies_ms), "ms"),
        Row("key to painted frame, p99", ms(latencies_ms, 99), "ms", TARGET_KEY_P99_MS),
        Row("key to painted frame, max", max(latencies_ms, default=math.nan), "ms"),
        Row(
            "   'm' p50 (n={})".format(len(found["by_key"].get("m", []))),
            ms([s * 1000 for s in found["by_key"].get("m", [])]),
            "ms",
        ),
        Row("   keys lost (no frame within 1 s)", found["timeouts"], ""),
        Row(f"   gen 2 collections during the keys: {len(gen2)}, longest", max(gen2, default=0.0), "ms"),
        Row(f"   gen 0/1 collections: {len(young)}, longest", max(young, default=0.0), "ms"),
        Row("full refresh, wall (median)", ms(refresh_walls), "ms", TARGET_REFRESH_WALL_MS),
        Row("   of which the store's answers (median)", ms(answers), "ms"),
        Row(
            "   after the last answer (median)",
            ms([wall - a for wall, a in zip(refresh_walls, answers, strict=True)]),
            "ms",
            note="gputop's own part: the last answers decoded, the nodes made and read back",
        ),
        *quiet_rows(found.get("quiet")),
        Row("RSS at the end", found["rss_mb"], "MB", TARGET_RSS_MB),
        Row("   peak RSS (VmHWM)", found["hwm_mb"], "MB"),
        *history_rows(found["history_full"]),
        *node_past_rows(found["node_past"]),
        Row("peak RSS of the process decoding the answers", found["worker_hwm_mb"], "MB"),
    ]
    print_table(rows, {"ms": "{:.2f} ms", "MB": "{:.1f} MB", "%": "{:.1f} %"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
