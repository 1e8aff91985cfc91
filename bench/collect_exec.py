"""The other common way to poll a fleet, for bench_collect to set beside gputop's streaming: one
non-streaming `nvidia-smi --query-gpu` exec per node per second over persistent connections."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from gputop.core.config import ClusterConfig
from gputop.core.models import GpuSample, NodeSample, SourceResult
from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.query_gpu import parse_query_gpu
from gputop.sources.ssh import node_sample

INTERVAL_S = 1.0  # gputop's poll interval in the benchmark, and the exec baseline's


# -- the exec-per-tick baseline -----------------------------------------------------------------------------
class ExecLink:
    """One node polled the exec way: a persistent connection, one non-streaming --query-gpu per tick.
    Holds what `node_sample` reads from a NodeLink, so the samples are built exactly as gputop's are."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.conn: Any = None
        self.gpus: tuple[GpuSample, ...] = ()
        self.processes_by_uuid: dict[str, Any] = {}  # the exec way runs no processes fact
        self.gpus_processes: dict[str, Any] | None = self.processes_by_uuid
        self.sampled_at_s: float | None = None
        self.facts: dict[str, Any] = {}
        self.fact_errors: dict[str, str] = {}
        self.derived: dict[str, tuple[Any, Any]] = {}
        self.error: str | None = None
        self.version = 0
        self.facts_version = 0  # the exec way runs no slow facts
        self.connected = False  # what node_sample says of a node before its first sample


class ExecStats:
    def __init__(self) -> None:
        self.active = False
        self.done = 0
        self.failed = 0
        self.skipped = 0  # intervals missed because the previous exec was still running
        self.latencies_s: list[float] = []
        self.parse_cpu_s = 0.0
        self.errors: dict[str, int] = {}

    def reset(self) -> None:
        self.done = self.failed = self.skipped = 0
        self.latencies_s.clear()
        self.parse_cpu_s = 0.0
        self.errors.clear()


class ExecPerTickSource:
    """The approach of all-smi's SSH mode and gpustat-web: every node, every tick, one exec of the
    non-streaming `nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`, parsed by gputop's
    parser; `collect` hands the poller the latest result of each node, like SshSource."""

    def __init__(
        self, cluster: ClusterConfig, links: Sequence[ExecLink], command_line: str, fields: Sequence[str]
    ) -> None:
        self.name = f"exec:{cluster.name}"
        self.cluster = cluster
        self.links = list(links)
        self.command_line = command_line
        self.fields = tuple(fields)
        self.stats = ExecStats()
        self._tasks: list[asyncio.Task[None]] = []
        self._samples: dict[str, tuple[int, NodeSample]] = {}

    async def start(self) -> None:
        # Rounds: every node's exec starts at the same moment each interval, as a poller's tick would.
        first_at = asyncio.get_running_loop().time() + 0.05
        self._tasks = [asyncio.create_task(self._loop(link, first_at)) for link in self.links]

    async def _loop(self, link: ExecLink, due: float) -> None:
        loop = asyncio.get_running_loop()
        stats = self.stats
        while True:
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            started = loop.time()
            try:
                result = await link.conn.run(self.command_line, encoding=None, timeout=5.0, check=False)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # a failed exec is the node's error, as in any poller
                self._failed(link, f"{type(err).__name__}: {err}")
            else:
                if stats.active:
                    stats.latencies_s.append(loop.time() - started)
                self._read(link, result)
            due += INTERVAL_S
            now = loop.time()
            if due < now:  # the exec took longer than an interval: skip to the next round
                missed = int((now - due) / INTERVAL_S) + 1
                due += missed * INTERVAL_S
                if stats.active:
                    stats.skipped += missed

    def _read(self, link: ExecLink, result: Any) -> None:
        stats = self.stats
        cpu0 = time.process_time()
        out = result.stdout or b""
        text = out.decode("utf-8", errors="replace") if isinstance(out, bytes) else out
        parsed = parse_query_gpu(text, self.fields) if result.exit_status == 0 else None
        if stats.active:
            stats.parse_cpu_s += time.process_time() - cpu0
        if parsed is None or isinstance(parsed, ParseFailure):
            reason = (
                f"exit status {result.exit_status}: {text.strip()[:80]}" if parsed is None else parsed.reason
            )
            self._failed(link, reason)
            return
        link.gpus = parsed.gpus
        link.sampled_at_s = time.time()
        link.error = None
        link.version += 1
        if stats.active:
            stats.done += 1

    def _failed(self, link: ExecLink, reason: str) -> None:
        if self.stats.active:
            self.stats.failed += 1
            self.stats.errors[reason] = self.stats.errors.get(reason, 0) + 1
        if link.error != reason:
            link.error = reason
            link.version += 1

    async def collect(self, now_s: float) -> SourceResult:
        return SourceResult(nodes=tuple(self._sample(link) for link in self.links))

    def _sample(self, link: ExecLink) -> NodeSample:
        cached = self._samples.get(link.name)
        if cached is not None and cached[0] == link.version:
            return cached[1]
        sample = node_sample(link, self.cluster.gpus_per_node)  # type: ignore[arg-type]
        self._samples[link.name] = (link.version, sample)
        return sample

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        for link in self.links:
            if link.conn is not None:
                link.conn.close()
        await asyncio.gather(
            *(link.conn.wait_closed() for link in self.links if link.conn is not None), return_exceptions=True
        )
