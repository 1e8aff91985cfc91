"""Theme files: the shipped ones are complete and readable, broken ones are skipped with a warning."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml
from textual.app import App, ComposeResult
from textual.color import Color
from textual.widgets import Static

from gputop.tui import themes as themes_module
from gputop.tui.themes import (
    DEFAULT_THEME,
    HEAT_VARIABLES,
    REQUIRED_VARIABLES,
    ThemeError,
    builtin_fallback_theme,
    discover_themes,
    load_theme_file,
    load_themes,
    packaged_theme_dir,
    resolve_theme,
    theme_dirs,
    theme_variable_defaults,
)

SHIPPED_NAMES = {"gputop-dark", "gputop-light", "gputop-high-contrast"}
# Neighbouring heat steps must be told apart by lightness alone (WCAG contrast ratio).
MIN_NEIGHBOUR_CONTRAST = 1.2


def _shipped_dir() -> Path:
    directory = packaged_theme_dir()
    assert directory is not None, "packaged themes not found"
    return directory


SHIPPED_FILES = sorted(_shipped_dir().glob("*.yaml"))


def relative_luminance(color: Color) -> float:
    """WCAG 2 relative luminance of an sRGB colour."""

    def linear(channel: int) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    return 0.2126 * linear(color.r) + 0.7152 * linear(color.g) + 0.0722 * linear(color.b)


def contrast_ratio(a: Color, b: Color) -> float:
    high, low = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def dark_theme_data() -> dict[str, Any]:
    data = yaml.safe_load((_shipped_dir() / "gputop-dark.yaml").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def write_theme(directory: Path, filename: str, data: dict[str, Any]) -> Path:
    path = directory / filename
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


# --- shipped themes ---------------------------------------------------------------------------


def test_shipped_themes_load_without_warnings() -> None:
    loaded, warnings = load_themes([_shipped_dir()])
    assert warnings == []
    assert {theme.name for theme in loaded} == SHIPPED_NAMES


@pytest.mark.parametrize("path", SHIPPED_FILES, ids=lambda path: path.stem)
def test_shipped_theme_is_named_after_its_file(path: Path) -> None:
    assert load_theme_file(path).name == path.stem


@pytest.mark.parametrize("path", SHIPPED_FILES, ids=lambda path: path.stem)
def test_shipped_theme_defines_every_variable_as_a_colour(path: Path) -> None:
    theme = load_theme_file(path)
    for name in REQUIRED_VARIABLES:
        Color.parse(theme.variables[name])


@pytest.mark.parametrize("path", SHIPPED_FILES, ids=lambda path: path.stem)
def test_shipped_heat_scale_is_monotonic_in_luminance(path: Path) -> None:
    theme = load_theme_file(path)
    scale = [Color.parse(theme.variables[name]) for name in HEAT_VARIABLES]
    luminance = [relative_luminance(color) for color in scale]
    steps = [after - before for before, after in itertools.pairwise(luminance)]
    assert all(step > 0 for step in steps) or all(step < 0 for step in steps), luminance
    for low, high in itertools.pairwise(scale):
        assert contrast_ratio(low, high) >= MIN_NEIGHBOUR_CONTRAST, (low.hex, high.hex)


def test_builtin_fallback_matches_the_dark_file() -> None:
    assert builtin_fallback_theme() == load_theme_file(_shipped_dir() / "gputop-dark.yaml")


def test_variable_defaults_cover_every_variable() -> None:
    assert set(theme_variable_defaults()) == set(REQUIRED_VARIABLES)


# --- broken files -----------------------------------------------------------------------------


def broken_variants() -> dict[str, tuple[str, str]]:
    """File name -> (file text, a fragment the warning must contain)."""
    good = dark_theme_data()

    def dump(data: dict[str, Any]) -> str:
        return yaml.safe_dump(data, sort_keys=False)

    bad_colour = {**good, "name": "bad-colour", "primary": "#12345g"}
    no_heat = {**good, "name": "no-heat", "variables": dict(good["variables"])}
    del no_heat["variables"]["heat-7"]
    misspelt = {**good, "name": "misspelt", "primay": good["primary"]}
    del misspelt["primary"]
    return {
        "syntax.yaml": ("name: syntax\nvariables: [unclosed\n", "line 3"),
        "bad-colour.yaml": (dump(bad_colour), "primary: '#12345g' is not a colour"),
        "no-heat.yaml": (dump(no_heat), "missing variables: heat-7"),
        "misspelt.yaml": (dump(misspelt), "unknown key 'primay' (did you mean 'primary'?)"),
        "unquoted.yaml": (
            dump(good).replace('"#4c9be8"', "#4c9be8").replace("'#4c9be8'", "#4c9be8"),
            "no value",
        ),
        "list.yaml": ("- just\n- a list\n", "expected a mapping"),
        "empty.yaml": ("", "file is empty"),
    }


def test_broken_files_are_skipped_with_a_warning_each(tmp_path: Path) -> None:
    variants = broken_variants()
    for filename, (text, _) in variants.items():
        (tmp_path / filename).write_text(text, encoding="utf-8")
    write_theme(tmp_path, "good.yaml", {**dark_theme_data(), "name": "good"})

    loaded, warnings = load_themes([tmp_path])

    assert [theme.name for theme in loaded] == ["good"]
    assert len(warnings) == len(variants)
    for filename, (_, fragment) in variants.items():
        (warning,) = [w for w in warnings if filename in w]
        assert warning.startswith(f"theme file {tmp_path / filename} ignored: ")
        assert fragment in warning


def test_bad_required_variable_colour_names_key_and_value(tmp_path: Path) -> None:
    data = dark_theme_data()
    data["variables"] = {**data["variables"], "cell-down": "not-a-colour"}
    path = write_theme(tmp_path, "x.yaml", data)
    with pytest.raises(ThemeError) as raised:
        load_theme_file(path)
    assert "x.yaml" in str(raised.value)
    assert "variables.cell-down: 'not-a-colour' is not a colour" in str(raised.value)


def test_missing_variable_suggests_a_misspelt_one(tmp_path: Path) -> None:
    data = dark_theme_data()
    variables = dict(data["variables"])
    variables["cel-down"] = variables.pop("cell-down")
    path = write_theme(tmp_path, "x.yaml", {**data, "variables": variables})
    with pytest.raises(ThemeError, match=r"missing variables: cell-down \(did you mean 'cel-down'\?\)"):
        load_theme_file(path)


def test_every_problem_in_a_file_is_reported(tmp_path: Path) -> None:
    data = {**dark_theme_data(), "dark": "maybe", "accent": "blu"}
    del data["panel"]
    path = write_theme(tmp_path, "x.yaml", data)
    with pytest.raises(ThemeError) as raised:
        load_theme_file(path)
    problems = raised.value.problems
    assert any("missing keys: panel" in p for p in problems)
    assert any("dark must be true or false" in p for p in problems)
    assert any("accent: 'blu' is not a colour (did you mean 'blue'?)" in p for p in problems)


def test_non_colour_extra_variables_are_allowed(tmp_path: Path) -> None:
    data = dark_theme_data()
    data["variables"] = {**data["variables"], "block-cursor-text-style": "none"}
    theme = load_theme_file(write_theme(tmp_path, "x.yaml", data))
    assert theme.variables["block-cursor-text-style"] == "none"


# --- directories ------------------------------------------------------------------------------


def test_later_directories_override_by_name(tmp_path: Path) -> None:
    user_dir = tmp_path / "user"
    user_dir.mkdir()
    write_theme(user_dir, "mine.yaml", {**dark_theme_data(), "primary": "#123456"})

    loaded, warnings = load_themes([_shipped_dir(), user_dir, tmp_path / "absent"])

    assert warnings == []
    by_name = {theme.name: theme for theme in loaded}
    assert set(by_name) == SHIPPED_NAMES
    assert by_name[DEFAULT_THEME].primary == "#123456"


def test_theme_dirs_end_with_the_xdg_user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    dirs = theme_dirs()
    assert dirs[0] == _shipped_dir()
    assert dirs[-1] == tmp_path / "gputop" / "themes"


def test_theme_dirs_default_to_dot_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert theme_dirs()[-1] == tmp_path / ".config" / "gputop" / "themes"


def test_discover_falls_back_to_builtin_dark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "gputop-dark.yaml").write_text("name: [", encoding="utf-8")
    monkeypatch.setattr(themes_module, "theme_dirs", lambda: [tmp_path])

    loaded, warnings = discover_themes()

    assert [theme.name for theme in loaded] == [DEFAULT_THEME]
    assert loaded[0] == builtin_fallback_theme()
    assert any("gputop-dark.yaml ignored" in w for w in warnings)
    assert any("using the built-in copy" in w for w in warnings)


# --- choosing a theme -------------------------------------------------------------------------


def test_resolve_known_and_default() -> None:
    assert resolve_theme("gputop-light", SHIPPED_NAMES) == ("gputop-light", None)
    assert resolve_theme(None, SHIPPED_NAMES) == (DEFAULT_THEME, None)


def test_resolve_unknown_theme_warns_and_uses_default() -> None:
    name, warning = resolve_theme("solarized", ["gputop-light", "gputop-dark"])
    assert name == DEFAULT_THEME
    assert warning == "unknown theme 'solarized'; using gputop-dark (available: gputop-dark, gputop-light)"


# --- inside Textual ---------------------------------------------------------------------------


class HeatCellApp(App[None]):
    CSS = """
    #cell {
        background: $heat-9;
        color: $sev-crit;
    }
    """

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return theme_variable_defaults()

    def compose(self) -> ComposeResult:
        yield Static("GPU", id="cell")


async def test_app_colours_widgets_from_the_registered_theme() -> None:
    loaded, _ = load_themes([_shipped_dir()])
    app = HeatCellApp()
    async with app.run_test() as pilot:
        for theme in loaded:
            app.register_theme(theme)
        for theme in loaded:
            app.theme = theme.name
            await pilot.pause()
            cell = app.query_one("#cell", Static)
            assert cell.styles.background == Color.parse(theme.variables["heat-9"])
            assert cell.styles.color == Color.parse(theme.variables["sev-crit"])
            assert app.theme_variables["heat-3"] == theme.variables["heat-3"]
            assert app.current_theme.variables["cell-down"] == theme.variables["cell-down"]


async def test_gputop_css_still_parses_under_a_textual_theme() -> None:
    app = HeatCellApp()
    async with app.run_test() as pilot:
        app.theme = "nord"
        await pilot.pause()
        cell = app.query_one("#cell", Static)
        assert cell.styles.background == Color.parse(theme_variable_defaults()["heat-9"])
