"""What an Xid means and what to do about it, from the bucket NVIDIA's Xid catalogue gives it
(gputop.core.xid_catalog), in words an on-call engineer acts on.

- IGNORE is informational: the event is listed with the node, but it raises no problem and no alert.
- RESTART_APP and the CHECK_* buckets are the job's: a WARN that tells its owner what to do.
- RESET_GPU, RESTART_BM (reboot the machine), RESTART_VM, CONTACT_SUPPORT and the workflows for Xid 48
  and Xid 74 are CRIT: the node is drained, then the GPU or the node is reset or rebooted.
- Xid 144-150 (NVLink5) take their severity from the line's own word: a Fatal error needs a GPU reset,
  a Nonfatal one is informational, as the catalogue's decode table has them.
- Xid 154 names the recovery action itself ("... from 0x0 (None) to 0x2 (Node Reboot Required)"): its
  number decides, whatever the words (drivers print "OS Reboot" or "PF FLR" too).
- Codes the catalogue lists as unused on current GPUs are a WARN: a driver or GPU older than the
  catalogue prints them.
- Codes 162-172 have no bucket in the catalogue yet; what gputop does with them is its own reading of the
  catalogue's notes, and its words say so.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from gputop.core.models import Severity
from gputop.core.xid_catalog import CATALOG, CATALOG_EDITION


class XidVerdict(NamedTuple):
    severity: Severity | None  # None: informational (listed, no problem, no alert)
    meaning: str  # what happened, in a few words
    action: str  # what to do about it
    bucket: str  # the catalogue's immediate bucket the verdict follows ("" where it gives none)
    # what kind of action it calls for (ACTION_CLASSES): what an auto-drain policy matches on
    action_class: str = ""


_CRIT, _WARN = Severity.CRIT, Severity.WARN

# The classes of action a problem can call for; the auto-drain policy (gputop.core.drain_policy) drains
# on the ones its config names (default: reset, reboot, support).
ACTION_CLASSES: Final = ("reset", "reboot", "support", "inspect", "job", "update")
DEFAULT_DRAIN_CLASSES: Final = ("reset", "reboot", "support")

_CLASS_BY_BUCKET: Final[dict[str, str]] = {
    "RESTART_APP": "job",
    "CHECK_MECHANICALS": "inspect",
    "CHECK_UVM": "job",
    "UPDATE_SWFW": "update",
    "RESET_GPU": "reset",
    "RESTART_BM": "reboot",
    "RESTART_VM": "reboot",
    "CONTACT_SUPPORT": "support",
    "WORKFLOW_XID_48": "reset",
    "WORKFLOW_NVLINK_ERR": "reset",
    "WORKFLOW_XID_45": "job",
}

# bucket -> (severity, action); {node} and {gpu} are filled in for the event
_BY_BUCKET: Final[dict[str, tuple[Severity | None, str]]] = {
    "IGNORE": (None, "none: informational"),
    "RESTART_APP": (_WARN, "restart {job} on {gpu}"),
    "CHECK_MECHANICALS": (_WARN, "check {gpu}'s auxiliary power cable"),
    "CHECK_UVM": (_WARN, "check {job}'s unified memory use on {gpu}"),
    "UPDATE_SWFW": (_WARN, "update the driver and the GPU firmware"),
    "RESET_GPU": (_CRIT, "drain {node}, then reset {gpu}"),
    "RESTART_BM": (_CRIT, "drain {node}, then reboot {node}: a GPU reset will not bring {gpu} back"),
    "RESTART_VM": (_CRIT, "drain {node}, then restart its VM"),
    "CONTACT_SUPPORT": (_CRIT, "hardware: drain {node} and open a support case for {gpu}"),
    "WORKFLOW_XID_48": (_CRIT, "drain {node}, then reset {gpu} so the failed row is remapped"),
    "WORKFLOW_NVLINK_ERR": (_CRIT, "drain {node}, then reset {gpu}; keep the line for NVIDIA's decode"),
    "WORKFLOW_XID_45": (_WARN, "follow the Xid that came with it; alone, restart Fabric Manager"),
}

# Codes 162-172: no bucket in the catalogue (CATALOG_EDITION); gputop's reading of its notes.
_OWN: Final[dict[int, tuple[Severity | None, str]]] = {
    162: (None, "none: power smoothing is back"),
    163: (_WARN, "power smoothing is off: resolve the thermal events, or reload the driver"),
    164: (_WARN, "power smoothing wears out: plan to replace {gpu} if power swings matter"),
    165: (_WARN, "power smoothing is exhausted: replace {gpu} if power swings matter"),
    166: (_WARN, "confidential computing: open a support case if it repeats"),
    167: (_CRIT, "drain {node}, then reset {gpu} (a fatal PCIe timeout)"),
    168: (_WARN, "enable ECC (row remapping) on {gpu}, or reboot {node}"),
    169: (_CRIT, "drain {node}, then reset {gpu} (a micro-controller halted)"),
    170: (_WARN, "confidential computing: open a support case if it repeats"),
    171: (_CRIT, "drain {node}, then reset {gpu} so the failed row is remapped"),
    172: (_CRIT, "drain {node}, then reset {gpu} (an uncorrectable SRAM error)"),
}

_NVLINK5: Final = range(144, 151)
_NONFATAL = re.compile(r"\bnon-?fatal\b", re.IGNORECASE)
_FATAL = re.compile(r"\bfatal\b", re.IGNORECASE)
# Xid 154: "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)"
_RECOVERY = re.compile(r"recovery action changed from 0x[0-9a-fA-F]+ \([^)]*\) to 0x([0-9a-fA-F]+)")
# NVML's nvmlDeviceGpuRecoveryAction_t, which the line's number is
_RECOVERY_ACTIONS: Final[dict[int, tuple[Severity | None, str, str]]] = {
    0: (None, "none: no recovery needed", ""),
    1: (_CRIT, "drain {node}, then reset {gpu}", "reset"),
    2: (_CRIT, "drain {node}, then reboot {node}", "reboot"),
    3: (_WARN, "drain {node} of jobs that use peer-to-peer traffic", "job"),
    4: (_CRIT, "drain {node}, then reset {gpu}", "reset"),
    5: (_CRIT, "drain {node}, then recover its IMEX domain", "reset"),
    6: (_CRIT, "drain {node}, then reset {gpu}'s PCIe bus", "reset"),
    7: (_CRIT, "drain {node}, then reboot {node}", "reboot"),
}


# Xid 74's seven register words: "NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, ...)"
_XID74_REGISTERS = re.compile(r"\blink\s+(\d+)\s*\(\s*(0x[0-9a-fA-F]+(?:\s*,\s*0x[0-9a-fA-F]+){6})\s*\)")


def xid74_registers(text: str) -> tuple[int, tuple[int, ...]] | None:
    """The NVLink and the seven register words of an Xid 74 line, which NVIDIA's WORKFLOW_NVLINK_ERR
    decodes bit by bit; None where the line does not carry them. The event keeps the line whole, so
    they can be decoded later."""
    found = _XID74_REGISTERS.search(text)
    if found is None:
        return None
    words = tuple(int(word, 16) for word in found.group(2).split(","))
    return int(found.group(1)), words


def xid_verdict(
    code: int, text: str = "", *, node: str = "the node", gpu: int | None = None, job: str | None = None
) -> XidVerdict:
    """The verdict on one Xid event: ``text`` is the kernel line (Xid 144-150 and 154 read it); ``job``:
    the Slurm job holding the GPU, which the job's own actions name."""
    where = f"GPU{gpu}" if gpu is not None else "the GPU"
    whose = f"job {job}" if job else "the job"
    entry = CATALOG.get(code)
    if entry is None:
        action = f"not in {CATALOG_EDITION}: check the driver's release notes"
        return XidVerdict(_WARN, f"Xid {code}", action, "")
    meaning = entry.description if entry.description != "Unused" else f"{entry.mnemonic} (unused)"
    bucket = entry.immediate
    if code == 74 and (registers := xid74_registers(text)) is not None:
        link, registers_read = registers
        meaning = f"{meaning} on link {link} ({', '.join(f'0x{w:x}' for w in registers_read)})"
    if code in _NVLINK5:
        if _NONFATAL.search(text):
            return XidVerdict(None, f"{meaning}, non-fatal", "none: informational", bucket)
        if _FATAL.search(text):
            return XidVerdict(
                _CRIT, f"{meaning}, fatal", f"drain {node}, then reset {where}", bucket, "reset"
            )
        return XidVerdict(_WARN, meaning, "decode the line with NVIDIA's Xid 144-150 table", bucket)
    if code == 154:
        found = _RECOVERY.search(text)
        named = _RECOVERY_ACTIONS.get(int(found.group(1), 16)) if found else None
        if named is None:
            return XidVerdict(_WARN, meaning, "do what the line names, with the Xid before it", bucket)
        severity, words, action_class = named
        return XidVerdict(severity, meaning, words.format(node=node, gpu=where), bucket, action_class)
    if code in _OWN:
        severity, words = _OWN[code]
        action = f"{words.format(node=node, gpu=where)} (gputop's reading)"
        return XidVerdict(severity, meaning, action, "", "reset" if severity is _CRIT else "")
    if entry.description == "Unused":
        action = "a driver or GPU older than the catalogue printed it: open a support case if it repeats"
        return XidVerdict(_WARN, meaning, action, bucket)
    severity, words = _BY_BUCKET.get(bucket, (_WARN, "see NVIDIA's Xid catalogue"))
    action = words.format(node=node, gpu=where, job=whose)
    return XidVerdict(severity, meaning, action, bucket, _CLASS_BY_BUCKET.get(bucket, ""))
