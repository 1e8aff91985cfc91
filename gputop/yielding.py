"""Handing the event loop back in the middle of long work (a tick, a simulator step), UI first.

Not ``asyncio.sleep(0)``: that queues the rest of the work behind what is ready now, so a key press that
becomes ready while the next slice runs waits for that slice, and Textual hands a key through several
queues (driver, app, screen, widget, repaint), each hop waiting for one more slice. Behind a short timer
the rest of the work lets everything that is ready run first, hop after hop; it costs the work a fraction
of a millisecond per slice.
"""

from __future__ import annotations

import asyncio

UI_FIRST_S = 0.0005


async def yield_to_ui() -> None:
    await asyncio.sleep(UI_FIRST_S)
