"""`nvidia-smi -q -d PCIE,ECC,TEMPERATURE,PAGE_RETIREMENT,ROW_REMAPPER`: the counters fleets judge GPUs by.

Reads any `nvidia-smi -q` text (the full report or a `-d` subset, every driver layout seen): per GPU, by its
bus id, the PCIe replay counter, the volatile ECC counts, the retired pages, the row remapper's state and
its bank availability, and the memory (HBM) temperature with its limit.

The layout is indentation: a section name alone on its line, then `Name : value` lines four spaces further
in. Keys are read as paths (``ECC Errors / Volatile / DRAM Correctable``) so that a value in one section
cannot be taken for the same name in another (``Pending`` appears under MIG Mode, Retired Pages and Remapped
Rows). Two ECC layouts exist: drivers before about 525 print ``Single Bit`` / ``Double Bit`` sections with a
``Total``; later ones print ``SRAM``/``DRAM Correctable`` and ``Uncorrectable`` lines, summed here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from gputop.core.parsers.common import NOT_AVAILABLE, ParseFailure, ParserInfo
from gputop.core.parsers.xid import bus_key

KIND: Final = "nvidia-smi-q"

_GPU_HEADER = re.compile(r"^GPU\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")
_NUMBER = re.compile(r"^(-?\d+)(?:\s*(?:C|bank\(s\)))?$")
_INDENT = 4  # nvidia-smi -q indents each level by four spaces


@dataclass(frozen=True, slots=True)
class GpuCounters:
    """One GPU's counters; None where the GPU or driver does not report one (``N/A``)."""

    pci_bus_id: str
    pcie_replays: int | None = None  # since the last reset (with rollovers counted in)
    ecc_volatile_correctable: int | None = None  # single-bit, since the driver loaded
    ecc_volatile_uncorrectable: int | None = None
    retired_pages_sbe: int | None = None  # pages retired for single-bit errors (pre-Ampere)
    retired_pages_dbe: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    banks_without_spare: int | None = None  # the remap histogram's "None": banks with no spare row left
    memory_temp_c: float | None = None  # HBM
    memory_max_operating_temp_c: float | None = None  # the HBM limit the driver slows memory down at
    gpu_slowdown_temp_c: float | None = None

    @property
    def retired_pages(self) -> int | None:
        if self.retired_pages_sbe is None and self.retired_pages_dbe is None:
            return None
        return (self.retired_pages_sbe or 0) + (self.retired_pages_dbe or 0)


@dataclass(frozen=True, slots=True)
class SmiCounters:
    gpus: tuple[GpuCounters, ...] = ()

    def by_bus_id(self, bus_id: str | None) -> GpuCounters | None:
        if bus_id is None:
            return None
        wanted = bus_key(bus_id)
        if wanted is None:
            return None
        return next((g for g in self.gpus if bus_key(g.pci_bus_id) == wanted), None)


def _number(value: str) -> int | None:
    if value in NOT_AVAILABLE:
        return None
    match = _NUMBER.match(value)
    return int(match.group(1)) if match else None


def _yes_no(value: str) -> bool | None:
    word = value.strip().lower()
    return True if word == "yes" else False if word == "no" else None


# path (section names and key, lowered) -> field; sums for the ECC counters of drivers that split them
_FIELDS: Final[dict[tuple[str, ...], str]] = {
    ("pci", "replays since reset"): "pcie_replays",
    ("retired pages", "single bit ecc"): "retired_pages_sbe",
    ("retired pages", "double bit ecc"): "retired_pages_dbe",
    ("retired pages", "pending page blacklist"): "retired_pages_pending",
    ("retired pages", "pending page retirement"): "retired_pages_pending",
    ("remapped rows", "correctable error"): "remapped_rows_correctable",
    ("remapped rows", "uncorrectable error"): "remapped_rows_uncorrectable",
    ("remapped rows", "bank remap availability histogram", "none"): "banks_without_spare",
    ("temperature", "memory current temp"): "memory_temp_c",
    ("temperature", "memory max operating temp"): "memory_max_operating_temp_c",
    ("temperature", "gpu slowdown temp"): "gpu_slowdown_temp_c",
    ("ecc errors", "volatile", "single bit", "total"): "ecc_volatile_correctable",
    ("ecc errors", "volatile", "double bit", "total"): "ecc_volatile_uncorrectable",
}
_SUMMED: Final[dict[tuple[str, ...], str]] = {
    ("ecc errors", "volatile", "sram correctable"): "ecc_volatile_correctable",
    ("ecc errors", "volatile", "dram correctable"): "ecc_volatile_correctable",
    ("ecc errors", "volatile", "sram uncorrectable"): "ecc_volatile_uncorrectable",
    ("ecc errors", "volatile", "sram uncorrectable parity"): "ecc_volatile_uncorrectable",
    ("ecc errors", "volatile", "sram uncorrectable sec-ded"): "ecc_volatile_uncorrectable",
    ("ecc errors", "volatile", "dram uncorrectable"): "ecc_volatile_uncorrectable",
}
_ROLLOVERS: Final = ("pci", "replay number rollovers")
_REPLAY_ROLLOVER = 1 << 32  # NVML's replay counter is 32 bits; the driver counts its wraps apart
_BOOLEAN_FIELDS: Final = frozenset({"retired_pages_pending"})
_FLOAT_FIELDS: Final = frozenset({"memory_temp_c", "memory_max_operating_temp_c", "gpu_slowdown_temp_c"})


def _gpu(bus_id: str, lines: list[str]) -> GpuCounters:
    values: dict[str, object] = {}
    rollovers = 0
    path: list[tuple[int, str]] = []  # (indent, lowered section name)
    for line in lines:
        text = line.rstrip()
        if not text.strip():
            continue
        indent = len(text) - len(text.lstrip(" "))
        while path and path[-1][0] >= indent:
            path.pop()
        name, colon, value = text.strip().partition(":")
        key = name.strip().lower()
        if not colon:
            path.append((indent, key))
            continue
        if indent // _INDENT == 1:
            path.clear()  # a top-level "Name : value" ends any section above it
        where = (*(section for _indent, section in path), key)
        value = value.strip()
        if where == _ROLLOVERS:
            rollovers = _number(value) or 0
            continue
        field = _FIELDS.get(where)
        if field is not None:
            if field in _BOOLEAN_FIELDS:
                values[field] = _yes_no(value)
            elif field in _FLOAT_FIELDS:
                number = _number(value)
                values[field] = float(number) if number is not None else None
            else:
                values[field] = _number(value)
            continue
        summed = _SUMMED.get(where)
        if summed is not None:
            number = _number(value)
            if number is not None:
                values[summed] = int(values.get(summed) or 0) + number  # type: ignore[call-overload]
            else:
                values.setdefault(summed, None)
    replays = values.get("pcie_replays")
    if isinstance(replays, int) and rollovers:
        values["pcie_replays"] = replays + rollovers * _REPLAY_ROLLOVER
    return GpuCounters(bus_id, **values)  # type: ignore[arg-type]  # the keys are _FIELDS' own


def parse_smi_counters(text: str) -> SmiCounters | ParseFailure:
    blocks: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        header = _GPU_HEADER.match(line)
        if header:
            blocks.append((header.group(1), []))
        elif blocks:
            blocks[-1][1].append(line)
    if not blocks:
        first = next((line.strip() for line in text.splitlines() if line.strip()), "")
        return ParseFailure(KIND, "no 'GPU <bus id>' sections", first[:200])
    gpus = tuple(_gpu(bus_id, lines) for bus_id, lines in blocks)
    return SmiCounters(gpus)


PARSERS: dict[str, ParserInfo] = {
    KIND: ParserInfo(
        KIND, "nvidia-smi -q (PCIe replays, ECC, retired pages, row remaps, HBM temp)", parse_smi_counters
    )
}
