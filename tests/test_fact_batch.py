"""Slow facts in one exec: the script, read by a real sh, and its output split back per command."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from gputop.sources.fact_batch import (
    batch_command_line,
    batch_output,
    batch_script,
    new_nonce,
    parse_batch_script,
    split_batch_output,
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
)


def run_script(argvs: tuple[tuple[str, ...], ...], nonce: str) -> subprocess.CompletedProcess[bytes]:
    # The remote login shell gets batch_command_line; sh -c with the script is what it runs.
    return subprocess.run(["sh", "-c", batch_script(argvs, nonce)], capture_output=True, check=False)


def test_each_command_gets_its_own_output_errors_and_status_back() -> None:
    nonce = new_nonce()
    done = run_script(ARGVS, nonce)
    steps = split_batch_output(done.stdout, done.stderr, nonce, len(ARGVS))
    assert [s.stdout for s in steps] == [
        b"hello\n",
        b"no final newline",
        b"",
        b"",
        b'it\'s "quoted"; $HOME `id` && echo no\n',
        b"",
    ]
    assert [s.status for s in steps] == [0, 0, 3, 127, 0, 0]
    assert steps[2].stderr == b"oops\n"
    assert b"gputop-no-such-program" in steps[3].stderr
    assert all(s.started for s in steps)


def test_a_fake_node_frames_outputs_byte_for_byte_as_sh_does() -> None:
    nonce = new_nonce()
    done = run_script(ARGVS[:3], nonce)
    assert batch_output(
        nonce, [(b"hello\n", b"", 0), (b"no final newline", b"", 0), (b"", b"oops\n", 3)]
    ) == (
        done.stdout,
        done.stderr,
    )


def test_a_batch_cut_off_keeps_what_finished_and_what_the_cut_one_printed() -> None:
    nonce = new_nonce()
    stdout, stderr = batch_output(nonce, [(b"first\n", b"", 0), (b"second\n", b"", 0)])
    cut = stdout[: stdout.index(b"second\n") + len(b"sec")]
    steps = split_batch_output(cut, stderr, nonce, 3)
    assert (steps[0].stdout, steps[0].status, steps[0].started) == (b"first\n", 0, True)
    assert (steps[1].stdout, steps[1].status, steps[1].started) == (b"sec", None, True)
    assert (steps[2].status, steps[2].started) == (None, False)


def test_output_that_imitates_a_marker_of_another_batch_frames_nothing() -> None:
    nonce, other = new_nonce(), new_nonce()
    forged = f"\n{other} end 0 0\nstill mine\n".encode()
    stdout, stderr = batch_output(nonce, [(forged, b"", 0)])
    assert split_batch_output(stdout, stderr, nonce, 1)[0].stdout == forged


def test_the_script_reads_back_as_its_command_lines_and_nothing_else_does() -> None:
    nonce = new_nonce()
    assert parse_batch_script(batch_script((("ibstat",), ("nvidia-smi", "topo", "-m")), nonce)) == (
        nonce,
        ("ibstat", "nvidia-smi topo -m"),
    )
    assert parse_batch_script("ibstat; rm -rf /") is None
    assert parse_batch_script(batch_script((("ibstat",),), nonce).replace(" begin 0", " begin 1")) is None
    with pytest.raises(ValueError, match="nonce"):
        batch_script((("ibstat",),), "x; rm -rf /")
    assert batch_command_line((("ibstat",),), nonce).startswith("sh -c '")
