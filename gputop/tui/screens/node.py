"""The node screen: every GPU of one node, what is wrong with it, its MIG partitions, and how its GPUs and
NICs connect. From here GPUs are marked, repartitioned and have their MIG mode changed."""

from __future__ import annotations

import operator
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from gputop.core.event_history import EventHistory
from gputop.core.health import format_age
from gputop.core.models import GpuSample, NodeSample, Severity, SlurmState
from gputop.core.parsers.query_gpu import throttling_reasons
from gputop.core.problem import GpuVerdict, Problem, gpu_kind_severities, gpu_verdicts
from gputop.core.safe_text import safe_line
from gputop.core.summary import ClusterView, NodeRow
from gputop.tui import format as fmt
from gputop.tui.palette import Palette
from gputop.tui.screens.base import GputopScreen
from gputop.tui.screens.mig_action import MigActionScreen
from gputop.tui.screens.mig_dialog import MigRepartitionScreen
from gputop.tui.screens.mig_mode_dialog import MigModeScreen
from gputop.tui.store_past import StorePast
from gputop.tui.widgets.footer import GputopFooter
from gputop.tui.widgets.history_chart import ChartEvent, HistoryChart
from gputop.tui.widgets.mig_pane import MigPane
from gputop.tui.widgets.status_header import StatusHeader
from gputop.tui.widgets.topology_pane import TopologyPane

if TYPE_CHECKING:
    from gputop.core.node_timeline import NodeTimeline

NOT_EXPORTED = "not exported"
# how the Collection section names the readings a source does not export
READING_NAMES = {
    "util_pct": "utilization",
    "mem_util_pct": "memory bandwidth",
    "mem_used_mib": "memory used",
    "mem_total_mib": "memory total",
    "temp_c": "temperature",
    "power_w": "power",
    "power_limit_w": "power limit",
    "sm_clock_mhz": "SM clock",
    "sm_clock_max_mhz": "SM clock max",
    "ecc_uncorrected": "ECC",
}
PROCESS_NAME_MAX_CHARS = 64  # a path-long process name would push the others off the row

GPU_COLUMNS = (
    ("gpu", "GPU"),
    ("health", "Health"),
    ("model", "Model"),
    ("util", "Util"),
    ("mem", "Memory"),
    ("temp", "Temp"),
    ("power", "Power/limit"),
    ("clock", "SM clock"),
    ("ecc", "ECC"),
    ("mig", "MIG"),
    ("job", "Job"),
    ("procs", "Processes"),
)


def _styled(text: str, severity: Severity | None, palette: Palette) -> Text:
    # Always a Text: the DataTable reads a plain str as markup, and a process name like
    # "[@click=...]x" would become a link that runs an action.
    return Text(text) if severity is None else Text(text, style=palette.severity[severity])


def _same_cell(shown: object, value: Text) -> bool:
    # Text's own == ignores the style, and a cell that turns WARN keeps its words
    return isinstance(shown, Text) and (shown.plain, shown.style, shown.spans) == (
        value.plain,
        value.style,
        value.spans,
    )


def gpu_cells(
    gpu: GpuSample,
    node: str,
    slurm: SlurmState | None,
    severities: Mapping[tuple[int, str], Severity],
    palette: Palette,
    verdict: GpuVerdict | None = None,
    not_exported: frozenset[str] = frozenset(),
) -> dict[str, Text]:
    """The GPU table's cells for one GPU; ``severities``: the node's problems by (GPU, kind), whose
    colours the temperature, memory, clock and ECC cells take (the core's verdict, never a threshold read
    here); ``verdict``: the GPU's worst problem (None: it has none)."""
    index = gpu.index
    temp_sev = severities.get((index, "temp"))
    mem_sev = severities.get((index, "mem"))
    mem_pct = gpu.mem_pct
    mem_text = fmt.mem_pair(gpu.mem_used_mib, gpu.mem_total_mib)
    if mem_pct is not None:
        mem_text += f" {mem_pct:.0f}%"
    ecc = "n/a" if gpu.ecc_uncorrected is None else str(gpu.ecc_uncorrected)
    job = slurm.job_on_gpu(node, gpu.index) if slurm else None
    procs = ", ".join(
        f"{safe_line(p.name, PROCESS_NAME_MAX_CHARS)}:{p.pid}"
        + (f" {fmt.gib(p.used_mib)}G" if p.used_mib is not None else "")
        for p in gpu.processes
    )
    clock = fmt.mhz(gpu.sm_clock_mhz)
    slowed = throttling_reasons(gpu.throttle_reasons)
    if slowed:
        clock += f" ({slowed[0].replace('_', ' ')})"
    if verdict is None:
        health = Text("ok")
    else:
        # the row already says which GPU: "CRIT 91 C", "WARN PCIe x8, max x16"
        reason = verdict.reason.removeprefix(f"GPU{gpu.index} ")
        health = _styled(f"{verdict.severity.value.upper()} {safe_line(reason)}", verdict.severity, palette)

    def unless_missing(field: str, text: str) -> str:
        # a reading the node's source does not export at all is said so, not shown as n/a
        return NOT_EXPORTED if getattr(gpu, field) is None and field in not_exported else text

    util = fmt.pct(gpu.util_pct) if gpu.mig_enabled else unless_missing("util_pct", fmt.pct(gpu.util_pct))
    return {
        "gpu": Text(str(gpu.index)),
        "health": health,
        "model": Text(safe_line(gpu.name.removeprefix("NVIDIA "))),
        "util": Text(util),
        "mem": _styled(unless_missing("mem_used_mib", mem_text), mem_sev, palette),
        "temp": _styled(unless_missing("temp_c", fmt.temp(gpu.temp_c)), temp_sev, palette),
        "power": Text(unless_missing("power_w", fmt.power_pair(gpu.power_w, gpu.power_limit_w))),
        "clock": _styled(unless_missing("sm_clock_mhz", clock), severities.get((index, "throttle")), palette),
        "ecc": _styled(unless_missing("ecc_uncorrected", ecc), severities.get((index, "ecc")), palette),
        "mig": Text({True: "on", False: "off", None: "n/a"}[gpu.mig_enabled]),
        "job": Text(safe_line(f"{job.job_id} {job.user}") if job else "-"),
        "procs": Text(safe_line(procs) if procs else "-"),
    }


def chart_events(
    node: NodeSample,
    problems: Sequence[Problem],
    history: EventHistory | None,
    timeline: NodeTimeline | None = None,
) -> list[ChartEvent]:
    """What the chart marks on its time axis, oldest first: the node's Xid events; its problems' starts
    and ends, Slurm draining and resuming it and its MIG changes, as gputop saw them happen (the
    timeline); the current problems that began before gputop looked; the drains gputop made of it."""
    found = [
        ChartEvent(e.time_s, f"Xid {e.code}" + (f" GPU{e.gpu_index}" if e.gpu_index is not None else ""))
        for e in node.xid_events
    ]
    seen = timeline.events(node.name) if timeline is not None else ()
    started = {e.subject for e in seen if e.kind == "problem"}
    found += [ChartEvent(e.time_s, e.label) for e in seen if e.subject[0] != "xid"]
    found += [
        ChartEvent(p.since_s, p.message)
        for p in problems
        if p.since_s is not None and p.kind != "xid" and (p.kind, p.gpu_index) not in started
    ]
    if history is not None:
        found += [ChartEvent(d.time_s, f"drained by gputop ({d.by})") for d in history.drains(node.name)]
    return sorted(found, key=lambda e: e.time_s)


class NodeScreen(GputopScreen):
    ACTING = frozenset({"drain", "resume", "mark_gpu", "mig_layout", "mig_mode"})
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("left_square_bracket", "step(-1)", "Previous node"),
        Binding("right_square_bracket", "step(1)", "Next node"),
        Binding("d", "drain", "Drain"),
        Binding("R", "resume", "Resume"),
        Binding("space", "mark_gpu", "Mark GPU", show=False),
        Binding("m", "mig_layout", "MIG layout"),
        Binding("M", "mig_mode", "MIG mode on/off"),
        # The pane's own keys (up/down/j/k pick the GPU whose row, nearest NIC and NVLink peers it marks)
        # work while it has the focus; the GPU table's cursor picks the same GPU.
        Binding("i", "toggle_topology", "Topology: select a GPU (\u2191\u2193)"),
        Binding("c", "chart_metric", "Chart: next metric"),
        Binding("w", "chart_window", "Chart: 5 min / 1 h / 24 h"),
    ]

    def action_chart_metric(self) -> None:
        self.query_one(HistoryChart).next_metric()
        self._draw_chart()

    def action_chart_window(self) -> None:
        self.query_one(HistoryChart).next_window()
        self._draw_chart()

    def _draw_chart(self) -> None:
        """The chart as of the latest tick: it moves every tick, whether or not the node's row did."""
        view = self.gputop.view
        node = view.snapshot.node(self.node_name) if view is not None else None
        if view is None or node is None:
            return
        row = view.rows.get(self.node_name)
        events = chart_events(
            node, row.problems if row is not None else (), self.gputop.policy.history, view.timeline
        )
        chart = self.query_one(HistoryChart)
        now_s = view.snapshot.taken_at_s
        history, source_note = self._store_past.for_chart(node.name, chart.window[0], view.history, now_s)
        chart.show(history, node, now_s, events, source_note)
        legend = "; ".join(
            f"{time.strftime('%H:%M', time.localtime(e.time_s))} {e.label}"
            for e in events
            if e.time_s >= view.snapshot.taken_at_s - chart.window[0]
        )
        self.query_one("#chart-events", Static).update(safe_line(f"events: {legend}" if legend else ""))

    def action_drain(self) -> None:
        self.app.open_node_action("drain", [self.node_name])  # type: ignore[attr-defined]

    def action_resume(self) -> None:
        self.app.open_node_action("resume", [self.node_name])  # type: ignore[attr-defined]

    def action_mark_gpu(self) -> None:
        """Marks or unmarks the GPU under the cursor, for a MIG action on several, and moves on."""
        table: DataTable[Text | str] = self.query_one("#gpus", DataTable)
        index = self._cursor_gpu()
        if index is None:
            return
        self.marked_gpus ^= {index}
        self._show_mark(table, index)
        table.action_cursor_down()

    def _cursor_gpu(self) -> int | None:
        table: DataTable[Text | str] = self.query_one("#gpus", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return int(key) if key is not None else None

    def _show_mark(self, table: DataTable[Text | str], index: int) -> None:
        label = Text(f"*{index}" if index in self.marked_gpus else str(index))
        table.update_cell(str(index), "gpu", label, update_width=True)

    def _targets(self) -> list[int]:
        """The marked GPUs, else the one under the cursor."""
        if self.marked_gpus:
            return sorted(self.marked_gpus)
        index = self._cursor_gpu()
        return [] if index is None else [index]

    def action_mig_layout(self) -> None:
        self._open_mig(MigRepartitionScreen)

    def action_mig_mode(self) -> None:
        view = self.gputop.view
        node = view.snapshot.node(self.node_name) if view else None
        targets = self._targets()
        if node is None or not targets:
            return
        # Off only when every chosen GPU is on; otherwise the dialog turns on those that are not.
        states = {g.index: g.mig_enabled for g in node.gpus}
        self._open_mig(MigModeScreen, enable=not all(states.get(i) is True for i in targets))

    def _open_mig(self, dialog: type[MigActionScreen], **options: object) -> None:
        from gputop.actions.mig import node_runner_for

        app = self.gputop
        view = app.view
        targets = self._targets()
        if app.read_only or view is None or not targets:
            return
        settings = app.settings
        self.app.push_screen(
            dialog(
                self.node_name,
                targets,
                view,
                runner=node_runner_for(settings.sources, self.node_name),
                mig=settings.config.mig,
                cluster=settings.cluster_name,
                audit_log=settings.audit_log,
                refresh=app.action_refresh,
                demo=settings.is_demo,
                **options,
            )
        )

    DEFAULT_CSS = """
    NodeScreen { layout: vertical; }
    #node-title { height: 1; padding: 0 1; background: $surface; text-style: bold; }
    #gpus { height: auto; max-height: 60%; }
    #details { height: 1fr; padding: 0 1; scrollbar-size-vertical: 1; }
    """

    def __init__(self, node_name: str) -> None:
        super().__init__()
        self.node_name = node_name
        self._rows_shown: list[int] = []
        # the row, Slurm state and palette on screen: identity tells whether anything moved
        self._shown: tuple[NodeRow | None, SlurmState | None, Palette | None] = (None, None, None)
        self.marked_gpus: set[int] = set()
        # the chart's past from a store where gputop's own does not reach over its window (on_mount)
        self._store_past = StorePast((), self._draw_chart)

    def compose(self) -> ComposeResult:
        app = self.gputop
        yield app.status_header()
        yield Static(safe_line(self.node_name), id="node-title", markup=False)
        table: DataTable[Text | str] = DataTable(id="gpus", cursor_type="row", zebra_stripes=True)
        for key, label in GPU_COLUMNS:
            table.add_column(label, key=key)
        yield table
        with VerticalScroll(id="details"):
            yield HistoryChart(app.settings.config.thresholds, id="chart")
            yield Static("", id="chart-events", markup=False)
            yield Static("", id="details-text", markup=False)
            yield MigPane(id="mig")
            yield TopologyPane(id="topology")
        yield GputopFooter()

    def on_mount(self) -> None:
        self._store_past = StorePast(self.gputop.poller.sources, self._draw_chart)
        self.query_one("#gpus", DataTable).focus()
        self._drill(self.node_name)
        view = self.gputop.view
        if view is not None:
            self.apply_view(view)

    def on_unmount(self) -> None:
        self._drill(None)
        self._store_past.cancel()

    def _drill(self, node: str | None) -> None:
        """Tells the sources that read a node more deeply while its screen is open (the Prometheus
        source opens SSH to it) which node that is now; None: none."""
        for source in self.gputop.poller.sources:
            drill = getattr(source, "drill", None)
            if drill is not None:
                drill(node)

    def on_screen_resume(self) -> None:
        view = self.gputop.view
        if view is not None:
            self.apply_view(view)

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_toggle_topology(self) -> None:
        pane = self.query_one(TopologyPane)
        # at once, so the arrow keys typed right after ``i`` move what ``i`` gave them to
        if pane.has_focus:
            self.set_focus(self.query_one("#gpus", DataTable))
        else:
            self.set_focus(pane)
            pane.scroll_visible(animate=False)  # below the chart: brought into view to be used

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.query_one(TopologyPane).select_gpu(int(event.row_key.value))
            self.query_one(HistoryChart).select(int(event.row_key.value))
            self._draw_chart()

    def on_topology_pane_gpu_selected(self, event: TopologyPane.GpuSelected) -> None:
        table: DataTable[Text | str] = self.query_one("#gpus", DataTable)
        key = str(event.index)
        if key in table.rows:
            table.move_cursor(row=table.get_row_index(key))

    def action_step(self, step: int) -> None:
        view = self.gputop.view
        if view is None:
            return
        names = [n.name for n in view.snapshot.nodes]
        if self.node_name in names:
            self.node_name = names[(names.index(self.node_name) + step) % len(names)]
            self._drill(self.node_name)
            self._rows_shown = []
            self.marked_gpus = set()
            self.query_one("#gpus", DataTable).clear()
            self.apply_view(view)

    def apply_view(self, view: ClusterView) -> None:
        if not self.is_mounted:
            return  # a tick that lands between push and compose: on_mount shows the newest view
        self.query_one(StatusHeader).apply_view(view)
        self._draw_chart()
        node = view.snapshot.node(self.node_name)
        row = view.rows.get(self.node_name)
        # The row is the same object while the node's sample, Slurm entry and problems are: nothing on
        # this screen moved unless it or the Slurm state (the jobs on its GPUs) did.
        shown = (row, view.snapshot.slurm, self.gputop.palette)  # a new theme is a new palette
        if row is not None and self._rows_shown and all(map(operator.is_, shown, self._shown)):
            return
        self._shown = shown
        if node is None or row is None:
            self.query_one("#node-title", Static).update(
                safe_line(f"{self.node_name}: no longer in the cluster")
            )
            return
        palette = shown[2]
        self._update_title(node, row, palette)
        self._update_gpus(node, view.snapshot.slurm, palette, row.problems)
        self.query_one("#details-text", Static).update(self._details(node, row, view, palette))
        self.query_one(MigPane).show(node)
        self.query_one(TopologyPane).show(node)

    def _update_title(self, node: NodeSample, row: NodeRow, palette: Palette) -> None:
        title = Text(no_wrap=True, overflow="ellipsis")
        title.append(safe_line(node.name), style="bold")
        # whether it answers, and (apart) how it is: "ok" beside three CRIT problems read as all well
        answering = {"ok": "answering", "stale": "stale", "down": "down"}[node.reachability.value]
        reach_severity = {"ok": Severity.OK, "stale": Severity.WARN, "down": Severity.CRIT}
        title.append(f"  {answering}", palette.severity[reach_severity[node.reachability.value]])
        count = len(row.problems)
        verdict = f"{row.severity.value.upper()}" + (
            f" ({count} problem{'s' * (count != 1)})" if count else ""
        )
        title.append(f"  {verdict}", palette.severity[row.severity])
        title.append(f"  GPUs {row.gpu_count}", palette.text)
        if row.expected_gpu_count is not None:
            title.append(f"/{row.expected_gpu_count}")
        title.append(f"  util {fmt.pct(row.util_mean_pct)}  max temp {fmt.temp(row.temp_max_c)}")
        title.append(f"  memory {fmt.mem_pair(row.mem_used_mib, row.mem_total_mib)}")
        title.append(f"  power {fmt.power(row.power_w)}")
        if row.slurm_state:
            title.append(f"  slurm {safe_line(row.slurm_state)}")
        title.append("   [ ] previous/next node", palette.dim)
        self.query_one("#node-title", Static).update(title)

    def _update_gpus(
        self,
        node: NodeSample,
        slurm: SlurmState | None,
        palette: Palette,
        problems: tuple[Problem, ...],
    ) -> None:
        table: DataTable[Text | str] = self.query_one("#gpus", DataTable)
        verdicts = gpu_verdicts(problems)
        severities = gpu_kind_severities(problems)
        indices = [g.index for g in node.gpus]
        if indices != self._rows_shown:
            table.clear()
            for gpu in node.gpus:
                cells = gpu_cells(
                    gpu, node.name, slurm, severities, palette, verdicts.get(gpu.index), node.not_exported
                )
                table.add_row(*(cells[key] for key, _ in GPU_COLUMNS), key=str(gpu.index))
            self._rows_shown = indices
            self.marked_gpus &= set(indices)
            for index in self.marked_gpus:
                self._show_mark(table, index)
            return
        # keyed update: only cells whose text changed are touched
        for gpu in node.gpus:
            cells = gpu_cells(
                gpu, node.name, slurm, severities, palette, verdicts.get(gpu.index), node.not_exported
            )
            if gpu.index in self.marked_gpus:
                cells["gpu"] = Text(f"*{gpu.index}")
            for key, _label in GPU_COLUMNS:
                value = cells[key]
                if not _same_cell(table.get_cell(str(gpu.index), key), value):
                    table.update_cell(str(gpu.index), key, value)

    def _details(self, node: NodeSample, row: NodeRow, view: ClusterView, palette: Palette) -> Text:
        text = Text()
        now_s = view.snapshot.taken_at_s
        text.append("Problems\n", style="bold")
        if not row.problems:
            text.append("  none\n", palette.severity[Severity.OK])
        for problem in row.problems:
            text.append(f"  {problem.severity.value.upper():4} ", palette.severity[problem.severity])
            text.append(safe_line(problem.message))
            if problem.action:
                text.append(f"  -> {safe_line(problem.action)}", palette.dim)
            text.append("\n")
        failed_facts = [(name, r) for name, r in node.facts.readings() if r.error is not None]
        if node.error or node.sampled_at_s is not None or failed_facts:
            text.append("\nCollection\n", style="bold")
            if node.sampled_at_s is not None:
                text.append(f"  last data {format_age(now_s - node.sampled_at_s)} ago\n")
            if node.not_exported:
                names = ", ".join(READING_NAMES.get(f, f) for f in sorted(node.not_exported))
                text.append(f"  not exported by this node's exporter: {names}\n", palette.dim)
            if node.error and not node.error.startswith("no data for"):
                text.append(f"  {safe_line(node.error)}\n", palette.severity[Severity.WARN])
        for command, reading in sorted(failed_facts, key=lambda item: item[0]):
            # the value on screen is the last good one: say how old it is
            kept = (
                ""
                if reading.read_at_s is None
                else f" (shown: read {format_age(now_s - reading.read_at_s)} ago)"
            )
            text.append(
                f"  {safe_line(f'{command}: {reading.error}')}{kept}\n", palette.severity[Severity.WARN]
            )
        slurm = view.snapshot.slurm
        slurm_node = slurm.nodes.get(node.name) if slurm else None
        if slurm_node is not None:
            text.append("\nSlurm\n", style="bold")
            partitions = ",".join(slurm_node.partitions) or "-"
            text.append(safe_line(f"  state {slurm_node.label}   partitions {partitions}") + "\n")
            if slurm_node.reason:
                who = f" by {slurm_node.reason_user}" if slurm_node.reason_user else ""
                when = ""
                if slurm_node.reason_time_s is not None:
                    when = " at " + datetime.fromtimestamp(slurm_node.reason_time_s, UTC).strftime(
                        "%Y-%m-%d %H:%M UTC"
                    )
                text.append(safe_line(f"  reason: {slurm_node.reason}{who}{when}") + "\n")
            jobs = [j for j in slurm.jobs if node.name in j.gpus_by_node] if slurm else []
            for job in jobs:
                held = ",".join(str(i) for i in job.gpus_by_node[node.name])
                elapsed = format_age(now_s - job.start_time_s) if job.start_time_s else "-"
                who = f"{job.user}, {job.partition}"
                text.append(
                    safe_line(f"  job {job.job_id} {job.name} ({who}) GPUs {held}, running {elapsed}") + "\n"
                )
        if node.xid_events:
            text.append("\nXid events\n", style="bold")
            for event in node.xid_events:
                stamp = datetime.fromtimestamp(event.time_s, UTC).strftime("%Y-%m-%d %H:%M:%S")
                text.append(
                    safe_line(f"  {stamp} Xid {event.code} {event.pci_bus_id or ''}: {event.message}") + "\n"
                )
        return text
