"""What every parser shares: the failure value, and the cells nvidia-smi prints for "no value"."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ParseFailure:
    """Input a parser could not make sense of, said so a person can act on it."""

    kind: str
    reason: str
    excerpt: str = ""  # the first offending line(s), trimmed


@dataclass(frozen=True, slots=True)
class ParserInfo:
    kind: str  # the name `gputop parse KIND` takes
    summary: str  # what command's output it reads
    parse: Callable[[str], Any]  # text -> a frozen value or ParseFailure


# nvidia-smi's ways of saying "no value" (with or without brackets, as CSV and -q print them)
NOT_AVAILABLE = frozenset(
    {
        "",
        "[N/A]",
        "N/A",
        "[Not Supported]",
        "Not Supported",
        "[Unknown Error]",
        "Unknown Error",
        "[Insufficient Permissions]",
        "Insufficient Permissions",
        "[GPU requires reset]",
        "[Requested functionality has been deprecated]",
    }
)


def as_text(data: bytes | str | None) -> str:
    """A command's output as text: bytes decoded as UTF-8, anything undecodable replaced (nodes print
    what they like), None as empty."""
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", errors="replace")
    return data
