"""`nvidia-smi nvlink -e`: per GPU, each NVLink's error counters.

Drivers before NVLink 5 print three counters a link (``Replay Errors``, ``Recovery Errors``, ``CRC Errors``);
later ones print more under other names (``Rx Errors``, ``Link recovery failed events``, ``Effective
Errors``...). Every ``Link N: <name>: <count>`` is kept under its own name; `LinkErrors` sorts them into the
three kinds the health rules judge (CRC, replay, recovery) by the words in their names, so a counter a newer
driver adds is counted where its name says, never dropped. An empty output is a real answer (no NVLink).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from gputop.core.parsers.common import BoundedNotes, ParseFailure, ParserInfo

KIND: Final = "nvlink-errors"

_GPU_LINE = re.compile(r"^GPU\s+(\d+):\s*(.*?)\s*(?:\(UUID:\s*([^)\s]+)\s*\))?\s*$")
_COUNTER_LINE = re.compile(r"^\s*Link\s+(\d+):\s*([^:]+?)\s*:\s*(\S+)\s*$")


@dataclass(frozen=True, slots=True)
class LinkErrors:
    link: int
    counters: tuple[tuple[str, int], ...]  # (name as printed, count)

    def _sum(self, *words: str) -> int:
        return sum(n for name, n in self.counters if any(w in name.lower() for w in words))

    @property
    def crc(self) -> int:
        return self._sum("crc")

    @property
    def replay(self) -> int:
        return self._sum("replay")

    @property
    def recovery(self) -> int:
        return self._sum("recovery")


@dataclass(frozen=True, slots=True)
class GpuLinkErrors:
    index: int
    uuid: str | None
    links: tuple[LinkErrors, ...] = ()

    @property
    def crc(self) -> int:
        return sum(link.crc for link in self.links)

    @property
    def replay(self) -> int:
        return sum(link.replay for link in self.links)

    @property
    def recovery(self) -> int:
        return sum(link.recovery for link in self.links)


@dataclass(frozen=True, slots=True)
class NvlinkErrors:
    gpus: tuple[GpuLinkErrors, ...] = ()
    notes: tuple[str, ...] = ()

    def gpu(self, index: int) -> GpuLinkErrors | None:
        return next((g for g in self.gpus if g.index == index), None)


def parse_nvlink_errors(text: str) -> NvlinkErrors | ParseFailure:
    if not text.strip():
        return NvlinkErrors(notes=("no output: no NVLink reported",))
    notes = BoundedNotes()
    gpus: list[GpuLinkErrors] = []
    current: tuple[int, str | None] | None = None
    links: dict[int, list[tuple[str, int]]] = {}

    def close() -> None:
        if current is not None:
            made = tuple(LinkErrors(k, tuple(v)) for k, v in sorted(links.items()))
            gpus.append(GpuLinkErrors(current[0], current[1], made))

    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            continue
        gpu_match = _GPU_LINE.match(stripped)
        counter = _COUNTER_LINE.match(line)
        if counter and current is not None:
            count = counter.group(3)
            if count.isdigit():
                links.setdefault(int(counter.group(1)), []).append((counter.group(2), int(count)))
            else:
                notes.append(f"GPU {current[0]} link {counter.group(1)}: {counter.group(2)} reads {count!r}")
        elif gpu_match:
            close()
            current = (int(gpu_match.group(1)), gpu_match.group(3))
            links = {}
        elif current is not None:
            notes.append(f"GPU {current[0]}: {stripped[:120]}")
        else:
            notes.append(f"ignored line: {stripped[:120]}")
    close()
    if not gpus:
        return ParseFailure(KIND, "no 'GPU n: ...' lines", text.strip()[:200])
    return NvlinkErrors(tuple(gpus), tuple(notes))


PARSERS: dict[str, ParserInfo] = {
    KIND: ParserInfo(KIND, "nvidia-smi nvlink -e (NVLink error counters)", parse_nvlink_errors)
}
