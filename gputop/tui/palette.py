"""Rich styles built from the current theme's variables, for widgets that render their own lines.

Widgets never name a colour: they ask for a role (heat step, stale cell, severity) and get the theme's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.style import Style
from textual.app import App
from textual.color import Color

from gputop.core.metrics import HEAT_STEPS
from gputop.core.models import Severity


def _color(variables: dict[str, str], name: str, fallback: str) -> Color:
    try:
        return Color.parse(variables.get(name, fallback))
    except Exception:
        return Color.parse(fallback)


@dataclass(frozen=True)
class Palette:
    theme: str
    heat_bg: tuple[Style, ...]  # a cell coloured by its heat step, text contrasting
    heat_fg: tuple[Style, ...]  # the heat colour as foreground (legend, half-block upper cells)
    heat_colors: tuple[Color, ...]
    empty: Style
    stale: Style
    down: Style
    missing: Style
    na: Style
    selection: Style
    text: Style
    dim: Style
    header: Style
    cursor: Style
    severity: dict[Severity, Style]
    severity_badge: dict[Severity, Style]
    badge_demo: Style
    badge_readonly: Style

    @staticmethod
    def from_app(app: App[Any]) -> Palette:
        v = app.theme_variables or app.get_css_variables()
        heat = tuple(_color(v, f"heat-{i}", "grey") for i in range(HEAT_STEPS))
        background = _color(v, "background", "black")
        foreground = _color(v, "foreground", "white")
        panel = _color(v, "panel", "grey")

        def cell(name: str) -> Style:
            color = _color(v, name, "grey")
            return Style(bgcolor=color.rich_color, color=color.get_contrast_text().rich_color)

        # Every style carries a background: Line-API strips are painted as they are.
        def text(name: str, bold: bool = False) -> Style:
            return Style(color=_color(v, name, "white").rich_color, bgcolor=background.rich_color, bold=bold)

        def badge(name: str) -> Style:
            color = _color(v, name, "red")
            return Style(bgcolor=color.rich_color, color=color.get_contrast_text().rich_color, bold=True)

        return Palette(
            theme=app.theme,
            heat_bg=tuple(
                Style(bgcolor=c.rich_color, color=c.get_contrast_text().rich_color, bold=True) for c in heat
            ),
            heat_fg=tuple(Style(color=c.rich_color) for c in heat),
            heat_colors=heat,
            empty=Style(bgcolor=background.rich_color),
            stale=cell("cell-stale"),
            down=cell("cell-down"),
            missing=cell("cell-missing"),
            na=cell("cell-na"),
            selection=text("selection", bold=True),
            text=Style(color=foreground.rich_color, bgcolor=background.rich_color),
            dim=Style(color=foreground.blend(background, 0.45).rich_color, bgcolor=background.rich_color),
            header=Style(color=foreground.rich_color, bgcolor=panel.rich_color, bold=True),
            cursor=Style(
                bgcolor=_color(v, "block-cursor-background", "blue").rich_color,
                color=_color(v, "block-cursor-foreground", "white").rich_color,
            ),
            severity={
                Severity.OK: text("sev-ok"),
                Severity.WARN: text("sev-warn", bold=True),
                Severity.CRIT: text("sev-crit", bold=True),
            },
            severity_badge={
                Severity.OK: badge("sev-ok"),
                Severity.WARN: badge("sev-warn"),
                Severity.CRIT: badge("sev-crit"),
            },
            badge_demo=badge("badge-demo"),
            badge_readonly=badge("badge-readonly"),
        )


class PaletteCache:
    """Rebuilds the palette only when the theme changes."""

    def __init__(self) -> None:
        self._palette: Palette | None = None

    def get(self, app: App[Any]) -> Palette:
        if self._palette is None or self._palette.theme != app.theme:
            self._palette = Palette.from_app(app)
        return self._palette
