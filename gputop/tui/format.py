"""How values read on screen: units, rounding, and "n/a" for what a source could not report."""

from __future__ import annotations

NA = "n/a"


def pct(value: float | None) -> str:
    return NA if value is None else f"{value:.0f}%"


def temp(value: float | None) -> str:
    return NA if value is None else f"{value:.0f}C"


def gib(mib: float | None) -> str:
    return NA if mib is None else f"{mib / 1024:.0f}"


def mem_pair(used_mib: float | None, total_mib: float | None) -> str:
    if used_mib is None or total_mib is None:
        return NA
    return f"{used_mib / 1024:.0f}/{total_mib / 1024:.0f}G"


def power(watts: float | None) -> str:
    if watts is None:
        return NA
    if watts >= 10_000:
        return f"{watts / 1000:.0f}kW"
    if watts >= 1000:
        return f"{watts / 1000:.1f}kW"
    return f"{watts:.0f}W"


def power_pair(watts: float | None, limit_w: float | None) -> str:
    if watts is None:
        return NA
    return f"{watts:.0f}/{limit_w:.0f}W" if limit_w else f"{watts:.0f}W"


def mhz(value: float | None) -> str:
    return NA if value is None else f"{value:.0f}MHz"


def duration(seconds: float | None) -> str:
    """Slurm's way: 1-02:03:04, 02:03:04, 03:04; n/a for none."""
    if seconds is None:
        return NA
    total = int(max(0.0, seconds))
    days, rest = divmod(total, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"
