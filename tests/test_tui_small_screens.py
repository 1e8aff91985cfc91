"""What an on-call engineer reads at 1,000 nodes and at 80x24: glyphs on the packed map, a legend that keeps
every glyph, a footer with the keys that matter, a filter that says what it did, a node header that does
not say 'ok' beside CRIT problems."""

from __future__ import annotations

from textual.widgets import Input

from gputop.core.heatmap import CRIT_FLAG, DOWN, IDLE_FLAG, MIG_NA, MISSING, STALE
from gputop.tui.widgets.cluster_map import ClusterMap, _marked
from gputop.tui.widgets.footer import GputopFooter
from gputop.tui.widgets.node_table import NodeTable
from tests.test_tui import incident_node, map_lines, table_lines
from tests.tui_helpers import demo_app, wait_for_data


def test_a_packed_character_shows_the_glyph_of_either_gpu_most_urgent_first() -> None:
    assert _marked(3, 5) is None  # two heat colours: the half blocks
    assert _marked(3, CRIT_FLAG + 9) == CRIT_FLAG + 9
    assert _marked(DOWN, CRIT_FLAG + 2) == CRIT_FLAG + 2
    assert _marked(STALE, DOWN) == DOWN
    assert _marked(MISSING, 4) == MISSING
    assert _marked(IDLE_FLAG + 0, 4) == IDLE_FLAG
    assert _marked(IDLE_FLAG + 0, STALE) == STALE
    assert _marked(MIG_NA, 2) == MIG_NA


async def test_the_thousand_node_map_keeps_its_glyphs_and_legend() -> None:
    app = demo_app(nodes=1000)
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for_data(pilot)
        node_map = app.screen.query_one(ClusterMap)
        assert node_map.map_layout.compact
        lines = map_lines(node_map)
        body, legend = "\n".join(lines[:-1]), lines[-1]
        for glyph in ("!", "z", "-", "\u00b7", "m"):  # critical, idle in a job, missing, stale, MIG
            assert glyph in body, f"no {glyph!r} on the packed map"
        for words in ("! critical", "z idle in a job", "\u00d7 down", "- missing", "\u00b7 stale"):
            assert words in legend, legend


async def test_at_80x24_the_legend_footer_and_problem_text_fit() -> None:
    app = demo_app(nodes=32)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for_data(pilot)
        node_map = app.screen.query_one(ClusterMap)
        legend = map_lines(node_map)[-1]
        assert len(legend.rstrip()) <= 80
        for glyph in ("!crit", "zidle", "\u00d7down", "[m]"):
            assert glyph in legend, legend
        footer = app.screen.query_one(GputopFooter)
        assert footer.compact
        text = " ".join(
            str(widget.render()) for widget in footer.query("FooterKey") if widget.region.right <= 80
        )
        for key in ("Open node", "/ Filter", "d Drain", "A Alerts", "? Help", "q Quit"):
            assert key in text, text
        # no key runs under the command palette's, docked right (a letter of it showed past its end)
        keys = list(footer.query("FooterKey"))
        (palette,) = [key for key in keys if key.has_class("-command-palette")]
        for key in keys:
            assert key.region.right <= 80, (key.description, key.region)
            if key is not palette:
                assert key.region.right <= palette.region.x, (key.description, key.region, palette.region)
        # the problem column keeps enough room to say what is wrong
        lines = table_lines(app.screen.query_one(NodeTable))
        assert any("GPU5 missing" in line for line in lines), lines


async def test_a_filter_that_does_not_parse_says_the_table_is_unchanged_and_the_count_is_shown() -> None:
    app = demo_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for_data(pilot)
        table = app.screen.query_one(NodeTable)
        await pilot.press("slash", *"temp>85", "enter")
        shown = len(table.order)
        count = str(app.screen.query_one("#filter-count").render())
        assert count == f"showing {shown} of 32 nodes", count
        await pilot.press("slash", "ctrl+u", *"temp>hot", "enter")
        error = str(app.screen.query_one("#filter-error").render())
        assert "not applied; the table shows the filter 'temp>85'" in error, error
        assert len(table.order) == shown  # not the half-typed 'temp>' nor nothing
        assert app.screen.query_one("#filter", Input).value == "temp>hot"
        await pilot.press("escape")
        assert str(app.screen.query_one("#filter-count").render()) == ""


async def test_the_node_header_says_answering_and_the_verdict_apart() -> None:
    app = demo_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await wait_for_data(pilot)
        app.open_node(incident_node(app, "missing_gpu"))
        await pilot.pause()
        title = str(app.screen.query_one("#node-title").render())
        assert "answering  CRIT (" in title and "  ok  " not in title, title
