"""A real VictoriaMetrics and a real Prometheus on 127.0.0.1 (Debian packages victoria-metrics and
prometheus), started by the tests that need them and stopped after; each test that needs one is skipped,
naming the package, where it is not installed.

VictoriaMetrics takes its series through its import path (no scraping needed); Prometheus scrapes the
exporters a test serves, every second.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.infra.procnet import free_ports, read_text

VICTORIA_METRICS = shutil.which("victoria-metrics") or "/usr/bin/victoria-metrics"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


@dataclass(frozen=True)
class Store:
    url: str
    process: subprocess.Popen[bytes]
    log: Path


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path, within_s: float) -> None:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url} exited: {read_text(log)[-2000:]}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1) as answer:  # noqa: S310
            if answer.status == 200:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{url} not ready within {within_s:g}s: {read_text(log)[-2000:]}")


@contextlib.contextmanager
def _running(argv: list[str], port: int, log: Path, ready_path: str, within_s: float) -> Iterator[Store]:
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    store = Store(f"http://127.0.0.1:{port}", process, log)
    try:
        _wait_ready(f"{store.url}{ready_path}", process, log, within_s)
        yield store
    finally:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)
        if process.poll() is None:
            process.kill()


@contextlib.contextmanager
def victoria_metrics(workdir: Path) -> Iterator[Store]:
    (port,) = free_ports(1)
    log = workdir / "victoria-metrics.log"
    argv = [
        VICTORIA_METRICS,
        f"-httpListenAddr=127.0.0.1:{port}",
        f"-storageDataPath={workdir / 'vm-data'}",
        "-retentionPeriod=100y",
        # an instant query at "now" sees what was just imported (the default leaves out the last 30 s)
        "-search.latencyOffset=0s",
        "-search.disableCache",
    ]
    with _running(argv, port, log, "/health", 20.0) as store:
        yield store


def vm_import(store: Store, text: str) -> None:
    """Exposition lines (with millisecond timestamps) into VictoriaMetrics, searchable at once."""
    request = urllib.request.Request(  # noqa: S310
        f"{store.url}/api/v1/import/prometheus", data=text.encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
        assert answer.status in (200, 204)
    with urllib.request.urlopen(f"{store.url}/internal/force_flush", timeout=30):  # noqa: S310
        pass
    # flushed data becomes searchable a moment later (its index is built in the background): wait for it
    sample = next(line for line in text.splitlines() if line and not line.startswith("#"))
    first = sample.split("{", 1)[0]
    stamp = sample.rsplit(" ", 2)
    at = {"time": f"{int(stamp[-1]) / 1000:.3f}"} if len(stamp) == 3 and stamp[-1].isdigit() else {}
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        query = urllib.parse.urlencode({"query": f"count({first})", **at})
        with urllib.request.urlopen(f"{store.url}/api/v1/query?{query}", timeout=10) as answer:  # noqa: S310
            if b'"value"' in answer.read():
                return
        time.sleep(0.2)
    raise RuntimeError(f"imported {first} did not become searchable within 20 s")


@contextlib.contextmanager
def prometheus(workdir: Path, targets: list[str]) -> Iterator[Store]:
    """Prometheus scraping ``targets`` every second: host:port, or host:port/path for another path than
    /metrics."""
    (port,) = free_ports(1)
    config = workdir / "prometheus.yml"
    jobs = []
    for number, target in enumerate(targets):
        address, _, path = target.partition("/")
        jobs.append(
            # honor_labels: one fake exporter speaks for many hosts, each series naming its own instance
            f"  - job_name: job{number}\n    metrics_path: /{path or 'metrics'}\n    honor_labels: true\n"
            f"    static_configs:\n      - targets: ['{address}']\n"
        )
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n" + "".join(jobs)
    )
    log = workdir / "prometheus.log"
    argv = [
        PROMETHEUS,
        f"--config.file={config}",
        f"--storage.tsdb.path={workdir / 'prom-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
    ]
    with _running(argv, port, log, "/-/ready", 30.0) as store:
        yield store
