"""How long a large Slurm queue holds up the event loop while gputop reads it.

    python bench/bench_slurm_read.py [--jobs 50000] [--form json|scontrol|both]

The queue is a real ``squeue --json`` / ``scontrol -d -o show job`` job record from the test cluster
(tests/fixtures/slurm-22.05-loopback), copied with new ids. For each form it reads the queue through
`SlurmSource._read` with a runner that answers at once, while a ticker on the same loop wakes every 5 ms
and notes how late it was (what a key press would wait). Two ways, in one process, alternating:

- ``inline``: the parse called on the event loop, as gputop did before;
- ``thread``: `SlurmSource` as it is (the parse in a worker thread; JSON decoded job by job).

Printed per form and way: the read's wall time, the loop's longest stall and its p99; then, from one more
read of each way under tracemalloc (which slows it several times), the peak memory the read added.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import tracemalloc
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gputop.core.config import ClusterConfig, SlurmConfig
from gputop.sources import slurm as slurm_source
from gputop.sources.slurm_runner import Completed

LOOPBACK = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "slurm-22.05-loopback"


def json_queue(jobs: int) -> str:
    import json

    doc = json.loads((LOOPBACK / "squeue.json").read_text(encoding="utf-8"))
    template = next(job for job in doc["jobs"] if job["job_state"] == "RUNNING")
    doc["jobs"] = [dict(template, job_id=1000 + i) for i in range(jobs)]
    return json.dumps(doc, indent=2)


def scontrol_queue(jobs: int) -> str:
    records = (LOOPBACK / "scontrol-show-job-d.txt").read_text(encoding="utf-8").split("\n\n")
    record = next(r for r in records if "JobState=RUNNING" in r)
    one = " ".join(line.strip() for line in record.splitlines() if line.strip())
    _head, rest = one.split(" ", 1)
    return "".join(f"JobId={1000 + i} {rest}\n" for i in range(jobs))


def safe_queue(jobs: int) -> str:
    times = "2026-12-02T17:06:39|2026-12-02T17:06:40|UNLIMITED|0:02"
    line = "{}|gpu|root|RUNNING|None|2|node[01-02]|gres:gpu:4|" + times + "\n"
    return "".join(line.format(1000 + i) for i in range(jobs))


class Answering:
    where = "local"

    def __init__(self, answers: Mapping[tuple[str, ...], str]) -> None:
        self.answers = answers

    async def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> Completed:
        return Completed(tuple(argv), 0, self.answers[tuple(argv)], "")

    def refresh(self) -> None:
        return None

    async def close(self) -> None:
        return None


async def read(
    form: slurm_source.Form, answers: Mapping[tuple[str, ...], str], inline: bool, memory: bool
) -> dict[str, float]:
    cluster = ClusterConfig(
        "bench", nodeset="node[01-02]", node_names=("node01", "node02"), slurm=SlurmConfig()
    )
    source = slurm_source.SlurmSource(cluster, time.time, runner=Answering(answers))
    source._form_index["jobs"] = slurm_source.JOB_FORMS.index(form)
    lags: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            before = time.perf_counter()
            await asyncio.sleep(0.005)
            lags.append(time.perf_counter() - before - 0.005)

    real_to_thread = asyncio.to_thread

    async def on_the_loop(function: Any, *args: Any) -> Any:
        return function(*args)

    if inline:
        asyncio.to_thread = on_the_loop  # type: ignore[assignment]
    if memory:
        tracemalloc.start()
    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.02)
    started = time.perf_counter()
    try:
        listing = await source._read("jobs")
    finally:
        asyncio.to_thread = real_to_thread  # type: ignore[assignment]
    wall_s = time.perf_counter() - started
    done.set()
    await task
    peak = 0
    if memory:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert len(listing.jobs) > 0
    lags.sort()
    return {
        "wall_s": wall_s,
        "max_stall_ms": lags[-1] * 1000,
        "p99_stall_ms": lags[int(len(lags) * 0.99) - 1] * 1000,
        "peak_mb": peak / 1e6,
        "jobs": len(listing.jobs),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--jobs", type=int, default=50_000)
    parser.add_argument("--form", choices=["json", "scontrol", "both"], default="both")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of each way")
    args = parser.parse_args()
    forms: list[tuple[str, slurm_source.Form, dict[tuple[str, ...], str]]] = []
    if args.form in ("json", "both"):
        forms.append(
            (
                "squeue --json",
                slurm_source.JOB_FORMS[0],
                {slurm_source.JOB_FORMS[0].argv: json_queue(args.jobs)},
            )
        )
    if args.form in ("scontrol", "both"):
        form = slurm_source.JOB_FORMS[1]
        assert form.check is not None
        answers = {form.argv: scontrol_queue(args.jobs), form.check: safe_queue(args.jobs)}
        forms.append(("scontrol -d -o show job, checked", form, answers))
    print(f"{args.jobs} jobs, Python {sys.version.split()[0]}")
    print(f"{'form':36} {'way':7} {'read s':>8} {'max stall ms':>13} {'p99 stall ms':>13}")
    for label, form, answers in forms:
        results: dict[str, list[dict[str, float]]] = {"inline": [], "thread": []}
        for _ in range(args.rounds):
            for way in ("inline", "thread"):
                results[way].append(asyncio.run(read(form, answers, way == "inline", False)))
        peaks = {
            way: asyncio.run(read(form, answers, way == "inline", memory=True))["peak_mb"] for way in results
        }
        for way, runs in results.items():
            for run in runs:
                print(
                    f"{label:36} {way:7} {run['wall_s']:8.2f} {run['max_stall_ms']:13.1f} "
                    f"{run['p99_stall_ms']:13.1f}"
                )
        inline_max = statistics.median(r["max_stall_ms"] for r in results["inline"])
        thread_max = statistics.median(r["max_stall_ms"] for r in results["thread"])
        print(f"{label}: longest stall, median: inline {inline_max:.0f} ms, thread {thread_max:.0f} ms")
        print(
            f"{label}: peak memory of a read (tracemalloc): {peaks['inline']:.0f} / {peaks['thread']:.0f} MB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
