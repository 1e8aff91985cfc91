"""Colour themes: Textual themes read from YAML files.

Every gputop theme defines the variables in `REQUIRED_VARIABLES`; widgets colour themselves only
through them (`$heat-3` in TCSS, `app.theme_variables["heat-3"]` in Python), never with literals.
A broken theme file is reported and skipped: the app must start whatever the user's files hold.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from textual.color import Color, ColorParseError
from textual.theme import Theme

from gputop.core.metrics import HEAT_STEPS
from gputop.core.yaml_limits import TooLarge, check_expansion
from gputop.packaged import shipped

DEFAULT_THEME = "gputop-dark"

HEAT_VARIABLES: tuple[str, ...] = tuple(f"heat-{step}" for step in range(HEAT_STEPS))
STATE_VARIABLES: tuple[str, ...] = (
    "cell-empty",
    "cell-stale",
    "cell-down",
    "cell-missing",
    "cell-na",
    "sev-ok",
    "sev-warn",
    "sev-crit",
    "badge-demo",
    "badge-readonly",
    "selection",
)
REQUIRED_VARIABLES: tuple[str, ...] = HEAT_VARIABLES + STATE_VARIABLES

_REQUIRED_COLORS = (
    "primary",
    "secondary",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "warning",
    "error",
    "success",
)
_REQUIRED_KEYS = ("name", "dark", *_REQUIRED_COLORS, "variables")
_OPTIONAL_COLORS = ("boost",)
_OPTIONAL_NUMBERS = ("luminosity_spread", "text_alpha")
_KNOWN_KEYS = (*_REQUIRED_KEYS, *_OPTIONAL_COLORS, *_OPTIONAL_NUMBERS)

# Names are typed on the command line and in config files, so keep them to one shell word.
_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
# What TCSS accepts after `$`.
_VARIABLE_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")

THEME_MAX_BYTES = 256 * 1024


class ThemeError(Exception):
    """A theme file that cannot be used; `problems` lists everything wrong with it."""

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        super().__init__(f"{path}: {self.reason}")

    @property
    def reason(self) -> str:
        return "; ".join(self.problems)


def packaged_theme_dir() -> Path | None:
    """The themes shipped with gputop: inside the package when installed, else the checkout's."""
    found = shipped("_themes", "themes")
    return found if found is not None and found.is_dir() else None


def user_theme_dir() -> Path:
    """`$XDG_CONFIG_HOME/gputop/themes`, defaulting to ~/.config (relative values are ignored, per XDG)."""
    config_home = os.environ.get("XDG_CONFIG_HOME", "")
    base = Path(config_home) if config_home and Path(config_home).is_absolute() else Path.home() / ".config"
    return base / "gputop" / "themes"


def theme_dirs() -> list[Path]:
    """Directories to load themes from, in override order: later ones win by theme name."""
    packaged = packaged_theme_dir()
    return [*([packaged] if packaged is not None else []), user_theme_dir()]


def _did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _color_problem(where: str, value: object) -> str | None:
    if value is None:
        return f"{where} has no value (quote colours: an unquoted '#' starts a YAML comment)"
    if not isinstance(value, str):
        return f"{where} must be a quoted colour string, not {value!r}"
    try:
        Color.parse(value)
    except ColorParseError as error:
        hint = f" (did you mean {error.suggested_color!r}?)" if error.suggested_color else ""
        return f"{where}: {value!r} is not a colour{hint}"
    return None


def _read_yaml(path: Path) -> Any:
    try:
        with path.open("rb") as file:
            raw = file.read(THEME_MAX_BYTES + 1)
        if len(raw) > THEME_MAX_BYTES:
            raise ThemeError(path, [f"larger than {THEME_MAX_BYTES // 1024} KiB (a theme is a few KiB)"])
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ThemeError(path, [f"cannot read file ({error})"]) from error
    # libyaml's safe loader when present: several times faster, and themes load at every start
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        check_expansion(node)
        return loader.construct_document(node)
    except (TooLarge, RecursionError) as error:
        why = str(error) if isinstance(error, TooLarge) else "nested too deeply"
        raise ThemeError(path, [f"refused: {why}"]) from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ThemeError(path, [f"YAML syntax error{where}: {error.problem or error}"]) from error
    except yaml.YAMLError as error:
        raise ThemeError(path, [f"YAML syntax error: {error}"]) from error
    finally:
        loader.dispose()


def _check_variables(variables: object, problems: list[str]) -> dict[str, str]:
    if variables is None:
        variables = {}  # `variables:` with nothing under it; report what is missing
    if not isinstance(variables, Mapping):
        problems.append("'variables' must be a mapping of variable name to colour")
        return {}
    checked: dict[str, str] = {}
    for name, value in variables.items():
        if not isinstance(name, str) or not _VARIABLE_PATTERN.fullmatch(name):
            problems.append(f"variable name {name!r} is not a valid CSS variable name")
        elif name in REQUIRED_VARIABLES:
            # Python code parses these too (Rich styles for the heat map), so they must be plain colours.
            problem = _color_problem(f"variables.{name}", value)
            if problem:
                problems.append(problem)
            else:
                checked[name] = value
        elif isinstance(value, str):
            # Other variables feed Textual's own CSS, which also takes values like "none" or "red 50%".
            checked[name] = value
        else:
            problems.append(f"variables.{name} must be a quoted string, not {value!r}")
    missing = [name for name in REQUIRED_VARIABLES if name not in variables]
    if missing:
        # Pair each unrecognised name with the missing one it most resembles, so a typo is pointed
        # out once, next to the variable it was meant to be.
        typo_for: dict[str, str] = {}
        for extra in variables:
            if isinstance(extra, str) and extra not in REQUIRED_VARIABLES:
                close = difflib.get_close_matches(extra, missing, n=1)
                if close:
                    typo_for.setdefault(close[0], extra)
        described = [
            f"{name} (did you mean {typo_for[name]!r}?)" if name in typo_for else name for name in missing
        ]
        problems.append(f"missing variables: {', '.join(described)}")
    return checked


def _theme_from_mapping(path: Path, data: Mapping[Any, Any]) -> Theme:
    problems: list[str] = []
    for key in data:
        if key not in _KNOWN_KEYS:
            problems.append(f"unknown key {key!r}{_did_you_mean(str(key), _KNOWN_KEYS)}")
    missing = [key for key in _REQUIRED_KEYS if key not in data]
    if missing:
        problems.append(f"missing keys: {', '.join(missing)}")

    name = data.get("name")
    if "name" in data and not (isinstance(name, str) and _NAME_PATTERN.fullmatch(name)):
        problems.append(f"name {name!r} must be one word of letters, digits, '-', '_' or '.'")
    dark = data.get("dark")
    if "dark" in data and not isinstance(dark, bool):
        problems.append(f"dark must be true or false, not {dark!r}")
    for key in _REQUIRED_COLORS + _OPTIONAL_COLORS:
        if key in data and (problem := _color_problem(key, data[key])):
            problems.append(problem)
    for key in _OPTIONAL_NUMBERS:
        value = data.get(key)
        if key in data and (isinstance(value, bool) or not isinstance(value, int | float)):
            problems.append(f"{key} must be a number, not {value!r}")
    variables = _check_variables(data.get("variables", {}), problems) if "variables" in data else {}
    if problems:
        raise ThemeError(path, problems)

    options = {key: data[key] for key in (*_OPTIONAL_COLORS, *_OPTIONAL_NUMBERS) if key in data}
    theme = Theme(
        name=data["name"],
        dark=data["dark"],
        variables=variables,
        **{key: data[key] for key in _REQUIRED_COLORS},
        **options,
    )
    try:
        # Building the colour system is what Textual does on switching; fail here, not mid-session.
        theme.to_color_system().generate()
    except Exception as error:
        raise ThemeError(path, [f"Textual rejects the theme ({error})"]) from error
    return theme


def load_theme_file(path: Path) -> Theme:
    """Read one theme file; raises `ThemeError` naming the file and everything wrong with it."""
    data = _read_yaml(path)
    if data is None:
        raise ThemeError(path, ["file is empty"])
    if not isinstance(data, Mapping):
        raise ThemeError(path, [f"expected a mapping of theme keys at the top, found {type(data).__name__}"])
    return _theme_from_mapping(path, data)


def load_themes(dirs: Iterable[Path]) -> tuple[list[Theme], list[str]]:
    """Load every `*.yaml` in `dirs`; a later theme replaces an earlier one of the same name.

    Returns the themes and one warning per file that was skipped. Never raises for a bad file.
    """
    themes: dict[str, Theme] = {}
    warnings: list[str] = []
    for directory in dirs:
        try:
            paths = sorted(directory.glob("*.yaml")) if directory.is_dir() else []
        except OSError as error:
            warnings.append(f"theme directory {directory} ignored: {error}")
            continue
        for path in paths:
            try:
                theme = load_theme_file(path)
            except ThemeError as error:
                warnings.append(f"theme file {path} ignored: {error.reason}")
                continue
            themes[theme.name] = theme
    return list(themes.values()), warnings


def builtin_fallback_theme() -> Theme:
    """gputop-dark, kept in code so the app has a complete theme even if the packaged file is gone."""
    return Theme(
        name=DEFAULT_THEME,
        dark=True,
        primary="#4c9be8",
        secondary="#7f8fa6",
        accent="#f0a030",
        foreground="#d8dee9",
        background="#0f1117",
        surface="#171a21",
        panel="#222733",
        warning="#f0c93c",
        error="#f85149",
        success="#3fbf9f",
        variables={
            "heat-0": "#440154",
            "heat-1": "#482878",
            "heat-2": "#3e4989",
            "heat-3": "#31688e",
            "heat-4": "#26828e",
            "heat-5": "#1f9e89",
            "heat-6": "#35b779",
            "heat-7": "#6ece58",
            "heat-8": "#b5de2b",
            "heat-9": "#fde725",
            "cell-empty": "#1a1d24",
            "cell-stale": "#5c6370",
            "cell-down": "#e5534b",
            "cell-missing": "#c678dd",
            "cell-na": "#2e3440",
            "sev-ok": "#3fbf9f",
            "sev-warn": "#f0c93c",
            "sev-crit": "#f85149",
            "badge-demo": "#8957e5",
            "badge-readonly": "#1f6feb",
            "selection": "#ffffff",
            "footer-key-foreground": "#4c9be8",
        },
    )


def theme_variable_defaults() -> dict[str, str]:
    """Values for `App.get_theme_variable_defaults`.

    TCSS that names `$heat-3` fails to parse under a theme lacking it (Textual's own themes, or the
    one active before gputop's are registered); these defaults keep such CSS valid.
    """
    variables = builtin_fallback_theme().variables
    return {name: variables[name] for name in REQUIRED_VARIABLES}


def discover_themes() -> tuple[list[Theme], list[str]]:
    """All themes from `theme_dirs()`, always including `DEFAULT_THEME`, plus warnings to show."""
    dirs = theme_dirs()
    themes, warnings = load_themes(dirs)
    if not any(theme.name == DEFAULT_THEME for theme in themes):
        searched = ", ".join(str(directory) for directory in dirs)
        warnings.append(f"theme {DEFAULT_THEME!r} not found in {searched}; using the built-in copy")
        themes.insert(0, builtin_fallback_theme())
    return themes, warnings


def resolve_theme(requested: str | None, available: Iterable[str]) -> tuple[str, str | None]:
    """The theme to use for `requested`, and a warning when it is not among `available`."""
    names = list(available)
    if not requested:
        return DEFAULT_THEME, None
    if requested in names:
        return requested, None
    listed = ", ".join(sorted(names))
    return DEFAULT_THEME, f"unknown theme {requested!r}; using {DEFAULT_THEME} (available: {listed})"
