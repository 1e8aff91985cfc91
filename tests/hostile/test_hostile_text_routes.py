"""Every route by which text a cluster user controls reaches the screen: the escape sequences in it are
never sent to the terminal, and are shown visibly instead.

The demo cluster runs with a source that writes hostile text into job names, GPU names, process names,
Xid lines, drain reasons, a node's fact errors and Slurm's error; each test opens one route and reads what
gputop would write to the terminal (the compositor's output, escape sequences and all).
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Mapping

import pytest
from textual.widgets import Input

from gputop.clock import FrozenClock
from gputop.cluster_app import demo_source
from gputop.core.config import Config
from gputop.core.models import NodeSample, SlurmState, SourceResult
from gputop.core.safe_text import safe_block, safe_line, strip_unsafe
from gputop.sim.demo import SimulatorSource
from gputop.tui.app import AppSettings, GputopApp
from gputop.tui.screens.node_action import NodeActionScreen
from tests.factories import facts_of
from tests.hostile.inputs import TEXTS
from tests.tui_helpers import FROZEN_EPOCH_S, wait_for_data

SIZE = (160, 50)
HOSTILE = "job\x1b]2;PWNED\x07\x1b[31mred\x9b1m\u202eX"
SHOWN = "job␛]2;PWNED␇␛[31mred\\x9b1m\\u202eX"
NEVER = ("\x1b]2;PWNED", "\x1b[31mred", "\x9b", "\u202e", "\x07")


class HostileSource(SimulatorSource):
    """The demo's simulator, with `HOSTILE` written into every free-text field a user or node controls."""

    def __init__(self, inner: SimulatorSource, slurm_error: str | None = None) -> None:
        super().__init__(inner._build or inner.cluster, history_s=inner._history_s)
        self.slurm_error = slurm_error

    async def collect(self, now_s: float) -> SourceResult:
        return inject(await super().collect(now_s), self.slurm_error)


def inject(result: SourceResult, slurm_error: str | None) -> SourceResult:
    nodes = tuple(_node(node) for node in result.nodes)
    slurm = result.slurm
    if slurm is not None:
        jobs = tuple(dataclasses.replace(job, name=HOSTILE) for job in slurm.jobs)
        slurm_nodes: Mapping[str, object] = {
            name: dataclasses.replace(node, reason=HOSTILE) if node.reason else node
            for name, node in slurm.nodes.items()
        }
        slurm = SlurmState(slurm_nodes, jobs, slurm.sampled_at_s, error=slurm_error)  # type: ignore[arg-type]
    return dataclasses.replace(result, nodes=nodes, slurm=slurm)


def _node(node: NodeSample) -> NodeSample:
    gpus = tuple(
        gpu._replace(name=HOSTILE, processes=tuple(p._replace(name=HOSTILE) for p in gpu.processes))
        for gpu in node.gpus
    )
    xids = tuple(dataclasses.replace(event, message=HOSTILE) for event in node.xid_events)
    return dataclasses.replace(node, gpus=gpus, xid_events=xids, facts=facts_of({}, {"ibstat": HOSTILE}))


def hostile_app(slurm_error: str | None = None) -> GputopApp:
    base = Config.default()
    config = dataclasses.replace(base, demo=dataclasses.replace(base.demo, nodes=32, seed=42))
    clock = FrozenClock(FROZEN_EPOCH_S)
    source = HostileSource(demo_source(config, clock), slurm_error)
    settings = AppSettings(
        config=config, cluster_name="demo", sources=[source], clock=clock, is_demo=True, freeze_gc=False
    )
    return GputopApp(settings)


def terminal(app: GputopApp) -> str:
    """What gputop writes to the terminal for the whole screen now (the screens below a dialog too)."""
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    assert update is not None
    return str(update.render_segments(app.console))


def assert_safe(output: str, *, shown: bool = True) -> None:
    for raw in NEVER:
        assert raw not in output, f"{raw!r} reached the terminal"
    if shown:
        assert SHOWN in output or "job␛]2;PWNED␇" in output, "the hostile text is not shown visibly"


async def shown_after(keys: str, *, slurm_error: str | None = None, open_xid_node: bool = False) -> str:
    """The terminal output once ``keys`` were pressed on the hostile demo (or the Xid node was opened)."""
    app = hostile_app(slurm_error)
    async with app.run_test(size=(220, 50), notifications=True) as pilot:
        await wait_for_data(pilot)
        assert app.view is not None
        if open_xid_node:
            app.open_node(next(n.name for n in app.view.snapshot.nodes if n.xid_events))
        for key in keys:
            await pilot.press(key)
        await pilot.pause(0.3)
        return terminal(app)


async def test_the_queue_shows_a_job_name_with_escapes_visibly() -> None:
    assert_safe(await shown_after("J"))


async def test_the_node_screen_shows_gpu_and_process_names_xid_lines_and_reasons_visibly() -> None:
    output = await shown_after("", open_xid_node=True)
    assert_safe(output)
    assert output.count("job␛]2;PWNED") >= 3, "GPU names, processes, the Xid line, the fact error"


async def test_the_alerts_pane_shows_a_drain_reason_visibly() -> None:
    assert_safe(await shown_after("A"))


async def test_a_notice_and_the_header_show_a_source_error_visibly() -> None:
    output = await shown_after("", slurm_error=HOSTILE)
    assert_safe(output)
    assert output.count("job␛]2;PWNED") >= 2, "in the header and in the notice"


async def test_the_drain_dialog_shows_job_names_visibly_and_prefills_a_storable_reason() -> None:
    app = hostile_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for_data(pilot)
        assert app.view is not None and app.view.snapshot.slurm is not None
        busy = next(iter(app.view.snapshot.slurm.jobs[0].gpus_by_node))
        xid_node = next(n.name for n in app.view.snapshot.nodes if n.xid_events)
        app.open_node_action("drain", [busy])
        await pilot.pause(0.3)
        assert isinstance(app.screen, NodeActionScreen)
        app.screen.query_one("#reason", Input).value = "maintenance"
        await pilot.pause(0.2)
        assert_safe(terminal(app))
        await pilot.press("escape")
        app.open_node(xid_node)
        await pilot.pause(0.2)
        await pilot.press("d")
        await pilot.pause(0.3)
        dialog = app.screen
        assert isinstance(dialog, NodeActionScreen)
        reason = dialog.query_one("#reason", Input).value
        assert reason and safe_line(reason) == reason, f"the prefilled reason holds controls: {reason!r}"
        assert_safe(terminal(app), shown=False)


@pytest.mark.parametrize(("what", "text", "raw", "shown"), TEXTS, ids=[t[0] for t in TEXTS])
def test_every_hostile_text_is_shown_and_never_sent(what: str, text: str, raw: str, shown: str) -> None:
    line = safe_line(text)
    assert shown in line
    if raw:
        assert raw not in line and raw not in safe_block(text)
    assert line.isprintable(), what
    assert strip_unsafe(text).isprintable() or not text.isprintable()


def test_gputop_check_prints_problems_with_escapes_visibly(tmp_path: object) -> None:
    """The headless text output: `gputop check` on the demo with a hostile drain reason."""
    script = (
        "import sys, dataclasses\n"
        "from tests.hostile.test_hostile_text_routes import HOSTILE\n"
        "import gputop.sim.slurm_render as render\n"
        "real = render.slurm_node\n"
        "def hostile(cluster, i, t):\n"
        "    node = real(cluster, i, t)\n"
        "    return dataclasses.replace(node, reason=HOSTILE) if node.reason else node\n"
        "render.slurm_node = hostile\n"
        "from gputop.cli import main\n"
        "sys.exit(main(['check', '--demo', '--timeout', '20']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode in (1, 2), done.stderr
    assert "job␛]2;PWNED" in done.stdout, done.stdout[-2000:]
    for raw in NEVER:
        assert raw not in done.stdout
