"""NVIDIA's Xid catalogue as data: each code's mnemonic, description and resolution buckets.

Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog" (Ampere and newer GPUs),
https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, and the catalogue spreadsheet it
links (sheet "Catalog"), as published in October 2025 (codes 1-172). Cross-checked against the copy
gpud generates from the same spreadsheet (github.com/leptonai/gpud,
components/accelerator/nvidia/xid/catalog_generated.go, generated 2025-10-29): every code, mnemonic and
bucket agrees. Codes 162-172 have no bucket in that edition of the catalogue (only trigger notes);
`gputop.core.xid_codes` says what gputop makes of them, and says that the words are its own.

Immediate: the catalogue's "Resolution Bucket (Immediate Action)". Investigatory: "Resolution Bucket
(Investigatory Action)", what to look into once the immediate action is done. The text is NVIDIA's.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, NamedTuple


class CatalogEntry(NamedTuple):
    code: int
    mnemonic: str
    description: str
    immediate: str  # the bucket, e.g. "RESET_GPU"; "" where the catalogue gives none
    investigatory: str


CATALOG_EDITION: Final = "NVIDIA's Xid catalogue as of October 2025 (codes 1-172)"

CATALOG: Final[Mapping[int, CatalogEntry]] = MappingProxyType(
    {
        1: CatalogEntry(1, "ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD", "Unused", "CONTACT_SUPPORT", ""),
        2: CatalogEntry(2, "ROBUST_CHANNEL_FIFO_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT", ""),
        3: CatalogEntry(3, "ROBUST_CHANNEL_FIFO_ERROR_UNK_METHOD", "Unused", "CONTACT_SUPPORT", ""),
        4: CatalogEntry(4, "ROBUST_CHANNEL_FIFO_ERROR_CHANNEL_BUSY", "Unused", "CONTACT_SUPPORT", ""),
        5: CatalogEntry(5, "ROBUST_CHANNEL_FIFO_ERROR_RUNOUT_OVERFLOW", "Unused", "CONTACT_SUPPORT", ""),
        6: CatalogEntry(6, "ROBUST_CHANNEL_FIFO_ERROR_PARSE_ERR", "Unused", "CONTACT_SUPPORT", ""),
        7: CatalogEntry(7, "ROBUST_CHANNEL_FIFO_ERROR_PTE_ERR", "Unused", "CONTACT_SUPPORT", ""),
        8: CatalogEntry(
            8,
            "ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT",
            "GPU stopped processing",
            "RESTART_APP",
            "CONTACT_SUPPORT",
        ),
        9: CatalogEntry(9, "ROBUST_CHANNEL_GR_ERROR_INSTANCE", "Unused", "CONTACT_SUPPORT", ""),
        10: CatalogEntry(10, "ROBUST_CHANNEL_GR_ERROR_SINGLE_STEP", "Unused", "CONTACT_SUPPORT", ""),
        11: CatalogEntry(
            11,
            "ROBUST_CHANNEL_GR_ERROR_MISSING_HW",
            "Invalid or corrupted push buffer stream",
            "RESTART_APP",
            "CHECK_APP/CUDA",
        ),
        12: CatalogEntry(12, "ROBUST_CHANNEL_GR_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT", ""),
        13: CatalogEntry(
            13,
            "ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY",
            "Graphics Engine Exception",
            "RESTART_APP",
            "WORKFLOW_XID_13",
        ),
        14: CatalogEntry(14, "ROBUST_CHANNEL_FAKE_ERROR", "Unused", "IGNORE", "CONTACT_SUPPORT"),
        15: CatalogEntry(15, "ROBUST_CHANNEL_SCANLINE_TIMEOUT", "Unused", "CONTACT_SUPPORT", ""),
        16: CatalogEntry(
            16, "ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT", "Unused", "CONTACT_SUPPORT", "CONTACT_SUPPORT"
        ),
        17: CatalogEntry(17, "ROBUST_CHANNEL_PARAMETER_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        18: CatalogEntry(18, "ROBUST_CHANNEL_BUS_MASTER_TIMEOUT_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        19: CatalogEntry(19, "ROBUST_CHANNEL_DISP_MISSED_NOTIFIER", "Unused", "CONTACT_SUPPORT", ""),
        20: CatalogEntry(20, "ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT", ""),
        21: CatalogEntry(21, "ROBUST_CHANNEL_ME_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT", ""),
        22: CatalogEntry(22, "ROBUST_CHANNEL_VP_ERROR_SW_METHOD", "Unused", "CONTACT_SUPPORT", ""),
        23: CatalogEntry(23, "ROBUST_CHANNEL_RC_LOGGING_ENABLED", "Unused", "CONTACT_SUPPORT", ""),
        24: CatalogEntry(24, "ROBUST_CHANNEL_GR_SEMAPHORE_TIMEOUT", "Unused", "CONTACT_SUPPORT", ""),
        25: CatalogEntry(
            25,
            "ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY",
            "Invalid or illegal push buffer stream",
            "RESTART_APP",
            "CHECK_APP/CUDA",
        ),
        26: CatalogEntry(26, "ROBUST_CHANNEL_FIFO_ERROR_FBISTATE_TIMEOUT", "Unused", "CONTACT_SUPPORT", ""),
        27: CatalogEntry(27, "ROBUST_CHANNEL_VP_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        28: CatalogEntry(28, "ROBUST_CHANNEL_VP2_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        29: CatalogEntry(29, "ROBUST_CHANNEL_BSP_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        30: CatalogEntry(30, "ROBUST_CHANNEL_BAD_ADDR_ACCESS", "Unused", "CONTACT_SUPPORT", ""),
        31: CatalogEntry(
            31,
            "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT",
            "GPU memory page fault",
            "RESTART_APP",
            "WORKFLOW_XID_31",
        ),
        32: CatalogEntry(
            32,
            "ROBUST_CHANNEL_PBDMA_ERROR",
            "Invalid or corrupted push buffer stream",
            "RESTART_APP",
            "CHECK_APP/CUDA",
        ),
        33: CatalogEntry(33, "ROBUST_CHANNEL_SEC_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        34: CatalogEntry(34, "ROBUST_CHANNEL_MSVLD_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        35: CatalogEntry(35, "ROBUST_CHANNEL_MSPDEC_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        36: CatalogEntry(36, "ROBUST_CHANNEL_MSPPP_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        37: CatalogEntry(
            37,
            "ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD",
            "Driver firmware error",
            "IGNORE",
            "CHECK_APP/CUDA",
        ),
        38: CatalogEntry(
            38,
            "ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT",
            "Driver firmware error",
            "IGNORE",
            "CONTACT_SUPPORT",
        ),
        39: CatalogEntry(
            39, "ROBUST_CHANNEL_CE0_ERROR", "Copy Engine Exception", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        40: CatalogEntry(
            40, "ROBUST_CHANNEL_CE1_ERROR", "Copy Engine Exception", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        41: CatalogEntry(
            41, "ROBUST_CHANNEL_CE2_ERROR", "Copy Engine Exception", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        42: CatalogEntry(42, "ROBUST_CHANNEL_VIC_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        43: CatalogEntry(
            43,
            "ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR",
            "GPU stopped processing",
            "IGNORE",
            "CONTACT_SUPPORT",
        ),
        44: CatalogEntry(
            44,
            "ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW",
            "Graphics Engine fault during context switch",
            "IGNORE",
            "CONTACT_SUPPORT",
        ),
        45: CatalogEntry(
            45,
            "ROBUST_CHANNEL_PREEMPTIVE_REMOVAL",
            "Preemptive cleanup, due to previous errors -- Most likely to see when running multiple cuda "
            "applications and hitting a DBE",
            "WORKFLOW_XID_45",
            "Solo: RESTART_FM; Not Solo: IGNORE (follow other Xid)",
        ),
        46: CatalogEntry(
            46, "ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing", "RESET_GPU", "CONTACT_SUPPORT"
        ),
        47: CatalogEntry(47, "ROBUST_CHANNEL_NVENC0_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        48: CatalogEntry(
            48, "ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", "WORKFLOW_XID_48", "WORKFLOW_XID_48"
        ),
        49: CatalogEntry(
            49, "SILENT_RUNNING_CONSTANT_LEVEL_SET_BY_REGISTRY", "Unused", "CONTACT_SUPPORT", ""
        ),
        50: CatalogEntry(
            50, "SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR", "Unused", "CONTACT_SUPPORT", ""
        ),
        51: CatalogEntry(51, "SILENT_RUNNING_STRESS_TEST_FAILURE", "Unused", "CONTACT_SUPPORT", ""),
        52: CatalogEntry(52, "SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE", "Unused", "CONTACT_SUPPORT", ""),
        53: CatalogEntry(53, "SILENT_RUNNING_TEMP_REDUCED_CLOCKING", "Unused", "CONTACT_SUPPORT", ""),
        54: CatalogEntry(
            54,
            "SILENT_RUNNING_PWR_REDUCED_CLOCKING",
            "Auxiliary power is not connected to the GPU board",
            "CHECK_MECHANICALS",
            "CONTACT_SUPPORT",
        ),
        55: CatalogEntry(55, "SILENT_RUNNING_TEMPERATURE_READ_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        56: CatalogEntry(56, "DISPLAY_CHANNEL_EXCEPTION", "Unused", "CONTACT_SUPPORT", ""),
        57: CatalogEntry(57, "FB_LINK_TRAINING_FAILURE_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        58: CatalogEntry(58, "FB_MEMORY_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        59: CatalogEntry(59, "PMU_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        60: CatalogEntry(
            60, "ROBUST_CHANNEL_SEC2_ERROR", "Video processor exception", "RESTART_APP", "INVESTIGATE_SW"
        ),
        61: CatalogEntry(61, "PMU_BREAKPOINT", "Unused", "CONTACT_SUPPORT", ""),
        62: CatalogEntry(
            62,
            "PMU_HALT_ERROR",
            "Internal micro-controller halt (newer drivers)",
            "RESET_GPU",
            "CONTACT_SUPPORT",
        ),
        63: CatalogEntry(
            63, "INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event", "IGNORE", "IGNORE"
        ),
        64: CatalogEntry(
            64,
            "INFOROM_DRAM_RETIREMENT_FAILURE",
            "GPU memory remapping failure",
            "RESET_GPU",
            "CONTACT_SUPPORT",
        ),
        65: CatalogEntry(65, "ROBUST_CHANNEL_NVENC1_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        66: CatalogEntry(
            66,
            "ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION",
            "Illegal access by driver",
            "IGNORE",
            "INVESTIGATE_SW",
        ),
        67: CatalogEntry(
            67,
            "ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION",
            "Illegal access by driver",
            "IGNORE",
            "CONTACT_SUPPORT",
        ),
        68: CatalogEntry(
            68, "ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 Exception", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        69: CatalogEntry(
            69,
            "ROBUST_CHANNEL_GR_CLASS_ERROR",
            "Graphics Engine class error",
            "RESTART_APP",
            "CHECK_APP/CUDA",
        ),
        70: CatalogEntry(
            70, "ROBUST_CHANNEL_CE3_ERROR", "CE3: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        71: CatalogEntry(
            71, "ROBUST_CHANNEL_CE4_ERROR", "CE4: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        72: CatalogEntry(
            72, "ROBUST_CHANNEL_CE5_ERROR", "CE5: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        73: CatalogEntry(73, "ROBUST_CHANNEL_NVENC2_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        74: CatalogEntry(74, "NVLINK_ERROR", "NVLINK Error", "WORKFLOW_NVLINK_ERR", "CONTACT_SUPPORT"),
        75: CatalogEntry(
            75, "ROBUST_CHANNEL_CE6_ERROR", "CE6: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        76: CatalogEntry(
            76, "ROBUST_CHANNEL_CE7_ERROR", "CE7: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        77: CatalogEntry(
            77, "ROBUST_CHANNEL_CE8_ERROR", "CE8: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        78: CatalogEntry(78, "VGPU_START_ERROR", "vGPU Start Error", "UPDATE_SWFW", "UPDATE_SWFW"),
        79: CatalogEntry(
            79,
            "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS",
            "GPU has fallen off the bus",
            "RESTART_BM",
            "CONTACT_SUPPORT",
        ),
        80: CatalogEntry(
            80, "PBDMA_PUSHBUFFER_CRC_MISMATCH", "Corrupted data sent to GPU", "RESTART_APP", "CHECK_APP/CUDA"
        ),
        81: CatalogEntry(81, "ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        82: CatalogEntry(82, "ROBUST_CHANNEL_NVJPG0_ERROR", "NVJPG0 Error", "RESTART_APP", "CONTACT_SUPPORT"),
        83: CatalogEntry(83, "ROBUST_CHANNEL_NVDEC1_ERROR", "NVDEC1 Error", "RESTART_APP", "CONTACT_SUPPORT"),
        84: CatalogEntry(84, "ROBUST_CHANNEL_NVDEC2_ERROR", "NVDEC2 Error", "RESTART_APP", "CONTACT_SUPPORT"),
        85: CatalogEntry(
            85, "ROBUST_CHANNEL_CE9_ERROR", "CE9: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        86: CatalogEntry(86, "ROBUST_CHANNEL_OFA0_ERROR", "OFA Exception", "RESTART_APP", "CONTACT_SUPPORT"),
        87: CatalogEntry(87, "NVTELEMETRY_DRIVER_REPORT", "Unused", "CONTACT_SUPPORT", ""),
        88: CatalogEntry(88, "ROBUST_CHANNEL_NVDEC3_ERROR", "NVDEC3 Error", "RESTART_APP", "CONTACT_SUPPORT"),
        89: CatalogEntry(89, "ROBUST_CHANNEL_NVDEC4_ERROR", "NVDEC4 Error", "RESTART_APP", "CONTACT_SUPPORT"),
        90: CatalogEntry(90, "LTC_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        91: CatalogEntry(91, "RESERVED_XID", "Unused", "CONTACT_SUPPORT", ""),
        92: CatalogEntry(
            92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", "IGNORE", "CONTACT_SUPPORT"
        ),
        93: CatalogEntry(
            93,
            "INFOROM_ERASE_LIMIT_EXCEEDED",
            "Non-fatal violation of provisioned InfoROM wear limit",
            "IGNORE",
            "CONTACT_SUPPORT",
        ),
        94: CatalogEntry(
            94,
            "ROBUST_CHANNEL_CONTAINED_ERROR",
            "Contained memory error",
            "RESTART_APP",
            "IGNORE (sympathetic)",
        ),
        95: CatalogEntry(
            95,
            "ROBUST_CHANNEL_UNCONTAINED_ERROR",
            "Uncontained memory error",
            "RESET_GPU",
            "IGNORE (sympathetic)",
        ),
        96: CatalogEntry(96, "ROBUST_CHANNEL_NVDEC5_ERROR", "NVDEC5 Error", "RESTART_APP", "CONTACT_SUPPORT"),
        97: CatalogEntry(97, "ROBUST_CHANNEL_NVDEC6_ERROR", "NVDEC6 Error", "RESTART_APP", "CONTACT_SUPPORT"),
        98: CatalogEntry(98, "ROBUST_CHANNEL_NVDEC7_ERROR", "NVDEC7 Error", "RESTART_APP", "CONTACT_SUPPORT"),
        99: CatalogEntry(99, "ROBUST_CHANNEL_NVJPG1_ERROR", "NVJPG1 Error", "RESTART_APP", "CONTACT_SUPPORT"),
        100: CatalogEntry(
            100, "ROBUST_CHANNEL_NVJPG2_ERROR", "NVJPG2 Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        101: CatalogEntry(
            101, "ROBUST_CHANNEL_NVJPG3_ERROR", "NVJPG3 Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        102: CatalogEntry(
            102, "ROBUST_CHANNEL_NVJPG4_ERROR", "NVJPG4 Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        103: CatalogEntry(
            103, "ROBUST_CHANNEL_NVJPG5_ERROR", "NVJPG5 Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        104: CatalogEntry(
            104, "ROBUST_CHANNEL_NVJPG6_ERROR", "NVJPG6 Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        105: CatalogEntry(
            105, "ROBUST_CHANNEL_NVJPG7_ERROR", "NVJPG7 Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        106: CatalogEntry(106, "SMBPBI_TEST_MESSAGE", "SMBPBI Test Message", "IGNORE", "IGNORE"),
        107: CatalogEntry(
            107, "SMBPBI_TEST_MESSAGE_SILENT", "SMBPBI Test Message Silent", "IGNORE", "IGNORE"
        ),
        108: CatalogEntry(108, "NVLINK_REMOTE_TRANSLATION_ERROR", "Unused", "IGNORE", "XID_137_FLOW"),
        109: CatalogEntry(
            109,
            "ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR",
            "Context Switch Timeout Error",
            "RESET_GPU",
            "CONTACT_SUPPORT",
        ),
        110: CatalogEntry(110, "SEC_FAULT_ERROR", "Security Fault Error", "RESET_GPU", "INVESTIGATE_SW"),
        111: CatalogEntry(111, "BUNDLE_ERROR_EVENT", "Unused", "CONTACT_SUPPORT", ""),
        112: CatalogEntry(112, "DISP_SUPERVISOR_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        113: CatalogEntry(113, "DP_LT_FAILURE", "Unused", "CONTACT_SUPPORT", ""),
        114: CatalogEntry(114, "HEAD_RG_UNDERFLOW", "Unused", "CONTACT_SUPPORT", ""),
        115: CatalogEntry(115, "CORE_CHANNEL_REGS", "Unused", "CONTACT_SUPPORT", ""),
        116: CatalogEntry(116, "WINDOW_CHANNEL_REGS", "Unused", "CONTACT_SUPPORT", ""),
        117: CatalogEntry(117, "CURSOR_CHANNEL_REGS", "Unused", "CONTACT_SUPPORT", ""),
        118: CatalogEntry(118, "HEAD_REGS", "Unused", "CONTACT_SUPPORT", ""),
        119: CatalogEntry(119, "GSP_RPC_TIMEOUT", "GSP RPC Timeout", "RESET_GPU", "INVESTIGATE_SW"),
        120: CatalogEntry(120, "GSP_ERROR", "GSP Error", "RESET_GPU", "INVESTIGATE_SW"),
        121: CatalogEntry(121, "C2C_ERROR", "C2C Error", "IGNORE", "CONTACT_SUPPORT"),
        122: CatalogEntry(122, "SPI_PMU_RPC_READ_FAIL", "Unused", "CONTACT_SUPPORT", ""),
        123: CatalogEntry(123, "SPI_PMU_RPC_WRITE_FAIL", "Unused", "CONTACT_SUPPORT", ""),
        124: CatalogEntry(124, "SPI_PMU_RPC_ERASE_FAIL", "Unused", "CONTACT_SUPPORT", ""),
        125: CatalogEntry(125, "INFOROM_FS_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        126: CatalogEntry(
            126, "ROBUST_CHANNEL_CE10_ERROR", "CE10: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        127: CatalogEntry(
            127, "ROBUST_CHANNEL_CE11_ERROR", "CE11: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        128: CatalogEntry(
            128, "ROBUST_CHANNEL_CE12_ERROR", "CE12: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        129: CatalogEntry(
            129, "ROBUST_CHANNEL_CE13_ERROR", "CE13: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        130: CatalogEntry(
            130, "ROBUST_CHANNEL_CE14_ERROR", "CE14: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        131: CatalogEntry(
            131, "ROBUST_CHANNEL_CE15_ERROR", "CE15: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        132: CatalogEntry(
            132, "ROBUST_CHANNEL_CE16_ERROR", "CE16: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        133: CatalogEntry(
            133, "ROBUST_CHANNEL_CE17_ERROR", "CE17: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        134: CatalogEntry(
            134, "ROBUST_CHANNEL_CE18_ERROR", "CE18: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        135: CatalogEntry(
            135, "ROBUST_CHANNEL_CE19_ERROR", "CE19: Unknown Error", "RESTART_APP", "CONTACT_SUPPORT"
        ),
        136: CatalogEntry(
            136, "ALI_TRAINING_FAIL", "Link Training Failed", "RESET_GPU", "INVESTIGATE_LINK_SI"
        ),
        137: CatalogEntry(137, "NVLINK_PRIV_ERR", "NVLink Privilege Error", "IGNORE", "XID_137_FLOW"),
        138: CatalogEntry(138, "ROBUST_CHANNEL_DLA_ERROR", "Unused", "CONTACT_SUPPORT", ""),
        139: CatalogEntry(139, "ROBUST_CHANNEL_OFA1_ERROR", "OFA1 Error", "RESTART_APP", "CONTACT_SUPPORT"),
        140: CatalogEntry(
            140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "ECC Unrecovered Error", "RESET_GPU", "CONTACT_SUPPORT"
        ),
        141: CatalogEntry(
            141, "ROBUST_CHANNEL_FAST_PATH_ERROR", "CUDA Fast Path Error", "IGNORE", "CONTACT_SUPPORT"
        ),
        142: CatalogEntry(142, "ROBUST_CHANNEL_NVENC3_ERROR", "NVENC3 Error", "CONTACT_SUPPORT", ""),
        143: CatalogEntry(143, "GPU_INIT_ERROR", "GPU Initialization Error", "RESET_GPU", "CONTACT_SUPPORT"),
        144: CatalogEntry(
            144, "NVLINK_SAW_ERROR", "NVLINK: SAW Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"
        ),
        145: CatalogEntry(
            145, "NVLINK_RLW_ERROR", "NVLINK: RLW Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"
        ),
        146: CatalogEntry(
            146, "NVLINK_TLW_ERROR", "NVLINK: TLW Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"
        ),
        147: CatalogEntry(
            147, "NVLINK_TREX_ERROR", "NVLINK: TREX Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"
        ),
        148: CatalogEntry(
            148,
            "NVLINK_NVLPW_CTRL_ERROR",
            "NVLINK: NVLPW_CTRL Error",
            "WORKFLOW_NVLINK5_ERR",
            "WORKFLOW_NVLINK5_ERR",
        ),
        149: CatalogEntry(
            149, "NVLINK_NETIR_ERROR", "NVLINK: NETIR Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"
        ),
        150: CatalogEntry(
            150, "NVLINK_MSE_ERROR", "NVLINK: MSE Error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR"
        ),
        151: CatalogEntry(
            151, "ROBUST_CHANNEL_KEY_ROTATION_ERROR", "Key rotation Error", "RESTART_VM", "CONTACT_SUPPORT"
        ),
        152: CatalogEntry(
            152, "ROBUST_CHANNEL_DLA_SMMU_ERROR", "DLA SMMU Error", "IGNORE", "CONTACT_SUPPORT"
        ),
        153: CatalogEntry(
            153, "ROBUST_CHANNEL_DLA_TIMEOUT", "DLA timeout Error", "IGNORE", "CONTACT_SUPPORT"
        ),
        154: CatalogEntry(
            154,
            "GPU_RECOVERY_ACTION_CHANGED",
            "GPU Recovery Action Changed",
            "XID_154",
            "N/A Informational only regarding another Xid",
        ),
        155: CatalogEntry(
            155, "NVLINK_SW_DEFINED_ERROR", "NVLINK: SW Defined Error", "RESET_GPU", "INVESTIGATE_SW_USER"
        ),
        156: CatalogEntry(
            156, "RESOURCE_RETIREMENT_EVENT", "Resource Retirement Event", "RESET_GPU", "IGNORE"
        ),
        157: CatalogEntry(
            157, "RESOURCE_RETIREMENT_FAILURE", "Resource Retirement Failure", "IGNORE", "CONTACT_SUPPORT"
        ),
        158: CatalogEntry(158, "GPU_FATAL_TIMEOUT", "GPU Fatal Timeout", "RESET_GPU", "CONTACT_SUPPORT"),
        159: CatalogEntry(
            159,
            "ROBUST_CHANNEL_CHI_NON_DATA_ERROR",
            "CHI Non-Data Error",
            "CHECK_UVM",
            "SYMPATHETIC_REPORT_SOLO",
        ),
        160: CatalogEntry(
            160, "CHANNEL_RETIREMENT_EVENT", "Channel Retirement Event", "IGNORE", "INVESTIGATE_SW"
        ),
        161: CatalogEntry(
            161, "CHANNEL_RETIREMENT_FAILURE", "Channel Retirement Failure", "IGNORE", "INVESTIGATE_SW"
        ),
        162: CatalogEntry(162, "PSHC_REENGAGED", "Power Smoothing HW Circuitry capability reengaged", "", ""),
        163: CatalogEntry(
            163, "PSHC_DISENGAGED", "Power Smoothing HW Circuitry capability disengaged", "", ""
        ),
        164: CatalogEntry(
            164, "PSHC_LOW_LIFETIME", "Power Smoothing HW Circuitry low lifetime reached", "", ""
        ),
        165: CatalogEntry(
            165, "PSHC_ZERO_LIFETIME", "Power Smoothing HW Circuitry lifetime exhausted", "", ""
        ),
        166: CatalogEntry(
            166,
            "NVLINK_SECURE_CRYPTO_ERR",
            "CC traffic seen prior to link properly being configured for encrypted traffic",
            "",
            "",
        ),
        167: CatalogEntry(167, "PCIE_FATAL_TIMEOUT", "PCIE_FATAL_TIMEOUT", "", ""),
        168: CatalogEntry(
            168, "REDUCED_GPU_MEMORY_CAPACITY", "Errors found in WPR (write protected region)", "", ""
        ),
        169: CatalogEntry(169, "SEC2_HALT_ERROR", "Internal micro-controller halt", "", ""),
        170: CatalogEntry(170, "NVLINK_SECURE_OTHER", "Interrupt seen in CC mode", "", ""),
        171: CatalogEntry(
            171,
            "UNCORRECTABLE_DRAM_ERROR",
            "Additional to Xid 48 providing more details on particulars of fault to differentiate DRAM/SRAM",
            "",
            "",
        ),
        172: CatalogEntry(
            172,
            "UNCORRECTABLE_SRAM_ERROR",
            "Additional to Xid 48 providing more details on particulars of fault to differentiate DRAM/SRAM",
            "",
            "",
        ),
    }
)
