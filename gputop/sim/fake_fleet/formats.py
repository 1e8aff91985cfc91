"""Simulator state as the exact text nvidia-smi, ibstat and journalctl print: pure formatting, no I/O.

Layouts follow captured real outputs (separators, padding, tabs, final newlines); the MIG listings and
``nvidia-smi -L`` (gputop.sim.mig_text) and the topology matrix live in their own modules.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Final

from gputop.core.models import GpuSample, IbPort, XidEvent
from gputop.core.parsers.nvlink import GpuLinks

NA: Final = "[N/A]"  # what --format=csv,nounits prints for a value the driver does not report

# NVML's clocks_throttle_reasons bits, by the names the simulator gives the reasons.
THROTTLE_BITS: Final = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}


def throttle_mask(reasons: Iterable[str]) -> str:
    mask = 0
    for reason in reasons:
        mask |= THROTTLE_BITS.get(reason, 0)
    return f"0x{mask:016x}"


def _yes_no(value: bool | None) -> str:
    return NA if value is None else ("Yes" if value else "No")


def _number(value: int | None) -> str:
    return NA if value is None else str(value)


def repair_and_link(g: GpuSample) -> str:
    """The memory repair and PCIe link columns, from retired_pages.pending to pcie.link.width.max."""
    return ", ".join(
        (
            _yes_no(g.retired_pages_pending),
            _yes_no(g.remapped_rows_pending),
            _yes_no(g.remapped_rows_failure),
            _number(g.pcie_link_gen),
            _number(g.pcie_link_gen_max),
            _number(g.pcie_link_width_lanes),
            _number(g.pcie_link_width_max_lanes),
        )
    )


def _whole(value: float | None) -> str:
    return NA if value is None else f"{value:.0f}"


def _watts(value: float | None) -> str:
    return NA if value is None else f"{value:.2f}"


class QueryGpuFormatter:
    """Lines of ``nvidia-smi --query-gpu=<QUERY_GPU_FIELDS> --format=csv,noheader,nounits``.

    The hot path of the metrics stream (a line per GPU per interval on every node), so each GPU's
    constant columns are formatted once into a %-template and a line costs one % operation.
    """

    def __init__(self) -> None:
        self._templates: dict[tuple[object, ...], str] = {}
        self._masks: dict[tuple[str, ...], str] = {}

    def _template(self, key: tuple[object, ...], g: GpuSample) -> str:
        def lit(text: str) -> str:
            return text.replace("%", "%%")

        pci = g.pci_bus_id if g.pci_bus_id is not None else NA
        template = (
            f"{g.index}, {lit(g.uuid)}, {lit(g.name)}, {lit(pci)}, %s, %s, %s, {_whole(g.mem_total_mib)}, "
            f"%s, %s, {_watts(g.power_limit_w)}, %s, {_whole(g.sm_clock_max_mhz)}, %s, %s, %s, "
            f"{lit(repair_and_link(g))}\n"
        )
        self._templates[key] = template
        return template

    def lines(self, gpus: Sequence[GpuSample]) -> str:
        out = []
        templates = self._templates
        masks = self._masks
        for g in gpus:
            key = (
                g.uuid,
                g.index,
                g.mem_total_mib,
                g.power_limit_w,
                g.sm_clock_max_mhz,
                g.retired_pages_pending,
                g.remapped_rows_pending,
                g.remapped_rows_failure,
                g.pcie_link_gen,
                g.pcie_link_gen_max,
                g.pcie_link_width_lanes,
                g.pcie_link_width_max_lanes,
            )
            template = templates.get(key) or self._template(key, g)
            mask = masks.get(g.throttle_reasons)
            if mask is None:
                mask = masks[g.throttle_reasons] = throttle_mask(g.throttle_reasons)
            mig = NA if g.mig_enabled is None else ("Enabled" if g.mig_enabled else "Disabled")
            ecc = NA if g.ecc_uncorrected is None else str(g.ecc_uncorrected)
            out.append(
                template
                % (
                    _whole(g.util_pct),
                    _whole(g.mem_util_pct),
                    _whole(g.mem_used_mib),
                    _whole(g.temp_c),
                    _watts(g.power_w),
                    _whole(g.sm_clock_mhz),
                    ecc,
                    mig,
                    mask,
                )
            )
        return "".join(out)


def compute_apps(gpus: Iterable[GpuSample]) -> str:
    """``--query-compute-apps=gpu_uuid,pid,process_name,used_memory``: a line per process; no process, no
    output. Processes on MIG instances are reported against the parent GPU's UUID, as the driver does."""
    return "".join(f"{g.uuid}, {p.pid}, {p.name}, {_whole(p.used_mib)}\n" for g in gpus for p in g.processes)


def nvlink_status(gpus: Iterable[GpuLinks]) -> str:
    """``nvidia-smi nvlink -s``: each GPU, then a tab-and-space indented line per link."""
    return "".join(
        f"GPU {g.index}: {g.name} (UUID: {g.uuid})\n"
        + "".join(
            f"\t Link {link.index}: {link.speed_gbps:.3f} GB/s\n"
            if link.active and link.speed_gbps is not None
            else f"\t Link {link.index}: <inactive>\n"
            for link in g.links
        )
        for g in gpus
    )


def device_handle_error(pci_bus_id: str) -> str:
    """What every nvidia-smi command prints when the driver cannot reach a GPU (it exits 15)."""
    return f"Unable to determine the device handle for GPU{short_bus_id(pci_bus_id)}: Unknown Error\n"


def short_bus_id(pci_bus_id: str) -> str:
    """ "00000000:18:00.0" -> "0000:18:00.0": the 4-digit domain that driver messages use."""
    domain, _, rest = pci_bus_id.partition(":")
    return f"{domain[-4:]}:{rest}" if rest else pci_bus_id


def kernel_bus_id(pci_bus_id: str) -> str:
    """ "00000000:9A:00.0" -> "0000:9a:00": how NVRM names a GPU in kernel log lines."""
    return short_bus_id(pci_bus_id).rsplit(".", 1)[0].lower()


def fallen_off_bus_message(pci_bus_id: str) -> str:
    return (
        f"NVRM: Xid (PCI:{kernel_bus_id(pci_bus_id)}): 79, pid='<unknown>', name=<unknown>, "
        "GPU has fallen off the bus."
    )


NO_JOURNAL_ENTRIES: Final = "-- No entries --\n"


def journal_kernel_lines(host: str, events: Iterable[XidEvent]) -> str:
    """``journalctl -k -o short-iso`` lines, oldest first, in UTC."""
    return "".join(
        f"{time.strftime('%Y-%m-%dT%H:%M:%S+0000', time.gmtime(e.time_s))} {host} kernel: {e.message}\n"
        for e in sorted(events, key=lambda e: e.time_s)
    )


# ConnectX generations by the link rate a node's fabric runs at: (CA type, firmware).
_HCA_BY_RATE: Final = {400.0: ("MT4129", "28.39.1002"), 200.0: ("MT4123", "20.39.1002")}


def ibstat(ports: Sequence[IbPort], guid_base: int, lid_base: int, sm_lid: int = 1) -> str:
    """``ibstat``: every CA in name order (mlx5_10 sorts before mlx5_2, as ibstat lists them).

    ``guid_base`` makes GUIDs unique per node, ``lid_base`` the LIDs; a port that is down has no LID.
    """
    fabric_rate = max((p.rate_gbps for p in ports if p.rate_gbps is not None), default=400.0)
    ca_type, firmware = _HCA_BY_RATE.get(fabric_rate, _HCA_BY_RATE[400.0])
    by_ca: dict[str, list[IbPort]] = {}
    for port in ports:
        by_ca.setdefault(port.ca_name, []).append(port)
    out = []
    for k, ca in enumerate(sorted(by_ca)):
        guid = f"0x{guid_base + k:016x}"
        out.append(
            f"CA '{ca}'\n"
            f"\tCA type: {ca_type}\n"
            f"\tNumber of ports: {len(by_ca[ca])}\n"
            f"\tFirmware version: {firmware}\n"
            "\tHardware version: 0\n"
            f"\tNode GUID: {guid}\n"
            f"\tSystem image GUID: {guid}\n"
        )
        for port in sorted(by_ca[ca], key=lambda p: p.port):
            up = port.is_up
            # A port that never came up has no LID from the subnet manager and trains at the lowest rate.
            rate = f"{port.rate_gbps:.0f}" if port.rate_gbps is not None else "10"
            out.append(
                f"\tPort {port.port}:\n"
                f"\t\tState: {port.state}\n"
                f"\t\tPhysical state: {port.physical_state}\n"
                f"\t\tRate: {rate}\n"
                f"\t\tBase lid: {lid_base + k if up else 65535}\n"
                "\t\tLMC: 0\n"
                f"\t\tSM lid: {sm_lid if up else 0}\n"
                "\t\tCapability mask: 0xa751e848\n"
                f"\t\tPort GUID: {guid}\n"
                f"\t\tLink layer: {port.link_layer}\n"
            )
    return "".join(out)
