"""Fan-out benchmark: a fresh GPU sample from 50 nodes, gputop against clush, on a real OpenSSH sshd.

    python bench/bench_fanout.py [--nodes 50] [--rounds 3] [--intervals 1,0.2]

Both sides talk to the same sshd on 127.0.0.1 (one port per node, tests/infra/sshd.py), whose nodes run
gputop's fake nvidia-smi (gputop.sim.fake_fleet.tool), and both read the same ssh_config.

- gputop: SshSource from a gputop config file, metrics stream only (the slow facts are left out, so both
  sides fetch the same thing). "connect" is the one-off time from start to a first sample from every node;
  a round is the time from `refresh()` to a sample newer than the refresh from every node. A stream prints
  once per poll interval and the 50 streams start at different moments, so a round lasts about one
  interval whenever it starts: gputop is measured at its default interval (1 s) and at 0.2 s.
- clush: ``clush -w node[01-50] -b -o "-F ssh_config" nvidia-smi --query-gpu=... --format=csv,noheader,
  nounits``, the same fields as gputop's stream: one ssh, one login and one nvidia-smi per node per round.

The nodes' nvidia-smi is a Python program that takes about 180 ms to start (the first figure printed); a
real one answers a query faster, so clush rounds and gputop's one-off connect are slower here than on a
cluster, while gputop's rounds, which start nothing, are not.

Each figure is the median of --rounds rounds. The target is gputop at least 10 times faster than clush
once connected. A missed target is reported, not failed: the exit status is non-zero only when the
benchmark cannot run or crashes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))  # tests.infra.sshd, also where gputop is not installed editable

from gputop.config_file import load_config  # noqa: E402
from gputop.core.nodeset import fold_nodes  # noqa: E402
from gputop.sources.commands import QUERY_GPU_FIELDS, metrics_stream  # noqa: E402
from gputop.sources.ssh import SshSource  # noqa: E402
from tests.infra.sshd import SSHD, RealSshd, SshdUnavailable, start_sshd, stop_sshd  # noqa: E402

TARGET_RATIO = 10.0
TIMEOUT_S = 120.0


def clush_path() -> str | None:
    beside = Path(sys.executable).parent / "clush"
    return str(beside) if beside.exists() else shutil.which("clush")


def gputop_config(directory: Path, sshd: RealSshd, interval_s: float) -> Path:
    def q(path: Path) -> str:
        return json.dumps(str(path))

    path = directory / "gputop.yaml"
    path.write_text(
        f"poll:\n  interval_s: {interval_s}\n"
        "clusters:\n"
        "  - name: loopback\n"
        f"    nodes: {fold_nodes(sshd.nodes)}\n"
        "    gpus_per_node: 8\n"
        "    ssh:\n"
        f"      config_file: {q(sshd.ssh_config)}\n"
        f"      known_hosts: {q(sshd.known_hosts)}\n"
        "      verify_host_keys: true\n"
        "    slurm:\n"
        "      enabled: false\n",
        encoding="utf-8",
    )
    return path


async def wait_all(source: SshSource, newer_than: float, timeout_s: float = TIMEOUT_S) -> None:
    """Until every node holds a sample taken after ``newer_than`` (time.time())."""
    deadline = time.monotonic() + timeout_s
    while True:
        links = source.links.values()
        if all(link.sampled_at_s is not None and link.sampled_at_s > newer_than for link in links):
            return
        if time.monotonic() > deadline:
            late = {link.name: link.error for link in links if (link.sampled_at_s or 0) <= newer_than}
            raise RuntimeError(f"no fresh sample within {timeout_s:g}s from {len(late)} nodes: {late}")
        await asyncio.sleep(0.002)


async def bench_gputop(
    sshd: RealSshd, directory: Path, rounds: int, interval_s: float
) -> tuple[float, list[float], int]:
    """(one-off connect time, round times, GPUs seen)."""
    config = load_config(gputop_config(directory, sshd, interval_s))
    stream = metrics_stream(config.poll.interval_s)
    source = SshSource(config.clusters[0], config.poll, time.time, commands={stream.name: stream})
    started = time.time()
    t0 = time.perf_counter()
    await source.start()
    try:
        await wait_all(source, started - 1e9)
        connect_s = time.perf_counter() - t0
        gpus = sum(len(link.gpus) for link in source.links.values())  # a simulated node lost one
        times = []
        for _ in range(rounds):
            await asyncio.sleep(interval_s * 1.37)  # a refresh lands anywhere in the streams' interval
            asked = time.time()
            t = time.perf_counter()
            source.refresh()
            await wait_all(source, asked)
            times.append(time.perf_counter() - t)
        return connect_s, times, gpus
    finally:
        try:
            await asyncio.wait_for(source.close(), 30)
        except TimeoutError:
            raise RuntimeError("SshSource.close() did not return within 30 s") from None


def bench_clush(sshd: RealSshd, clush: str, rounds: int, gpus: int) -> list[float]:
    query = f"--query-gpu={','.join(QUERY_GPU_FIELDS)}"
    command = [
        clush,
        "-w",
        fold_nodes(sshd.nodes),
        "-b",
        "-f",
        "64",
        "-o",
        f"-F {sshd.ssh_config}",
        "nvidia-smi",
        query,
        "--format=csv,noheader,nounits",
    ]
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        result = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        times.append(time.perf_counter() - t)
        rows = sum(1 for line in result.stdout.splitlines() if ", GPU-" in line)
        if result.returncode != 0 or rows != gpus:
            raise RuntimeError(
                f"clush exited {result.returncode} with {rows} GPU rows, gputop saw {gpus}: "
                f"{result.stderr[-2000:]}"
            )
    return times


def tool_startup_ms(sshd: RealSshd, runs: int = 7) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        result = sshd.tool(sshd.nodes[0], "nvidia-smi", "-L")
        times.append(time.perf_counter() - t)
        if result.returncode != 0:
            raise RuntimeError(f"the fake nvidia-smi failed: {result.stderr}")
    return statistics.median(times) * 1000


def openssh_version() -> str:
    result = subprocess.run([SSHD, "-V"], capture_output=True, text=True, check=False)
    return (result.stderr or result.stdout).strip().split(",")[0]


def runs(times: list[float]) -> str:
    return "runs " + ", ".join(f"{t:.3f}" for t in times)


def row(label: str, value: str, note: str = "") -> None:
    print(f"  {label:<58}{value:>10}{f'  ({note})' if note else ''}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--intervals", default="1,0.2", help="gputop poll.interval_s values to measure (default 1,0.2)"
    )
    args = parser.parse_args()
    intervals = [float(x) for x in args.intervals.split(",")]
    clush = clush_path()
    if clush is None:
        print("bench_fanout: clush not found (pip install ClusterShell)", file=sys.stderr)
        return 1
    gputop_runs: list[tuple[float, list[float]]] = []
    with tempfile.TemporaryDirectory(prefix="gputop-bench-fanout-") as tmp:
        directory = Path(tmp)
        t = time.perf_counter()
        try:
            sshd = start_sshd(directory / "sshd", nodes=args.nodes)
        except SshdUnavailable as err:
            print(f"bench_fanout: cannot run: {err}", file=sys.stderr)
            return 1
        sshd_up_s = time.perf_counter() - t
        try:
            print(
                f"{args.nodes} nodes x 8 GPUs on {openssh_version()} at 127.0.0.1 "
                f"({len(sshd.pids)} sshd processes, login {sshd.user}); "
                f"{os.cpu_count()} CPUs, Python {platform.python_version()}; median of {args.rounds} rounds"
            )
            row("sshd up", f"{sshd_up_s:.3f} s")
            row("fake nvidia-smi -L, run locally", f"{tool_startup_ms(sshd):.0f} ms", "median of 7")
            gpus = 0
            for interval_s in intervals:
                connect_s, times, gpus = asyncio.run(bench_gputop(sshd, directory, args.rounds, interval_s))
                gputop_runs.append((interval_s, times))
                label = f"gputop, stream every {interval_s:g} s:"
                row(f"{label} connect, first sample from all", f"{connect_s:.3f} s", "one-off")
                row(f"{label} fresh sample from all", f"{statistics.median(times):.3f} s", runs(times))
            clush_times = bench_clush(sshd, clush, args.rounds, gpus)
        finally:
            stop_sshd(sshd)
    clush_s = statistics.median(clush_times)
    row("clush -b nvidia-smi --query-gpu", f"{clush_s:.3f} s", runs(clush_times))
    for interval_s, times in gputop_runs:
        ratio = clush_s / statistics.median(times)
        verdict = "met" if ratio >= TARGET_RATIO else "MISSED"
        row(
            f"clush / gputop (every {interval_s:g} s)",
            f"{ratio:.1f} x",
            f"target >= {TARGET_RATIO:g} x: {verdict}",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
