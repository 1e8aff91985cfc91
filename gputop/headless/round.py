"""One collection round with a deadline: start the sources, wait until each has answered once (or the
deadline passed), take one poller tick, close everything without waiting on what hangs.

The round never outlives its deadline by more than the tick's floor and the close grace: a node whose
SSH handshake or command hangs is reported for what it is, and the connections are dropped, not drained.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import threading
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from gputop.clock import Clock
from gputop.core.config import Config
from gputop.core.summary import ClusterView
from gputop.headless import readiness
from gputop.poller import Poller
from gputop.sources.base import Source

# How often the round looks whether every source has answered.
READY_POLL_S = 0.05
# The tick gets at least this long even when the wait used the whole deadline, so sources that answer
# at once (SSH and Slurm hand over what they hold) are still read.
TICK_FLOOR_S = 1.0
# Closing drops connections; whatever has not finished by then is abandoned with the process.
CLOSE_GRACE_S = 1.0
# Worker threads (NVML reads, the simulator's build) are named so the command can tell whether one hangs;
# an idle one ends at once when the executor shuts down, a busy one is given this long.
THREAD_PREFIX = "gputop-round"
WORKER_GRACE_S = 0.2

_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Round:
    """What one round saw, and what it could not see in time."""

    cluster: str
    is_demo: bool
    view: ClusterView
    timeout_s: float
    elapsed_s: float
    # "<source>: <reason>" for sources that failed to start, failed or missed the deadline
    source_errors: tuple[str, ...]
    # node -> slow facts (xid, ibstat, ...) it had not read by the deadline
    unread_facts: Mapping[str, tuple[str, ...]]
    host_keys_verified: bool | None = None  # False: ssh.verify_host_keys is off; None: no SSH at all

    @property
    def heard_from_cluster(self) -> bool:
        """Whether anything came from the cluster itself: a node's data (even stale) or Slurm's state
        as read. Nodes that only failed, and sources that only said why, do not count."""
        snapshot = self.view.snapshot
        slurm_read = snapshot.slurm is not None and snapshot.slurm.sampled_at_s is not None
        return slurm_read or any(node.sampled_at_s is not None for node in snapshot.nodes)


async def collect_round(
    *,
    cluster: str,
    sources: Sequence[Source],
    config: Config,
    clock: Clock,
    timeout_s: float,
    is_demo: bool = False,
    host_keys_verified: bool | None = None,
) -> Round:
    started = time.monotonic()
    deadline = started + timeout_s
    errors: list[str] = []
    started_sources: list[Source] = []
    try:
        for source in sources:
            try:
                await asyncio.wait_for(source.start(), max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                errors.append(f"{source.name}: could not start within {timeout_s:g}s")
                continue
            except Exception as err:  # one source that cannot start must not keep the others dark
                errors.append(f"{source.name}: could not start: {err}")
                continue
            started_sources.append(source)
        asked: set[str] = set()
        while time.monotonic() < deadline and any(readiness.owes(s) for s in started_sources):
            for source in started_sources:
                readiness.read_facts_now(source, asked)
            await asyncio.sleep(READY_POLL_S)
        view, tick_errors = await _tick(cluster, started_sources, config, clock, timeout_s, deadline, is_demo)
        unread: dict[str, tuple[str, ...]] = {}
        for source in started_sources:
            unread |= readiness.unread_facts(source)
            if readiness.slurm_unread(source):
                errors.append(f"{source.name}: no answer within {timeout_s:g}s")
        return Round(
            cluster=cluster,
            is_demo=is_demo,
            view=view,
            timeout_s=timeout_s,
            elapsed_s=time.monotonic() - started,
            source_errors=(*errors, *tick_errors),
            unread_facts=unread,
            host_keys_verified=host_keys_verified,
        )
    finally:
        await _close(started_sources)


async def _tick(
    cluster: str,
    sources: Sequence[Source],
    config: Config,
    clock: Clock,
    timeout_s: float,
    deadline: float,
    is_demo: bool,
) -> tuple[ClusterView, list[str]]:
    # Only sources with silent nodes are wrapped: the others keep what the poller looks for on them
    # (the simulator's take_history).
    ticked = [
        readiness.WithSilentNodes(source, silent)
        if (silent := readiness.silent_nodes(source, timeout_s))
        else source
        for source in sources
    ]
    # in tenths of a second, rounded up: a source that misses it is named with this figure
    remaining_s = max(TICK_FLOOR_S, math.ceil((deadline - time.monotonic()) * 10) / 10)
    poll = dataclasses.replace(config.poll, node_deadline_s=min(config.poll.node_deadline_s, remaining_s))
    poller = Poller(
        cluster=cluster,
        sources=ticked,
        clock=clock,
        poll=poll,
        thresholds=config.thresholds,
        on_view=lambda _view: None,
        is_demo=is_demo,
        judge_at_once=True,  # one round has no past to wait on: a temperature over its threshold now counts
    )
    # What Poller.run does before its first tick: the demo's recent past goes to the idle tracker, so a
    # job holding idle GPUs is named in this one round.
    poller.replay_history()
    view = await poller.tick()
    return view, poller.source_errors


async def _close(sources: Sequence[Source]) -> None:
    closing = asyncio.gather(*(s.close() for s in sources), return_exceptions=True)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(closing, CLOSE_GRACE_S)


def run_bounded(make: Callable[[], Coroutine[Any, Any, _T]]) -> tuple[_T, bool]:
    """Runs a round to its end on a loop of its own; returns its result and whether a worker thread is
    still blocked (a hung NVML call cannot be interrupted: the caller then exits without joining it).

    Unlike asyncio.run, leftover tasks get a bounded time to cancel, and the worker threads are not
    joined: a connection that ignores its cancel or a driver call that never returns cannot hold the
    process past the deadline."""
    loop = asyncio.new_event_loop()
    executor = ThreadPoolExecutor(thread_name_prefix=THREAD_PREFIX)
    loop.set_default_executor(executor)
    try:
        result = loop.run_until_complete(make())
    finally:
        leftovers = asyncio.all_tasks(loop)
        for task in leftovers:
            task.cancel()
        if leftovers:
            loop.run_until_complete(asyncio.wait(leftovers, timeout=CLOSE_GRACE_S))
        loop.run_until_complete(loop.shutdown_asyncgens())
        executor.shutdown(wait=False, cancel_futures=True)
        loop.close()
    return result, _workers_stuck(WORKER_GRACE_S)


def _workers_stuck(grace_s: float) -> bool:
    until = time.monotonic() + grace_s
    for thread in threading.enumerate():
        if thread.name.startswith(THREAD_PREFIX):
            thread.join(max(0.0, until - time.monotonic()))
    return any(t.name.startswith(THREAD_PREFIX) and t.is_alive() for t in threading.enumerate())
