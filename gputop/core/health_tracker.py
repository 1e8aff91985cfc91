"""Readings that must last before they are reported, and must fall well back before they clear.

`HealthTracker` is fed one snapshot per tick (like gputop.core.idle.IdleTracker) and returns the GPU flags
it holds as of that snapshot, by node. Pure: every time comes from the snapshots (``taken_at_s``).

Rules:
- Temperature: WARN from ``temp_warn_c``, CRIT from ``temp_crit_c``, each only once the value has stayed
  at or over that threshold for ``temp_sustain_s`` (a dip below restarts the count), so a short spike
  under a burst of work is not reported. A reported level clears (CRIT drops to WARN, WARN to nothing)
  only when the value falls ``hysteresis_c`` below its threshold, so a GPU hovering at 84-86 C against
  85 does not flap.
- Memory: WARN from ``mem_warn_pct`` at once (memory fills in steps, not spikes), cleared
  ``mem_hysteresis_pct`` points below it.
- PCIe generation below its maximum while the GPU works (utilization over ``pcie_busy_util_pct``): WARN
  once that has lasted ``temp_sustain_s``; it clears as soon as either stops. Idle GPUs lower the link
  speed to save power, and a GPU ramping up takes a moment to raise it again.
- A GPU without the value has nothing to report there: its state for that reading is dropped.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Final, NamedTuple

from gputop.core.config import Thresholds
from gputop.core.models import ClusterSnapshot, GpuSample, Severity
from gputop.core.slices import run_to_end

TEMP: Final = "temp"
MEM: Final = "mem"
PCIE_GEN: Final = "pcie_gen"
NODES_PER_SLICE: Final = 1000  # nodes between two yields of `update_steps`: a few milliseconds


class GpuFlag(NamedTuple):
    """One reading of one GPU that the rules report, and how badly."""

    index: int  # type: ignore[assignment]  # the GPU index, as in GpuSample
    kind: str  # TEMP, MEM or PCIE_GEN
    severity: Severity


# By node name, the flags of its GPUs in index order; nodes without any are absent.
HealthFlags = Mapping[str, tuple[GpuFlag, ...]]


@dataclass(slots=True)
class _GpuState:
    temp_level: int = 0  # 0 nothing, 1 WARN, 2 CRIT
    warn_since_s: float | None = None  # start of the current stretch at or over temp_warn_c
    crit_since_s: float | None = None
    mem_flagged: bool = False
    pcie_since_s: float | None = None  # start of the current stretch of a slow link under load

    def idle(self) -> bool:
        return (
            not self.temp_level
            and self.warn_since_s is None
            and self.crit_since_s is None
            and not self.mem_flagged
            and self.pcie_since_s is None
        )


_LEVEL_SEVERITY: Final = (Severity.OK, Severity.WARN, Severity.CRIT)


class HealthTracker:
    """Follows each GPU's temperature, memory and PCIe link from snapshot to snapshot; see the module
    notes for the rules. ``sustain_s`` starts as ``thresholds.temp_sustain_s``; a single collection round
    (``gputop check``) sets it to 0: it has no past to wait on."""

    def __init__(self, thresholds: Thresholds) -> None:
        self.warn_c = thresholds.temp_warn_c
        self.crit_c = thresholds.temp_crit_c
        self.hysteresis_c = thresholds.hysteresis_c
        self.mem_warn_pct = thresholds.mem_warn_pct
        self.mem_clear_pct = thresholds.mem_warn_pct - thresholds.mem_hysteresis_pct
        self.pcie_busy_pct = thresholds.pcie_busy_util_pct
        self.sustain_s = thresholds.temp_sustain_s
        self.flags: HealthFlags = {}
        self._states: dict[str, dict[int, _GpuState]] = {}
        self._snapshot: ClusterSnapshot | None = None

    def update(self, snapshot: ClusterSnapshot) -> HealthFlags:
        return run_to_end(self.update_steps(snapshot))

    def update_steps(
        self, snapshot: ClusterSnapshot, nodes_per_slice: int = NODES_PER_SLICE
    ) -> Generator[None, None, HealthFlags]:
        """`update`, yielding after every ``nodes_per_slice`` nodes (10,000 nodes take some 30 ms). The
        flags change only when the last slice is done."""
        if snapshot is self._snapshot:
            return self.flags
        now_s = snapshot.taken_at_s
        warn_c, mem_warn, busy = self.warn_c, self.mem_warn_pct, self.pcie_busy_pct
        old_states = self._states
        # last tick's samples: a node that hands the very same one again (a store's source between its
        # refreshes) has nothing new over a threshold; only its GPUs that have a state can move (in time)
        last_samples = self._snapshot.by_name if self._snapshot is not None else {}
        states: dict[str, dict[int, _GpuState]] = {}
        flags: dict[str, tuple[GpuFlag, ...]] = {}
        for count, node in enumerate(snapshot.nodes, 1):
            if not count % nodes_per_slice:
                yield
            mine = old_states.get(node.name)
            same_sample = last_samples.get(node.name) is node
            if same_sample and not mine:
                continue
            kept: dict[int, _GpuState] = {}
            for gpu in node.gpus:
                state = mine.get(gpu.index) if mine else None
                if state is None:
                    if same_sample:
                        continue
                    # The common case, kept cheap: a GPU with no state and nothing over a threshold.
                    temp = gpu.temp_c
                    used, total = gpu.mem_used_mib, gpu.mem_total_mib
                    gen = gpu.pcie_link_gen
                    if not (
                        (temp is not None and temp >= warn_c)
                        or (used is not None and total and used * 100.0 >= mem_warn * total)
                        or (gen is not None and _slow_link_under_load(gpu, gen, busy))
                    ):
                        continue
                    state = _GpuState()
                self._step(state, gpu, now_s)
                if not state.idle():
                    kept[gpu.index] = state
            if kept:
                states[node.name] = kept
                found = self._flags(kept, now_s)
                if found:
                    flags[node.name] = found
        self._states, self._snapshot, self.flags = states, snapshot, flags
        return flags

    def _step(self, state: _GpuState, gpu: GpuSample, now_s: float) -> None:
        temp = gpu.temp_c
        if temp is None:
            state.temp_level, state.warn_since_s, state.crit_since_s = 0, None, None
        else:
            state.warn_since_s = _since(state.warn_since_s, now_s) if temp >= self.warn_c else None
            state.crit_since_s = _since(state.crit_since_s, now_s) if temp >= self.crit_c else None
            level = state.temp_level
            if state.crit_since_s is not None and now_s - state.crit_since_s >= self.sustain_s:
                level = 2
            elif state.warn_since_s is not None and now_s - state.warn_since_s >= self.sustain_s:
                level = max(level, 1)
            if level == 2 and temp < self.crit_c - self.hysteresis_c:
                level = 1
            if level == 1 and temp < self.warn_c - self.hysteresis_c:
                level = 0
            state.temp_level = level
        mem_pct = gpu.mem_pct
        if mem_pct is None:
            state.mem_flagged = False
        else:
            state.mem_flagged = mem_pct >= (self.mem_clear_pct if state.mem_flagged else self.mem_warn_pct)
        gen = gpu.pcie_link_gen
        if gen is not None and _slow_link_under_load(gpu, gen, self.pcie_busy_pct):
            if state.pcie_since_s is None:
                state.pcie_since_s = now_s
        else:
            state.pcie_since_s = None

    def _flags(self, states: dict[int, _GpuState], now_s: float) -> tuple[GpuFlag, ...]:
        found: list[GpuFlag] = []
        for index in sorted(states):
            state = states[index]
            if state.temp_level:
                found.append(GpuFlag(index, TEMP, _LEVEL_SEVERITY[state.temp_level]))
            if state.mem_flagged:
                found.append(GpuFlag(index, MEM, Severity.WARN))
            if state.pcie_since_s is not None and now_s - state.pcie_since_s >= self.sustain_s:
                found.append(GpuFlag(index, PCIE_GEN, Severity.WARN))
        return tuple(found)


def _since(started_s: float | None, now_s: float) -> float:
    """When the current stretch over a threshold began: when it did, or now for a new one."""
    return now_s if started_s is None else started_s


def _slow_link_under_load(gpu: GpuSample, gen: int, busy_pct: float) -> bool:
    gen_max = gpu.pcie_link_gen_max
    util = gpu.util_pct
    return gen_max is not None and gen < gen_max and util is not None and util > busy_pct


def instant_flags(gpus: tuple[GpuSample, ...], thresholds: Thresholds) -> tuple[GpuFlag, ...]:
    """The flags a tracker without a past gives these GPUs: every threshold counts at once. For callers
    that assess one sample on its own (tests, `gputop parse`)."""
    tracker = HealthTracker(thresholds)
    tracker.sustain_s = 0.0
    flags: list[GpuFlag] = []
    for gpu in gpus:
        state = _GpuState()
        tracker._step(state, gpu, 0.0)
        flags.extend(tracker._flags({gpu.index: state}, 0.0))
    return tuple(flags)
