"""The view stage alone: CPU of `ViewStage.derive` per tick on the simulator, without the UI or the
simulator's own step, for pairing changes to the stage.

    python bench/bench_stage.py [--nodes 10000] [--ticks 12] [--same-samples] [--no-slurm]

--same-samples derives the first tick's very samples again each second, as a store's source hands them
on between its refreshes (only ages, sustained readings and idle minutes move); --no-slurm leaves Slurm
out, as a cluster read from a store alone has it.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench_report import Row, cpu_model, print_table

from gputop.core.config import HistoryConfig, Thresholds
from gputop.core.models import ClusterSnapshot
from gputop.core.view import ViewStage
from gputop.sim.simulator import SimulatedCluster

T0 = 1_780_000_000.0
WARMUP = 2


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--ticks", type=int, default=12)
    parser.add_argument("--same-samples", action="store_true", help="the same samples every tick")
    parser.add_argument("--no-slurm", action="store_true", help="no Slurm state")
    args = parser.parse_args()
    what = "the same samples each tick" if args.same_samples else "every node changing each tick"
    slurm_said = ", no Slurm" if args.no_slurm else ""
    print(f"view stage benchmark: {args.nodes} nodes x 8 GPUs, {what}{slurm_said}; {cpu_model()}")
    cluster = SimulatedCluster(nodes=args.nodes, gpus_per_node=8, seed=42, start_time_s=T0)
    stage = ViewStage(Thresholds(), interval_s=1.0, history=HistoryConfig())
    spent_ms = []
    first = cluster.result()
    for tick in range(WARMUP + args.ticks):
        now_s = T0 + tick
        if args.same_samples:
            result = first
        else:
            cluster.advance_to(now_s)
            result = cluster.result()
        slurm = None if args.no_slurm else result.slurm
        snapshot = ClusterSnapshot.build("bench", now_s, result.nodes, slurm)
        started = time.process_time()
        stage.derive(snapshot)
        spent_ms.append((time.process_time() - started) * 1000)
    measured = spent_ms[WARMUP:]
    print_table(
        [
            Row(f"derive CPU per tick, median (n={len(measured)})", statistics.median(measured), "ms"),
            Row("derive CPU per tick, max", max(measured), "ms"),
        ],
        {"ms": "{:.1f} ms"},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
