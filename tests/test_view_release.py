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
