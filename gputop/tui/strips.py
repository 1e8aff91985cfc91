"""Strips for the Line-API widgets; one fix to how Textual's Strip caches its division; and the last guard
between the widgets and the terminal.

`Strip.divide` caches its result; when a strip is not cut at all, the result is a list holding the strip
itself, so every line the compositor paints whole becomes a reference cycle that only the garbage
collector can free. A 1,000-node dashboard drops hundreds of such strips a second, and the collections
that freed them (17 ms for ten ticks of them, measured) landed on key presses. The replacement returns
the same strips and simply does not cache that case, so dropped strips are freed at once by reference
counting.

`Strip.render` is where every widget's text becomes the bytes written to the terminal. Text from nodes and
Slurm is shown through `gputop.core.safe_text` before it is laid out (control characters as visible
pictures); the guard installed here removes any control character that still reaches a strip, so an
escape sequence in a job name can never be sent even by a widget that forgot (Textual's own Input, a
notice, a future pane). Such characters measure zero cells, so removing them keeps the layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from gputop.core.safe_text import safe_line, strip_unsafe

_upstream_divide = Strip.divide
_upstream_render = Strip.render


def _divide(self: Strip, cuts: Iterable[int]) -> Sequence[Strip]:
    cuts = [cut for cut in cuts if cut <= self.cell_length]
    if cuts == [self.cell_length]:
        return [self]
    return _upstream_divide(self, cuts)


def patch_strip_divide() -> None:
    """Install the cycle-free `Strip.divide` (idempotent)."""
    Strip.divide = _divide  # type: ignore[method-assign]


def _render(self: Strip, console: Console) -> str:
    if self._render_cache is None:
        segments = self._segments
        if not "".join([segment.text for segment in segments]).isprintable():
            self._segments = [
                Segment(strip_unsafe(text), style, control) for text, style, control in segments
            ]
    return _upstream_render(self, console)


def patch_strip_render() -> None:
    """Install the terminal guard on `Strip.render` (idempotent)."""
    Strip.render = _render  # type: ignore[method-assign]


def line_strip(segments: list[Segment], width: int, pad: Style) -> Strip:
    """A strip of exactly `width` cells: padded with `pad`, or cut. (Built at its final width, so no
    crop_extend is needed, which would cache the strip inside itself.)"""
    return Strip(Segment.adjust_line_length(segments, width, pad), width)


def safe_line_strip(segments: list[Segment], width: int, pad: Style) -> Strip:
    """`line_strip` for lines that carry a node's own words (MIG profile names, NIC names, UUIDs): each
    segment's text is made safe (`gputop.core.safe_text.safe_line`) before it is laid out."""
    shown = [Segment(safe_line(text, width), style, control) for text, style, control in segments]
    return line_strip(shown, width, pad)
