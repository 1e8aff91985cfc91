"""`nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv[,noheader][,nounits]`.

Each process comes with the UUID of the GPU it runs on (the stable key that joins it to its GpuSample).
With no process nvidia-smi prints nothing (csv,noheader) or "No running processes found": both are an
empty result, not a failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from gputop.core.models import GpuProcess
from gputop.core.parsers.common import ParseFailure, ParserInfo
from gputop.core.parsers.driver_errors import detect_driver_error
from gputop.core.parsers.query_gpu import header_fields

KIND: Final = "compute-apps"

# The columns gputop asks for; the same tuple as gputop.sources.commands.COMPUTE_APPS_FIELDS.
COMPUTE_APPS_FIELDS: Final[tuple[str, ...]] = ("gpu_uuid", "pid", "process_name", "used_memory")

# Query names and header names -> the column's role (nvidia-smi heads `used_memory` `used_gpu_memory`).
_ROLE_BY_FIELD: Final = {
    "gpu_uuid": "uuid",
    "uuid": "uuid",
    "pid": "pid",
    "process_name": "name",
    "name": "name",
    "used_memory": "used",
    "used_gpu_memory": "used",
}
_NO_PROCESSES: Final = "No running processes found"


@dataclass(frozen=True, slots=True)
class ComputeAppsResult:
    processes: tuple[tuple[str, GpuProcess], ...]  # (gpu_uuid, process); "" when no uuid column
    notes: tuple[str, ...] = ()

    def by_gpu(self) -> dict[str, tuple[GpuProcess, ...]]:
        """Processes grouped by GPU UUID, in output order."""
        grouped: dict[str, list[GpuProcess]] = {}
        for uuid, process in self.processes:
            grouped.setdefault(uuid, []).append(process)
        return {uuid: tuple(found) for uuid, found in grouped.items()}


def _no_value(text: str) -> bool:
    return not text or (text.startswith("[") and text.endswith("]")) or text in ("N/A", "Not Supported")


def _used_mib(text: str) -> float | None:
    if _no_value(text):
        return None
    return float(text.split(None, 1)[0])  # "1234 MiB" or "1234"


def _fit(cells: list[str], width: int, name_column: int | None) -> list[str] | None:
    """The cells of one row; extra commas are taken to belong to the process name (a command line)."""
    if len(cells) == width:
        return cells
    if len(cells) < width or name_column is None:
        return None
    extra = len(cells) - width
    name = ", ".join(cells[name_column : name_column + extra + 1])
    return [*cells[:name_column], name, *cells[name_column + extra + 1 :]]


def _roles(columns: Sequence[str]) -> dict[str | None, int]:
    """Column position of each role; the first column wins when two name the same role."""
    return {_ROLE_BY_FIELD.get(name): i for i, name in reversed(list(enumerate(columns)))}


def parse_compute_apps(text: str, fields: Sequence[str] | None = None) -> ComputeAppsResult | ParseFailure:
    """The processes of a `--query-compute-apps` output. The header names the columns when there is one;
    without one the columns are `fields` (COMPUTE_APPS_FIELDS when not given)."""
    columns = tuple(fields) if fields is not None else COMPUTE_APPS_FIELDS
    roles = _roles(columns)
    notes: list[str] = []
    processes: list[tuple[str, GpuProcess]] = []
    bad_lines: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or _NO_PROCESSES in line:
            continue
        cells = [c.strip() for c in line.split(",")]
        header = header_fields(cells)
        if header is not None:
            columns, roles = header, _roles(header)
            continue
        if "pid" not in roles:
            return ParseFailure(KIND, f"no pid column in {', '.join(columns)}", line[:200])
        row = _fit(cells, len(columns), roles.get("name"))
        if row is None:
            bad_lines.append(line)
            reason = detect_driver_error(line) or f"{len(cells)} columns, expected {len(columns)}"
            notes.append(f"line {number}: {reason}; row skipped")
            continue
        try:
            pid = int(row[roles["pid"]])
            used = _used_mib(row[roles["used"]]) if "used" in roles else None
        except ValueError:
            bad_lines.append(line)
            notes.append(f"line {number}: unreadable pid or memory; row skipped")
            continue
        uuid = row[roles["uuid"]] if "uuid" in roles else ""
        name = row[roles["name"]] if "name" in roles else ""
        processes.append((uuid, GpuProcess(pid=pid, name=name, used_mib=used)))
    if bad_lines and not processes:
        driver = detect_driver_error(text)
        return ParseFailure(KIND, driver or "no readable row", "\n".join(bad_lines[:3])[:200])
    return ComputeAppsResult(tuple(processes), tuple(notes))


def _parse(text: str) -> ComputeAppsResult | ParseFailure:
    return parse_compute_apps(text)


PARSERS: Final = {
    KIND: ParserInfo(
        KIND, "nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv", _parse
    )
}
