"""The metrics the cluster map can colour by, and how a value becomes a step on the heat scale.

For temperature and memory, which the health rules judge, the top step of the scale is reserved for the
GPUs the core has flagged (a problem of the metric's kind: past the rule's sustain time, with its
hysteresis), so the map's hottest colour says what the problem list says; any other value stays below it.
Utilization and power are judged by no rule: their top step is the top of the range (fully busy, at or
over `power_warn_pct` of the limit) and means no problem.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from operator import attrgetter

from gputop.core.models import GpuSample

HEAT_STEPS = 10  # heat-0 .. heat-9 in every theme


class Metric(StrEnum):
    UTIL = "util"
    MEM = "mem"
    TEMP = "temp"
    POWER = "power"

    @property
    def label(self) -> str:
        return _LABELS[self]

    @property
    def unit(self) -> str:
        return "C" if self is Metric.TEMP else "%"

    def next(self) -> Metric:
        members = list(Metric)
        return members[(members.index(self) + 1) % len(members)]

    def of(self, gpu: GpuSample) -> float | None:
        """This metric's value for one GPU (None when the GPU does not report it)."""
        return _READ[self](gpu)

    @property
    def rule_kind(self) -> str | None:
        """The kind of the problems that judge this metric (None: no rule does), whose verdict alone takes
        the top step of the map's scale."""
        return _RULE_KINDS.get(self)

    @property
    def fields(self) -> tuple[str, ...]:
        """The readings this metric is worked out from (`NodeSample.not_exported` names them)."""
        return _FIELDS[self]

    @property
    def reader(self) -> Callable[[GpuSample], float | None]:
        """``of`` as a plain function of the GPU: for loops over every GPU of a cluster, where two of the
        four are C-level field getters."""
        return _READ[self]


_READ: dict[Metric, Callable[[GpuSample], float | None]] = {
    Metric.UTIL: attrgetter("util_pct"),
    Metric.MEM: attrgetter("mem_pct"),
    Metric.TEMP: attrgetter("temp_c"),
    Metric.POWER: attrgetter("power_pct"),
}

_FIELDS: dict[Metric, tuple[str, ...]] = {
    Metric.UTIL: ("util_pct",),
    Metric.MEM: ("mem_used_mib", "mem_total_mib"),
    Metric.TEMP: ("temp_c",),
    Metric.POWER: ("power_w", "power_limit_w"),
}

_RULE_KINDS = {Metric.TEMP: "temp", Metric.MEM: "mem"}

_LABELS = {
    Metric.UTIL: "utilization",
    Metric.MEM: "memory used",
    Metric.TEMP: "temperature",
    Metric.POWER: "power of limit",
}


@dataclass(frozen=True, slots=True)
class HeatScale:
    """Maps a metric value to a heat step: [low, warn) spread over steps 0..8, warn and above is step 9
    (for a metric a rule judges, `heatmap.cell_codes` gives step 9 to the flagged GPUs alone)."""

    low: float
    warn: float

    def step(self, value: float) -> int:
        if value >= self.warn:
            return HEAT_STEPS - 1
        if value <= self.low:
            return 0
        fraction = (value - self.low) / (self.warn - self.low)
        return min(HEAT_STEPS - 2, int(fraction * (HEAT_STEPS - 1)))

    def legend(self, metric: Metric) -> list[tuple[int, str]]:
        """(step, label) pairs for a legend: the low end, the middle, and the threshold."""
        mid = (self.low + self.warn) / 2
        unit = metric.unit
        return [(0, f"{self.low:g}{unit}"), (4, f"{mid:g}{unit}"), (HEAT_STEPS - 1, f">={self.warn:g}{unit}")]


def heat_scales(temp_warn_c: float, mem_warn_pct: float, power_warn_pct: float) -> dict[Metric, HeatScale]:
    # Utilization has no warning level; its top step is "fully busy".
    return {
        Metric.UTIL: HeatScale(0.0, 95.0),
        Metric.MEM: HeatScale(0.0, mem_warn_pct),
        Metric.TEMP: HeatScale(25.0, temp_warn_c),
        Metric.POWER: HeatScale(0.0, power_warn_pct),
    }
