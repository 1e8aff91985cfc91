"""Several slow facts in one exec: the commands run one after another under ``sh -c``, each framed by
marker lines that carry its exit status, so each fact gets its own output, error text and status back.

An exec costs gputop a channel open, a request and a close (about 0.25 ms of CPU on a thousand-node
fleet) and costs the node an sshd session. A node's facts fall due together (processes, ibstat and the Xid
log every 30 s; NVLink and MIG every minute), so one exec per round instead of one per fact cuts both by
about three.

The markers carry a random nonce per batch, so no command's output can end or forge another's frame:

    stdout: \\n<nonce> begin 0\\n<output of command 0>\\n<nonce> end 0 <status>\\n ...
    stderr: \\n<nonce> begin 0\\n<errors of command 0>\\n<nonce> end 0\\n ...

The newline before each marker keeps it on a line of its own when a command's output has no final
newline; that newline is the marker's, not the output's. The script is plain POSIX sh, started by
``sh -c`` so that a login shell of another family (fish, csh) runs it too. Each command is its argv
quoted word by word, as a single command is.
"""

from __future__ import annotations

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
    "{command}; s=$?; "
    "printf '\\n%s end {i} %d\\n' {nonce} \"$s\"; printf '\\n%s end {i}\\n' {nonce} >&2"
)


def _step_pattern() -> re.Pattern[str]:
    """The template as a pattern, for parse_batch_script: the first {i} and {nonce} captured, the later
    ones required to repeat them."""
    pattern = re.escape(_STEP_TEMPLATE)
    for name, group in (("i", r"\d+"), ("nonce", _NONCE.pattern.strip("^$"))):
        placeholder = re.escape("{" + name + "}")
        pattern = pattern.replace(placeholder, f"(?P<{name}>{group})", 1).replace(placeholder, f"(?P={name})")
    return re.compile(pattern.replace(re.escape("{command}"), "(?P<command>.*?)"))


_STEP: Final = _step_pattern()


def new_nonce() -> str:
    return f"gputop-{secrets.token_hex(_NONCE_HEX // 2)}"


def batch_script(argvs: Sequence[Sequence[str]], nonce: str) -> str:
    """The sh script that runs each argv in turn, framed by markers (what ``sh -c`` gets)."""
    if not _NONCE.match(nonce):
        raise ValueError(f"not a batch nonce: {nonce!r}")
    steps = [
        _STEP_TEMPLATE.format(i=i, nonce=nonce, command=shlex.join(argv)) for i, argv in enumerate(argvs)
    ]
    return "\n".join(steps)  # a command per line: what a reader of `ps` or the node's logs sees


def batch_command_line(argvs: Sequence[Sequence[str]], nonce: str) -> str:
    """The remote command line: ``sh -c <the script>``, quoted for the login shell."""
    return shlex.join(("sh", "-c", batch_script(argvs, nonce)))


def parse_batch_script(script: str) -> tuple[str, tuple[str, ...]] | None:
    """(nonce, the command lines in order) of a script batch_script wrote; None for any other script."""
    nonce = None
    commands: list[str] = []
    for i, step in enumerate(script.split("\n")):
        match = _STEP.fullmatch(step)
        if match is None or int(match["i"]) != i or (nonce is not None and match["nonce"] != nonce):
            return None
        nonce = match["nonce"]
        commands.append(match["command"])
    return (nonce, tuple(commands)) if nonce is not None else None


def begin_marker(nonce: str, i: int) -> bytes:
    return f"\n{nonce} begin {i}\n".encode()


def end_marker(nonce: str, i: int, status: int | None = None) -> bytes:
    """stdout's end marker carries the status; stderr's does not (``status`` None)."""
    return f"\n{nonce} end {i}{'' if status is None else f' {status}'}\n".encode()


@dataclass(frozen=True, slots=True)
class StepOutput:
    """What one command of a batch printed; ``status`` None when its end marker never came (the batch
    was cut off while it ran, or before it started: then ``started`` is False too)."""

    stdout: bytes
    stderr: bytes
    status: int | None
    started: bool


# Any batch's marker line; a batch reads only those with its own nonce. One pattern for all: a pattern
# per nonce would be compiled again for every batch (re's cache never sees the same one twice).
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


def split_batch_output(stdout: bytes, stderr: bytes, nonce: str, count: int) -> list[StepOutput]:
    """Each of ``count`` commands' outputs, in order, from a batch's whole stdout and stderr."""
    out_frames = _frames(stdout, nonce, count)
    err_frames = _frames(stderr, nonce, count)
    steps = []
    for i in range(count):
        out, status, ended = out_frames.get(i, (b"", None, False))
        err = err_frames.get(i, (b"", None, False))[0]
        steps.append(StepOutput(out, err, status if ended else None, i in out_frames))
    return steps


def batch_output(nonce: str, outputs: Sequence[tuple[bytes, bytes, int]]) -> tuple[bytes, bytes]:
    """(stdout, stderr) of a batch whose commands printed ``outputs`` (stdout, stderr, status): what sh
    prints for the script, for a fake node to answer with."""
    stdout, stderr = bytearray(), bytearray()
    for i, (out, err, status) in enumerate(outputs):
        stdout += begin_marker(nonce, i) + out + end_marker(nonce, i, status)
        stderr += begin_marker(nonce, i) + err + end_marker(nonce, i)
    return bytes(stdout), bytes(stderr)
