"""The node table as CSV, as the dashboard shows it (its filter and its order), for a spreadsheet.

Units are in the column names. Text that a spreadsheet would read as a formula (a cell starting with
``=``, ``+``, ``-``, ``@``, a tab or a carriage return: a node name or a Slurm reason anyone can set) is
prefixed with a single quote, so opening the file never runs it.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable

from gputop.core.summary import NodeRow

HEADER = (
    "node",
    "state",
    "gpus",
    "gpus_expected",
    "util_mean_pct",
    "util_max_pct",
    "temp_max_c",
    "mem_used_mib",
    "mem_total_mib",
    "power_w",
    "power_limit_w",
    "slurm_state",
    "severity",
    "problem_count",
    "problems",
)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(value: str) -> str:
    """Text a spreadsheet will show, never run: a formula-looking start quoted."""
    return "'" + value if value.startswith(_FORMULA_START) else value


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def table_csv(rows: Iterable[NodeRow]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER)
    for row in rows:
        writer.writerow(
            (
                spreadsheet_safe(row.name),
                row.reachability.value,
                row.gpu_count,
                "" if row.expected_gpu_count is None else row.expected_gpu_count,
                _number(row.util_mean_pct),
                _number(row.util_max_pct),
                _number(row.temp_max_c),
                _number(row.mem_used_mib),
                _number(row.mem_total_mib),
                _number(row.power_w),
                _number(row.power_limit_w),
                spreadsheet_safe(row.slurm_state or ""),
                row.severity.value,
                len(row.problems),
                spreadsheet_safe(
                    "; ".join(p.message for p in sorted(row.problems, key=lambda p: p.sort_key))
                ),
            )
        )
    return out.getvalue()
