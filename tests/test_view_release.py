"""The old view is let go of a slice at a time after the new one is applied, and all of it in the end."""

from __future__ import annotations

import asyncio
import gc
import weakref
from types import SimpleNamespace
from typing import Any

from gputop.tui.view_release import ROWS_PER_SLICE, SMALL_VIEW_ROWS, ViewRelease


class Sample:
    """Stands for a node's sample: what the release must free in the end."""


def fake_view(nodes: int) -> Any:
    samples = [Sample() for _ in range(nodes)]
    rows = {f"n{i}": SimpleNamespace(source=sample) for i, sample in enumerate(samples)}
    return SimpleNamespace(rows=rows, snapshot=SimpleNamespace(nodes=tuple(samples)))


def test_a_large_view_is_freed_in_slices_and_wholly() -> None:
    async def run() -> None:
        release = ViewRelease()
        view = fake_view(3 * ROWS_PER_SLICE + 7)
        watched = [weakref.ref(sample) for sample in view.snapshot.nodes]
        release.retire(view)
        del view
        gc.collect()
        assert all(ref() is not None for ref in watched)  # kept past the frame that dropped the view
        assert release.pending == 2 * (3 * ROWS_PER_SLICE + 7)
        await asyncio.sleep(0)
        await asyncio.sleep(0.002)
        assert 0 < release.pending < 2 * (3 * ROWS_PER_SLICE + 7)  # one slice at a time
        for _ in range(200):
            if not release.pending:
                break
            await asyncio.sleep(0.002)
        assert release.pending == 0
        assert all(ref() is None for ref in watched)
        assert release.released_cpu_s >= 0.0

    asyncio.run(run())


def test_a_small_view_is_left_to_be_freed_at_once() -> None:
    async def run() -> None:
        release = ViewRelease()
        release.retire(fake_view(SMALL_VIEW_ROWS - 1))
        release.retire(None)
        assert release.pending == 0

    asyncio.run(run())


def test_a_view_a_widget_still_holds_waits_for_it_then_goes_in_slices() -> None:
    """On a large fleet the map takes the new view a frame after the table: until it lets go of the old
    one, slicing its rows would free nothing, and the map's letting go would then free it all at once."""

    async def run() -> None:
        release = ViewRelease()
        view = fake_view(3 * ROWS_PER_SLICE)
        watched = [weakref.ref(sample) for sample in view.snapshot.nodes]
        held_by_map = view
        release.retire(view)
        del view
        await asyncio.sleep(0.1)
        assert release.pending == 2 * 3 * ROWS_PER_SLICE  # nothing taken apart while the map holds it
        del held_by_map
        gc.collect()
        assert all(ref() is not None for ref in watched)  # not freed at once when the map let go
        seen: set[int] = set()
        for _ in range(400):
            seen.add(release.pending)
            if not release.pending:
                break
            await asyncio.sleep(0.0005)
        assert release.pending == 0
        assert seen & set(range(1, 2 * 3 * ROWS_PER_SLICE))  # part of it let go of, then the rest
        assert all(ref() is None for ref in watched)

    asyncio.run(run())


def test_a_view_held_past_the_wait_is_sliced_anyway(monkeypatch: Any) -> None:
    monkeypatch.setattr("gputop.tui.view_release.HOLDER_WAIT_S", 0.05)

    async def run() -> None:
        release = ViewRelease()
        view = fake_view(SMALL_VIEW_ROWS)
        release.retire(view)
        for _ in range(200):
            if not release.pending:
                break
            await asyncio.sleep(0.005)
        assert release.pending == 0
        assert len(view.rows) == SMALL_VIEW_ROWS  # the holder's view is whole: only the lists went

    asyncio.run(run())
