"""Text from a node, from Slurm or from a file, made safe to show: the one place every widget and every
text output passes such text through before it reaches a terminal.

Any cluster user writes job names, working directories and process names; kernel logs and drivers print
what they like. A string that carries an escape sequence (``\\x1b]2;title\\x07`` sets the terminal's
title, ``\\x1b[31m`` colours what follows, others write the clipboard or redraw the screen) must never be
sent to the terminal; it is shown instead, visibly, so the operator sees that the text holds something odd:

- C0 controls and DEL become their Unicode control pictures, one cell each: ``job\\x1b]2;x`` shows as
  ``job␛]2;x``, a tab as ``␉``, a newline (where the text is one line) as ``␊``.
- C1 controls (``\\x9b`` is an 8-bit CSI), Unicode format characters (bidi overrides and isolates that
  reorder what follows, zero-width characters that hide in names, the byte-order mark), line and paragraph
  separators and lone surrogates become ``\\x9b`` / ``\\u202e`` escapes, so nothing invisible stays hidden.
- Very long text is cut, and the cut says how much was left out.

Everything else (accents, CJK, emoji, box drawing) is shown as it is. The check is ``str.isprintable``
first, so ordinary text costs one C-level scan.
"""

from __future__ import annotations

import unicodedata

LINE_MAX_CHARS = 512  # one line of a table, a header, a notice
BLOCK_MAX_CHARS = 8192  # a dialog's command output, a node's error text
BLOCK_MAX_LINES = 60

_CONTROL_PICTURES = {code: chr(0x2400 + code) for code in range(0x20)} | {0x7F: "\u2421"}
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def _shown(char: str, keep_newlines: bool) -> str:
    code = ord(char)
    if code == 0x0A and keep_newlines:
        return char
    picture = _CONTROL_PICTURES.get(code)
    if picture is not None:
        return picture
    if unicodedata.category(char) not in _ESCAPED_CATEGORIES:
        return char  # printable after all: a space other than ' ', private use, unassigned
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _escaped(text: str, keep_newlines: bool) -> str:
    return "".join(
        char if char.isprintable() or (char == "\n" and keep_newlines) else _shown(char, keep_newlines)
        for char in text
    )


def _cut(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    return f"{text[:max_chars]}… ({len(text) - max_chars:,} more characters)"


def is_safe(text: str) -> bool:
    """True when ``text`` can reach a terminal as it is (no control or invisible format character)."""
    return text.isprintable()


def first_unsafe(text: str) -> int | None:
    """The position of the first character that would be shown escaped (a control or invisible format
    character), or None: for refusing such text where it would be stored (a drain reason)."""
    if text.isprintable():
        return None
    return next((at for at, char in enumerate(text) if _shown(char, False) != char), None)


def safe_line(text: str, max_chars: int = LINE_MAX_CHARS) -> str:
    """``text`` as one line that can reach a terminal: every control and invisible character shown
    visibly (newlines too), and at most ``max_chars`` of it (plus a note of what was cut)."""
    if not text.isprintable():
        text = _escaped(text, keep_newlines=False)
    return _cut(text, max_chars)


def safe_block(text: str, max_chars: int = BLOCK_MAX_CHARS, max_lines: int = BLOCK_MAX_LINES) -> str:
    """``text`` of several lines (a command's output, an error): newlines kept, every other control and
    invisible character shown visibly, at most ``max_lines`` lines and ``max_chars`` characters."""
    if not text.isprintable():
        text = _escaped(text.replace("\r\n", "\n"), keep_newlines=True)
    lines = text.split("\n")
    if len(lines) > max_lines:
        text = "\n".join(lines[:max_lines]) + f"\n… ({len(lines) - max_lines:,} more lines)"
    return _cut(text, max_chars)


def strip_unsafe(text: str) -> str:
    """``text`` with every character that `is_safe` refuses removed (not shown): for the last line of
    defence at the terminal, where the width of the text is already laid out and a control character,
    zero cells wide, must not become a visible one."""
    if text.isprintable():
        return text
    return "".join(char for char in text if char.isprintable() or _shown(char, False) == char)
