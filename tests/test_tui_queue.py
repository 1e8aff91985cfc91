"""The Slurm queue pane on the demo simulator: jobs, idle GPUs, sort, filter, the map lit for a job,
draining a job's nodes; and 20,000 jobs without rendering more than the screen shows."""

from __future__ import annotations

import dataclasses
import time

from textual.pilot import Pilot
from textual.widgets import Input, Static

from gputop.core.heatmap import IDLE_FLAG
from gputop.core.job_filter import parse_job_filter
from gputop.core.jobs import JobRow, job_id_key, job_rows
from gputop.core.models import SlurmJob, SlurmState
from gputop.core.summary import ClusterView
from gputop.tui.screens.dashboard import DashboardScreen
from gputop.tui.screens.node import NodeScreen
from gputop.tui.screens.node_action import NodeActionScreen
from gputop.tui.screens.queue import QueueScreen
from gputop.tui.widgets.cluster_map import ClusterMap
from gputop.tui.widgets.job_table import JobTable
from tests.tui_helpers import demo_app, send_burst, wait_for_data

SIZE = (160, 50)


def idle_job(view: ClusterView) -> JobRow:
    """The demo's job that holds its GPUs idle (the simulator's "idle_job" incident)."""
    flagged = [row for row in view.jobs.values() if row.idle_gpus]
    assert len(flagged) == 1, [r.job_id for r in flagged]
    return flagged[0]


async def open_queue(pilot: object) -> QueueScreen:
    await pilot.press("J")  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]
    screen = pilot.app.screen  # type: ignore[attr-defined]
    assert isinstance(screen, QueueScreen)
    return screen


async def open_queue_of_idle_user(pilot: Pilot[None]) -> tuple[QueueScreen, ClusterView, str]:
    """The queue screen once data is in, the view it shows, and the user of the demo's idle job."""
    await wait_for_data(pilot)
    queue = await open_queue(pilot)
    view = pilot.app.view  # type: ignore[attr-defined]
    assert isinstance(view, ClusterView)
    return queue, view, idle_job(view).job.user


async def test_idle_gpus_show_on_the_first_frame_on_table_map_and_job() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        view = app.view
        assert view is not None and view.idle is not None
        job = idle_job(view)
        node = next(iter(job.job.gpus_by_node))
        row = view.rows[node]
        assert row.idle_gpu_count == len(job.job.gpus_by_node[node]) == job.idle_gpus
        assert any(p.kind == "idle" and f"in job {job.job_id}" in p.message for p in row.problems)
        # the map marks each idle GPU; busy nodes have no such mark
        assert all(code >= IDLE_FLAG for code in view.cells[node])
        busy = next(r for r in view.rows.values() if not r.idle_gpu_count and r.util_mean_pct)
        assert not any(code >= IDLE_FLAG for code in view.cells[busy.name])
        assert job.wasted_gpu_hours >= job.idle_gpus * app.settings.config.thresholds.idle_minutes / 60


async def test_queue_lists_every_job_and_w_puts_the_most_wasteful_first_lit_on_the_map() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        queue = await open_queue(pilot)
        table = queue.query_one(JobTable)
        view = app.view
        assert view is not None and view.snapshot.slurm is not None
        assert set(table.order) == {job.job_id for job in view.snapshot.slurm.jobs}
        await pilot.press("w")
        await pilot.pause()
        worst = idle_job(view)
        assert table.sort_column == "wasted" and table.order[0] == worst.job_id
        assert table.cursor_name == worst.job_id
        line = str(queue.query_one("#job-line", Static).render())
        (node,) = worst.job.gpus_by_node
        assert f"job {worst.job_id}" in line and f"{node}: GPU 0-7 (idle: 0-7)" in line, line
        node_map = queue.query_one(ClusterMap)
        assert node_map.highlighted == frozenset({node}) and node_map.selected == node
        others = next(n for n in view.rows if n != node)
        assert node_map._dims(node, 8) == (False,) * 8 and node_map._dims(others, 8) == (True,) * 8


async def test_a_job_on_some_gpus_lights_only_those() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        queue = await open_queue(pilot)
        view = app.view
        assert view is not None
        partial = next(
            r
            for r in view.jobs.values()
            if len(r.job.gpus_by_node) == 1 and r.gpus < 8 and r.job.state == "RUNNING"
        )
        table = queue.query_one(JobTable)
        table.go_to(partial.job_id)
        await pilot.pause()
        ((node, indices),) = partial.job.gpus_by_node.items()
        dims = queue.query_one(ClusterMap)._dims(node, 8)
        assert [i for i, dimmed in enumerate(dims) if not dimmed] == sorted(indices)


async def test_filter_by_user_and_state_and_a_bad_filter_says_why() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        queue, view, user = await open_queue_of_idle_user(pilot)
        await pilot.press("slash")
        await pilot.press(*f"user={user} state=running")
        await pilot.pause()
        table = queue.query_one(JobTable)
        wanted = {r.job_id for r in view.jobs.values() if r.job.user == user and r.job.state == "RUNNING"}
        assert wanted and set(table.order) == wanted
        filter_input = queue.query_one("#queue-filter", Input)
        filter_input.value = "gpus>>4"
        await pilot.pause()
        error = queue.query_one("#queue-filter-error", Static)
        assert error.has_class("shown") and str(error.render())
        assert set(table.order) == wanted, "a bad filter leaves the last good one in place"
        filter_input.value = ""
        await pilot.pause()
        assert len(table.order) == len(view.jobs)


async def test_d_drains_the_jobs_nodes_and_enter_opens_its_node() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        queue = await open_queue(pilot)
        await pilot.press("w")
        await pilot.pause()
        view = app.view
        assert view is not None
        job = idle_job(view)
        await pilot.press("d")
        await pilot.pause()
        dialog = app.screen
        assert isinstance(dialog, NodeActionScreen)
        assert dialog.nodes == tuple(sorted(job.job.gpus_by_node))
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is queue
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, NodeScreen) and app.screen.node_name == next(iter(job.job.gpus_by_node))
        await pilot.press("escape", "escape")
        await pilot.pause()
        assert isinstance(app.screen, DashboardScreen)


async def test_read_only_queue_has_no_drain_key() -> None:
    app = demo_app(read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        await open_queue(pilot)
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, QueueScreen)
        assert "drain" not in {b.binding.action for b in app.screen.active_bindings.values()}


def many_jobs(view: ClusterView, count: int) -> ClusterView:
    """The demo's view with ``count`` pending jobs added, as a site with a deep queue has."""
    slurm = view.snapshot.slurm
    assert slurm is not None
    template = next(job for job in slurm.jobs if job.state == "PENDING")
    extra = tuple(
        dataclasses.replace(template, job_id=str(9_000_000 + i), user=f"user{i % 97:02d}", name=f"sweep-{i}")
        for i in range(count)
    )
    jobs: tuple[SlurmJob, ...] = slurm.jobs + extra
    snapshot = dataclasses.replace(view.snapshot, slurm=dataclasses.replace(slurm, jobs=jobs))
    assert isinstance(snapshot.slurm, SlurmState)
    return dataclasses.replace(view, snapshot=snapshot, jobs=job_rows(snapshot, view.idle, view.jobs))


async def test_twenty_thousand_jobs_render_only_the_rows_on_screen() -> None:
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        queue = await open_queue(pilot)
        assert app.view is not None
        app.poller.stop()  # no tick may replace the queue below with the demo's own
        await pilot.pause(0.2)
        big = many_jobs(app.view, 20_000)
        app.view = big
        table = queue.query_one(JobTable)
        started = time.perf_counter()
        queue.apply_view(big)
        await pilot.pause()
        await pilot.press("s", "down", "pagedown", "slash", *"user=user07")
        await pilot.pause()
        elapsed_s = time.perf_counter() - started
        assert len(table.order) == sum(1 for r in big.jobs.values() if r.job.user == "user07")
        assert len(table._lines) <= table.size.height, "only the visible rows are built"
        assert elapsed_s < 10.0, f"20,000 jobs took {elapsed_s:.1f} s to show, sort, scroll and filter"


async def test_a_queue_filter_typed_in_one_burst_is_not_taken_for_the_queues_keys() -> None:
    """``/user=...`` arriving in one read: ``d`` (drain) and ``w``/``s`` (sort) in the text reach the
    table before the filter has the focus; they must land in the filter, opening no drain dialog."""
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        queue, _view, user = await open_queue_of_idle_user(pilot)
        typed = f"user={user} state=running wasted>=0"
        assert {"d", "w", "s"} <= set(typed)
        send_burst(app, "/" + typed)
        await pilot.pause(0.2)
        await pilot.pause()
        assert app.screen is queue
        assert queue.query_one("#queue-filter", Input).value == typed
        assert not queue.query_one("#queue-filter-error", Static).has_class("shown")


async def test_jobs_that_come_and_go_are_placed_as_a_full_sort_would() -> None:
    """A tick that adds and removes a few jobs inserts them (keyed update) instead of sorting them all:
    the order is the one a full sort gives, for several columns both ways, with a filter on."""
    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        queue = await open_queue(pilot)
        app.poller.stop()
        await pilot.pause(0.2)
        assert app.view is not None
        big = many_jobs(app.view, 2_000)
        table = queue.query_one(JobTable)
        for column, reverse, text in (("state", False, ""), ("wasted", True, ""), ("user", True, "state=pd")):
            table.set_row_filter(parse_job_filter(text) if text else None)
            table.sort_by(column, reverse)
            table.set_rows(big.jobs)
            ids = list(big.jobs)
            changed = dict(big.jobs)
            for gone in ids[5:40:3]:
                del changed[gone]
            template = next(r for r in big.jobs.values() if r.job.state == "PENDING")
            for i in range(12):
                job = dataclasses.replace(template.job, job_id=str(9_500_000 - 7 * i), user=f"late{i % 3}")
                changed[job.job_id] = dataclasses.replace(template, job=job, id_key=job_id_key(job.job_id))
            sorts = table.full_sorts
            table.set_rows(changed)
            assert table.full_sorts == sorts, "a few jobs came and went: no full sort"
            inserted = list(table.order)
            table.sort_by(column, reverse)  # the same order, sorted in full
            assert table.full_sorts > sorts
            assert inserted == table.order, (column, reverse, text)
