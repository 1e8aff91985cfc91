"""What the benchmarks share: percentiles, the machine's CPU name, cProfile text, and the table that puts
each figure beside its target and ratio (under 1 is within target)."""

from __future__ import annotations

import cProfile
import dataclasses
import io
import math
import platform
import pstats
from collections.abc import Iterable, Mapping


def percentile(values: Iterable[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100): the smallest value with at least p% of values at or below it."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def profile_text(profiler: cProfile.Profile, title: str, top: int) -> str:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.strip_dirs()
    out.write(f"\n=== profile: {title}, by own time ===\n")
    stats.sort_stats("tottime").print_stats(top)
    out.write(f"\n=== profile: {title}, by cumulative time ===\n")
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


@dataclasses.dataclass
class Row:
    name: str
    value: float
    unit: str
    target: float | None = None
    note: str = ""
    at_least: bool = False  # the target is a floor, not a ceiling

    @property
    def ratio(self) -> float | None:
        if self.target is None or math.isnan(self.value):
            return None
        if self.at_least:
            return self.target / self.value if self.value else math.inf
        return self.value / self.target


def fmt_value(value: float, unit: str, formats: Mapping[str, str]) -> str:
    """``value`` with the format its unit has in ``formats`` ("{:.1f} ms"), else "{:g} unit"."""
    if math.isnan(value):
        return "n/a"
    return formats.get(unit, "{:g} " + unit).format(value).strip()


def print_table(rows: list[Row], formats: Mapping[str, str]) -> None:
    headers = ("figure", "value", "target", "ratio", "")
    cells = []
    for row in rows:
        ratio = row.ratio
        target = (
            ""
            if row.target is None
            else ("> " if row.at_least else "< ") + fmt_value(row.target, row.unit, formats)
        )
        mark = "" if ratio is None else ("ok" if ratio < 1 else "MISSED")
        cells.append(
            (
                row.name,
                fmt_value(row.value, row.unit, formats),
                target,
                "" if ratio is None else f"{ratio:.2f}",
                f"{mark} {row.note}".strip(),
            )
        )
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()
    print(line)
    print("-" * len(line))
    for c in cells:
        print(
            "  ".join(
                (v.rjust(w) if i in (1, 3) else v.ljust(w))
                for i, (v, w) in enumerate(zip(c, widths, strict=True))
            ).rstrip()
        )
