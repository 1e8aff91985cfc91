"""How the cluster map paints its cells: the style and glyph of every cell code for one palette, runs of
equal cells as one segment, and half blocks that hold two cells in one character."""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from textual.filter import dim_color

from gputop.core.heatmap import (
    CRIT_FLAG,
    DOWN,
    EMPTY,
    IDLE_FLAG,
    MIG_NA,
    MISSING,
    NA,
    NOT_EXPORTED,
    STALE,
    CellCodes,
)
from gputop.core.metrics import HEAT_STEPS, HeatScale, Metric
from gputop.tui.palette import Palette

UPPER_HALF = "\u2580"  # upper half block: foreground paints the top cell, background the bottom one
SELECTED_MARK = "\u25c6"  # a diamond on the selected node's (or group's) cell where there is no bracket


class CellStyles:
    """Style and glyph of every cell code for one palette, and the half-block styles as they are needed."""

    def __init__(self, palette: Palette) -> None:
        self.palette = palette
        plain: dict[int, tuple[Style, str]] = {}
        for step in range(HEAT_STEPS):
            plain[step] = (palette.heat_bg[step], " ")
            plain[step + CRIT_FLAG] = (palette.heat_bg[step], "!")
            plain[step + IDLE_FLAG] = (palette.heat_bg[step], "z")  # held by a job, idle (asleep)
        # Glyphs repeat what the colour says, for colour-blind users.
        plain[DOWN] = (palette.down, "\u00d7")
        plain[MISSING] = (palette.missing, "-")
        plain[STALE] = (palette.stale, "\u00b7")
        plain[MIG_NA] = (palette.na, "m")
        plain[NA] = (palette.na, "?")
        plain[NOT_EXPORTED] = (palette.na, "\u2205")  # empty set: the site's exporter gives no such field
        plain[EMPTY] = (palette.empty, " ")
        self.plain = plain
        self.dimmed = {
            code: (_dimmed(style), "\u2591" if glyph == " " and code != EMPTY else glyph)
            for code, (style, glyph) in plain.items()
        }
        self._halves: dict[tuple[int, int, bool], Style] = {}
        # Textual turns ANSI colours into the theme's truecolour, and dim into a blended colour, on every
        # segment it paints; a map whose cells are truecolour without dim does not need it.
        drawn = [style for style, _glyph in (*plain.values(), *self.dimmed.values())]
        self.truecolor_undimmed = all(
            map(_truecolor_undimmed, [*drawn, palette.dim, palette.selection, palette.text])
        )

    def half(self, top: int, bottom: int, dimmed: bool) -> Style:
        key = (top, bottom, dimmed)
        style = self._halves.get(key)
        if style is None:
            style = Style(color=self.plain[top][0].bgcolor, bgcolor=self.plain[bottom][0].bgcolor)
            self._halves[key] = style = _dimmed(style) if dimmed else style
        return style


def _truecolor_undimmed(style: Style) -> bool:
    colors = (style.color, style.bgcolor)
    return not style.dim and all(color is None or color.triplet is not None for color in colors)


def _dimmed(style: Style) -> Style:
    """``style`` dimmed as Textual paints dim: the text colour blended towards the background (done here
    once per style, rather than by Textual's line filter on every segment of every line)."""
    color, bgcolor = style.color, style.bgcolor
    if bgcolor is None or bgcolor.triplet is None or (color is not None and color.triplet is None):
        return style + Style(dim=True)  # ANSI colours: Textual's filter blends them as it converts them
    if color is None:
        return style  # no text colour to dim
    return style + Style(color=dim_color(bgcolor, color))


# In compact mode a character holds two GPUs; when either has a state or a flag, its glyph takes the
# character, the most urgent first.
_GLYPH_ORDER = (DOWN, MISSING, STALE)


def _marked(top: int, bottom: int) -> int | None:
    """The code whose glyph a two-GPU character shows, or None for the two heat colours."""
    for code in (top, bottom):
        if CRIT_FLAG <= code < IDLE_FLAG:
            return code
    for state in _GLYPH_ORDER:
        if state in (top, bottom):
            return state
    for code in (top, bottom):
        if IDLE_FLAG <= code < NOT_EXPORTED:
            return code
    for state in (MIG_NA, NOT_EXPORTED):
        if state in (top, bottom):
            return state
    return None


def wide_cells(
    segments: list[Segment], codes: CellCodes, styles: CellStyles, dims: Sequence[bool], width: int
) -> None:
    """``codes`` side by side, ``width`` characters each, equal neighbours as one segment."""
    if not codes:
        return
    run = (codes[0], dims[0])
    run_length = 0
    for cell_key in (*zip(codes, dims, strict=True), (-1, False)):  # -1 flushes the last run
        if cell_key == run:
            run_length += 1
            continue
        run_code, run_dimmed = run
        style, glyph = (styles.dimmed if run_dimmed else styles.plain)[run_code]
        # a state glyph fills its cell; "!" marks the left of a heat-coloured cell
        cell = glyph * width if glyph not in " !z" else glyph.ljust(width)
        segments.append(Segment(cell * run_length, style))
        run, run_length = cell_key, 1


def stacked_cells(
    segments: list[Segment],
    top: Sequence[int],
    bottom: Sequence[int],
    styles: CellStyles,
    dims: Sequence[bool],
) -> None:
    """Two cells a character: ``top[i]`` in the upper half, ``bottom[i]`` in the lower (EMPTY where
    ``bottom`` is shorter); ``dims[i]`` dims the character (lit if either cell is kept)."""
    run_style: Style | None = None
    run_length = 0
    for column, upper in enumerate(top):
        lower = bottom[column] if column < len(bottom) else EMPTY
        dimmed = dims[column]
        if upper >= HEAT_STEPS or lower >= HEAT_STEPS:
            marked = _marked(upper, lower)
            if marked is not None:
                # colour is never the only signal: a state or flag of either cell shows its glyph
                if run_style is not None:
                    segments.append(Segment(UPPER_HALF * run_length, run_style))
                    run_style, run_length = None, 0
                style, glyph = (styles.dimmed if dimmed else styles.plain)[marked]
                segments.append(Segment(glyph, style))
                continue
        style = styles.half(upper, lower, dimmed)
        if style is run_style:
            run_length += 1
            continue
        if run_style is not None:
            segments.append(Segment(UPPER_HALF * run_length, run_style))
        run_style, run_length = style, 1
    if run_style is not None:
        segments.append(Segment(UPPER_HALF * run_length, run_style))


def selected_cell(styles: CellStyles, code: int) -> Segment:
    """The selected node's (or group's) cell where no bracket fits: a diamond in the selection colour on
    the cell's own background."""
    style = styles.plain[code][0]
    return Segment(
        SELECTED_MARK, Style(color=styles.palette.selection.color, bgcolor=style.bgcolor, bold=True)
    )


def legend(
    styles: CellStyles,
    metric: Metric,
    scale: HeatScale,
    unexported: bool,
    width: int,
    prefix: Sequence[Segment] = (),
) -> list[Segment]:
    """The metric's scale and every glyph with its meaning, after ``prefix``; on a narrow map, the short
    words, so that no glyph falls off the end. ``unexported``: explain the "not exported" mark too."""
    for short in (False, True):
        segments = [*prefix, *_legend_segments(styles, metric, scale, unexported, short)]
        if sum(len(segment.text) for segment in segments) <= width:
            break
    return segments


def _legend_segments(
    styles: CellStyles, metric: Metric, scale: HeatScale, unexported: bool, short: bool
) -> list[Segment]:
    palette = styles.palette
    label = metric.label.capitalize()
    segments = [Segment(f"{label[:4] if short else label}: ", palette.text)]
    marks = dict(scale.legend(metric))
    for step, style in enumerate(palette.heat_bg):
        text = marks.get(step)
        if text is None:
            segments.append(Segment("  ", style))
        else:
            segments.append(Segment(text if short else f" {text} ", style))
    gap = " " if short else "  "
    segments.append(Segment(gap, palette.empty))
    meanings = (
        (styles.plain[DOWN], "down"),
        (styles.plain[STALE], "stale"),
        (styles.plain[MISSING], "missing" if not short else "miss"),
        (styles.plain[MIG_NA], "MIG/n/a" if not short else "MIG"),
        *(((styles.plain[NOT_EXPORTED], "not exported" if not short else "n/e"),) if unexported else ()),
        ((palette.heat_bg[-1], "!"), "critical" if not short else "crit"),
        ((palette.heat_bg[0], "z"), "idle in a job" if not short else "idle"),
    )
    for (style, glyph), meaning in meanings:
        segments.append(Segment(glyph, style))
        segments.append(Segment(f"{'' if short else ' '}{meaning}{gap}", palette.dim))
    segments.append(Segment("[m] metric" if not short else "[m]", palette.dim))
    return segments
