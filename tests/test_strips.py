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


def test_a_control_character_that_reaches_a_strip_is_never_written_to_the_terminal() -> None:
    """The last guard: a widget that forgot `safe_line` still cannot send an escape sequence."""
    from rich.console import Console

    strips.patch_strip_render()
    strip = Strip([Segment("job\x1b]2;PWNED\x07", Style(bold=True)), Segment(" \x9b31mx\u202e")])
    written = strip.render(Console(color_system="truecolor"))
    assert "\x1b]2" not in written and "\x07" not in written and "\x9b" not in written
    assert "\u202e" not in written and "job]2;PWNED" in written and " 31mx" in written
    assert written.startswith("\x1b[1m"), "the strip's own styles are still sent"
    assert strip.cell_length == len("job]2;PWNED 31mx"), "the layout is unchanged: controls take no cells"


def test_importing_the_app_changes_nothing_in_textual_making_one_does() -> None:
    import subprocess
    import sys

    probe = (
        "from textual.strip import Strip\n"
        "from textual.drivers import linux_driver\n"
        "before = (Strip.divide, Strip.render, linux_driver.WriterThread)\n"
        "import gputop.tui.app\n"
        "assert (Strip.divide, Strip.render, linux_driver.WriterThread) == before, 'patched at import'\n"
        "from gputop.cli import build_demo_app\n"
        "from gputop.core.config import Config\n"
        "build_demo_app(Config.default())\n"
        "assert Strip.divide is not before[0] and Strip.render is not before[1]\n"
        "assert linux_driver.WriterThread is not before[2]\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
