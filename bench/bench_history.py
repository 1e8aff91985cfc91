"""History benchmark: appending a tick, the memory of a full day, and drawing the node screen's chart.

    python bench/bench_history.py [--nodes 1000] [--ticks 120]

The simulator's 1,000 nodes x 8 GPUs, derived by the view stage as the poller does; each tick's append
to the history store is timed in CPU (thread) time. Then the store is filled to its configured windows
(15 minutes of ticks, 24 hours of minutes: one tick a minute for a day fills both rings) and this
process's RSS is read, beside its RSS before the store existed (the app's own is measured by
bench_dashboard.py). Last, the node screen's chart for one node is drawn (plotted and rendered to text)
for each window.
"""

from __future__ import annotations

import argparse
import gc
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report import Row, cpu_model, percentile, print_table

from gputop.core.config import HistoryConfig, Thresholds
from gputop.core.models import ClusterSnapshot
from gputop.core.view import ViewStage
from gputop.sim.simulator import SimulatedCluster

T0 = 1_800_000_000.0
FORMATS = {"ms": "{:.2f} ms", "MB": "{:.0f} MB", "kB": "{:.0f} kB", "ticks": "{:.0f}", "B": "{:.3f} B"}


def rss_mb() -> float:
    with open("/proc/self/status", encoding="utf-8") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=120)
    args = parser.parse_args()
    print(
        f"history benchmark: {args.nodes} nodes x 8 GPUs; {cpu_model()}; Python {platform.python_version()}"
    )
    cluster = SimulatedCluster(nodes=args.nodes, gpus_per_node=8, gpu_model="H100", seed=42, start_time_s=T0)
    rss_before_mb = rss_mb()
    stage = ViewStage(Thresholds(), interval_s=1.0, history=HistoryConfig())
    store = stage.store()
    assert store is not None
    append_s: list[float] = []
    real_append = store.append

    def timed_append(*a: object, **k: object) -> None:
        started = time.thread_time()
        real_append(*a, **k)  # type: ignore[arg-type]
        append_s.append(time.thread_time() - started)

    store.append = timed_append  # type: ignore[method-assign]
    gc.disable()
    for tick in range(args.ticks):
        now_s = T0 + tick
        cluster.advance_to(now_s)
        result = cluster.result()
        stage.derive(ClusterSnapshot.build("bench", now_s, result.nodes, result.slurm))
    gc.enable()
    store.append = real_append  # type: ignore[method-assign]
    times_ms = [t * 1000 for t in append_s[5:]]

    # a day of minutes (and with them 15 minutes' worth of tick rows): every row of both rings written
    result = cluster.result()
    for minute in range(1, 24 * 60 + 2):
        store.append(T0 + args.ticks + minute * 60.0, result.nodes, {}, 60.0)
    rss_full_mb = rss_mb()

    from textual.geometry import Size

    from gputop.tui.widgets.history_chart import WINDOWS, HistoryChart

    class Offscreen(HistoryChart):
        @property
        def size(self) -> Size:  # type: ignore[override]
            return Size(120, 14)

        def refresh(self, *a: object, **k: object) -> Offscreen:  # type: ignore[override]
            return self

    now_s = T0 + args.ticks + (24 * 60 + 1) * 60.0
    node = result.nodes[0]
    chart_ms: dict[str, float] = {}
    for index, (_window_s, label) in enumerate(WINDOWS):
        runs = []
        for _ in range(5):
            chart = Offscreen(Thresholds())
            chart.window_index = index
            started = time.perf_counter()
            chart.show(store, node, now_s)
            chart.plt.plotsize(120, 14)
            chart.plt.build()
            runs.append((time.perf_counter() - started) * 1000)
        chart_ms[label] = statistics.median(runs)

    # the recorder: each tick's frame, its CPU and its bytes; then the replay's decoding of them
    from gputop.core.record_tick import TickPlayer, TickRecorder
    from gputop.core.recording import frame, read_frames

    record_stage = ViewStage(Thresholds(), interval_s=1.0)
    recorder = TickRecorder()
    frames: list[bytes] = []
    record_s: list[float] = []
    for tick in range(60):
        now_s = T0 + 10_000 + tick
        cluster.advance_to(now_s)
        result = cluster.result()
        view = record_stage.derive(ClusterSnapshot.build("bench", now_s, result.nodes, result.slurm))
        started = time.thread_time()
        frames.append(frame(*recorder.frame(view)))
        record_s.append(time.thread_time() - started)
    samples = sum(len(n.gpus) for n in result.nodes) * 5
    bytes_per_sample = sum(len(f) for f in frames[1:]) / (len(frames) - 1) / samples
    data = b"".join(frames)
    player = TickPlayer("bench")
    # opening: every frame's document read, and the first frame (every node's slow facts) played
    started = time.perf_counter()
    decoded = read_frames(data, 0).frames
    player.play(decoded[0].document, decoded[0].arrays)
    open_s = time.perf_counter() - started
    started = time.perf_counter()
    for number, found in enumerate(decoded[1:], start=1):
        # at 64x a 1 s poll shows every 64th tick: the others are taken in without building samples
        if number % 64 == 63 or number == len(decoded) - 1:
            player.play(found.document, found.arrays)
        else:
            player.advance(found.document, found.arrays)
    replay_per_s = (len(frames) - 1) / (time.perf_counter() - started)

    rows = [
        Row("append a tick, median (CPU)", statistics.median(times_ms), "ms", 3.0),
        Row("append a tick, p95 (CPU)", percentile(times_ms, 95), "ms", 3.0),
        Row("RSS with 24 h of history", rss_full_mb, "MB", note=f"{rss_before_mb:.0f} MB before the store"),
        Row("history's share of it", rss_full_mb - rss_before_mb, "MB"),
        *(Row(f"node chart, {label}", value, "ms", 30.0) for label, value in chart_ms.items()),
        Row("recorder CPU per 1 s tick, median", statistics.median(record_s) * 1000, "ms", 50.0,
            note="5% of a core at a 1 s tick"),
        Row("recorder's first frame CPU", record_s[0] * 1000, "ms", note="every node's slow facts"),
        Row("recorder's first frame size", len(frames[0]) / 1e3, "kB"),
        Row("recorded bytes per GPU-metric sample", bytes_per_sample, "B", 1.0, note="after the first frame"),
        Row("recording per hour at 1 s", bytes_per_sample * samples * 3600 / 1e6, "MB", 150.0),
        Row("replay at 64x: recorded s read per s", replay_per_s, "ticks", 64.0, at_least=True,
            note="64x needs 64, with the view stage's own tick on top"),
        Row("replay opening (documents, first frame)", open_s * 1000, "ms"),
    ]  # fmt: skip
    print_table(rows, FORMATS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
