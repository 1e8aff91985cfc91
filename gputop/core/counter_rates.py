"""Rates of the counters whose growth, not their value, is the signal: PCIe replays, single-bit ECC errors,
NVLink CRC errors, and NVLink replay and recovery errors.

`CounterRateTracker` is fed one snapshot per tick. When a node's `nvidia-smi -q` or `nvidia-smi nvlink -e`
reading is a new read (another ``read_at_s``), each GPU's counters are compared with the read before it and
the rate over the time between the two reads is kept until the next read. A counter that went down was
reset (a GPU reset, a driver reload): that interval gives no rate rather than a negative one.

Pure: every time comes from the readings. Cheap: a node whose readings are the objects seen last tick costs
two identity checks.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import TypeVar

from gputop.core.facts import Reading
from gputop.core.models import ClusterSnapshot, NodeSample
from gputop.core.parsers.nvlink_errors import NvlinkErrors
from gputop.core.parsers.smi_counters import SmiCounters
from gputop.core.slices import run_to_end

NODES_PER_SLICE = 500  # nodes between two yields: some 3 ms where every node's counters are new


@dataclass(frozen=True, slots=True)
class GpuRates:
    """One GPU's rates over the last interval between two reads; None where there is no such interval yet
    or the counter is not reported."""

    pcie_replays_per_min: float | None = None
    sbe_per_min: float | None = None
    nvlink_crc_per_s: float | None = None
    nvlink_errors: int | None = None  # replay and recovery errors that appeared between the two reads


# node -> GPU index -> its rates (only GPUs with a measured interval)
NodeRates = Mapping[int, GpuRates]


def _per(delta: int | None, seconds: float, unit_s: float) -> float | None:
    if delta is None or delta < 0 or seconds <= 0:
        return None  # not reported, or the counter was reset between the reads
    return delta * unit_s / seconds


def _delta(new: int | None, old: int | None) -> int | None:
    return new - old if new is not None and old is not None else None


def _new_read(old: Reading[object] | None, new: Reading[object]) -> bool:
    return old is None or old.read_at_s != new.read_at_s


_V = TypeVar("_V")


def _interval(old: Reading[_V] | None, new: Reading[_V]) -> tuple[_V, _V, float] | None:
    """(value before, value now, seconds between the two reads), when both reads have a value."""
    if old is None or old.value is None or old.read_at_s is None:
        return None
    if new.value is None or new.read_at_s is None:
        return None
    return old.value, new.value, new.read_at_s - old.read_at_s


class CounterRateTracker:
    def __init__(self) -> None:
        self.rates: dict[str, NodeRates] = {}
        self._counters: dict[str, Reading[SmiCounters]] = {}
        self._nvlink: dict[str, Reading[NvlinkErrors]] = {}
        self._smi_rates: dict[str, dict[int, tuple[float | None, float | None]]] = {}
        self._link_rates: dict[str, dict[int, tuple[float | None, int | None]]] = {}
        self._handed_out: Mapping[str, NodeRates] | None = None

    def update(self, snapshot: ClusterSnapshot) -> Mapping[str, NodeRates]:
        return run_to_end(self.update_steps(snapshot))

    def update_steps(
        self, snapshot: ClusterSnapshot, nodes_per_slice: int = NODES_PER_SLICE
    ) -> Generator[None, None, Mapping[str, NodeRates]]:
        """`update`, yielding after every ``nodes_per_slice`` nodes (a store's slow refresh brings every
        node's counters anew). The rates handed out are a copy made at the end, the last one again where
        no node's rates changed."""
        published = False
        for count, node in enumerate(snapshot.nodes, 1):
            if not count % nodes_per_slice:
                yield
            counters, nvlink = node.facts.counters, node.facts.nvlink_errors
            name = node.name
            seen_counters, seen_nvlink = self._counters.get(name), self._nvlink.get(name)
            if seen_counters is counters and seen_nvlink is nvlink:
                continue
            changed = False
            if seen_counters is not counters:
                self._counters[name] = counters
                if counters.value is not None and _new_read(seen_counters, counters):
                    self._smi_rates[name] = self._smi_step(node, seen_counters, counters)
                    changed = True
            if seen_nvlink is not nvlink:
                self._nvlink[name] = nvlink
                if nvlink.value is not None and _new_read(seen_nvlink, nvlink):
                    self._link_rates[name] = self._link_step(seen_nvlink, nvlink)
                    changed = True
            if changed:
                self._publish(name)
                published = True
        if published or self._handed_out is None:
            self._handed_out = dict(self.rates)  # the views keep it: later ticks must not change it
        return self._handed_out

    @staticmethod
    def _smi_step(
        node: NodeSample, old: Reading[SmiCounters] | None, new: Reading[SmiCounters]
    ) -> dict[int, tuple[float | None, float | None]]:
        interval = _interval(old, new)
        if interval is None:
            return {}
        before, after, seconds = interval
        out: dict[int, tuple[float | None, float | None]] = {}
        for gpu in node.gpus:
            now_c, was_c = after.by_bus_id(gpu.pci_bus_id), before.by_bus_id(gpu.pci_bus_id)
            if now_c is None or was_c is None:
                continue
            replays = _per(_delta(now_c.pcie_replays, was_c.pcie_replays), seconds, 60.0)
            sbe = _per(_delta(now_c.ecc_volatile_correctable, was_c.ecc_volatile_correctable), seconds, 60.0)
            if replays is not None or sbe is not None:
                out[gpu.index] = (replays, sbe)
        return out

    @staticmethod
    def _link_step(
        old: Reading[NvlinkErrors] | None, new: Reading[NvlinkErrors]
    ) -> dict[int, tuple[float | None, int | None]]:
        interval = _interval(old, new)
        if interval is None:
            return {}
        before, after, seconds = interval
        out: dict[int, tuple[float | None, int | None]] = {}
        for gpu in after.gpus:
            was = before.gpu(gpu.index)
            if was is None:
                continue
            crc = _per(gpu.crc - was.crc, seconds, 1.0)
            errors = (gpu.replay + gpu.recovery) - (was.replay + was.recovery)
            out[gpu.index] = (crc, errors if errors >= 0 else None)
        return out

    def _publish(self, name: str) -> None:
        smi, links = self._smi_rates.get(name, {}), self._link_rates.get(name, {})
        merged: dict[int, GpuRates] = {}
        for index in sorted(set(smi) | set(links)):
            replays, sbe = smi.get(index, (None, None))
            crc, errors = links.get(index, (None, None))
            merged[index] = GpuRates(replays, sbe, crc, errors)
        if merged:
            self.rates[name] = merged
        else:
            self.rates.pop(name, None)
