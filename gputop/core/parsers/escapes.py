"""Terminal escape sequences taken out of a command's output before it is parsed.

Recent drivers (590 and later) underline the header of ``nvidia-smi topo -m`` with ``ESC[4m ... ESC[0m``
even when it writes to a pipe or a file; other tools colour their output when they think a person reads
it. A parser that splits on tabs and spaces then reads ``\\x1b[4mGPU0`` as a device name, or finds no
header at all. What a node's tool prints for a person's eyes is not data: sequences are removed, the text
between them kept.

Covered, as ECMA-48 defines them: CSI (``ESC [`` ... final byte, and the 8-bit ``\\x9b``), OSC, DCS, SOS,
PM and APC strings (ended by BEL, ``ESC \\`` or the 8-bit ST; one left open ends with its line, so it
cannot take the rest of the output with it), and the two-byte escapes (``ESC`` then one byte, such as
``ESC (B`` 's designator or ``ESC 7``). A lone ESC at the end is dropped too. Anything else is left as it is,
so the text that reaches the screen still shows what remains odd (gputop.core.safe_text).

Slurm's listings do not pass through here: an escape there sits in a user's job name or drain reason, and
is shown (as ``␛``) as the evidence it is.
"""

from __future__ import annotations

import re

_SEQUENCE = re.compile(
    r"""
    (?: \x1b\[ | \x9b ) [0-?]* [ -/]* [@-~]                        # CSI ... final byte
  | \x1b[\]PX^_] [^\n]*? (?: \x07 | \x1b\\ | \x9c | (?=\n) | $ )  # OSC, DCS, SOS, PM, APC strings
  | \x1b [ -/]* [0-~]                                               # two-byte escapes (nF, Fp, Fe, Fs)
  | \x1b $                                                          # a lone ESC at the very end
    """,
    re.VERBOSE,
)


def strip_terminal_escapes(text: str) -> str:
    """``text`` without terminal escape sequences; the text itself when it has none (the usual case costs
    two substring scans)."""
    if "\x1b" not in text and "\x9b" not in text:
        return text
    return _SEQUENCE.sub("", text)
