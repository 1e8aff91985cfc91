"""The node table: one row per node, sortable by any column, filterable, thousands of rows without lag
(a VirtualTable: only the rows on screen are rendered)."""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any, ClassVar

from textual.binding import BindingType

from gputop.core.filter import NodeFilter
from gputop.core.models import Reachability
from gputop.core.nodeset import natural_key
from gputop.core.problem import kind_severity
from gputop.core.summary import ClusterView, NodeRow
from gputop.tui import format as fmt
from gputop.tui.messages import NodeOpened, NodeSelected
from gputop.tui.widgets.virtual_table import Cell, Column, VirtualTable, none_last, table_bindings

# Every colour that means WARN or CRIT comes from the row's problems (the core's verdict, after its
# sustain time and with its hysteresis), never from a threshold read here: a cell is coloured exactly
# while the problem list names what it shows.


def _temp_cell(row: NodeRow, _context: object) -> Cell:
    value = row.temp_max_c
    if value is None:
        return fmt.NA, None
    return fmt.temp(value), kind_severity(row.problems, "temp")


def _mem_cell(row: NodeRow, _context: object) -> Cell:
    return fmt.mem_pair(row.mem_used_mib, row.mem_total_mib), kind_severity(row.problems, "mem")


def _state_cell(row: NodeRow, _context: object) -> Cell:
    state = row.reachability.value
    return state, kind_severity(row.problems, state) if row.reachability is not Reachability.OK else None


def _gpus_cell(row: NodeRow, _context: object) -> Cell:
    expected = row.expected_gpu_count
    if expected is None:
        return str(row.gpu_count), None
    return f"{row.gpu_count}/{expected}", kind_severity(row.problems, "missing")


def _slurm_cell(row: NodeRow, _context: object) -> Cell:
    state = row.slurm_state
    if state is None:
        return "-", None
    return state, kind_severity(row.problems, "slurm")


TREND_WINDOW_S = 300.0  # the utilization trend's window: 5 minutes
TREND_BINS = 8  # one character each


def _trend_cell(row: NodeRow, trends: Any) -> Cell:
    """The node's mean utilization over the last 5 minutes, oldest left; a gap (no data) is blank."""
    return (trends.spark(row.name, 0.0, 100.0) if trends is not None else ""), None


def _problem_cell(row: NodeRow, _context: object) -> Cell:
    return row.worst_problem, row.severity if row.problems else None


def _known(value: Callable[[NodeRow], float | None]) -> Callable[[NodeRow], tuple[bool, Any]]:
    """A reading's sort key: a node that stopped answering sorts as unknown, not by its last values."""
    return lambda r: none_last(None if r.reachability is Reachability.DOWN else value(r))


COLUMNS: tuple[Column, ...] = (
    Column("name", "Node", 10, False, lambda r: natural_key(r.name), lambda r, t: (r.name, None)),
    Column("state", "State", 6, False, lambda r: r.reachability.value, _state_cell),
    Column("gpus", "GPUs", 5, True, lambda r: r.gpu_count, _gpus_cell),
    Column(
        "util",
        "Util",
        5,
        True,
        _known(lambda r: r.util_mean_pct),
        lambda r, t: (fmt.pct(r.util_mean_pct), None),
        measured=True,
    ),
    Column(
        "util_max",
        "Max",
        5,
        True,
        _known(lambda r: r.util_max_pct),
        lambda r, t: (fmt.pct(r.util_max_pct), None),
        measured=True,
    ),
    Column("trend", "Util 5m", 8, False, _known(lambda r: r.util_mean_pct), _trend_cell, measured=True),
    Column("temp", "Temp", 5, True, _known(lambda r: r.temp_max_c), _temp_cell, measured=True),
    Column("mem", "Memory", 10, True, _known(lambda r: r.mem_pct), _mem_cell, measured=True),
    Column(
        "power",
        "Power",
        7,
        True,
        _known(lambda r: r.power_w),
        lambda r, t: (fmt.power(r.power_w), None),
        measured=True,
    ),
    Column("slurm", "Slurm", 12, False, lambda r: r.slurm_state or "", _slurm_cell),
    Column(
        "problem",
        "Problem",
        0,
        False,
        # rows arrive in natural name order and the sort is stable, so ties stay in name order
        attrgetter("worst_first"),
        _problem_cell,
    ),
)
COLUMN_BY_KEY = {c.key: c for c in COLUMNS}
# On a narrow terminal these go first, so the problem column keeps room to say what is wrong.
DROP_ORDER = ("trend", "util_max", "power", "gpus", "state", "slurm", "mem")
# What is wrong matters most on a narrow terminal: the state (the map shows it) and the rest give way.
PROBLEM_MIN_WIDTH = 34
# Columns whose natural order is "worst first" when first chosen.
DESCENDING_FIRST = {"util", "util_max", "temp", "mem", "power"}


class NodeTable(VirtualTable):
    """Sortable, filterable node list. Enter opens the node under the cursor."""

    COLUMNS = COLUMNS
    DROP_ORDER = DROP_ORDER
    LAST_MIN_WIDTH = PROBLEM_MIN_WIDTH
    DESCENDING_FIRST = frozenset(DESCENDING_FIRST)
    BINDINGS: ClassVar[list[BindingType]] = table_bindings("node", "Open node")

    DEFAULT_CSS = """
    NodeTable { height: 1fr; overflow-x: hidden; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(sort_column="problem", **kwargs)
        self.node_filter: NodeFilter | None = None
        self._view: ClusterView | None = None

    def apply_view(self, view: ClusterView) -> None:
        self._view = view
        store = view.history
        if store is not None and getattr(self.cell_context, "store", None) is not store:
            from gputop.core.history_trends import Trends  # numpy: loaded with the first data, not before

            self.cell_context = Trends(store, "util_pct", TREND_WINDOW_S, TREND_BINS)
        self.set_rows(view.rows)

    def set_filter(self, node_filter: NodeFilter | None) -> None:
        self.node_filter = node_filter
        self.set_row_filter(node_filter)

    def row_dimmed(self, row: Any) -> bool:
        return bool(row.reachability is Reachability.DOWN)

    def row_selected(self, key: str) -> None:
        self.post_message(NodeSelected(key))

    def row_opened(self, key: str) -> None:
        self.post_message(NodeOpened(key))
