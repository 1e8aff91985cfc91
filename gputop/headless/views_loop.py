"""The loop `gputop watch` and `gputop record` share: the poller run without end on the target's sources,
each newest view handed to the command, until SIGTERM, SIGINT or SIGHUP (then 128 + the signal).

Only the newest view matters: a command slower than a tick skips the views it missed rather than
falling behind."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable

from gputop.core.config import HistoryConfig
from gputop.core.event_history import EventHistory
from gputop.core.summary import ClusterView
from gputop.headless.command import Target
from gputop.poller import Poller

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Stopped(Exception):
    """The loop ended by a signal: its number."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


async def run_views(
    target: Target,
    on_view: Callable[[ClusterView], Awaitable[None]],
    *,
    history: EventHistory | None = None,
    keep_history: HistoryConfig | None = None,
) -> None:
    """Runs until a stop signal (raises Stopped) or until ``on_view`` raises; the poller and its sources
    are stopped and closed either way."""
    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()
    stopped_by: list[int] = []

    def stop(signum: int) -> None:
        stopped_by.append(signum)
        if main_task is not None:
            main_task.cancel()

    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, stop, signum)
    latest: asyncio.Queue[ClusterView] = asyncio.Queue(maxsize=1)

    def newest(view: ClusterView) -> None:
        with contextlib.suppress(asyncio.QueueEmpty):
            latest.get_nowait()
        latest.put_nowait(view)

    config = target.config
    poller = Poller(
        cluster=target.cluster_name,
        sources=target.sources,
        clock=target.clock,
        poll=config.poll,
        thresholds=config.thresholds,
        on_view=newest,
        is_demo=target.is_demo,
        history=keep_history,
    )
    poller.stage.history = history
    polling = asyncio.create_task(poller.run())
    try:
        while True:
            await on_view(await latest.get())
    except asyncio.CancelledError:
        if not stopped_by:
            raise
        raise Stopped(stopped_by[0]) from None
    finally:
        poller.stop()
        polling.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(polling, 2.0)
