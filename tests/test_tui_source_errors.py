"""A failing source is said in the header (and once in a toast) while its last good data stays on screen."""

from __future__ import annotations

from gputop.clock import FrozenClock
from gputop.core.config import Config
from gputop.core.models import (
    GpuSample,
    NodeSample,
    Reachability,
    SlurmBaseState,
    SlurmNode,
    SlurmState,
    SourceResult,
)
from gputop.tui.app import AppSettings, GputopApp
from gputop.tui.widgets.status_header import StatusHeader
from tests.tui_helpers import FROZEN_EPOCH_S, wait_for_data

CONTROLLER_DOWN = "squeue: error: Unable to contact slurm controller (connect failure)"


class ScriptedSource:
    """Answers with one node, and Slurm read ``slurm_age_s`` ago with ``slurm_error``; or raises."""

    name = "scripted"

    def __init__(self, slurm_error: str | None, raises: str | None = None) -> None:
        self.slurm_error = slurm_error
        self.raises = raises

    async def start(self) -> None:
        return None

    async def collect(self, now_s: float) -> SourceResult:
        if self.raises:
            raise RuntimeError(self.raises)
        gpu = GpuSample(
            *(0, "GPU-0", "NVIDIA H100 80GB HBM3", "00000000:18:00.0", 50.0, 20.0, 4096.0, 81559.0),
            *(40.0, 300.0, 700.0, 1980.0, 1980.0, 0, False),
        )
        node = NodeSample("gpu001", Reachability.OK, now_s, (gpu,), 1)
        slurm = SlurmState(
            {"gpu001": SlurmNode("gpu001", SlurmBaseState.IDLE)}, (), now_s - 120.0, error=self.slurm_error
        )
        return SourceResult(nodes=(node,), slurm=slurm)

    async def close(self) -> None:
        return None


def app_on(source: ScriptedSource) -> GputopApp:
    settings = AppSettings(
        config=Config.default(),
        cluster_name="lab",
        sources=[source],  # type: ignore[list-item]
        clock=FrozenClock(FROZEN_EPOCH_S),
        freeze_gc=False,
    )
    return GputopApp(settings)


def header_text(app: GputopApp) -> str:
    return str(app.screen.query_one(StatusHeader).render())


async def test_a_slurm_read_error_shows_in_the_header_with_the_age_of_what_is_shown() -> None:
    source = ScriptedSource(CONTROLLER_DOWN)
    app = app_on(source)
    async with app.run_test(size=(220, 30)) as pilot:
        await wait_for_data(pilot)
        text = header_text(app)
        assert f"SLURM  {CONTROLLER_DOWN} (showing its state of 2m ago)" in text, text
        toasts = [n.message for n in app._notifications]
        assert toasts.count(f"SLURM: {CONTROLLER_DOWN}") == 1, toasts
        source.slurm_error = None
        app.action_refresh()
        for _ in range(50):
            await pilot.pause(0.02)
            if "SLURM" not in header_text(app):
                break
        assert "SLURM" not in header_text(app)
        assert f"recovered: SLURM: {CONTROLLER_DOWN}" in [n.message for n in app._notifications]


async def test_a_source_that_raises_is_named_in_the_header() -> None:
    app = app_on(ScriptedSource(None, raises="inventory file vanished"))
    async with app.run_test(size=(220, 30)) as pilot:
        for _ in range(100):
            await pilot.pause(0.02)
            if app.view is not None:
                break
        assert app.view is not None
        assert "SOURCE  scripted: inventory file vanished" in header_text(app)
