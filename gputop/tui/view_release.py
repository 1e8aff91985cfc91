"""Freeing a view the screen no longer shows a slice at a time, after the new one is painted.

A view at 10,000 nodes holds some two million objects (each node's sample, its GPUs and their readings);
when the last widget lets go of one, Python frees them all at once, some 20 ms in which no key is
answered. Here the app hands the old view over as it applies the new one. Once no widget holds it any
more (on a large fleet the map takes the new view a frame after the table, so it holds the old one a
frame longer), its rows and samples are kept in lists, the view itself is dropped (freeing little), and
the lists are let go of a few hundred rows at a time, handing the event loop back between slices as the
poller does. The CPU is the same; what changes is that it no longer falls in one piece inside a frame.
`released_cpu_s` counts it, so a benchmark can report it beside the frame's own cost.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import deque
from typing import TYPE_CHECKING

from gputop.yielding import yield_to_ui

if TYPE_CHECKING:
    from gputop.core.summary import ClusterView

ROWS_PER_SLICE = 400  # about a millisecond of freeing at eight GPUs a node
SMALL_VIEW_ROWS = 2 * ROWS_PER_SLICE  # below this, freeing at once costs less than the task
HOLDER_CHECK_S = 0.02  # how often a view some widget still holds is looked at again (about a frame)
HOLDER_WAIT_S = 2.0  # a view held longer than this (a screen kept it) is sliced anyway
# sys.getrefcount of a view only the release holds: its waiting entry, the check's local name, the call's
# own argument
_OWN_REFERENCES = 3


class ViewRelease:
    def __init__(self) -> None:
        self._waiting: deque[tuple[ClusterView, float]] = deque()  # (view, retired at, monotonic s)
        self._held: deque[list[object]] = deque()
        self._task: asyncio.Task[None] | None = None
        self.released_cpu_s = 0.0

    def retire(self, view: ClusterView | None) -> None:
        """Takes ``view`` to free in slices once nothing else holds it; the caller drops its own
        reference at once."""
        if view is None or len(view.rows) < SMALL_VIEW_ROWS:
            return
        self._waiting.append((view, time.monotonic()))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._release())

    @property
    def pending(self) -> int:
        """Rows and samples not yet let go of."""
        waiting = sum(len(view.rows) + len(view.snapshot.nodes) for view, _ in self._waiting)
        return waiting + sum(len(held) for held in self._held)

    def _first_let_go_of(self) -> bool:
        """Whether the first waiting view is held by nothing but the release (or has waited its time)."""
        view, retired_at_s = self._waiting[0]
        return sys.getrefcount(view) <= _OWN_REFERENCES or time.monotonic() - retired_at_s >= HOLDER_WAIT_S

    async def _release(self) -> None:
        waiting, held = self._waiting, self._held
        while waiting or held:
            started = time.process_time()
            if waiting and self._first_let_go_of():
                view, _ = waiting.popleft()
                held.append(list(view.rows.values()))
                held.append(list(view.snapshot.nodes))
                del view  # the view's own dicts and lists go now; what they held stays in the lists
            elif held:
                items = held[0]
                del items[-ROWS_PER_SLICE:]
                if not items:
                    held.popleft()
            else:
                await asyncio.sleep(HOLDER_CHECK_S)  # a widget holds the view still: look again later
                continue
            self.released_cpu_s += time.process_time() - started
            await yield_to_ui()

    def release_now(self) -> None:
        """Everything at once (the app is exiting)."""
        self._waiting.clear()
        self._held.clear()
        if self._task is not None:
            self._task.cancel()
