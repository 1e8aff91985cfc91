"""dcgm-exporter's field and label names as sites really have them, and what gputop makes of each: the
gauges a GpuSample takes, the counters the node's facts take, and which change seldom."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

# The host label, in the order dcgm-exporter releases and common relabelling spell it.
HOST_LABELS: Final = ("Hostname", "hostname", "instance")
UUID_LABELS: Final = ("UUID", "uuid")
GPU_LABELS: Final = ("gpu",)
MIG_PROFILE_LABEL: Final = "GPU_I_PROFILE"
MIG_ID_LABEL: Final = "GPU_I_ID"
# the labels that place a series: what an aggregating query of a reading keeps ("max by (...)")
PLACE_LABELS: Final = (*HOST_LABELS, *GPU_LABELS, MIG_PROFILE_LABEL, MIG_ID_LABEL)
# and every label the join reads, kept by the one query that says when each GPU was sampled
JOIN_LABELS: Final = (*PLACE_LABELS, *UUID_LABELS, "pci_bus_id", "modelName")

# the gauges, by name (`_sample` reads each by its name)
GPU_UTIL: Final = "DCGM_FI_DEV_GPU_UTIL"  # a percentage
MEM_COPY_UTIL: Final = "DCGM_FI_DEV_MEM_COPY_UTIL"
FB_USED: Final = "DCGM_FI_DEV_FB_USED"  # in every dcgm-exporter default field list
GPU_TEMP: Final = "DCGM_FI_DEV_GPU_TEMP"
POWER_USAGE: Final = "DCGM_FI_DEV_POWER_USAGE"
POWER_LIMIT: Final = "DCGM_FI_DEV_POWER_MGMT_LIMIT"
SM_CLOCK: Final = "DCGM_FI_DEV_SM_CLOCK"
MAX_SM_CLOCK: Final = "DCGM_FI_DEV_MAX_SM_CLOCK"
ECC_DBE: Final = "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"
# metric -> (GpuSample field, scale): what each dcgm-exporter field becomes
GAUGES: Final[Mapping[str, tuple[str, float]]] = {
    GPU_UTIL: ("util_pct", 1.0),
    MEM_COPY_UTIL: ("mem_util_pct", 1.0),
    FB_USED: ("mem_used_mib", 1.0),
    GPU_TEMP: ("temp_c", 1.0),
    POWER_USAGE: ("power_w", 1.0),
    POWER_LIMIT: ("power_limit_w", 1.0),
    SM_CLOCK: ("sm_clock_mhz", 1.0),
    MAX_SM_CLOCK: ("sm_clock_max_mhz", 1.0),
    ECC_DBE: ("ecc_uncorrected", 1.0),
}
# read besides the gauges: memory free and reserved (the total is their sum with used), the profiling
# utilization (where whole-GPU utilization is not exported, or under MIG), the clock-event reasons, Xid
PROFILE_UTIL: Final = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # a ratio, 0 to 1
FB_FREE: Final = "DCGM_FI_DEV_FB_FREE"
FB_RESERVED: Final = "DCGM_FI_DEV_FB_RESERVED"
CLOCK_REASONS: Final = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
XID: Final = "DCGM_FI_DEV_XID_ERRORS"
ROW_REMAP_FAILURE: Final = "DCGM_FI_DEV_ROW_REMAP_FAILURE"
ROW_REMAP_PENDING: Final = "DCGM_FI_DEV_ROW_REMAP_PENDING"
# counters, read into the node's facts as `nvidia-smi -q` and `nvidia-smi nvlink -e` would give them, so
# the counter rules (PCIe replay and single-bit ECC rates, HBM temperature, row remapping, NVLink errors)
# judge them the same way: metric -> GpuCounters field
COUNTERS: Final[Mapping[str, str]] = {
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "pcie_replays",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "ecc_volatile_correctable",
    "DCGM_FI_DEV_RETIRED_SBE": "retired_pages_sbe",
    "DCGM_FI_DEV_RETIRED_DBE": "retired_pages_dbe",
    "DCGM_FI_DEV_RETIRED_PENDING": "retired_pages_pending",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "remapped_rows_correctable",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "remapped_rows_uncorrectable",
    "DCGM_FI_DEV_MEMORY_TEMP": "memory_temp_c",
}
# NVLink error totals per GPU -> the counter's name as `nvidia-smi nvlink -e` prints it
NVLINK_COUNTERS: Final[Mapping[str, str]] = {
    "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": "CRC flit errors",
    "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL": "CRC data errors",
    "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL": "Replay errors",
    "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL": "Recovery errors",
}

# what changes seldom: asked less often than the readings by a source that refreshes (the Xid, ECC and the
# readings are asked every time). Free memory changes, but it is read only for the GPU's total, which
# does not: the total is worked out when free memory is read, with the used memory of the same update.
SLOW_METRICS: Final = frozenset(
    {
        MEM_COPY_UTIL,
        FB_FREE,
        POWER_LIMIT,
        MAX_SM_CLOCK,
        FB_RESERVED,
        *CLOCK_REASONS,
        ROW_REMAP_FAILURE,
        ROW_REMAP_PENDING,
        *COUNTERS,
        *NVLINK_COUNTERS,
    }
)
METRICS: Final = (
    *GAUGES,
    PROFILE_UTIL,
    FB_FREE,
    FB_RESERVED,
    *CLOCK_REASONS,
    XID,
    ROW_REMAP_FAILURE,
    ROW_REMAP_PENDING,
    *COUNTERS,
    *NVLINK_COUNTERS,
)
