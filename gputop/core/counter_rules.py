"""What a GPU's counters say: PCIe replay and single-bit ECC rates, NVLink CRC and replay errors, retired
pages and spare memory rows, and its HBM temperature against the memory's own limit.

The counters come from `nvidia-smi -q` (core.parsers.smi_counters) and `nvidia-smi nvlink -e`
(core.parsers.nvlink_errors), the rates from core.counter_rates; the limits are the config's, whose
defaults are DCGM's (core.config.Thresholds).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gputop.core.config import Thresholds
from gputop.core.counter_rates import GpuRates
from gputop.core.identity_memo import IdentityMemo
from gputop.core.models import NodeSample, Severity
from gputop.core.parsers.smi_counters import GpuCounters, SmiCounters
from gputop.core.parsers.xid import bus_key

# health.assess_node's add: (severity, gpu, kind, message, subject, since_s, action[, action_class])
AddProblem = Callable[..., None]


@dataclass(frozen=True, slots=True)
class _Standing:
    """What one `nvidia-smi -q` reading holds that the rules may flag, worked out once per reading."""

    worn: tuple[GpuCounters, ...]  # GPUs with retired pages or banks without a spare row
    hbm_headroom_c: tuple[tuple[GpuCounters, float], ...]  # (GPU, degrees under its memory limit)
    least_headroom_c: float


def _standing_of(counters: SmiCounters) -> _Standing:
    worn = tuple(g for g in counters.gpus if g.banks_without_spare or g.retired_pages)
    headroom = tuple(
        (g, g.memory_max_operating_temp_c - g.memory_temp_c)
        for g in counters.gpus
        if g.memory_temp_c is not None and g.memory_max_operating_temp_c is not None
    )
    return _Standing(worn, headroom, min((h for _g, h in headroom), default=float("inf")))


# The reading is the same object at every tick until the node prints other counters (healthy nodes of a
# simulated fleet share one): the rules ask every tick for every node, and a lookup is one dict access.
_standing = IdentityMemo(_standing_of)


def counter_problems(
    node: NodeSample, rates: Mapping[int, GpuRates] | None, thresholds: Thresholds, add: AddProblem
) -> None:
    name = node.name
    if rates:
        for k, rate in rates.items():
            _rate_problems(name, k, rate, thresholds, add)
    counters = node.facts.counters.value
    if counters is None:
        return
    standing = _standing(counters)
    hot = standing.least_headroom_c <= thresholds.hbm_temp_margin_c
    if not standing.worn and not hot:
        return
    index_of = {bus_key(g.pci_bus_id): g.index for g in node.gpus if g.pci_bus_id}
    for found in standing.worn:
        index = index_of.get(bus_key(found.pci_bus_id))
        if index is not None:
            _wear_problems(name, index, found, thresholds, add)
    if hot:
        for found, _headroom in standing.hbm_headroom_c:
            index = index_of.get(bus_key(found.pci_bus_id))
            if index is not None:
                temp_c, limit_c = found.memory_temp_c, found.memory_max_operating_temp_c
                _hbm_problem(name, index, temp_c, limit_c, thresholds, add)


def _wear_problems(name: str, k: int, found: GpuCounters, thresholds: Thresholds, add: AddProblem) -> None:
    pages = found.retired_pages
    if pages is not None and pages >= thresholds.retired_pages_warn:
        crit = pages >= thresholds.retired_pages_crit
        add(
            Severity.CRIT if crit else Severity.WARN,
            k,
            "retired_pages",
            f"GPU{k} has {pages} retired pages (limit {thresholds.retired_pages_crit})",
            "count",
            None,
            f"drain {name}, then RMA GPU{k}"
            if crit
            else f"plan an RMA of GPU{k}: at {thresholds.retired_pages_crit} pages DCGM fails it",
            "support" if crit else "",
        )
    if found.banks_without_spare:
        add(
            Severity.WARN,
            k,
            "remap",
            f"GPU{k}: {found.banks_without_spare} memory banks have no spare row left",
            "banks",
            None,
            f"the next uncorrectable error there cannot be remapped: plan an RMA of GPU{k}",
        )


def _rate_problems(name: str, k: int, rate: GpuRates, thresholds: Thresholds, add: AddProblem) -> None:
    replays = rate.pcie_replays_per_min
    if replays is not None and replays > thresholds.pcie_replay_per_min:
        add(
            Severity.WARN,
            k,
            "pcie_replay",
            f"GPU{k} PCIe replays {replays:.0f}/min (limit {thresholds.pcie_replay_per_min:g}/min)",
            "",
            None,
            f"drain {name} when its job ends, reseat GPU{k} (riser, cable, slot), then dcgmi diag -r 2",
        )
    sbe = rate.sbe_per_min
    if sbe is not None and sbe > thresholds.sbe_per_min:
        add(
            Severity.WARN,
            k,
            "ecc_sbe",
            f"GPU{k} {sbe:.0f} single-bit ECC errors/min (limit {thresholds.sbe_per_min:g}/min)",
            "",
            None,
            f"watch GPU{k} for row remaps and Xid 48/94/95; run dcgmi diag -r 3 on it when the node is free",
        )
    crc, errors = rate.nvlink_crc_per_s, rate.nvlink_errors
    if crc is not None and crc > thresholds.nvlink_crc_per_s:
        add(
            Severity.WARN,
            k,
            "nvlink_errors",
            f"GPU{k} NVLink CRC errors {crc:.0f}/s (limit {thresholds.nvlink_crc_per_s:g}/s)",
            "crc",
            None,
            f"drain {name}, reset GPU{k}; if it goes on, check its NVLink/NVSwitch path with dcgmi diag -r 3",
        )
    if errors is not None and errors >= thresholds.nvlink_error_count:
        add(
            Severity.WARN,
            k,
            "nvlink_errors",
            f"GPU{k} {errors} new NVLink replay/recovery errors",
            "replay",
            None,
            f"drain {name}, reset GPU{k}; if it goes on, check its NVLink/NVSwitch path with dcgmi diag -r 3",
        )


def _hbm_problem(
    name: str,
    k: int,
    temp_c: float | None,
    limit_c: float | None,
    thresholds: Thresholds,
    add: AddProblem,
) -> None:
    if temp_c is None or limit_c is None or temp_c < limit_c - thresholds.hbm_temp_margin_c:
        return
    at_limit = temp_c >= limit_c
    add(
        Severity.CRIT if at_limit else Severity.WARN,
        k,
        "hbm_temp",
        f"GPU{k} HBM {temp_c:.0f} C, {'at' if at_limit else 'near'} its {limit_c:.0f} C limit"
        + (" (memory slowed down)" if at_limit else ""),
        "",
        None,
        f"check {name}'s cooling (airflow, fans, inlet temperature); memory slows down at {limit_c:.0f} C",
    )
