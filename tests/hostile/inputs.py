"""Hostile inputs for the hostile-input suite: text any cluster user (or a broken driver) can put in front
of gputop, and what each must look like once gputop has shown it.

To extend the suite, add a string to `TEXTS`; every text route (`test_hostile_text_routes.py`) and every
parser (`test_hostile_parsers.py`) is then tried with it.
"""

from __future__ import annotations

import random

# (what it is, the text, a piece of the raw text that must never reach the terminal, how that piece shows)
TEXTS: tuple[tuple[str, str, str, str], ...] = (
    ("OSC title", "job\x1b]2;PWNED\x07x", "\x1b]2;PWNED", "␛]2;PWNED␇"),
    ("OSC title, ST ended", "job\x1b]0;PWNED\x1b\\x", "\x1b]0;PWNED", "␛]0;PWNED␛\\"),
    ("SGR colour", "job\x1b[31mred", "\x1b[31mred", "␛[31mred"),
    ("OSC 52 clipboard", "py\x1b]52;c;ZXZpbA==\x07", "\x1b]52;c;", "␛]52;c;ZXZpbA==␇"),
    ("clear screen", "x\x1b[2J\x1b[Hwipe", "\x1b[2J", "␛[2J␛[Hwipe"),
    ("alternate screen off", "x\x1b[?1049l", "\x1b[?1049l", "␛[?1049l"),
    ("8-bit CSI", "x\x9b31mred", "\x9b31m", "\\x9b31mred"),
    ("bidi override", "gpu\u202e100upg", "\u202e", "\\u202e100upg"),
    ("zero width", "gpu\u200b001", "\u200b", "\\u200b001"),
    ("bell and backspace", "a\x07\x08\x08b", "\x07\x08", "␇␈␈b"),
    ("carriage return", "safe\rEVIL", "\rEVIL", "␍EVIL"),
    ("NUL", "a\x00b", "\x00", "␀b"),
    ("markup", "[@click=app.quit]click me[/]", "", "[@click=app.quit]click me[/]"),
)


def random_bytes(size: int, seed: int = 17) -> bytes:
    return random.Random(seed).randbytes(size)


def random_lines(lines: int, seed: int = 17) -> str:
    """Random printable junk with separators parsers split on."""
    rng = random.Random(seed)
    alphabet = "abcXYZ019 ,:=|[]()-_./\t%;\x1b\u202e"
    return "\n".join("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 120))) for _ in range(lines))
