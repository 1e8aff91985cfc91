"""Strips for the Line-API widgets, and one fix to how Textual's Strip caches its division.

`Strip.divide` caches its result; when a strip is not cut at all, the result is a list holding the strip
itself, so every line the compositor paints whole becomes a reference cycle that only the garbage
collector can free. A 1,000-node dashboard drops hundreds of such strips a second, and the collections
that freed them (17 ms for ten ticks of them, measured) landed on key presses. The replacement returns
the same strips and simply does not cache that case, so dropped strips are freed at once by reference
counting.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

_upstream_divide = Strip.divide


def _divide(self: Strip, cuts: Iterable[int]) -> Sequence[Strip]:
    cuts = [cut for cut in cuts if cut <= self.cell_length]
    if cuts == [self.cell_length]:
        return [self]
    return _upstream_divide(self, cuts)


def patch_strip_divide() -> None:
    """Install the cycle-free `Strip.divide` (idempotent)."""
    Strip.divide = _divide  # type: ignore[method-assign]


def line_strip(segments: list[Segment], width: int, pad: Style) -> Strip:
    """A strip of exactly `width` cells: padded with `pad`, or cut. (Built at its final width, so no
    crop_extend is needed, which would cache the strip inside itself.)"""
    return Strip(Segment.adjust_line_length(segments, width, pad), width)
