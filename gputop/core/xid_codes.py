"""Xid codes by what they point at, with their meanings from NVIDIA's Xid catalogue.

Hardware and driver faults are CRIT: the GPU or its node needs a reset, a reboot or a person. Application
faults are WARN: the program that ran most often caused them, and the next job usually runs fine.
"""

from __future__ import annotations

from typing import Final

from gputop.core.models import Severity

HARDWARE_XIDS: Final[dict[int, str]] = {
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
    140: "unrecovered ECC error",
    143: "GPU initialization failure",
    144: "NVLink SAW (MINION) error",
    145: "NVLink RLW error",
    146: "NVLink TLW error",
    147: "NVLink TREX error",
    148: "NVLink NVLPW control error",
    149: "NVLink NETIR error",
    150: "NVLink MSE error",
    154: "GPU recovery action changed (reset or reboot needed)",
}
APPLICATION_XIDS: Final[dict[int, str]] = {
    13: "graphics engine exception (often an application fault)",
    31: "GPU memory page fault (often an application fault)",
    43: "GPU stopped processing (often an application fault)",
    45: "preemptive cleanup, due to previous errors",
}


def xid_meaning(code: int) -> tuple[Severity, str]:
    if code in HARDWARE_XIDS:
        return Severity.CRIT, HARDWARE_XIDS[code]
    if code in APPLICATION_XIDS:
        return Severity.WARN, APPLICATION_XIDS[code]
    return Severity.WARN, "see NVIDIA's Xid catalogue"
