"""gputop's Strip.divide gives what Textual's gives, without making the strip refer to itself."""

from __future__ import annotations

import gc

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from gputop.tui import strips


def sample() -> Strip:
    return Strip([Segment("abc", Style(bold=True)), Segment("defgh"), Segment("ij", Style(dim=True))])


def test_divide_matches_upstream_for_every_cut() -> None:
    strip = sample()
    for cuts in ([10], [3], [3, 10], [1, 4, 8, 10], [10, 12], [0, 10], [5]):
        ours = strips._divide(strip, cuts)
        theirs = strips._upstream_divide(sample(), cuts)
        assert [s.text for s in ours] == [s.text for s in theirs], cuts
        assert [list(s) for s in ours] == [list(s) for s in theirs], cuts


def test_whole_strip_is_freed_without_the_collector() -> None:
    strips.patch_strip_divide()
    gc.collect()
    gc.disable()
    try:
        strip = sample()
        assert strip.divide([strip.cell_length]) == [strip]
        strip.divide([3, 10])  # a real cut is cached, as upstream does: it holds new strips, not itself
        del strip
        assert gc.collect() == 0, "the divided strip was left in a reference cycle"
    finally:
        gc.enable()


def test_line_strip_is_exactly_the_width() -> None:
    pad = Style(bgcolor="black")
    assert strips.line_strip([Segment("abc")], 6, pad).cell_length == 6
    assert strips.line_strip([Segment("abcdefgh")], 4, pad).text == "abcd"
    assert strips.line_strip([], 3, pad).text == "   "
