"""Work done a slice at a time: a generator that yields between slices and returns its result.

The view stage and the trackers it runs are written so (`steps`, `update_steps`), so that a caller on an
event loop can answer a key press between slices; a caller without one runs them to the end here.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TypeVar

Result = TypeVar("Result")


def run_to_end(steps: Generator[None, None, Result]) -> Result:
    """What ``steps`` returns, every slice run at once."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
