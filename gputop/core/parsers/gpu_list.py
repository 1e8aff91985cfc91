"""`nvidia-smi -L`: the GPUs of a node with their UUIDs, and the MIG devices under each.

    GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-7fdaf0a5-...)
      MIG 1g.10gb     Device  0: (UUID: MIG-feb88891-...)                       R470 and later
      MIG 1c.3g.20gb Device 0: (UUID: MIG-GPU-2fa5cf01-.../1/0)                 R450/R460

The old MIG UUID names its GPU instance and compute instance (``/gi/ci``); the new one is opaque, so
`gi_id` and `ci_id` are None there. Indentation is not trusted (copies from docs indent everything): a
MIG line belongs to the GPU line above it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from gputop.core.parsers.common import ParseFailure, ParserInfo
from gputop.core.parsers.driver_errors import detect_driver_error

KIND: Final = "nvidia-smi-L"

_GPU_LINE: Final = re.compile(r"^GPU\s+(\d+):\s*(.*?)\s*\(UUID:\s*([^)\s]+)\s*\)\s*$")
_MIG_LINE: Final = re.compile(r"^MIG\s+(\S+)\s+Device\s+(\d+):\s*\(UUID:\s*([^)\s]+)\s*\)\s*$")
_OLD_MIG_UUID: Final = re.compile(r"^MIG-GPU-[0-9a-fA-F-]+/(\d+)/(\d+)$")


@dataclass(frozen=True, slots=True)
class ListedMigDevice:
    gpu_index: int
    mig_index: int  # the "Device N" number nvidia-smi gives it on its GPU
    profile: str  # 1g.10gb, or 1c.3g.20gb for a compute instance smaller than its GPU instance
    device_id: str  # "<gpu_index>:<mig_index>", the short name gputop shows
    uuid: str  # MIG-<uuid> (R470+) or MIG-GPU-<gpu uuid>/<gi>/<ci> (R450/R460)
    gi_id: int | None = None  # GPU instance id, known from the old UUID form only
    ci_id: int | None = None  # compute instance id, likewise


@dataclass(frozen=True, slots=True)
class ListedGpu:
    index: int
    name: str
    uuid: str
    mig_devices: tuple[ListedMigDevice, ...] = ()


@dataclass(frozen=True, slots=True)
class GpuList:
    gpus: tuple[ListedGpu, ...]
    notes: tuple[str, ...] = ()

    def gpu(self, index: int) -> ListedGpu | None:
        return next((g for g in self.gpus if g.index == index), None)


def _mig_device(gpu_index: int, match: re.Match[str]) -> ListedMigDevice:
    profile, mig_index, uuid = match.group(1), int(match.group(2)), match.group(3)
    old = _OLD_MIG_UUID.match(uuid)
    return ListedMigDevice(
        gpu_index=gpu_index,
        mig_index=mig_index,
        profile=profile,
        device_id=f"{gpu_index}:{mig_index}",
        uuid=uuid,
        gi_id=int(old.group(1)) if old else None,
        ci_id=int(old.group(2)) if old else None,
    )


def parse_gpu_list(text: str) -> GpuList | ParseFailure:
    notes: list[str] = []
    gpus: list[ListedGpu] = []
    migs: list[ListedMigDevice] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        gpu = _GPU_LINE.match(line)
        if gpu is not None:
            if gpus:
                gpus[-1] = ListedGpu(gpus[-1].index, gpus[-1].name, gpus[-1].uuid, tuple(migs))
            gpus.append(ListedGpu(int(gpu.group(1)), gpu.group(2), gpu.group(3)))
            migs = []
            continue
        mig = _MIG_LINE.match(line)
        if mig is not None:
            if gpus:
                migs.append(_mig_device(gpus[-1].index, mig))
            else:
                notes.append(f"line {number}: MIG device before any GPU line; skipped")
            continue
        reason = detect_driver_error(line)
        notes.append(
            f"line {number}: {reason}" if reason else f"line {number}: not understood: {line[:80]!r}"
        )
    if gpus:
        gpus[-1] = ListedGpu(gpus[-1].index, gpus[-1].name, gpus[-1].uuid, tuple(migs))
        return GpuList(tuple(gpus), tuple(notes))
    if not text.strip():
        return ParseFailure(KIND, "empty output")
    reason = detect_driver_error(text)
    return ParseFailure(KIND, reason or "no GPU line (GPU <n>: <name> (UUID: ...))", text.strip()[:200])


PARSERS: Final = {KIND: ParserInfo(KIND, "nvidia-smi -L", parse_gpu_list)}
