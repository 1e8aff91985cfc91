"""`nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`: one GpuSample per row.

Two entry points. `parse_query_gpu` reads a whole output: a saved file, a `-l`/`-lms` log with its header
printed once or repeated, cells with or without units. `parse_query_gpu_line` reads one line of the
metrics stream and is the hot path (1,000 nodes x 8 GPUs at 1 s is 8,000 lines a second), so it runs a
plan computed once per field list and tries the plain number before anything else; units and `[N/A]`
take the slower path.

Throttle reasons: the `clocks_throttle_reasons.active` bitmask becomes the names of its set bits, and
`gpu_idle` stays in that list because it is what the driver reports; "is this GPU being slowed down?"
is `throttling_reasons(sample.throttle_reasons)`, which leaves `gpu_idle` out (an idle GPU runs low
clocks because it has nothing to do, not because power or heat hold it back).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from gputop.core.models import GpuProcess, GpuSample
from gputop.core.parsers.common import NOT_AVAILABLE, ParseFailure, ParserInfo
from gputop.core.parsers.driver_errors import detect_driver_error
from gputop.core.parsers.row_reader import Reader, compile_reader

KIND: Final = "query-gpu"

# The metrics stream's columns, in order; the same tuple as gputop.sources.commands.QUERY_GPU_FIELDS
# (a test keeps them equal: the core cannot import the sources layer).
QUERY_GPU_FIELDS: Final[tuple[str, ...]] = (
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "utilization.gpu",
    "utilization.memory",
    "memory.used",
    "memory.total",
    "temperature.gpu",
    "power.draw",
    "power.limit",
    "clocks.sm",
    "clocks.max.sm",
    "ecc.errors.uncorrected.volatile.total",
    "mig.mode.current",
    "clocks_throttle_reasons.active",
    "retired_pages.pending",
    "remapped_rows.pending",
    "remapped_rows.failure",
    "pcie.link.gen.current",
    "pcie.link.gen.max",
    "pcie.link.width.current",
    "pcie.link.width.max",
)
# Fields an older driver may reject ('Field "remapped_rows.pending" is not a valid field to query.'):
# the SSH source drops such a field from its stream and keeps the rest (gputop.sources.ssh_node).

# Query names and the names nvidia-smi prints in its header (it prints `clocks.current.sm` for a
# `clocks.sm` query, and `clocks_event_reasons` in drivers that renamed throttle to event) -> GpuSample slot.
SLOT_BY_FIELD: Final[dict[str, str]] = {
    "index": "index",
    "uuid": "uuid",
    "gpu_uuid": "uuid",
    "name": "name",
    "gpu_name": "name",
    "pci.bus_id": "pci_bus_id",
    "gpu_bus_id": "pci_bus_id",
    "utilization.gpu": "util_pct",
    "utilization.memory": "mem_util_pct",
    "memory.used": "mem_used_mib",
    "memory.total": "mem_total_mib",
    "temperature.gpu": "temp_c",
    "power.draw": "power_w",
    "power.draw.instant": "power_w",
    "power.draw.average": "power_w",
    "power.limit": "power_limit_w",
    "enforced.power.limit": "power_limit_w",
    "clocks.sm": "sm_clock_mhz",
    "clocks.current.sm": "sm_clock_mhz",
    "clocks.max.sm": "sm_clock_max_mhz",
    "clocks.max.streaming_multiprocessor": "sm_clock_max_mhz",
    "ecc.errors.uncorrected.volatile.total": "ecc_uncorrected",
    "mig.mode.current": "mig_enabled",
    "clocks_throttle_reasons.active": "throttle_reasons",
    "clocks_event_reasons.active": "throttle_reasons",
    "retired_pages.pending": "retired_pages_pending",
    "remapped_rows.pending": "remapped_rows_pending",
    "remapped_rows.failure": "remapped_rows_failure",
    "pcie.link.gen.current": "pcie_link_gen",
    "pcie.link.gen.gpucurrent": "pcie_link_gen",
    "pcie.link.gen.max": "pcie_link_gen_max",
    "pcie.link.gen.gpumax": "pcie_link_gen_max",
    "pcie.link.width.current": "pcie_link_width_lanes",
    "pcie.link.width.max": "pcie_link_width_max_lanes",
}

# NVML's nvmlClocksThrottleReason* (nvmlClocksEventReason*) bits.
THROTTLE_REASON_BITS: Final[tuple[tuple[int, str], ...]] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clocks_setting"),
)
_KNOWN_BITS: Final = sum(bit for bit, _ in THROTTLE_REASON_BITS)
# Reasons that are not a slowdown: the GPU has no work.
NOT_THROTTLING: Final = frozenset({"gpu_idle"})

# Header cells: dotted names, lower-case at the start (drivers 580 and later print camelCase parts such as
# pci.baseClass and fabric.cliqueId), optionally followed by a unit in brackets.
_HEADER_CELL = re.compile(r"^([a-z][A-Za-z0-9_.]*)\s*(?:\[[^\]]*\])?$")
# Header names without a dot or underscore that are still field names (the rest have one).
_PLAIN_FIELD_NAMES = frozenset({"index", "uuid", "name", "timestamp", "count", "serial", "pstate", "pid"})
_MAX_ROW_NOTES = 20
_MAX_PLANS = 64

_new_tuple = tuple.__new__


@functools.cache
def throttle_reason_names(mask: int) -> tuple[str, ...]:
    """The names of the bits set in a throttle (clocks event) reason mask, lowest bit first. A bit
    without a name (a newer driver's) is named by its hex value, e.g. ``0x200``. Cached: a cluster
    shows only a handful of distinct masks."""
    names = [name for bit, name in THROTTLE_REASON_BITS if mask & bit]
    rest = mask & ~_KNOWN_BITS
    bit = 1
    while rest >= bit:
        if rest & bit:
            names.append(f"0x{bit:x}")
        bit <<= 1
    return tuple(names)


def throttling_reasons(reasons: Sequence[str]) -> tuple[str, ...]:
    """The reasons that mean the clocks are held back (every listed reason except ``gpu_idle``)."""
    return tuple(r for r in reasons if r not in NOT_THROTTLING)


@dataclass(frozen=True, slots=True)
class QueryGpuResult:
    gpus: tuple[GpuSample, ...]  # one per accepted row, in output order (a -l log repeats GPUs)
    # Per accepted row (same order as gpus): the cells of the fields GpuSample has no slot for
    # (timestamp, driver_version, memory.free, ...), None where nvidia-smi printed no value.
    rows: tuple[dict[str, str | None], ...] = ()
    fields: tuple[str, ...] = ()  # the columns read, as the header (or the caller) named them
    notes: tuple[str, ...] = ()


# -- cell converters: each takes the raw cell (spaces around it included) and raises ValueError -------


def _is_no_value(text: str) -> bool:
    # nvidia-smi brackets every "no value" it prints in CSV ([N/A], [Unknown Error], [GPU requires reset])
    return text in NOT_AVAILABLE or (text.startswith("[") and text.endswith("]"))


def _number_text(cell: str) -> str | None:
    """The number part of a cell such as ``250.50 W``; None for a no-value cell."""
    text = cell.strip()
    if _is_no_value(text):
        return None
    return text.split(None, 1)[0]


def _to_float(cell: str) -> float | None:
    try:
        return float(cell)  # the stream's nounits cells: float() accepts the spaces around them
    except ValueError:
        number = _number_text(cell)
        return None if number is None else float(number)


def _to_int(cell: str) -> int | None:
    try:
        return int(cell)
    except ValueError:
        number = _number_text(cell)
        return None if number is None else int(number)


# nvidia-smi numbers a node's GPUs from 0; a row whose index is out of any node's range is not a GPU's.
MAX_GPU_INDEX: Final = 1023


def _to_index(cell: str) -> int:
    index = int(cell)  # a row without its GPU index cannot be placed: let it fail
    if not 0 <= index <= MAX_GPU_INDEX:
        raise ValueError(f"GPU index {index} out of range")
    return index


# Every GPU's UUID reads GPU-<hex groups>, and a MIG device's MIG-...: a row whose UUID column holds
# anything else is not nvidia-smi's (a broken stream, another program's output) and must not pass for a
# GPU with absurd readings.
_UUID_PREFIXES: Final = ("GPU-", "MIG-")


def _to_uuid(cell: str) -> str:
    text = cell.strip()
    if _is_no_value(text):
        return ""
    if not text.startswith(_UUID_PREFIXES):
        raise ValueError(f"not a GPU UUID: {text[:40]!r}")
    return text


def _to_text(cell: str) -> str:
    text = cell.strip()
    return "" if _is_no_value(text) else text


def _to_optional_text(cell: str) -> str | None:
    text = cell.strip()
    return None if _is_no_value(text) else text


_MIG_MODE: Final = {"Enabled": True, "Disabled": False}


def _to_mig(cell: str) -> bool | None:
    return _MIG_MODE.get(cell.strip())


# nvidia-smi prints these flags as Yes/No; some drivers print 1/0 for the remapper's.
_FLAG: Final = {"yes": True, "no": False, "1": True, "0": False, "true": True, "false": False}


def _to_flag(cell: str) -> bool | None:
    # A word it does not know leaves the flag unknown rather than costing the GPU its whole row.
    return _FLAG.get(cell.strip().lower())


def _to_reasons(cell: str) -> tuple[str, ...]:
    text = cell.strip()
    if _is_no_value(text):
        return ()
    return throttle_reason_names(int(text, 16))


# The builtins that read a plain number as the guarded converters do, and raise ValueError on the rest.
_BUILTIN_FOR: Final[dict[Callable[[str], Any], Callable[[str], Any]]] = {_to_float: float, _to_int: int}

# Every cell is read through a memo (a dict lookup, and the same value object each time) except those of
# the slots whose text seldom repeats: a cluster prints a few hundred distinct temperatures, utilizations
# and clocks, but power draw and memory in use vary in their last digits.
_UNMEMOIZED_SLOTS: Final = frozenset({"power_w", "mem_used_mib"})

_CONVERTER_BY_SLOT: Final[dict[str, Callable[[str], Any]]] = {
    "index": _to_index,
    "uuid": _to_uuid,
    "name": _to_text,
    "pci_bus_id": _to_optional_text,
    "util_pct": _to_float,
    "mem_util_pct": _to_float,
    "mem_used_mib": _to_float,
    "mem_total_mib": _to_float,
    "temp_c": _to_float,
    "power_w": _to_float,
    "power_limit_w": _to_float,
    "sm_clock_mhz": _to_float,
    "sm_clock_max_mhz": _to_float,
    "ecc_uncorrected": _to_int,
    "mig_enabled": _to_mig,
    "throttle_reasons": _to_reasons,
    "retired_pages_pending": _to_flag,
    "remapped_rows_pending": _to_flag,
    "remapped_rows_failure": _to_flag,
    "pcie_link_gen": _to_int,
    "pcie_link_gen_max": _to_int,
    "pcie_link_width_lanes": _to_int,
    "pcie_link_width_max_lanes": _to_int,
}


# -- plans -------------------------------------------------------------------------------------------


_Step = tuple[int, int, Callable[[str], Any]]  # (column, GpuSample position, converter)


@dataclass(slots=True)
class _Plan:
    fields: tuple[str, ...]
    width: int
    steps: tuple[_Step, ...]
    extra: tuple[tuple[int, str], ...]  # (column, field) of fields without a GpuSample slot
    template: tuple[Any, ...]  # GpuSample values before any cell is read
    has_index: bool
    has_uuid: bool
    # The steps compiled into one function of (cells, processes by GPU UUID), with the builtin float and
    # int for numbers except in the guarded columns, where a line has shown a cell only the careful
    # converters read ("[N/A]"). Each reader holds a plan of its own (`_own_plan`) and replaces this in
    # place when one of its columns needs guarding: one node's "[N/A]" never slows another's reader.
    fast: Reader
    guarded: frozenset[int] = frozenset()


def field_name(header_cell: str) -> str:
    """``memory.used [MiB]`` -> ``memory.used``."""
    return header_cell.split("[", 1)[0].strip()


def _plan_for(fields: tuple[str, ...]) -> _Plan:
    positions = {slot: i for i, slot in enumerate(GpuSample._fields)}
    steps: list[_Step] = []
    extra: list[tuple[int, str]] = []
    taken: set[str] = set()
    for column, name in enumerate(fields):
        slot = SLOT_BY_FIELD.get(field_name(name))
        if slot is None or slot in taken:  # a second column for a slot (power.draw and .instant) stays raw
            extra.append((column, name))
            continue
        taken.add(slot)
        steps.append((column, positions[slot], _CONVERTER_BY_SLOT[slot]))
    template: list[Any] = [None] * len(GpuSample._fields)
    template[positions["index"]] = 0
    template[positions["uuid"]] = ""
    template[positions["name"]] = ""
    template[positions["throttle_reasons"]] = ()
    template[positions["processes"]] = ()
    return _Plan(
        fields,
        len(fields),
        tuple(steps),
        tuple(extra),
        tuple(template),
        "index" in taken,
        "uuid" in taken,
        _compile(steps, tuple(template), frozenset()),
    )


_UUID_AT: Final = GpuSample._fields.index("uuid")
_PROCESSES_AT: Final = GpuSample._fields.index("processes")


def _compile(steps: Sequence[_Step], template: tuple[Any, ...], guarded: frozenset[int]) -> Reader:
    quick = [
        (c, p, convert if c in guarded else _BUILTIN_FOR.get(convert, convert)) for c, p, convert in steps
    ]
    memoized = frozenset(c for c, p, _ in steps if GpuSample._fields[p] not in _UNMEMOIZED_SLOTS)
    return compile_reader(GpuSample, template, quick, memoized=memoized, lookup=(_UUID_AT, _PROCESSES_AT))


@functools.lru_cache(maxsize=_MAX_PLANS)
def _layout(fields: tuple[str, ...]) -> _Plan:
    """The plan of a column layout, compiled once and never changed: readers start from a copy of it."""
    return _plan_for(fields)


def _own_plan(fields: Sequence[str]) -> _Plan:
    """A plan of its own for one reader: the layout's steps and compiled function, until a column of
    this reader's needs guarding and it compiles its own (`_guard_columns`)."""
    shared = _layout(tuple(fields))
    return _Plan(
        shared.fields,
        shared.width,
        shared.steps,
        shared.extra,
        shared.template,
        shared.has_index,
        shared.has_uuid,
        shared.fast,
    )


def header_fields(cells: Sequence[str]) -> tuple[str, ...] | None:
    """The field names when these stripped cells are a CSV header line, else None."""
    names: list[str] = []
    named = False
    for cell in cells:
        match = _HEADER_CELL.match(cell)
        if match is None:
            return None
        name = match.group(1)
        named = named or "." in name or "_" in name or name in _PLAIN_FIELD_NAMES
        names.append(name)
    return tuple(names) if named else None


def _read(plan: _Plan, cells: Sequence[str]) -> GpuSample:
    values = list(plan.template)
    for column, position, convert in plan.steps:
        values[position] = convert(cells[column])
    sample: GpuSample = _new_tuple(GpuSample, values)
    return sample


# -- the stream ---------------------------------------------------------------------------------------

# What a line without processes to join reads with.
_NO_PROCESSES: Final[Mapping[str, tuple[GpuProcess, ...]]] = {}


class StreamLineReader:
    """Reads the lines of one metrics stream (columns in ``fields`` order), each with its GPU's processes
    joined in from a mapping by GPU UUID as it is read: rebuilding every sample afterwards to add them
    cost more than reading the line.

    ``read(line, processes)``: as parse_query_gpu_line, with ``processes`` (by GPU UUID) in each sample.
    A partial of the line reader on this layout's plan, not a method: one call less per line."""

    __slots__ = ("fields", "read")

    def __init__(self, fields: Sequence[str]) -> None:
        self.fields = tuple(fields)
        # the reader's own plan: the partial holds it, and guarding a column recompiles it in place
        self.read: Callable[[str, Mapping[str, tuple[GpuProcess, ...]]], GpuSample | ParseFailure | None] = (
            functools.partial(_read_line, _own_plan(self.fields))
        )


def parse_query_gpu_line(line: str, fields: Sequence[str]) -> GpuSample | ParseFailure | None:
    """One line of `--format=csv,noheader,nounits` output, columns in `fields` order.

    None for a blank line or a header line (a stream started without ``noheader``); a ParseFailure for a
    line with the wrong column count or an unreadable number. Without an ``index`` field every line is
    GPU 0: ask for the index.
    """
    return _read_line(_own_plan(fields), line, _NO_PROCESSES)


def _read_line(
    plan: _Plan, line: str, processes: Mapping[str, tuple[GpuProcess, ...]]
) -> GpuSample | ParseFailure | None:
    if not line or line.isspace():
        return None
    cells = line.split(",")
    if len(cells) != plan.width:
        if header_fields([c.strip() for c in cells]) is not None:
            return None
        return ParseFailure(KIND, f"{len(cells)} columns, expected {plan.width}", line[:200])
    try:
        read: GpuSample = plan.fast(cells, processes)
        return read
    except ValueError:
        pass  # a cell only the guarded converters read, a header, or a broken line: read it with care
    values = list(plan.template)
    column = 0
    try:
        for column, position, convert in plan.steps:
            values[position] = convert(cells[column])
    except ValueError:
        if header_fields([c.strip() for c in cells]) is not None:
            return None
        cell = cells[column].strip()
        return ParseFailure(KIND, f"{plan.fields[column]}: unreadable value {cell!r}", line[:200])
    _guard_columns(plan, cells)
    if plan.has_uuid:
        values[_PROCESSES_AT] = processes.get(values[_UUID_AT], ())
    sample: GpuSample = _new_tuple(GpuSample, values)
    return sample


def _guard_columns(plan: _Plan, cells: Sequence[str]) -> None:
    """Recompiles the plan with its guarded converters in the columns whose builtin raised on ``cells``,
    a readable line: a GPU that prints "[N/A]" there once will print it every interval."""
    guarded = set(plan.guarded)
    for column, _position, convert in plan.steps:
        builtin = _BUILTIN_FOR.get(convert)
        if builtin is None or column in guarded:
            continue
        try:
            builtin(cells[column])
        except ValueError:
            guarded.add(column)
    if len(guarded) > len(plan.guarded):
        plan.guarded = frozenset(guarded)
        plan.fast = _compile(plan.steps, plan.template, plan.guarded)


# -- a whole output -----------------------------------------------------------------------------------


def _split_cells(line: str) -> list[str]:
    if "," not in line and "\t" in line:
        return [c.strip() for c in line.split("\t") if c.strip()]  # a copy that turned commas into tabs
    return [c.strip() for c in line.split(",")]


class _Notes:
    """Notes with the per-row complaints capped, so a long broken log does not make a longer report."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.skipped_rows = 0

    def add(self, text: str) -> None:
        self.items.append(text)

    def row(self, text: str) -> None:
        self.skipped_rows += 1
        if self.skipped_rows <= _MAX_ROW_NOTES:
            self.items.append(text)

    def done(self) -> tuple[str, ...]:
        hidden = self.skipped_rows - _MAX_ROW_NOTES
        if hidden > 0:
            self.items.append(f"{hidden} more row(s) skipped")
        return tuple(self.items)


def parse_query_gpu(text: str, fields: Sequence[str] | None = None) -> QueryGpuResult | ParseFailure:
    """A whole `--query-gpu` output. The header names the columns when there is one; without one the
    columns are `fields` (QUERY_GPU_FIELDS when not given). Rows that cannot be read are skipped with
    a note; an output without a single readable row is a ParseFailure."""
    notes = _Notes()
    plan = _own_plan(fields if fields is not None else QUERY_GPU_FIELDS)
    header_seen = False
    gpus: list[GpuSample] = []
    rows: list[dict[str, str | None]] = []
    bad_lines: list[str] = []
    driver_errors: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        cells = _split_cells(line)
        header = header_fields(cells)
        if header is not None and not _layout(header).steps:
            # a header names fields gputop reads: a line of junk such as "o." names none, and taken for
            # one it would make every one-cell line a GPU
            header = None
        if header is not None:
            if header_seen and header != plan.fields:
                notes.add(f"line {number}: the header changed to {', '.join(header)}")
            header_seen = True
            plan = _own_plan(header)
            continue
        if len(cells) != plan.width:
            driver = detect_driver_error(line)
            if driver is not None:
                driver_errors.append(driver)
                notes.add(f"line {number}: {driver}")
                continue
            bad_lines.append(line)
            notes.row(f"line {number}: {len(cells)} columns, expected {plan.width}; row skipped")
            continue
        try:
            sample = _read(plan, cells)
        except ValueError:
            column = 0
            for column, _, convert in plan.steps:
                try:
                    convert(cells[column])
                except ValueError:
                    break
            bad_lines.append(line)
            notes.row(
                f"line {number}: {plan.fields[column]}: unreadable value {cells[column]!r}; row skipped"
            )
            continue
        if not plan.has_index:
            sample = sample._replace(index=len(gpus))
        gpus.append(sample)
        rows.append({plan.fields[c]: _to_optional_text(cells[c]) for c, _ in plan.extra})
    if not plan.has_index and gpus:
        notes.add("no index column: GPUs numbered by row")
    if not gpus:
        if driver_errors:
            return ParseFailure(KIND, driver_errors[0], "")
        if bad_lines:
            return ParseFailure(KIND, "no readable row", "\n".join(bad_lines[:3])[:200])
        if not header_seen:
            return ParseFailure(KIND, "empty output")
        notes.add("header only: no GPU rows")
    return QueryGpuResult(tuple(gpus), tuple(rows), plan.fields, notes.done())


def _parse(text: str) -> QueryGpuResult | ParseFailure:
    return parse_query_gpu(text)


PARSERS: Final = {
    KIND: ParserInfo(KIND, "nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits] [-l N]", _parse)
}
