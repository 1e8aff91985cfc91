"""Draw the SVGs in screenshots/ from the demo cluster: fixed seed, frozen clock, so they change only when
the UI does. Run after any UI change:  python scripts/screenshots.py
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Input

from gputop.cli import build_demo_app
from gputop.clock import FrozenClock
from gputop.core.config import Config
from gputop.sim.demo import SimulatorSource
from gputop.tui.app import GputopApp

OUT = Path(__file__).resolve().parent.parent / "screenshots"
FROZEN_EPOCH_S = 1_800_000_000.0
SIZE = (200, 50)

Steps = Callable[[GputopApp, Pilot[None]], Awaitable[None]]


def make_app(nodes: int = 32, theme: str | None = None) -> GputopApp:
    base = Config.default()
    config = dataclasses.replace(base, demo=dataclasses.replace(base.demo, nodes=nodes, seed=42))
    app = build_demo_app(config, clock=FrozenClock(FROZEN_EPOCH_S), theme=theme)
    app.settings.freeze_gc = False
    return app


def incident(app: GputopApp, kind: str) -> str:
    source = app.settings.sources[0]
    assert isinstance(source, SimulatorSource)
    return next(i.node for i in source.cluster.incidents if i.kind == kind)


async def nothing(_app: GputopApp, _pilot: Pilot[None]) -> None:
    return None


async def open_ecc_node(app: GputopApp, pilot: Pilot[None]) -> None:
    app.open_node(incident(app, "ecc_xid"))
    await pilot.pause()


async def filter_hot(app: GputopApp, pilot: Pilot[None]) -> None:
    await pilot.press("m", "m", "slash", *"temp>80")
    for widget in app.query(Input):
        widget.cursor_blink = False


async def queue_most_idle(_app: GputopApp, pilot: Pilot[None]) -> None:
    await pilot.press("J", "w")


async def alerts(_app: GputopApp, pilot: Pilot[None]) -> None:
    await pilot.press("A")


async def open_mig_node(app: GputopApp, pilot: Pilot[None]) -> None:
    app.open_node(incident(app, "mig"))
    await pilot.pause()


async def show_help(_app: GputopApp, pilot: Pilot[None]) -> None:
    await pilot.press("question_mark")


async def shoot(name: str, app: GputopApp, steps: Steps, size: tuple[int, int] = SIZE) -> Path:
    async with app.run_test(size=size) as pilot:
        for _ in range(300):
            if app.view is not None:
                break
            await pilot.pause(0.01)
        await pilot.pause()
        await steps(app, pilot)
        await pilot.pause()
        await pilot.wait_for_scheduled_animations()
        path = OUT / f"{name}.svg"
        path.write_text(app.export_screenshot(title=f"gputop: {name.replace('-', ' ')}"))
    return path


async def main() -> int:
    OUT.mkdir(exist_ok=True)
    shots = [
        ("dashboard", make_app(), nothing, SIZE),
        ("dashboard-1000-nodes", make_app(nodes=1000), nothing, SIZE),
        ("dashboard-filter-temperature", make_app(), filter_hot, SIZE),
        ("node-screen", make_app(), open_ecc_node, SIZE),
        ("queue-most-idle-first", make_app(), queue_most_idle, SIZE),
        ("alerts", make_app(), alerts, SIZE),
        ("node-screen-mig", make_app(), open_mig_node, SIZE),
        ("help", make_app(), show_help, SIZE),
        ("theme-light-80x24", make_app(theme="gputop-light"), nothing, (80, 24)),
        ("theme-high-contrast", make_app(theme="gputop-high-contrast"), nothing, SIZE),
    ]
    for name, app, steps, size in shots:
        path = await shoot(name, app, steps, size)
        print(path.relative_to(OUT.parent))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
