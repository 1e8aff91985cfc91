"""How the config reader words a problem: where YAML broke and why, what the user wrote (with its
YAML type), a number as a person writes it, an allowed range, and the nearest allowed word."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

import yaml


def yaml_message(err: yaml.MarkedYAMLError, source_name: str) -> str:
    mark = err.problem_mark or err.context_mark
    where = f"{source_name}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source_name
    why = err.problem or err.context or "syntax error"
    if err.problem and err.context:
        context = err.context
        if err.context_mark is not None and mark is not None and err.context_mark.line != mark.line:
            context += f" that starts on line {err.context_mark.line + 1}"
        # PyYAML's contexts are either "while parsing X" or the first half of a sentence the problem ends.
        why = f"{why} ({context})" if context.startswith("while") else f"{context}, {why}"
    if "\\t" in why or "\t" in why:
        why += "; YAML indents with spaces, not tabs"
    if "got '['" in why:
        why += "; quote nodesets inside a [ ] list: ['gpu[001-064]', 'dgx[01-04]']"
    return f"{where}: invalid YAML: {why}"


def number_text(value: Any) -> str:
    """A number as a person writes it: 3600, not 3600.0."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def describe(value: Any) -> str:
    """What the user wrote, with its YAML type: 'hot' (str), true (bool), a list."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"{str(value).lower()} (bool)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    shown = repr(value) if isinstance(value, str | int | float) else str(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{shown} ({type(value).__name__})"


def looks_numeric(text: str) -> bool:
    try:
        float(text.replace("_", ""))
    except ValueError:
        return False
    return True


def range_text(lo: float | None, hi: float | None, lo_open: bool) -> str:
    if lo is not None and hi is not None and not lo_open:
        return f"between {number_text(lo)} and {number_text(hi)}"
    parts = []
    if lo is not None:
        parts.append(f"{'greater than' if lo_open else 'at least'} {number_text(lo)}")
    if hi is not None:
        parts.append(f"at most {number_text(hi)}")
    return " and ".join(parts)


def did_you_mean(value: Any, choices: Iterable[str]) -> str:
    if not isinstance(value, str):
        return ""
    choices = list(choices)
    folded = {c.casefold(): c for c in choices}
    if value.casefold() in folded:
        return f"; did you mean {folded[value.casefold()]!r}?"
    close = difflib.get_close_matches(value, choices, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
