"""yield_to_ui: long work sliced behind it lets a chain of ready callbacks (a key's hops) finish first."""

from __future__ import annotations

import asyncio

import pytest

from gputop import yielding
from gputop.yielding import yield_to_ui


async def slices_and_hops(pause: object) -> list[str]:
    loop = asyncio.get_running_loop()
    order: list[str] = []

    async def work() -> None:
        for n in range(3):
            order.append(f"slice{n}")
            await pause()  # type: ignore[operator]

    def hop(n: int) -> None:
        order.append(f"hop{n}")
        if n < 5:
            loop.call_soon(hop, n + 1)  # each hop queues the next, as Textual's message pumps do

    task = asyncio.create_task(work())
    await asyncio.sleep(0)  # the first slice has run
    loop.call_soon(hop, 0)
    await task
    for _ in range(10):  # the rest of the chain, if the work finished first
        await asyncio.sleep(0)
    return order


async def test_a_chain_of_hops_finishes_before_the_next_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    # a longer timer than gputop's, so a busy test machine pausing this process between two hops
    # cannot let the timer fall due mid-chain; the mechanism is the same
    monkeypatch.setattr(yielding, "UI_FIRST_S", 0.05)
    order = await slices_and_hops(yield_to_ui)
    assert order.index("hop5") < order.index("slice1"), order


async def test_sleep_zero_would_put_a_slice_between_the_hops() -> None:
    order = await slices_and_hops(lambda: asyncio.sleep(0))
    assert order.index("slice1") < order.index("hop5"), order  # the behaviour yield_to_ui avoids
