"""What is wrong with each GPU of a node, read from its own sample and facts: temperature, memory, ECC,
memory repair, throttling, the PCIe link and its NVLinks.

Temperature, memory and the PCIe generation come as flags from gputop.core.health_tracker (they must last
and fall back before they change); the rest are facts that hold as long as the driver says so.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Final

from gputop.core.health_tracker import MEM, PCIE_GEN, TEMP, GpuFlag
from gputop.core.identity_memo import IdentityMemo
from gputop.core.idle import gpu_by_index
from gputop.core.models import GpuSample, NodeSample, Severity
from gputop.core.parsers.nvlink import NvlinkStatus

AddProblem = Callable[[Severity, "int | None", str, str, str], None]

# Throttle reasons worth a word, worst first, with their severity and words. A power brake is an
# external signal (the node's power supply or its management controller) that drops the clocks to their
# floor: the GPU, and every collective its job runs, crawls until someone fixes the node's power. A
# hardware slowdown or thermal slowdown halves the clocks or so and points at cooling or power; a
# software thermal slowdown is the driver's own, milder step. The power cap and idle clocks are the
# GPU doing its job.
THROTTLE_RULES: Final[tuple[tuple[str, Severity, str], ...]] = (
    ("hw_power_brake_slowdown", Severity.CRIT, "HW power brake (node power supply)"),
    ("hw_thermal_slowdown", Severity.WARN, "HW thermal slowdown"),
    ("hw_slowdown", Severity.WARN, "HW slowdown"),
    ("sw_thermal_slowdown", Severity.WARN, "SW thermal slowdown"),
)


def gpu_problems(
    node: NodeSample, flags: tuple[GpuFlag, ...], add: AddProblem, nvlink_said: Collection[int] = ()
) -> None:
    """Adds each GPU problem of ``node`` through ``add``. ``flags``: the node's tracked temperature,
    memory and PCIe generation flags. ``nvlink_said``: GPUs whose NVLinks a comparison with the node's
    peers already reports; they get no second word here."""
    gpus = node.gpus
    for flag in flags:
        gpu = gpu_by_index(gpus, flag.index)
        if gpu is not None:
            _flag_problem(gpu, flag, add)
    for gpu in gpus:
        k = gpu.index
        if gpu.ecc_uncorrected:
            add(Severity.CRIT, k, "ecc", f"GPU{k} {gpu.ecc_uncorrected} uncorrected ECC", "")
        if gpu.remapped_rows_failure:
            add(Severity.CRIT, k, "remap", f"GPU{k} row remapping failed: replace the GPU", "")
        elif gpu.remapped_rows_pending:
            add(Severity.WARN, k, "remap", f"GPU{k} row remapping pending: reset the GPU", "")
        if gpu.retired_pages_pending:
            add(Severity.WARN, k, "retired_pages", f"GPU{k} page retirement pending: reset the GPU", "")
        if gpu.throttle_reasons:
            _throttle_problem(gpu, add)
        width, width_max = gpu.pcie_link_width_lanes, gpu.pcie_link_width_max_lanes
        if width is not None and width_max is not None and width < width_max:
            add(Severity.WARN, k, "pcie", f"GPU{k} PCIe x{width}, max x{width_max}", "width")
    nvlink = node.facts.nvlink.value
    if nvlink is not None:
        for index, active, total in _partly_down(nvlink):
            if index not in nvlink_said:
                add(Severity.WARN, index, "nvlink", f"GPU{index} has {active} of {total} NVLinks active", "")


def _partly_down_links(nvlink: NvlinkStatus) -> tuple[tuple[int, int, int], ...]:
    """(GPU index, active links, links) of each GPU with some links down and some up. A GPU with every
    link down while its peers' are up is the peers' comparison's to report; with no link up at all on a
    board without NVLink bridges, there is nothing to report."""
    counts = ((links.index, links.active_count, len(links.links)) for links in nvlink.gpus)
    return tuple((index, active, total) for index, active, total in counts if 0 < active < total)


# The same status object comes back at every tick until nvidia-smi nvlink -s prints something else.
_partly_down = IdentityMemo(_partly_down_links)


def _flag_problem(gpu: GpuSample, flag: GpuFlag, add: AddProblem) -> None:
    k = gpu.index
    if flag.kind == TEMP and gpu.temp_c is not None:
        add(flag.severity, k, "temp", f"GPU{k} {gpu.temp_c:.0f} C", "")
    elif flag.kind == MEM and gpu.mem_pct is not None:
        add(flag.severity, k, "mem", f"GPU{k} memory {gpu.mem_pct:.0f}%", "")
    elif flag.kind == PCIE_GEN:
        message = f"GPU{k} PCIe gen{gpu.pcie_link_gen}, max gen{gpu.pcie_link_gen_max} under load"
        add(flag.severity, k, "pcie", message, "gen")


def _throttle_problem(gpu: GpuSample, add: AddProblem) -> None:
    reasons = gpu.throttle_reasons
    for reason, severity, words in THROTTLE_RULES:
        if reason in reasons:
            add(severity, gpu.index, "throttle", f"GPU{gpu.index} throttled: {words}", "")
            return
