"""The metrics the cluster map can colour by, and how a value becomes a step on the heat scale.

The top step of the scale is reserved for values at or over the configured warning threshold, so the map's
hottest colour means exactly what the config says it means.
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

_LABELS = {
    Metric.UTIL: "utilization",
    Metric.MEM: "memory used",
    Metric.TEMP: "temperature",
    Metric.POWER: "power of limit",
}


@dataclass(frozen=True, slots=True)
class HeatScale:
    """Maps a metric value to a heat step: [low, warn) spread over steps 0..8, warn and above is step 9."""

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
