"""A node's slow facts as one typed record: each command's last good parse, when it was read, why it failed.

Sources fill it (the SSH source from its command table, the simulator from its model); every other layer
reads its fields by name, never by a string key, and rules judge the parsed values, never their display
text. The parser types are imported for the type checker only: the parsers build on gputop.core.models,
which holds the record.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from gputop.core.parsers.compute_apps import ComputeAppsResult
    from gputop.core.parsers.gpu_list import GpuList
    from gputop.core.parsers.ib import IbStat
    from gputop.core.parsers.mig import MigComputeInstances, MigGpuInstances, MigPlacements, MigProfiles
    from gputop.core.parsers.nvlink import NvlinkStatus
    from gputop.core.parsers.nvlink_errors import NvlinkErrors
    from gputop.core.parsers.smi_counters import SmiCounters
    from gputop.core.parsers.topo import Topology
    from gputop.core.parsers.xid import XidLog

_T = TypeVar("_T", covariant=True)  # a Reading[Topology] is a Reading[object]


@dataclass(frozen=True, slots=True)
class Reading(Generic[_T]):
    """The latest word of one slow command on one node."""

    value: _T | None = None  # the last good parse, kept while later runs fail
    read_at_s: float | None = None  # when ``value`` was read (epoch seconds)
    error: str | None = None  # why the latest run failed; None once a run succeeds again

    @property
    def heard(self) -> bool:
        """Whether the command has said anything yet, a value or a failure."""
        return self.value is not None or self.error is not None

    @property
    def current(self) -> _T | None:
        """The value, when the latest run gave it (None while the command fails or was never read)."""
        return self.value if self.error is None else None

    def why_missing(self) -> str:
        """Why there is no current value: the failure, or that it was not read yet."""
        return self.error or "not read yet"


UNREAD: Reading[Any] = Reading()


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """One reading per slow command, under the command's name in the command table
    (gputop.sources.commands): a site's override changes how a command runs, never what it is called."""

    gpu_list: Reading[GpuList] = UNREAD  # nvidia-smi -L
    topology: Reading[Topology] = UNREAD  # nvidia-smi topo -m
    nvlink: Reading[NvlinkStatus] = UNREAD  # nvidia-smi nvlink -s
    mig_gip: Reading[MigProfiles] = UNREAD  # nvidia-smi mig -lgip
    mig_gipp: Reading[MigPlacements] = UNREAD  # nvidia-smi mig -lgipp
    mig_gi: Reading[MigGpuInstances] = UNREAD  # nvidia-smi mig -lgi
    mig_ci: Reading[MigComputeInstances] = UNREAD  # nvidia-smi mig -lci
    ibstat: Reading[IbStat] = UNREAD  # the node's ib_ports and ib_failures come from it
    xid: Reading[XidLog] = UNREAD  # the node's xid_events come from it
    processes: Reading[ComputeAppsResult] = UNREAD  # joined into the GPUs' samples
    counters: Reading[SmiCounters] = UNREAD  # nvidia-smi -q: PCIe replays, ECC, retired pages, remaps, HBM
    nvlink_errors: Reading[NvlinkErrors] = UNREAD  # nvidia-smi nvlink -e

    def readings(self) -> tuple[tuple[str, Reading[object]], ...]:
        """(command name, reading) of every command, in the record's order: for lists that show them all."""
        return tuple((f.name, getattr(self, f.name)) for f in fields(self))

    def errors(self) -> tuple[tuple[str, str], ...]:
        """(command name, why it failed) of each command whose latest run failed, by name."""
        return tuple(sorted((name, r.error) for name, r in self.readings() if r.error is not None))

    def read(self) -> tuple[str, ...]:
        """The names of the commands that gave a value, by name."""
        return tuple(sorted(name for name, r in self.readings() if r.value is not None))

    @property
    def heard(self) -> bool:
        """Whether any command has said anything yet."""
        return self is not NO_FACTS and any(r.heard for _name, r in self.readings())


NO_FACTS = NodeFacts()
FACT_NAMES: tuple[str, ...] = tuple(f.name for f in fields(NodeFacts))
