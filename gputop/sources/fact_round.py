"""Slow facts in rounds through one long-lived shell: each round is a script of the facts due, run one
after another, each framed by marker lines that carry its exit status, so each fact gets its own output,
error text and status back.

gputop keeps one ``sh`` per node (SHELL_COMMAND, started once per connection) and writes each round's
script to its stdin. An exec would cost gputop a channel open, an exec request, an exit status, an EOF and
two closes per round, and the node an sshd session and a shell per round; the shell costs a write and the
output's packets (0.37 against 0.65 ms of gputop's CPU per round: bench/bench_fact_rounds.py).

The markers carry a random nonce per round, so no command's output can end or forge another's frame:

    stdout: \\n<nonce> begin 0\\n<output of command 0>\\n<nonce> end 0 <status>\\n ...
    stderr: \\n<nonce> begin 0\\n<errors of command 0>\\n<nonce> end 0\\n ...

The newline before each marker keeps it on a line of its own when a command's output has no final
newline; that newline is the marker's, not the output's. The script is plain POSIX sh, run by ``sh`` so
that a login shell of another family (fish, csh) runs it too. Each command is its argv quoted word by
word, as a single command is, with its stdin from /dev/null: a command that read its stdin would
otherwise eat the lines of the script that follow it.
"""

from __future__ import annotations

import functools
import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

_NONCE_HEX: Final = 16
_NONCE = re.compile(rf"^gputop-[0-9a-f]{{{_NONCE_HEX}}}$")
# One command of the script: its markers on stdout and stderr around it, its status in the end marker.
_STEP_TEMPLATE: Final = (
    "printf '\\n%s begin {i}\\n' {nonce}; printf '\\n%s begin {i}\\n' {nonce} >&2; "
    "{command} </dev/null; s=$?; "
    "printf '\\n%s end {i} %d\\n' {nonce} \"$s\"; printf '\\n%s end {i}\\n' {nonce} >&2"
)


def _step_pattern() -> re.Pattern[str]:
    """The template as a pattern, for parse_script_line: the first {i} and {nonce} captured, the later
    ones required to repeat them."""
    pattern = re.escape(_STEP_TEMPLATE)
    for name, group in (("i", r"\d+"), ("nonce", _NONCE.pattern.strip("^$"))):
        placeholder = re.escape("{" + name + "}")
        pattern = pattern.replace(placeholder, f"(?P<{name}>{group})", 1).replace(placeholder, f"(?P={name})")
    return re.compile(pattern.replace(re.escape("{command}"), "(?P<command>.*?)"))


_STEP: Final = _step_pattern()

# What gputop execs once per connection: a shell that runs each round's script from its stdin. ``exec``
# so that a login shell that would fork for it (fish, zsh) leaves one process, not two.
SHELL_COMMAND: Final = "exec sh"


def new_nonce() -> str:
    return f"gputop-{secrets.token_hex(_NONCE_HEX // 2)}"


# A node's facts are the same few argvs round after round: each is quoted once.
_quoted = functools.lru_cache(maxsize=1024)(shlex.join)


def round_script(argvs: Sequence[Sequence[str]], nonce: str) -> str:
    """The sh script that runs each argv in turn, framed by markers: a command per line, each line
    ending in a newline (the shell reading its stdin runs a line once its newline has come)."""
    if not _NONCE.match(nonce):
        raise ValueError(f"not a round nonce: {nonce!r}")
    return "".join(
        _STEP_TEMPLATE.format(i=i, nonce=nonce, command=_quoted(tuple(argv))) + "\n"
        for i, argv in enumerate(argvs)
    )


def parse_script_line(line: str) -> tuple[str, int, str] | None:
    """(nonce, step, the command line) of one line round_script wrote; None for any other line."""
    match = _STEP.fullmatch(line)
    if match is None:
        return None
    return match["nonce"], int(match["i"]), match["command"]


def begin_marker(nonce: str, i: int) -> bytes:
    return f"\n{nonce} begin {i}\n".encode()


def end_marker(nonce: str, i: int, status: int | None = None) -> bytes:
    """stdout's end marker carries the status; stderr's does not (``status`` None)."""
    return f"\n{nonce} end {i}{'' if status is None else f' {status}'}\n".encode()


@dataclass(frozen=True, slots=True)
class StepOutput:
    """What one command of a round printed; ``status`` None when its end marker never came (the round
    was cut off while it ran, or before it started: then ``started`` is False too)."""

    stdout: bytes
    stderr: bytes
    status: int | None
    started: bool


# Any round's marker line; a round reads only those with its own nonce. One pattern for all: a pattern
# per nonce would be compiled again for every round (re's cache never sees the same one twice).
MARKER = re.compile(rb"\n(gputop-[0-9a-f]{%d}) (begin|end) (\d+)(?: (-?\d+))?\n" % _NONCE_HEX)


def _frames(data: bytes, nonce: str, count: int) -> dict[int, tuple[bytes, int | None, bool]]:
    """Per step index: (its bytes, the status its end marker gave, whether its end marker came)."""
    ours = nonce.encode()
    frames: dict[int, tuple[bytes, int | None, bool]] = {}
    opened: tuple[int, int] | None = None  # (step, where its output starts)
    for found in MARKER.finditer(data):
        step = int(found[3])
        if found[1] != ours or step >= count:
            continue
        if found[2] == b"begin":
            opened = (step, found.end())
        elif opened is not None and opened[0] == step:
            status = int(found[4]) if found[4] is not None else None
            frames[step] = (data[opened[1] : found.start()], status, True)
            opened = None
    if opened is not None:  # cut off while it ran: what it printed so far
        frames[opened[0]] = (data[opened[1] :], None, False)
    return frames


def split_round_output(stdout: bytes, stderr: bytes, nonce: str, count: int) -> list[StepOutput]:
    """Each of ``count`` commands' outputs, in order, from a round's whole stdout and stderr."""
    out_frames = _frames(stdout, nonce, count)
    err_frames = _frames(stderr, nonce, count)
    steps = []
    for i in range(count):
        out, status, ended = out_frames.get(i, (b"", None, False))
        err = err_frames.get(i, (b"", None, False))[0]
        steps.append(StepOutput(out, err, status if ended else None, i in out_frames))
    return steps


def step_output(nonce: str, i: int, out: bytes, err: bytes, status: int) -> tuple[bytes, bytes]:
    """(stdout, stderr) that sh prints for step ``i`` of a round whose command printed ``out`` and
    ``err`` and exited with ``status``: for a fake node to answer with."""
    return (
        begin_marker(nonce, i) + out + end_marker(nonce, i, status),
        begin_marker(nonce, i) + err + end_marker(nonce, i),
    )
