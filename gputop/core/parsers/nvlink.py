"""`nvidia-smi nvlink -s`: per GPU, each NVLink's speed or `<inactive>`.

An empty output is a real answer (GPUs without NVLink, MIG guests, many VMs print nothing), so it gives an
empty status rather than a failure.
"""

from __future__ import annotations

import functools
import operator
import re
from dataclasses import dataclass

from gputop.core.parsers.common import ParseFailure, ParserInfo

KIND = "nvlink"

_GPU_LINE = re.compile(r"^GPU\s+(\d+):\s*(.*?)\s*(?:\(UUID:\s*([^)\s]+)\s*\))?\s*$")
_LINK_LINE = re.compile(r"^\s*Link\s+(\d+):\s*(.*?)\s*$")
_SPEED = re.compile(r"^([\d.]+)\s*GB/s$")
_IS_ACTIVE = operator.attrgetter("active")


@dataclass(frozen=True, slots=True)
class Link:
    index: int
    # GB/s (gigabytes) as nvidia-smi prints it per link and direction, e.g. 26.562; None when inactive
    speed_gbps: float | None
    active: bool


@dataclass(frozen=True, slots=True)
class GpuLinks:
    index: int
    name: str
    uuid: str | None
    links: tuple[Link, ...] = ()

    @property
    def active_count(self) -> int:
        return sum(map(_IS_ACTIVE, self.links))  # map over a C getter: the health rules ask every tick

    @property
    def inactive_links(self) -> tuple[int, ...]:
        return tuple(link.index for link in self.links if not link.active)

    @property
    def total_speed_gbps(self) -> float:
        """Sum of the active links' speeds, in the same GB/s as each link."""
        return sum(link.speed_gbps or 0.0 for link in self.links if link.active)


@dataclass(frozen=True, slots=True)
class NvlinkStatus:
    gpus: tuple[GpuLinks, ...] = ()
    notes: tuple[str, ...] = ()

    def gpu(self, index: int) -> GpuLinks | None:
        return next((g for g in self.gpus if g.index == index), None)


@functools.lru_cache(maxsize=4096)
def _shared_link(index: int, speed_gbps: float | None, active: bool) -> Link:
    # A fleet's nodes report the same few (link, speed) pairs: one frozen Link each, not one per node
    # (18 links x 8 GPUs x 1,000 nodes held 15 KB a node).
    return Link(index, speed_gbps, active)


def _link(index: int, value: str, gpu: int, notes: list[str]) -> Link:
    if value == "<inactive>":
        return _shared_link(index, None, False)
    match = _SPEED.match(value)
    if match:
        try:
            return _shared_link(index, float(match.group(1)), True)
        except ValueError:
            pass
    notes.append(f"GPU {gpu} link {index}: unreadable status {value!r}")
    return _shared_link(index, None, False)


def parse_nvlink(text: str) -> NvlinkStatus | ParseFailure:
    if not text.strip():
        return NvlinkStatus(notes=("no output: no NVLink reported (no NVLink, MIG guest or VM)",))
    notes: list[str] = []
    gpus: list[GpuLinks] = []
    current: tuple[int, str, str | None] | None = None
    links: list[Link] = []

    def close() -> None:
        if current is not None:
            gpus.append(GpuLinks(current[0], current[1], current[2], tuple(links)))

    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        gpu_match = _GPU_LINE.match(stripped)
        link_match = _LINK_LINE.match(line)
        if gpu_match:
            close()
            current = (int(gpu_match.group(1)), gpu_match.group(2), gpu_match.group(3))
            links = []
        elif link_match and current is not None:
            links.append(_link(int(link_match.group(1)), link_match.group(2), current[0], notes))
        elif stripped in ("...", "…"):
            notes.append("output elided ('...'): GPUs or links after it are missing")
        elif current is not None:
            notes.append(f"GPU {current[0]}: {stripped}")  # e.g. NVML's "Unable to retrieve NVLink ..."
        else:
            notes.append(f"ignored line: {stripped[:120]}")
    close()
    if not gpus:
        return ParseFailure(KIND, "no 'GPU n: ...' lines", text.strip()[:200])
    return NvlinkStatus(tuple(gpus), tuple(notes))


PARSERS: dict[str, ParserInfo] = {KIND: ParserInfo(KIND, "nvidia-smi nvlink -s", parse_nvlink)}
