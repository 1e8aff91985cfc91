"""Queue pane benchmark: a 20,000-job queue on the 1,000-node demo, per tick and per key press.

    python bench/bench_queue.py [--nodes 1000] [--jobs 20000] [--quick]

The demo's Slurm gains ``--jobs`` pending jobs (a deep queue of sweeps, some array tasks), the same objects
on every read as between two Slurm reads. The queue pane is open on a 200x50 headless screen, with the
cluster map above it. Figures, side by side from one run, each beside its target:

1. per tick: the poller's CPU (simulator, merge, node rows, idle tracking and the 20,000 job rows) and the
   UI's, from posting the view to the painted frame (the pane re-orders 20,000 rows and draws the rows on
   screen);
2. key press to painted frame: down/up in the table, `s` (sort by the next column) then `home` every
   tenth key, and each character typed into the filter (`/user=user07`, then erased).

As in bench_dashboard.py, keys are sent without Pilot's wait for an idle CPU, one after the previous one
has been painted, while a tick arrives every second.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ["COLORTERM"] = "truecolor"
os.environ.pop("NO_COLOR", None)

import gputop.tui  # noqa: F401, I001  (sets Textual's defaults before Textual is imported)
from bench_dashboard import SCREEN_SIZE, PaintProbe, bench_config, press, send_key, wrap
from bench_report import Row, cpu_model, percentile, print_table

from gputop.cli import build_demo_app
from gputop.clock import FrozenClock
from gputop.core.models import SlurmJob, SourceResult
from gputop.tui.app import GputopApp, ViewUpdated
from gputop.tui.screens.queue import QueueScreen
from gputop.tui.widgets.cluster_map import ClusterMap
from gputop.tui.widgets.job_table import JobTable

TARGET_TICK_UI_MS = 16.0
TARGET_KEY_P99_MS = 20.0
TARGET_KEY_MAX_MS = 50.0
KEY_TIMEOUT_S = 1.0
FILTER_TEXT = "user=user07"


def deep_queue(count: int, template: SlurmJob) -> tuple[SlurmJob, ...]:
    """Pending jobs as a busy site has them: many users, some arrays, a few reasons."""
    reasons = ("Priority", "Resources", "QOSMaxGpuPerUserLimit", "Dependency")
    jobs = []
    for i in range(count):
        job_id = f"{7_000_000 + i // 10}_[{i % 10}-{i % 10 + 20}]" if i % 25 == 0 else str(8_000_000 + i)
        jobs.append(
            dataclasses.replace(
                template,
                job_id=job_id,
                user=f"user{i % 97:02d}",
                name=f"sweep-{i % 400}",
                pending_reason=reasons[i % len(reasons)],
                gpus_requested=(1, 2, 4, 8)[i % 4],
            )
        )
    return tuple(jobs)


class QueueHarness:
    def __init__(self, nodes: int, jobs: int) -> None:
        self.clock = FrozenClock(time.time())
        self.app: GputopApp = build_demo_app(bench_config(nodes), clock=self.clock)
        self.extra_jobs = jobs
        self.apply_cpu_s: list[float] = []
        self.captured: list[Any] = []

    def post_last(self) -> None:
        """Hand the app the last tick's view, as the poller does in normal running."""
        view = self.captured[-1]
        self.captured.clear()
        self.app.post_message(ViewUpdated(view))

    async def start(self, pilot: Any) -> None:
        app = self.app
        for _ in range(1000):
            if app.view is not None:
                break
            await pilot.pause(0.01)
        app.poller.stop()
        source = app.poller.sources[0]
        slurm = app.view.snapshot.slurm  # type: ignore[union-attr]
        template = next(job for job in slurm.jobs if job.state == "PENDING")
        extra = deep_queue(self.extra_jobs, template)
        collect = source.collect

        async def with_deep_queue(now_s: float) -> SourceResult:
            result = await collect(now_s)
            assert result.slurm is not None
            return dataclasses.replace(
                result, slurm=dataclasses.replace(result.slurm, jobs=result.slurm.jobs + extra)
            )

        source.collect = with_deep_queue  # type: ignore[method-assign]
        app.poller.on_view = self.captured.append
        await self.tick()
        self.post_last()
        await pilot.pause()
        app.open_queue()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, QueueScreen)
        self.screen = screen
        self.table = screen.query_one(JobTable)
        self.map = screen.query_one(ClusterMap)
        self.probe = PaintProbe(app, self.table, self.map)  # type: ignore[arg-type]
        probe, table = self.probe, self.table

        def apply_view(original: Any, view: Any) -> None:
            started = time.process_time()
            original(view)
            self.apply_cpu_s.append(time.process_time() - started)
            probe.change("table")

        def reorder(original: Any) -> None:
            original()
            probe.change("table")

        def move_to(original: Any, index: int) -> None:
            original(index)
            probe.change("table")

        wrap(screen, "apply_view", apply_view, "figure 1")
        wrap(table, "_reorder", reorder, "figure 2 (sort, filter)")
        wrap(table, "_move_to", move_to, "figure 2 (down/up)")
        await pilot.pause()

    async def tick(self) -> tuple[float, float]:
        self.clock.advance(1.0)
        started = time.process_time()
        await self.app.poller.tick()
        return time.process_time() - started, self.app.poller.last_tick_cpu_s

    def send_key(self, key: str) -> None:
        send_key(self.app, key)


async def measure_ticks(h: QueueHarness, count: int) -> tuple[list[float], list[float], list[float]]:
    poll_cpu, derive_cpu, ui_cpu = [], [], []
    for _ in range(count):
        all_s, derive_s = await h.tick()
        poll_cpu.append(all_s)
        derive_cpu.append(derive_s)
        future = h.probe.arm(("table",))
        cpu0 = time.process_time()
        h.post_last()
        _t1, cpu1 = await asyncio.wait_for(future, KEY_TIMEOUT_S * 5)
        h.probe.disarm()
        ui_cpu.append(cpu1 - cpu0)
        await asyncio.sleep(0.02)
    return poll_cpu, derive_cpu, ui_cpu


async def measure_keys(h: QueueHarness, keys: list[str]) -> tuple[dict[str, list[float]], int]:
    by_key: dict[str, list[float]] = {}
    timeouts = 0
    loop = asyncio.get_running_loop()
    next_tick = loop.time() + 1.0
    for key in keys:
        if loop.time() >= next_tick:  # a tick a second, as in normal running
            await h.tick()
            h.post_last()
            next_tick += 1.0
        await asyncio.sleep(0.03)
        latency_s = await press(h.app, h.probe, key, ("table",))
        if latency_s is None:
            timeouts += 1
            continue
        label = "filter char" if key == "backspace" or (len(key) == 1 and key != "s") else key
        by_key.setdefault(label, []).append(latency_s)
    return by_key, timeouts


def key_plan(rounds: int) -> tuple[list[str], list[str]]:
    moves: list[str] = []
    for i in range(rounds * 10):
        # after a sort the cursor stays on its job, wherever it went: home brings it back to the top
        moves += ["s", "home"] if i % 10 == 9 else ["down" if i % 2 == 0 else "up"]
    typing: list[str] = []
    for _ in range(max(1, rounds // 4)):
        typing += list(FILTER_TEXT) + ["backspace"] * len(FILTER_TEXT)
    return moves, typing


def ms(values: list[float], p: float | None = None) -> float:
    if not values:
        return float("nan")
    return 1000 * (statistics.median(values) if p is None else percentile(values, p))


async def run(args: argparse.Namespace) -> list[Row]:
    h = QueueHarness(args.nodes, args.jobs)
    async with h.app.run_test(size=SCREEN_SIZE) as pilot:
        await h.start(pilot)
        jobs_shown = len(h.table.order)
        poll_cpu, derive_cpu, ui_cpu = await measure_ticks(h, 10 if args.quick else 40)
        moves, typing = key_plan(4 if args.quick else 20)
        by_key, timeouts = await measure_keys(h, moves)
        h.screen.action_start_filter()
        await pilot.pause()
        typed, typed_timeouts = await measure_keys(h, typing)
    every = [x for values in (*by_key.values(), *typed.values()) for x in values]
    rows = [
        Row(f"jobs in the table (the demo's and {args.jobs:,} pending)", jobs_shown, "jobs"),
        Row(f"1 UI apply+repaint CPU/tick, median (n={len(ui_cpu)})", ms(ui_cpu), "ms", TARGET_TICK_UI_MS),
        Row("1 UI apply+repaint CPU/tick, p95", ms(ui_cpu, 95), "ms", TARGET_TICK_UI_MS),
        Row("   of which QueueScreen.apply_view (median)", ms(h.apply_cpu_s), "ms"),
        Row("1 poller CPU/tick, median (simulator included)", ms(poll_cpu), "ms"),
        Row("   of which merge+derive, job rows included (median)", ms(derive_cpu), "ms"),
    ]
    for label, values in sorted({**by_key, **typed}.items()):
        rows.append(Row(f"2 key '{label}' to painted frame, p50 (n={len(values)})", ms(values), "ms"))
    rows += [
        Row(f"2 every key to painted frame, p99 (n={len(every)})", ms(every, 99), "ms", TARGET_KEY_P99_MS),
        Row("2 every key to painted frame, max", ms(every, 100), "ms", TARGET_KEY_MAX_MS),
        Row("2 keys whose table was not repainted within 1 s", timeouts, "keys"),
        # "user=" half typed is a filter error: the error line changes, the table rightly does not
        Row("2 filter keys that only showed a filter error", typed_timeouts, "keys"),
    ]
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000, help="simulated nodes (default 1000)")
    parser.add_argument("--jobs", type=int, default=20_000, help="pending jobs added (default 20000)")
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    args = parser.parse_args(argv)
    print("gputop queue benchmark")
    print(f"  cpu:     {cpu_model()} ({os.cpu_count()} logical CPUs)")
    print(f"  python:  {platform.python_implementation()} {platform.python_version()}")
    print(
        f"  load:    {args.nodes} nodes, {args.jobs:,} extra pending jobs, {SCREEN_SIZE[0]}x{SCREEN_SIZE[1]}"
    )
    print(flush=True)
    rows = asyncio.run(run(args))
    print_table(rows, {"ms": "{:.1f} ms", "jobs": "{:,.0f}", "keys": "{:.0f}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
