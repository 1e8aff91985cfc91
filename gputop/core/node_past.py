"""A node's past as its store keeps it, for the node screen's chart where gputop's own history does not
reach back over the chart's window: gputop started an hour ago and the chart asks for a day, or a fleet
too large for its history's memory bound (history.memory_mb) keeps only an hour or two of minutes.

The store's steps are written into a HistoryStore of their own, one node wide, so the chart reads them
as it reads gputop's history: the same series, gaps and spans. Pure: the source reads the steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from gputop.core.history_store import HistoryStore
from gputop.core.models import NodeSample

# gputop's own rows are drawn while they cover this much of the window: a chart of an hour after 55
# minutes of running is gputop's; a day after an hour is the store's
OWN_SHARE: Final = 0.9
# the steps a window is read in at most: two points per character column of a wide terminal's chart
MAX_POINTS: Final = 720
PAST_BUDGET_MB: Final = 16.0  # a node of 8 GPUs keeps a day of 2-minute steps in under 4 MB


@dataclass(frozen=True, slots=True)
class NodePast:
    node: str
    window_s: float
    step_s: float
    read_at_s: float  # the range's end: the store's time of the answer
    history: HistoryStore


def wants_store(history: HistoryStore | None, window_s: float, now_s: float) -> bool:
    """Whether a chart of ``window_s`` should be drawn from the store: gputop's rows cover less of it
    than OWN_SHARE."""
    return history is None or history.reach_s(window_s, now_s) < OWN_SHARE * window_s


def chart_step_s(window_s: float, interval_s: float) -> float:
    """The step a window is read in: MAX_POINTS across it, never finer than the store's own interval
    (whole seconds, so the steps fall on the same times each time it is read)."""
    return float(max(math.ceil(interval_s), math.ceil(window_s / MAX_POINTS)))


def past_from_steps(
    node: str, window_s: float, step_s: float, read_at_s: float, steps: Sequence[tuple[float, NodeSample]]
) -> NodePast:
    """The steps (time, the node's sample then; oldest first) as a history of their own: every step a
    row of the ticks, kept over the whole window."""
    history = HistoryStore(
        interval_s=step_s,
        fine_minutes=max(1.0, window_s / 60.0),
        coarse_hours=max(1.0, window_s / 3600.0),
        budget_mb=PAST_BUDGET_MB,
    )
    for at_s, sample in steps:
        history.append(at_s, (sample,), {}, step_s)
    return NodePast(node, window_s, step_s, read_at_s, history)
