"""The Slurm queue as a table: one row per job, sortable, filterable, 20,000 jobs without lag (a
VirtualTable: only the rows on screen are rendered; filtering and sorting happen on plain rows)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from textual.binding import BindingType
from textual.message import Message

from gputop.core.jobs import (
    DESCENDING_KEYS,
    JobFilter,
    JobRow,
    job_position_key,
    sort_job_rows,
    sort_value,
)
from gputop.core.models import Severity
from gputop.tui import format as fmt
from gputop.tui.widgets.virtual_table import Cell, Column, VirtualTable, table_bindings


class JobSelected(Message):
    def __init__(self, job_id: str) -> None:
        super().__init__()
        self.job_id = job_id


class JobOpened(Message):
    def __init__(self, job_id: str) -> None:
        super().__init__()
        self.job_id = job_id


def _state_cell(row: JobRow, _ctx: Any) -> Cell:
    state = row.job.state
    if state == "RUNNING":
        return state.lower(), None
    if state == "PENDING":
        return state.lower(), Severity.WARN if row.job.pending_reason not in (None, "Priority") else None
    return state.lower(), Severity.CRIT if state in _FAILED_STATES else None


def _util_cell(row: JobRow, _ctx: Any) -> Cell:
    if row.job.state != "RUNNING":
        return "", None
    if row.idle_gpus:
        return f"{fmt.pct(row.util_mean_pct)} {row.idle_gpus} idle", Severity.WARN
    return fmt.pct(row.util_mean_pct), None


LIFE_BINS = 8
LIFE_MAX_S = 24 * 3600.0  # a longer job's sparkline covers its last day: what the history keeps


class JobLives:
    """Each running job's GPU utilization over its life, from the history, worked out once per tick
    for the jobs on screen."""

    def __init__(self, store: Any) -> None:  # a HistoryStore: numpy is loaded with the first data
        self.store = store
        self._ticks = -1
        self._done: dict[str, str] = {}

    def of(self, row: JobRow) -> str:
        store = self.store
        if store.fine.written != self._ticks:
            self._ticks = store.fine.written
            self._done.clear()
        job = row.job
        found = self._done.get(job.job_id)
        if found is None:
            found = ""
            times = store.fine.times_s[store.fine.order()]
            if job.state == "RUNNING" and job.gpus_by_node and len(times):
                now_s = float(times[-1])
                since_s = max(job.start_time_s or now_s - LIFE_MAX_S, now_s - LIFE_MAX_S)
                from gputop.core.history_trends import mean_over, sparkline

                cells = [(node, gpu) for node, gpus in job.gpus_by_node.items() for gpu in gpus]
                values = mean_over(store, cells, "util_pct", since_s, now_s, LIFE_BINS)
                found = sparkline(values, 0.0, 100.0) if values is not None else ""
            self._done[job.job_id] = found
        return found


def _life_cell(row: JobRow, lives: Any) -> Cell:
    return (lives.of(row) if isinstance(lives, JobLives) else ""), None


def _wasted_cell(row: JobRow, _ctx: Any) -> Cell:
    # Short idle spells (start-up, checkpoints) count too, but under 0.05 h they would print as 0.0;
    # the figure is a warning only while some of the job's GPUs are flagged idle now.
    hours = row.wasted_gpu_hours
    if hours < 0.05:
        return "", None
    return f"{hours:.1f}", Severity.WARN if row.idle_gpus else None


def _time_cell(row: JobRow, _ctx: Any) -> Cell:
    limit = "unlimited" if row.job.time_limit_s is None else fmt.duration(row.job.time_limit_s)
    return f"{fmt.duration(row.elapsed_s) if row.elapsed_s is not None else '-'}/{limit}", None


_FAILED_STATES = frozenset({"FAILED", "NODE_FAIL", "TIMEOUT", "OUT_OF_MEMORY"})


def _column(key: str, title: str, width: int, right: bool, cell: Callable[[JobRow, Any], Cell]) -> Column:
    # no sort key: the table orders its rows with the core's `sort_job_rows` (see JobTable.ordered_keys)
    return Column(key, title, width, right, None, cell)


def _reason_cell(row: JobRow, _ctx: Any) -> Cell:
    reason = row.job.pending_reason
    return row.job.name + (f"  ({reason})" if reason else ""), None


JOB_COLUMNS: tuple[Column, ...] = (
    _column("id", "Job", 8, False, lambda r, c: (r.job.job_id, None)),
    _column("user", "User", 9, False, lambda r, c: (r.job.user, None)),
    _column("partition", "Partition", 9, False, lambda r, c: (r.job.partition, None)),
    _column("state", "State", 9, False, _state_cell),
    _column("gpus", "GPUs", 4, True, lambda r, c: (str(r.gpus or ""), None)),
    _column("util", "GPU util", 12, True, _util_cell),
    _column("life", "Util/life", 9, False, _life_cell),
    _column("wasted", "Idle GPU-h", 10, True, _wasted_cell),
    _column("elapsed", "Elapsed/limit", 22, False, _time_cell),
    _column("nodes", "Nodes", 16, False, lambda r, c: (r.nodes_text, None)),
    _column("reason", "Name / reason", 0, False, _reason_cell),
)


class JobTable(VirtualTable):
    """The queue. Enter shows the job's nodes; d drains them (see the queue screen)."""

    COLUMNS = JOB_COLUMNS
    DROP_ORDER = ("life", "partition", "wasted", "elapsed", "nodes")
    LAST_MIN_WIDTH = 20
    DESCENDING_FIRST = DESCENDING_KEYS
    BINDINGS: ClassVar[list[BindingType]] = table_bindings("job", "Job's nodes")

    DEFAULT_CSS = """
    JobTable { height: 1fr; overflow-x: hidden; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(sort_column="state", **kwargs)

    def ordered_keys(self, rows: list[Any], column: Column, reverse: bool) -> list[str]:
        # The table's `reverse` means largest first; the core's means the other way from its default order.
        # Rows without a value (a pending job's utilization) stay last either way.
        return sort_job_rows(rows, column.key, reverse=reverse != (column.key in DESCENDING_KEYS))

    def position_key(self, column: Column, reverse: bool) -> Callable[[Any], Any] | None:
        # the table's reverse is "largest first", which is the core's descending order
        return job_position_key(column.key, reverse)

    def keeps_place(self, before: Any, after: Any, column: Column) -> bool:
        return bool(sort_value(before, column.key) == sort_value(after, column.key))

    def filtered(self, rows: list[Any]) -> list[Any]:
        row_filter = self.row_filter
        return row_filter.select(rows) if isinstance(row_filter, JobFilter) else super().filtered(rows)

    def row_selected(self, key: str) -> None:
        self.post_message(JobSelected(key))

    def row_opened(self, key: str) -> None:
        self.post_message(JobOpened(key))
