"""The Prometheus source at scale: a real VictoriaMetrics holding N nodes x 8 GPUs of dcgm-exporter series
(loaded through its import path: 10,000 scrape targets are more than this machine runs), and gputop's
refreshes of it timed: wall time of one full refresh (all queries, concurrently, and the join) and the
CPU it takes (gputop's process and the worker that decodes the answers), as a share of a core at the
source's 15 s cadence.

    python bench/bench_prometheus.py [--nodes 10000] [--refreshes 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # tests.infra.stores

from bench_report import Row, cpu_model, print_table  # noqa: E402

from gputop.core.config import ClusterConfig, PrometheusConfig  # noqa: E402
from gputop.core.models import Reachability  # noqa: E402
from gputop.sim.dcgm_text import exposition  # noqa: E402
from gputop.sim.simulator import SimulatedCluster  # noqa: E402
from gputop.sources.prometheus import PrometheusSource  # noqa: E402
from tests.infra.stores import victoria_metrics, vm_import  # noqa: E402

CADENCE_S = 15.0


async def refreshes(
    url: str, count: int
) -> tuple[list[float], list[float], list[float], list[float], int, float]:
    config = ClusterConfig(name="bench", prometheus=PrometheusConfig(url=url, flavor="victoriametrics"))
    source = PrometheusSource(config, time.time)
    await source.start()
    if source._refreshing is not None:  # the refresh the start began: not one of those timed
        await source._refreshing
    walls: list[float] = []
    cpus: list[float] = []  # gputop's process and its decoding worker together
    worker_cpus: list[float] = []
    waits: list[float] = []
    answering = 0
    try:
        for _ in range(count):
            cpu = time.process_time()
            worker_cpu = source.worker_cpu_s
            wall = time.perf_counter()
            result = await source._refresh(time.time())  # one full refresh, as collect starts it
            walls.append(time.perf_counter() - wall)
            worker_cpus.append(source.worker_cpu_s - worker_cpu)
            cpus.append(time.process_time() - cpu + worker_cpus[-1])
            waits.append(source.last_answers_wall_s or 0.0)
            answering = sum(1 for n in result.nodes if n.reachability is Reachability.OK)
    finally:
        await source.close()
    return walls, cpus, worker_cpus, waits, answering, source.worker_peak_rss_mb


def _status_mb(key: str) -> float:
    """A size from /proc/self/status (VmRSS, VmHWM) in MB; 0 where it cannot be read."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--refreshes", type=int, default=5)
    args = parser.parse_args()
    print(f"prometheus source benchmark: {args.nodes} nodes x 8 GPUs in VictoriaMetrics; {cpu_model()}")
    now_s = time.time()
    cluster = SimulatedCluster(nodes=args.nodes, gpus_per_node=8, seed=42, start_time_s=now_s - 2)
    cluster.advance_to(now_s)
    nodes = [n for n in cluster.result().nodes if n.reachability is Reachability.OK]
    with tempfile.TemporaryDirectory() as workdir, victoria_metrics(Path(workdir)) as store:
        started = time.perf_counter()
        chunk = 1000
        for at in range(0, len(nodes), chunk):
            vm_import(store, exposition(nodes[at : at + chunk], time_ms=int(now_s * 1000)))
        load_s = time.perf_counter() - started
        # the peak from here on: the import's exposition text (hundreds of MB at 80,000 GPUs) is not
        # gputop's (writing 5 to clear_refs resets VmHWM to the resident size now)
        rss_at_start_mb = _status_mb("VmRSS")
        with contextlib.suppress(OSError):
            Path("/proc/self/clear_refs").write_text("5")
        walls, cpus, worker_cpus, waits, answering, worker_rss_mb = asyncio.run(
            refreshes(store.url, args.refreshes)
        )
    rss_mb = _status_mb("VmHWM") or resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"loaded {len(nodes)} nodes in {load_s:.1f} s; {answering} answering in the last refresh")
    cpu_s = statistics.median(cpus)
    print_table(
        [
            Row("full refresh, wall (median)", statistics.median(walls) * 1000, "ms", 1000.0),
            Row(
                "   of which the store's answers (median)",
                statistics.median(waits) * 1000,
                "ms",
                note="the store's own query time on this machine, and the transfer",
            ),
            Row(
                "   after the last answer (median)",
                statistics.median(w - a for w, a in zip(walls, waits, strict=True)) * 1000,
                "ms",
                note="gputop's own part: the last answers decoded, the nodes made and read back",
            ),
            Row("full refresh, CPU (median)", cpu_s * 1000, "ms", note="gputop's process and its worker"),
            Row("   of which the decoding worker's", statistics.median(worker_cpus) * 1000, "ms"),
            Row("share of a core at a 15 s cadence", cpu_s / CADENCE_S * 100, "%", 25.0),
            Row(
                "RSS of this process before the refreshes",
                rss_at_start_mb,
                "MB",
                note="the simulator's fleet",
            ),
            Row("peak RSS of this process during the refreshes", rss_mb, "MB", 500.0, note="fleet included"),
            Row("peak RSS of the decoding worker", worker_rss_mb, "MB"),
        ],
        {"ms": "{:.0f} ms", "%": "{:.1f} %", "MB": "{:.0f} MB"},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
