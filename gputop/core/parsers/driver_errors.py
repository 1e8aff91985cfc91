"""The messages nvidia-smi, NVML and the shell print when a node's GPUs or driver are broken.

`detect_driver_error` finds them anywhere in an output (stdout and stderr together) and says in a few
words what is wrong, so a node shows "GPU 0000:3B:00.0 lost" instead of a parse error.

Kernel log lines (``NVRM: ...``) are not read: an Xid 79 line says "GPU has fallen off the bus" too, but
it is history in a log that the Xid parser reads, not the state of the command that printed it.
"No such file or directory" counts only when it names nvidia-smi: other commands print it for other
files.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

_Reason = Callable[[re.Match[str], str], str]

# The address nvidia-smi prints after "for GPU" (with a space in old drivers, without one in new).
_DEVICE_HANDLE: Final = re.compile(
    r"Unable to determine the device handle for GPU\s*"
    r"([0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+(?:\.[0-9A-Fa-f]+)?)",
    re.IGNORECASE,
)
_NOT_INSTALLED_SHELL: Final = re.compile(
    r"(?:^|[\s:/])([\w.+-]+): (?:command not found|not found)\s*$"  # bash, dash ("sh: 1: x: not found")
    r"|command not found: ([\w.+-]+)\s*$"  # zsh
    r"|(?:^|[\s:/])(nvidia-smi): No such file or directory",
    re.MULTILINE,
)


def _lost(match: re.Match[str], text: str) -> str:
    bus_ids = list(dict.fromkeys(m.group(1) for m in _DEVICE_HANDLE.finditer(text)))
    return f"GPU {', '.join(bus_ids)} lost: unable to determine the device handle"


def _not_installed(match: re.Match[str], text: str) -> str:
    command = next(group for group in match.groups() if group)
    return f"{command} not installed"


def _fixed(reason: str) -> _Reason:
    return lambda match, text: reason


def _nvml(match: re.Match[str], text: str) -> str:
    return f"NVML failed to initialize: {match.group(1).strip().rstrip('.')}"


# Most specific first: the first pattern found anywhere in the output gives the reason.
_PATTERNS: Final[tuple[tuple[re.Pattern[str], _Reason], ...]] = (
    (_NOT_INSTALLED_SHELL, _not_installed),
    (
        re.compile(r"Failed to initialize NVML: Driver/library version mismatch", re.IGNORECASE),
        _fixed("NVML driver/library version mismatch (driver updated without a reboot?)"),
    ),
    (
        re.compile(r"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"),
        _fixed("nvidia-smi cannot communicate with the NVIDIA driver (driver not loaded?)"),
    ),
    (
        re.compile(r"NVIDIA-SMI couldn't find libnvidia-ml\.so"),
        _fixed("NVML library (libnvidia-ml.so) not found"),
    ),
    (re.compile(r"Failed to initialize NVML: ([^\n]*)", re.IGNORECASE), _nvml),
    (_DEVICE_HANDLE, _lost),
    (re.compile(r"GPU has fallen off the bus", re.IGNORECASE), _fixed("GPU has fallen off the bus")),
    (re.compile(r"GPU is lost", re.IGNORECASE), _fixed("GPU lost (reboot to recover it)")),
    (re.compile(r"No devices were found"), _fixed("no GPUs found (No devices were found)")),
)

# Cheap gate: every message above contains one of these words as spelled here, so most outputs are
# rejected in one case-sensitive pass (a case-blind one costs several times as much per line).
_ANY: Final = re.compile(
    r"not found|No such file|NVML|NVIDIA-SMI|device handle|fallen off|is lost|No devices"
)


def detect_driver_error(text: str) -> str | None:
    """A short human reason when `text` carries a broken-driver or missing-tool message, else None."""
    if not _ANY.search(text):
        return None
    if "NVRM" in text:
        text = "\n".join(line for line in text.splitlines() if "NVRM" not in line)
    for pattern, reason in _PATTERNS:
        match = pattern.search(text)
        if match is not None:
            return reason(match, text)
    return None
