"""Freeing a view the screen no longer shows a slice at a time, after the new one is painted.

A view at 10,000 nodes holds some two million objects (each node's sample, its GPUs and their readings);
when the last widget lets go of one, Python frees them all at once, some 20 ms in which no key is
answered. Here the app keeps the old view's rows and samples in lists as it applies the new view, so
dropping the view itself frees little, then lets go of the lists a few hundred rows at a time, handing the
event loop back between slices as the poller does. The CPU is the same; what changes is that it no longer
falls in one piece inside a frame. `released_cpu_s` counts it, so a benchmark can report it beside the
frame's own cost.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import TYPE_CHECKING

from gputop.yielding import yield_to_ui

if TYPE_CHECKING:
    from gputop.core.summary import ClusterView

ROWS_PER_SLICE = 400  # about a millisecond of freeing at eight GPUs a node
SMALL_VIEW_ROWS = 2 * ROWS_PER_SLICE  # below this, freeing at once costs less than the task


class ViewRelease:
    def __init__(self) -> None:
        self._held: deque[list[object]] = deque()
        self._task: asyncio.Task[None] | None = None
        self.released_cpu_s = 0.0

    def retire(self, view: ClusterView | None) -> None:
        """Keeps ``view``'s rows and node samples (what is dear to free) for `release` to let go of;
        the caller then drops ``view`` itself cheaply."""
        if view is None or len(view.rows) < SMALL_VIEW_ROWS:
            return
        self._held.append(list(view.rows.values()))
        self._held.append(list(view.snapshot.nodes))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._release())

    @property
    def pending(self) -> int:
        return sum(len(held) for held in self._held)

    async def _release(self) -> None:
        held = self._held
        while held:
            items = held[0]
            started = time.process_time()
            del items[-ROWS_PER_SLICE:]
            if not items:
                held.popleft()
            self.released_cpu_s += time.process_time() - started
            await yield_to_ui()

    def release_now(self) -> None:
        """Everything at once (the app is exiting)."""
        self._held.clear()
        if self._task is not None:
            self._task.cancel()
