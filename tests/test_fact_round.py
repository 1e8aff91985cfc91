"""Slow facts in rounds: the script, read by a real sh from its stdin, and its output split per command."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

import pytest

from gputop.sources.fact_round import (
    SHELL_COMMAND,
    new_nonce,
    parse_script_line,
    round_script,
    split_round_output,
    step_output,
)

pytestmark = pytest.mark.skipif(shutil.which("sh") is None, reason="no sh on PATH")

# Outputs with and without a final newline, errors, statuses, a missing program and words a shell would
# otherwise take apart.
ARGVS = (
    ("printf", "hello\\n"),
    ("printf", "no final newline"),
    ("sh", "-c", "echo oops >&2; exit 3"),
    ("gputop-no-such-program",),
    ("printf", "%s\\n", 'it\'s "quoted"; $HOME `id` && echo no'),
    ("printf", ""),
    ("cat",),  # reads its stdin: it must not eat the lines that follow it
    ("printf", "after cat"),
)


def round_output(nonce: str, outputs: Sequence[tuple[bytes, bytes, int]]) -> tuple[bytes, bytes]:
    """(stdout, stderr) of a round whose commands printed ``outputs``, framed as a fake node frames each
    step."""
    framed = [step_output(nonce, i, out, err, status) for i, (out, err, status) in enumerate(outputs)]
    return b"".join(out for out, _ in framed), b"".join(err for _, err in framed)


def run_script(argvs: tuple[tuple[str, ...], ...], nonce: str) -> subprocess.CompletedProcess[bytes]:
    # The login shell gets SHELL_COMMAND; the sh it starts reads the round's script from its stdin.
    return subprocess.run(
        ["sh", "-c", SHELL_COMMAND],
        input=round_script(argvs, nonce).encode(),
        capture_output=True,
        check=False,
        timeout=30,
    )


def test_each_command_gets_its_own_output_errors_and_status_back() -> None:
    nonce = new_nonce()
    done = run_script(ARGVS, nonce)
    steps = split_round_output(done.stdout, done.stderr, nonce, len(ARGVS))
    assert [s.stdout for s in steps] == [
        b"hello\n",
        b"no final newline",
        b"",
        b"",
        b'it\'s "quoted"; $HOME `id` && echo no\n',
        b"",
        b"",
        b"after cat",
    ]
    assert [s.status for s in steps] == [0, 0, 3, 127, 0, 0, 0, 0]
    assert steps[2].stderr == b"oops\n"
    assert b"gputop-no-such-program" in steps[3].stderr
    assert all(s.started for s in steps)


def test_a_fake_node_frames_outputs_byte_for_byte_as_sh_does() -> None:
    nonce = new_nonce()
    done = run_script(ARGVS[:3], nonce)
    assert round_output(
        nonce, [(b"hello\n", b"", 0), (b"no final newline", b"", 0), (b"", b"oops\n", 3)]
    ) == (
        done.stdout,
        done.stderr,
    )


def test_a_round_cut_off_keeps_what_finished_and_what_the_cut_one_printed() -> None:
    nonce = new_nonce()
    stdout, stderr = round_output(nonce, [(b"first\n", b"", 0), (b"second\n", b"", 0)])
    cut = stdout[: stdout.index(b"second\n") + len(b"sec")]
    steps = split_round_output(cut, stderr, nonce, 3)
    assert (steps[0].stdout, steps[0].status, steps[0].started) == (b"first\n", 0, True)
    assert (steps[1].stdout, steps[1].status, steps[1].started) == (b"sec", None, True)
    assert (steps[2].status, steps[2].started) == (None, False)


def test_output_that_imitates_a_marker_of_another_batch_frames_nothing() -> None:
    nonce, other = new_nonce(), new_nonce()
    forged = f"\n{other} end 0 0\nstill mine\n".encode()
    stdout, stderr = round_output(nonce, [(forged, b"", 0)])
    assert split_round_output(stdout, stderr, nonce, 1)[0].stdout == forged


def test_each_line_of_the_script_reads_back_as_its_step_and_nothing_else_does() -> None:
    nonce = new_nonce()
    lines = round_script((("ibstat",), ("nvidia-smi", "topo", "-m")), nonce).splitlines()
    assert [parse_script_line(line) for line in lines] == [
        (nonce, 0, "ibstat"),
        (nonce, 1, "nvidia-smi topo -m"),
    ]
    assert parse_script_line("ibstat; rm -rf /") is None
    assert parse_script_line(lines[0].replace(" end 0", " end 1")) is None
    with pytest.raises(ValueError, match="nonce"):
        round_script((("ibstat",),), "x; rm -rf /")
