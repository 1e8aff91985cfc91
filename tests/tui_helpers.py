"""Building the demo app for tests: fixed seed, frozen clock, so every run shows the same cluster."""

from __future__ import annotations

import dataclasses
import time

from textual import events
from textual.app import App
from textual.keys import _character_to_key
from textual.pilot import Pilot

from gputop.cli import build_demo_app
from gputop.clock import FrozenClock
from gputop.core.config import Config
from gputop.tui.app import GputopApp

FROZEN_EPOCH_S = 1_800_000_000.0  # 2027-01-15 08:00 UTC
FIRST_VIEW_WITHIN_S = 30.0


def demo_app(nodes: int = 32, seed: int = 42, **kwargs: object) -> GputopApp:
    base = Config.default()
    config = dataclasses.replace(base, demo=dataclasses.replace(base.demo, nodes=nodes, seed=seed))
    app = build_demo_app(config, clock=FrozenClock(FROZEN_EPOCH_S), **kwargs)  # type: ignore[arg-type]
    # The UI under test should not collect the garbage differently from run to run.
    app.settings.freeze_gc = False
    return app


async def wait_for_data(pilot: Pilot[None]) -> None:
    app = pilot.app
    # Usually a few hundred milliseconds; a loaded machine (a CI runner sharing its cores) can take many
    # times that for the first tick of the 1,000-node demo.
    deadline_s = time.monotonic() + FIRST_VIEW_WITHIN_S
    while getattr(app, "view", None) is None and time.monotonic() < deadline_s:
        await pilot.pause(0.01)
    await pilot.pause()
    assert app.view is not None, f"no data reached the app within {FIRST_VIEW_WITHIN_S:.0f} s"  # type: ignore[attr-defined]


def send_burst(app: App[None], text: str) -> None:
    """Every character of ``text`` queued at once, as a terminal delivers a paste or keys that came in
    one packet over a slow link (``Pilot.press`` instead waits for the app to go idle after each); ``\r``
    is Enter."""
    assert app._driver is not None
    for char in text:
        name = "enter" if char == "\r" else char if char.isalnum() else _character_to_key(char)
        key = events.Key(name, char)
        key.set_sender(app)
        app._driver.send_message(key)
