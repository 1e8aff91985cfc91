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


# What gputop reads of one command's output (a node's fact, a file given to `gputop parse`): the largest
# real one, `nvidia-smi -q` of an 8-GPU node, is under 1 MiB; the bound keeps a node or a file that prints
# without end (random bytes, /dev/zero) from filling memory.
OUTPUT_MAX_BYTES = 16 * 1024 * 1024


def cut_note(read_bytes: int, limit: int = OUTPUT_MAX_BYTES) -> str:
    return (
        f"only the first {limit // (1024 * 1024)} MiB were read ({read_bytes:,} bytes or more were printed)"
    )


NOTES_MAX = 50  # what a parser says of one output: past this, how many more


class BoundedNotes(list[str]):
    """A parser's notes, at most NOTES_MAX kept: 200,000 broken records must not make 200,000 notes.
    `done` adds how many were left out."""

    def __init__(self, limit: int = NOTES_MAX) -> None:
        super().__init__()
        self.limit = limit
        self.left_out = 0

    def append(self, note: str) -> None:
        if len(self) < self.limit:
            super().append(note)
        else:
            self.left_out += 1

    def done(self) -> tuple[str, ...]:
        more = (f"and {self.left_out:,} more notes like these",) if self.left_out else ()
        return (*self, *more)


def as_text(data: bytes | str | None) -> str:
    """A command's output as text: bytes decoded as UTF-8, anything undecodable replaced (nodes print
    what they like), None as empty."""
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", errors="replace")
    return data
