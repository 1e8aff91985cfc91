"""What can go wrong on a fake node, per node, switchable while the fleet runs.

The server reads a node's faults at the moment each one matters (authentication, the start of a command,
every stream interval), so a test can flip a fault on a live connection and watch the client react.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum


class Fault(StrEnum):
    REFUSE_AUTH = "refuse_auth"  # the node's public key is rejected: PermissionDenied
    STALL_HANDSHAKE = "stall_handshake"  # TCP accepted, the SSH handshake never completes
    STALL_COMMAND = "stall_command"  # commands start, then never print or exit
    DIE_MIDSTREAM = "die_midstream"  # the metrics stream stops mid-line after a few intervals
    GARBAGE = "garbage"  # output is random bytes: invalid UTF-8 and broken CSV
    DRIVER_ERROR = "driver_error"  # every nvidia-smi call fails as with a lost GPU handle, exit 15
    FALLEN_OFF_BUS = "fallen_off_bus"  # the last GPU vanishes and the kernel logs Xid 79
    SLOW = "slow"  # every answer starts a few seconds late
    NO_NVIDIA_SMI = "no_nvidia_smi"  # the driver tools are not installed: command not found, exit 127
    OLD_DRIVER = "old_driver"  # nvidia-smi rejects the fields older drivers lack (OLD_DRIVER_LACKS)
    FLOOD = "flood"  # ibstat prints far more than gputop reads of one output (FLOOD_BYTES)
    IB_ADAPTER_FAILS = "ib_adapter_fails"  # ibstat lists all but the last adapter, then fails on it (255)
    NO_SHELL = "no_shell"  # no shell for gputop (a forced command): each fact must run as its own command


# What ibstat prints on a flooding node: more than gputop reads of one command's output (16 MiB).
FLOOD_BYTES = 17 * 1024 * 1024


# Query fields a driver before row remapping (R450) does not know; asking for one fails the whole query.
OLD_DRIVER_LACKS: frozenset[str] = frozenset({"remapped_rows.pending", "remapped_rows.failure"})


def parse_fault_spec(text: str) -> tuple[str, frozenset[Fault]]:
    """``gpu003=garbage,slow`` -> ("gpu003", {GARBAGE, SLOW}); ValueError naming the known faults."""
    node, sep, names = text.partition("=")
    node = node.strip()
    if not sep or not node or not names.strip():
        raise ValueError(f"{text!r}: expected NODE=FAULT[,FAULT...], e.g. gpu003=garbage,slow")
    faults = set()
    for name in names.split(","):
        try:
            faults.add(Fault(name.strip()))
        except ValueError:
            known = ", ".join(f.value for f in Fault)
            raise ValueError(f"{text!r}: unknown fault {name.strip()!r}; known faults: {known}") from None
    return node, frozenset(faults)


class Faults:
    """The fault set of each node, plus the knobs that size the faults (how slow is slow)."""

    def __init__(
        self,
        initial: Mapping[str, Iterable[Fault | str]] | None = None,
        *,
        slow_delay_s: float = 3.0,
        die_after_intervals: int = 3,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.slow_delay_s = slow_delay_s
        self.die_after_intervals = die_after_intervals
        self._clock = clock
        self._by_node: dict[str, frozenset[Fault]] = {}
        # When each fault went on, so a fault that leaves a trace (the Xid 79 of a GPU that fell off the
        # bus) leaves it at the time it happened.
        self._since_s: dict[tuple[str, Fault], float] = {}
        for node, faults in (initial or {}).items():
            self.set(node, *faults)

    def of(self, node: str) -> frozenset[Fault]:
        return self._by_node.get(node, frozenset())

    def has(self, node: str, fault: Fault) -> bool:
        return fault in self._by_node.get(node, ())

    def since_s(self, node: str, fault: Fault) -> float | None:
        return self._since_s.get((node, fault))

    def set(self, node: str, *faults: Fault | str) -> None:
        """Replaces the node's faults with exactly these (none: the node is healthy again)."""
        wanted = frozenset(Fault(f) for f in faults)
        for gone in self.of(node) - wanted:
            self._since_s.pop((node, gone), None)
        now = self._clock()
        for new in wanted - self.of(node):
            self._since_s[(node, new)] = now
        if wanted:
            self._by_node[node] = wanted
        else:
            self._by_node.pop(node, None)

    def add(self, node: str, *faults: Fault | str) -> None:
        self.set(node, *self.of(node), *faults)

    def remove(self, node: str, *faults: Fault | str) -> None:
        self.set(node, *(self.of(node) - {Fault(f) for f in faults}))

    def clear(self, node: str | None = None) -> None:
        """Heals one node, or every node."""
        for name in [node] if node is not None else list(self._by_node):
            self.set(name)

    def items(self) -> list[tuple[str, frozenset[Fault]]]:
        return sorted(self._by_node.items())

    def describe(self) -> str:
        return "; ".join(f"{node}={','.join(sorted(faults))}" for node, faults in self.items()) or "none"
