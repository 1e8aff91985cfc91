"""A simulated node's health counters: `nvidia-smi -q` (PCIe replays, ECC, retired pages, row remapper, HBM
temperature) and `nvidia-smi nvlink -e`, as parsed values for the samples and as the text nvidia-smi prints
for the fake fleet.

Healthy nodes share one reading that never changes. The counter incidents' nodes are read again every
`COUNTER_READ_S` of simulated time, their counters grown at the incident's rate, so a rate shows between
two reads as it does over SSH. The text layout is driver 535's (`SRAM`/`DRAM` ECC lines), which
gputop.core.parsers.smi_counters reads with the older layouts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

from gputop.core.parsers.nvlink_errors import GpuLinkErrors, LinkErrors, NvlinkErrors
from gputop.core.parsers.smi_counters import GpuCounters, SmiCounters
from gputop.sim.incidents import incident_gpu

# the counter incidents whose node is read again (ib_flapping is the IB ports': gputop.sim.node_facts)
_READ_KINDS: Final = ("pcie_replays", "nvlink_crc", "hbm_hot", "memory_wear", "sbe_storm")

if TYPE_CHECKING:
    from gputop.sim.simulator import SimulatedCluster

COUNTER_READ_S: Final = 60.0  # the SSH source reads both every slow round (poll.slow_facts_interval_s)
HBM_LIMIT_C: Final = 95.0  # "Memory Max Operating Temp" of HBM2e/HBM3 boards
HBM_HEALTHY_C: Final = 46.0
GPU_SLOWDOWN_C: Final = 89.0
BANKS: Final = 2560

# Rates of the counter incidents, per minute of simulated time
PCIE_REPLAYS_PER_MIN: Final = 40
SBE_PER_MIN: Final = 30
NVLINK_CRC_PER_MIN: Final = 15_000  # 250 a second
NVLINK_REPLAYS_PER_MIN: Final = 2
HBM_HOT_C: Final = 92.0
BANKS_WITHOUT_SPARE: Final = 2


def _gpu_counters(bus: str, **changes: object) -> GpuCounters:
    values: dict[str, object] = {
        "pcie_replays": 0,
        "ecc_volatile_correctable": 0,
        "ecc_volatile_uncorrectable": 0,
        "remapped_rows_correctable": 0,
        "remapped_rows_uncorrectable": 0,
        "banks_without_spare": 0,
        "memory_temp_c": HBM_HEALTHY_C,
        "memory_max_operating_temp_c": HBM_LIMIT_C,
        "gpu_slowdown_temp_c": GPU_SLOWDOWN_C,
    }
    values.update(changes)
    return GpuCounters(bus, **values)  # type: ignore[arg-type]


_QUIET_LINK: Final = (("Replay Errors", 0), ("Recovery Errors", 0), ("CRC Errors", 0))


def _links(links: int, crc: int = 0, replays: int = 0) -> tuple[LinkErrors, ...]:
    # the errors sit on link 0, as a bad lane or connector shows on the one link it serves
    return tuple(
        LinkErrors(
            k,
            (
                ("Replay Errors", replays if k == 0 else 0),
                ("Recovery Errors", 0),
                ("CRC Errors", crc if k == 0 else 0),
            ),
        )
        for k in range(links)
    )


def setup_counters(sim: SimulatedCluster) -> None:
    """Every node's first reading, shared by the healthy ones; the incidents' nodes' own."""
    g_per = sim.gpus_per_node
    buses = sim._pci
    links = sim.model.nvlinks_per_gpu
    healthy = SmiCounters(tuple(_gpu_counters(buses[k]) for k in range(g_per)))
    quiet_links = NvlinkErrors(
        tuple(GpuLinkErrors(k, None, _links(links)) for k in range(g_per)) if links else ()
    )
    sim._counter_facts = [(healthy, quiet_links)] * sim._n
    for i in range(sim._n):
        sim._facts[i] = {**sim._facts[i], "counters": healthy, "nvlink_errors": quiet_links}
    sim._counter_nodes = {kind: sim._incident_at[kind] for kind in _READ_KINDS if kind in sim._incident_at}
    sim._next_counter_read_s = sim.start_time_s
    read_counters(sim, sim.start_time_s)


def read_counters(sim: SimulatedCluster, t: float) -> None:
    """The counter incidents' nodes read again, when a read is due: their facts replaced, as a new run of
    the two commands would replace them."""
    if t < sim._next_counter_read_s or not sim._counter_nodes:
        return
    sim._next_counter_read_s = t + COUNTER_READ_S
    minutes = (t - sim.origin_s) / 60.0 + 600.0  # the counters grew for ten hours before the origin
    g_per = sim.gpus_per_node
    buses = sim._pci
    links = sim.model.nvlinks_per_gpu
    for kind, i in sim._counter_nodes.items():
        k = incident_gpu(sim, kind)
        smi, nvlink = sim._counter_facts[i]
        gpus = list(smi.gpus)
        if kind == "pcie_replays":
            gpus[k] = _gpu_counters(buses[k], pcie_replays=int(PCIE_REPLAYS_PER_MIN * minutes))
        elif kind == "sbe_storm":
            gpus[k] = _gpu_counters(buses[k], ecc_volatile_correctable=int(SBE_PER_MIN * minutes))
        elif kind == "hbm_hot":
            gpus[k] = _gpu_counters(buses[k], memory_temp_c=HBM_HOT_C)
        elif kind == "memory_wear":
            gpus[k] = _gpu_counters(
                buses[k], remapped_rows_correctable=14, banks_without_spare=BANKS_WITHOUT_SPARE
            )
        elif kind == "nvlink_crc" and links:
            crc, replays = int(NVLINK_CRC_PER_MIN * minutes), int(NVLINK_REPLAYS_PER_MIN * minutes)
            nvlink = NvlinkErrors(
                tuple(
                    GpuLinkErrors(g, None, _links(links, crc, replays) if g == k else _links(links))
                    for g in range(g_per)
                )
            )
        smi = SmiCounters(tuple(gpus))
        sim._counter_facts[i] = (smi, nvlink)
        sim._facts[i] = {**sim._facts[i], "counters": smi, "nvlink_errors": nvlink}


# ---- the text nvidia-smi prints, for the fake fleet


def _value(value: object, unit: str = "") -> str:
    if value is None:
        return "N/A"
    if isinstance(value, float):
        return f"{value:.0f}{unit}"
    return f"{value}{unit}"


def _line(depth: int, name: str, value: object = None, unit: str = "", *, section: bool = False) -> str:
    pad = "    " * depth
    if section:
        return f"{pad}{name}"
    return f"{pad}{name:<{42 - len(pad)}}: {_value(value, unit)}"


def smi_counters_text(counters: SmiCounters, driver: str = "550.54.15", cuda: str = "12.4") -> str:
    """What `nvidia-smi -q -d PCIE,ECC,TEMPERATURE,PAGE_RETIREMENT,ROW_REMAPPER` prints for these GPUs."""
    out = [
        "",
        "==============NVSMI LOG==============",
        "",
        f"{'Timestamp':<42}: Mon Jun 15 02:56:17 2026",
        f"{'Driver Version':<42}: {driver}",
        f"{'CUDA Version':<42}: {cuda}",
        "",
        f"{'Attached GPUs':<42}: {len(counters.gpus)}",
    ]
    for gpu in counters.gpus:
        out += _gpu_text(gpu)
    return "\n".join(out) + "\n"


def _gpu_text(g: GpuCounters) -> list[str]:
    replays = g.pcie_replays or 0
    rollovers, replays = divmod(replays, 1 << 32)
    return [
        f"GPU {g.pci_bus_id}",
        _line(1, "PCI", section=True),
        _line(2, "Replays Since Reset", replays),
        _line(2, "Replay Number Rollovers", rollovers),
        _line(1, "ECC Errors", section=True),
        _line(2, "Volatile", section=True),
        _line(3, "SRAM Correctable", 0),
        _line(3, "SRAM Uncorrectable Parity", 0),
        _line(3, "SRAM Uncorrectable SEC-DED", 0),
        _line(3, "DRAM Correctable", g.ecc_volatile_correctable),
        _line(3, "DRAM Uncorrectable", g.ecc_volatile_uncorrectable),
        _line(1, "Retired Pages", section=True),
        _line(2, "Single Bit ECC", g.retired_pages_sbe),
        _line(2, "Double Bit ECC", g.retired_pages_dbe),
        _line(2, "Pending Page Blacklist", None),
        _line(1, "Remapped Rows", section=True),
        _line(2, "Correctable Error", g.remapped_rows_correctable),
        _line(2, "Uncorrectable Error", g.remapped_rows_uncorrectable),
        _line(2, "Pending", "No"),
        _line(2, "Remapping Failure Occurred", "No"),
        _line(2, "Bank Remap Availability Histogram", section=True),
        _line(3, "Max", BANKS - (g.banks_without_spare or 0), " bank(s)"),
        _line(3, "High", 0, " bank(s)"),
        _line(3, "Partial", 0, " bank(s)"),
        _line(3, "Low", 0, " bank(s)"),
        _line(3, "None", g.banks_without_spare, " bank(s)"),
        _line(1, "Temperature", section=True),
        _line(2, "GPU Slowdown Temp", g.gpu_slowdown_temp_c, " C"),
        _line(2, "Memory Current Temp", g.memory_temp_c, " C"),
        _line(2, "Memory Max Operating Temp", g.memory_max_operating_temp_c, " C"),
        "",
    ]


def nvlink_errors_text(gpus: Iterable[GpuLinkErrors], name: str, uuids: dict[int, str]) -> str:
    """What `nvidia-smi nvlink -e` prints: a tab and a space before each link's line, a blank line after
    each link's counters (as driver 535 prints them)."""
    out: list[str] = []
    for gpu in gpus:
        out.append(f"GPU {gpu.index}: {name} (UUID: {uuids.get(gpu.index, 'N/A')})")
        for link in gpu.links:
            out += [f"\t Link {link.link}: {counter}: {count}" for counter, count in link.counters]
            out.append("")
    return "\n".join(out) + ("\n" if out else "")
