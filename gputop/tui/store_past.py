"""The node screen's chart from the store's past where gputop's own history does not reach over its
window (gputop.core.node_past): the store is asked for the node's readings over the window, once per
step while the chart shows it, and the chart says where its lines come from, or why the store could
not give them. One reading at a time; what was read for another node or window is dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import Final, Protocol, cast

from gputop.core.history_store import HistoryStore
from gputop.core.node_past import NodePast, wants_store
from gputop.core.safe_text import safe_line
from gputop.tui.widgets.history_chart import FROM_STORE

log = logging.getLogger(__name__)

RETRY_S: Final = 15.0  # a store that could not answer is asked again this much later


class PastSource(Protocol):
    async def node_past(self, node: str, window_s: float) -> NodePast | None: ...


class StorePast:
    def __init__(self, sources: Iterable[object], on_read: Callable[[], None]) -> None:
        self._sources = [s for s in sources if hasattr(s, "node_past")]
        self._on_read = on_read  # the chart is drawn again with what was read
        self._past: NodePast | None = None
        self._asked: tuple[str, float] | None = None  # (node, window) being read or last read
        self._error = ""  # why the last reading failed
        self._reading: asyncio.Task[None] | None = None
        self._no_past: set[str] = set()  # nodes no store has
        self._asked_at_s = 0.0

    def for_chart(
        self, node: str, window_s: float, history: HistoryStore | None, now_s: float
    ) -> tuple[HistoryStore | None, str]:
        """The history to draw a chart of ``window_s`` from, and what the chart's title says of it
        ("": gputop's own)."""
        if not self._sources or node in self._no_past or not wants_store(history, window_s, now_s):
            return history, ""
        asked = (node, window_s)
        if self._asked != asked:
            self._past, self._error, self._asked = None, "", asked
            self.cancel()
        past = self._past
        if self._reading is None or self._reading.done():
            if past is not None:
                due = now_s - past.read_at_s >= past.step_s  # a step later: the chart's newest step
            else:
                due = not self._error or now_s - self._asked_at_s >= RETRY_S
            if due:
                self._asked_at_s = now_s
                self._reading = asyncio.create_task(self._read(node, window_s))
        if past is not None:
            return past.history, FROM_STORE
        if self._error:
            return history, safe_line(f"the store's past could not be read: {self._error}")
        return history, "reading the store's past"

    async def _read(self, node: str, window_s: float) -> None:
        try:
            for source in self._sources:
                past = await cast(PastSource, source).node_past(node, window_s)
                if past is not None:
                    break
            else:
                self._no_past.add(node)
                past = None
        except Exception as err:  # a store that cannot answer says so on the chart; the rest goes on
            log.warning("reading %s's past from the store failed: %s", node, err)
            if self._asked == (node, window_s):
                self._error = str(err) or type(err).__name__
        else:
            if self._asked == (node, window_s):
                self._past, self._error = past, ""
        self._on_read()

    def cancel(self) -> None:
        """Stops a reading under way (the screen left, or another node or window asked)."""
        if self._reading is not None:
            self._reading.cancel()
            self._reading = None
