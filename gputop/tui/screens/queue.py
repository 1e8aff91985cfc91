"""The Slurm queue: every job with its GPUs' utilization and idle GPU-hours, sortable and filterable;
the selected job's nodes stay lit on the cluster map, and d drains them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import Input, Static

from gputop.core.filter import FilterError
from gputop.core.idle import IdleState
from gputop.core.jobs import JobRow, parse_job_filter
from gputop.core.nodeset import fold_indices, natural_key
from gputop.core.safe_text import safe_line
from gputop.core.summary import ClusterView
from gputop.tui.screens.base import GputopScreen
from gputop.tui.widgets.cluster_map import ClusterMap
from gputop.tui.widgets.footer import GputopFooter
from gputop.tui.widgets.job_table import JobLives, JobOpened, JobSelected, JobTable
from gputop.tui.widgets.status_header import StatusHeader

if TYPE_CHECKING:
    pass


def job_line(row: JobRow, idle: IdleState | None) -> str:
    """The selected job in one line: who, what state, and which GPUs it holds on which node (the idle
    ones named)."""
    job = row.job
    head = f"job {job.job_id}  {job.user}  {job.partition}  {job.state.lower()}"
    if job.pending_reason:
        return f"{head} ({job.pending_reason})  {job.nodelist or ''}".rstrip()
    idle_by_node = idle.flagged_by_node if idle is not None else {}
    held: list[str] = []
    for node, indices in sorted(job.gpus_by_node.items(), key=lambda item: natural_key(item[0])):
        text = f"{node}: GPU {fold_indices(indices)}"
        idle_here = [g.index for g in idle_by_node.get(node, ()) if g.job_id == job.job_id]
        if idle_here:
            text += f" (idle: {fold_indices(idle_here)})"
        held.append(text)
    return f"{head}  {'  '.join(held) or row.nodes_text}"


class QueueScreen(GputopScreen):
    ACTING = frozenset({"drain"})
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("slash", "start_filter", "Filter"),
        Binding("d", "drain", "Drain job's nodes"),
        Binding("w", "sort_wasted", "Most idle GPU-h first"),
    ]

    DEFAULT_CSS = """
    QueueScreen { layout: vertical; }
    #queue-map { height: auto; max-height: 40%; }
    #job-line { height: 1; padding: 0 1; background: $surface; }
    #queue-filter-bar { height: auto; display: none; }
    #queue-filter-bar.active { display: block; }
    #queue-filter { border: none; height: 1; padding: 0 1; background: $boost; }
    #queue-filter-error { height: auto; color: $error; padding: 0 1; display: none; }
    #queue-filter-error.shown { display: block; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._lit: tuple[frozenset[str] | None, dict[str, frozenset[int]]] = (None, {})

    def compose(self) -> ComposeResult:
        app = self.gputop
        yield app.status_header()
        yield ClusterMap(
            metric=app.metric,
            scales=app.scales,
            height_share=0.4,
            rack_pattern=app.settings.config.ui.rack_pattern,
            id="queue-map",
        )
        yield Static("", id="job-line", markup=False)
        with Vertical(id="queue-filter-bar"):
            yield Input(
                placeholder="filter: user=ana part=gpu state=pending idle gpus>4 util<5 text ...",
                id="queue-filter",
            )
            yield Static("", id="queue-filter-error", markup=False)
        yield JobTable(id="jobs")
        yield GputopFooter()

    def on_mount(self) -> None:
        self.query_one(JobTable).focus()
        view = self.gputop.view
        if view is not None:
            self.apply_view(view)

    # -- data -----------------------------------------------------------------------------------------------
    def apply_view(self, view: ClusterView) -> None:
        self.query_one(StatusHeader).apply_view(view)
        self.query_one(ClusterMap).apply_view(view)
        table = self.query_one(JobTable)
        if view.history is not None and (
            not isinstance(table.cell_context, JobLives) or table.cell_context.store is not view.history
        ):
            table.cell_context = JobLives(view.history)
        table.set_rows(view.jobs)
        self._show_job(self.query_one(JobTable).cursor_name)

    def _show_job(self, job_id: str | None) -> None:
        """The job line, and the map dimmed to the job's nodes and GPUs."""
        view = self.gputop.view
        row = view.jobs.get(job_id or "") if view is not None else None
        line = self.query_one("#job-line", Static)
        if view is None or row is None:
            self._light(None, {})
            line.update("")
            return
        job = row.job
        nodes = frozenset(job.nodes or tuple(job.gpus_by_node))
        self._light(nodes or None, {node: frozenset(indices) for node, indices in job.gpus_by_node.items()})
        line.update(safe_line(job_line(row, view.idle)))

    def _light(self, nodes: frozenset[str] | None, gpus: dict[str, frozenset[int]]) -> None:
        # Only a change repaints the map: every tick re-shows the job, and most ticks it holds the same GPUs.
        if (nodes, gpus) == self._lit:
            return
        self._lit = (nodes, gpus)
        node_map = self.query_one(ClusterMap)
        node_map.set_filter(nodes, gpus)
        if nodes:
            node_map.selected = min(nodes, key=natural_key)

    @on(JobSelected)
    def _selected(self, event: JobSelected) -> None:
        self._show_job(event.job_id)

    @on(JobOpened)
    def _opened(self, event: JobOpened) -> None:
        view = self.gputop.view
        row = view.jobs.get(event.job_id) if view is not None else None
        if row is not None and (row.job.nodes or row.job.gpus_by_node):
            self.gputop.open_node(sorted(row.job.nodes or tuple(row.job.gpus_by_node))[0])

    # -- actions --------------------------------------------------------------------------------------------
    def action_sort_wasted(self) -> None:
        table = self.query_one(JobTable)
        table.sort_by("wasted", reverse=True)
        table.action_jump(0)  # the worst job, under the cursor and on the map

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_drain(self) -> None:
        view = self.gputop.view
        job_id = self.query_one(JobTable).cursor_name
        row = view.jobs.get(job_id or "") if view is not None else None
        if row is None:
            return
        self.gputop.open_node_action("drain", sorted(row.job.nodes or tuple(row.job.gpus_by_node)))

    # -- filter ---------------------------------------------------------------------------------------------
    def action_start_filter(self) -> None:
        self.query_one("#queue-filter-bar").add_class("active")
        self.set_focus(self.query_one("#queue-filter", Input))

    @on(Input.Changed, "#queue-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        table = self.query_one(JobTable)
        error = self.query_one("#queue-filter-error", Static)
        if not event.value.strip():
            table.set_row_filter(None)
            error.remove_class("shown")
            return
        try:
            job_filter = parse_job_filter(event.value)
        except FilterError as err:
            error.update(safe_line(str(err)))
            error.add_class("shown")
            return
        error.remove_class("shown")
        table.set_row_filter(job_filter)

    @on(Input.Submitted, "#queue-filter")
    def _filter_done(self) -> None:
        self.set_focus(self.query_one(JobTable))
