"""The whole dashboard's memory with a full day of history: the 1,000-node demo app, headless, its
history store then filled to its configured windows (a day of minutes, and with them 15 minutes of tick
rows) from the demo's own readings, and the process's RSS read, beside the RSS before the filling.

    python bench/bench_day_rss.py [--nodes 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_history import rss_mb
from bench_report import Row, print_table

from gputop.cli import build_demo_app
from gputop.core.config import Config


async def measure(nodes: int) -> tuple[float, float]:
    base = Config.default()
    config = dataclasses.replace(base, demo=dataclasses.replace(base.demo, nodes=nodes))
    app = build_demo_app(config)
    async with app.run_test(size=(200, 50)) as pilot:
        while app.view is None:
            await pilot.pause(0.1)
        for _ in range(5):  # a few live ticks, so the screens hold what they show
            await pilot.pause(1.0)
        view = app.view
        before_mb = rss_mb()
        store = app.poller.stage.store()
        assert store is not None
        now_s = view.snapshot.taken_at_s
        nodes_now = view.snapshot.nodes
        for minute in range(1, 24 * 60 + 2):
            store.append(now_s + minute * 60.0, nodes_now, view.rows, 60.0)
        await pilot.pause(1.0)
        return before_mb, rss_mb()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=1000)
    args = parser.parse_args()
    before_mb, day_mb = asyncio.run(measure(args.nodes))
    print(f"dashboard memory with a day of history: {args.nodes} nodes x 8 GPUs")
    print_table(
        [
            Row("RSS, the dashboard running", before_mb, "MB"),
            Row("RSS with 24 h of history", day_mb, "MB", 400.0),
        ],
        {"MB": "{:.0f} MB"},
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
