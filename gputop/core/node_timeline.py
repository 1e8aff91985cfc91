"""What changed on each node, and when: problems starting and clearing, Slurm draining and resuming it,
its GPUs' MIG mode and MIG instances. The node screen's chart marks these on its time axis beside the
Xid events; a problem that came and went while nobody looked is still there to see.

Pure and cheap: fed each tick with the derived rows, it skips a node whose row is the previous tick's
object (nothing about it changed), and otherwise compares a few keys; a node's list is bounded.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from gputop.core.slices import run_to_end

if TYPE_CHECKING:
    from gputop.core.models import NodeSample, SlurmNode
    from gputop.core.problem import Problem
    from gputop.core.summary import NodeRow

EVENTS_PER_NODE: Final = 200
KEEP_S: Final = 24 * 3600.0
DRAIN_FLAGS: Final = frozenset({"DRAIN", "DRAINING", "DRAINED"})
ROWS_PER_SLICE: Final = 1000  # some 3 ms of work between two yields, every row changed


@dataclass(frozen=True, slots=True)
class TimelineEvent:
    time_s: float
    kind: str  # "problem", "cleared", "drain", "resume", "mig"
    label: str  # "GPU3 91 C", "cleared: GPU3 91 C", "drained: RMA 1", "MIG on GPU3"
    subject: tuple[str, int | None] = ("", None)  # a problem's kind and GPU


@dataclass(slots=True)
class _Seen:
    row: NodeRow | None = None
    problems: dict[tuple[str, int | None, str], Problem] = field(default_factory=dict)
    slurm: SlurmNode | None = None
    drained: bool = False
    without_util: int = 0  # GPUs that report no utilization: MIG GPUs among them
    mig: tuple[int, ...] = ()
    mig_instances: object = None
    events: deque[TimelineEvent] = field(default_factory=lambda: deque(maxlen=EVENTS_PER_NODE))


class NodeTimeline:
    def __init__(self) -> None:
        self._nodes: dict[str, _Seen] = {}

    def update(self, now_s: float, rows: Mapping[str, NodeRow]) -> None:
        """One tick's rows. A node seen for the first time is only learnt: what was there before gputop
        looked did not start then."""
        run_to_end(self.update_steps(now_s, rows))

    def update_steps(
        self, now_s: float, rows: Mapping[str, NodeRow], rows_per_slice: int = ROWS_PER_SLICE
    ) -> Generator[None, None, None]:
        """`update`, yielding after every ``rows_per_slice`` rows (a refresh of a store's 10,000 nodes
        changes every row). Each node's events are whole between slices."""
        for count, (name, row) in enumerate(rows.items(), 1):
            if not count % rows_per_slice:
                yield
            seen = self._nodes.get(name)
            if seen is None:
                seen = self._nodes[name] = _Seen()
                self._learn(seen, row)
                continue
            if row is seen.row:
                continue
            self._compare(seen, row, now_s)

    def events(self, node: str, since_s: float = 0.0) -> tuple[TimelineEvent, ...]:
        seen = self._nodes.get(node)
        if seen is None:
            return ()
        return tuple(e for e in seen.events if e.time_s >= since_s)

    def _learn(self, seen: _Seen, row: NodeRow) -> None:
        seen.row = row
        seen.problems = {_key(p): p for p in row.problems}
        seen.slurm = row.slurm
        seen.drained = _drained(row.slurm)
        seen.without_util = row.gpu_count - row.util_gpu_count
        seen.mig = _mig(row.source) if seen.without_util else ()
        seen.mig_instances = row.source.facts.mig_gi.value

    def _compare(self, seen: _Seen, row: NodeRow, now_s: float) -> None:
        add = seen.events.append
        if row.problems or seen.problems:
            current = {_key(p): p for p in row.problems}
            for key, problem in current.items():
                if key not in seen.problems:
                    add(TimelineEvent(problem.since_s or now_s, "problem", problem.message, key[:2]))
            for key, problem in seen.problems.items():
                if key not in current:
                    add(TimelineEvent(now_s, "cleared", f"cleared: {problem.message}", key[:2]))
            seen.problems = current
        if row.slurm is not seen.slurm:
            drained = _drained(row.slurm)
            if drained != seen.drained and row.slurm is not None:
                reason = row.slurm.reason or ""
                label = f"drained: {reason}" if drained else "resumed"
                add(TimelineEvent(now_s, "drain" if drained else "resume", label[:120]))
            seen.slurm, seen.drained = row.slurm, drained
        without_util = row.gpu_count - row.util_gpu_count
        if without_util or seen.without_util:
            mig = _mig(row.source)
            for gpu in sorted(set(mig) ^ set(seen.mig)):
                add(TimelineEvent(now_s, "mig", f"MIG {'on' if gpu in mig else 'off'} GPU{gpu}"))
            seen.mig = mig
        seen.without_util = without_util
        instances = row.source.facts.mig_gi.value
        if instances is not seen.mig_instances:
            if instances != seen.mig_instances and seen.mig_instances is not None and instances is not None:
                add(TimelineEvent(now_s, "mig", "MIG instances changed"))
            seen.mig_instances = instances
        seen.row = row
        while seen.events and seen.events[0].time_s < now_s - KEEP_S:
            seen.events.popleft()


def _key(problem: Problem) -> tuple[str, int | None, str]:
    return (problem.kind, problem.gpu_index, problem.subject)


def _drained(slurm: SlurmNode | None) -> bool:
    return slurm is not None and bool(slurm.flags & DRAIN_FLAGS)


def _mig(node: NodeSample) -> tuple[int, ...]:
    return tuple(gpu.index for gpu in node.gpus if gpu.mig_enabled)
