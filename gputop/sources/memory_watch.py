"""Slow facts that wait for GPU memory to move before they run again (the processes fact: every process
holds GPU memory, so the process list cannot change without memory moving).

The metrics stream looks as it publishes, at each watched fact's own interval: a thousand nodes each
publishing every second pay one float comparison per publish until a look is due, where waking every
node's fact loop to look cost more than looking.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from gputop.sources.commands import MEM_MOVE_MIB

MemoryByGpu = Mapping[int, float]  # MiB used, by GPU index


@dataclass
class MemoryWatches:
    # by fact: (GPU memory when it last ran, when to look next, how often to look)
    watches: dict[str, tuple[MemoryByGpu, float, float]] = field(default_factory=dict)
    moved: set[str] = field(default_factory=set)  # watched facts whose memory moved: due at once
    next_look_s: float = math.inf  # the earliest look of any watch

    def watch(self, fact: str, memory: MemoryByGpu, now_s: float, every_s: float) -> None:
        """``fact`` just ran with GPU memory at ``memory``: look again every ``every_s``."""
        self.watches[fact] = (memory, now_s + every_s, every_s)
        self.next_look_s = min(self.next_look_s, now_s + every_s)

    def look(self, now_s: float, memory_now: Callable[[], MemoryByGpu]) -> bool:
        """Looks at each watch whose time has come; True when a fact became due (in ``moved``)."""
        became_due = False
        for fact, (memory_then, next_s, every_s) in list(self.watches.items()):
            if now_s < next_s:
                continue
            if memory_moved(memory_then, memory_now()):
                del self.watches[fact]
                self.moved.add(fact)
                became_due = True
            else:
                self.watches[fact] = (memory_then, now_s + every_s, every_s)
        self.next_look_s = min((next_s for _m, next_s, _e in self.watches.values()), default=math.inf)
        return became_due

    def take_moved(self) -> set[str]:
        moved, self.moved = self.moved, set()
        return moved

    def clear(self) -> None:
        self.watches.clear()
        self.moved.clear()
        self.next_look_s = math.inf


def memory_moved(then: MemoryByGpu, now: MemoryByGpu) -> bool:
    """Whether a GPU came or went, or any GPU's memory use moved by MEM_MOVE_MIB or more."""
    return then.keys() != now.keys() or any(abs(now[i] - then[i]) >= MEM_MOVE_MIB for i in now)
