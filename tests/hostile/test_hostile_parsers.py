"""Every parser `gputop parse --list` names, with random, oversized and hostile input: it returns (a
value or a ParseFailure, never an exception), in bounded time, with a result not much larger than its
input; and `gputop parse` itself reads at most 16 MiB of a file or a stream.

To try a new kind of bad input, add it to `INPUTS`; to try a new parser, register it (it is picked up
from the registry).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.registry import registry
from gputop.parse_command import to_json
from tests.hostile.inputs import TEXTS, random_bytes, random_lines

INPUTS: dict[str, Callable[[], str]] = {
    "random bytes": lambda: random_bytes(256 * 1024).decode("utf-8", errors="replace"),
    "random lines": lambda: random_lines(4000),
    "one 4 MiB line": lambda: "GPU-" + "0," * (2 * 1024 * 1024),
    "NULs": lambda: "\x00" * (1024 * 1024),
    "a million empty lines": lambda: "\n" * 1_000_000,
    "hostile texts": lambda: "\n".join(text for _, text, _, _ in TEXTS) * 50,
    "header-like junk": lambda: "o.\n" + "x\n" * 100_000,
    "deep JSON": lambda: "[" * 100_000 + "]" * 100_000,
    "deep JSON in a job": lambda: '{"jobs": [' + "[" * 100_000 + "]" * 100_000 + "]}",
    "JSON with a huge list": lambda: '{"jobs": [' + ",".join(["{}"] * 200_000) + "]}",
}
TIME_LIMIT_S = 20.0


@pytest.mark.parametrize("kind", sorted(registry()))
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_every_parser_survives_bad_input_in_bounded_time_and_size(kind: str, name: str) -> None:
    text = INPUTS[name]()
    started = time.perf_counter()
    result = registry()[kind].parse(text)
    took_s = time.perf_counter() - started
    assert took_s < TIME_LIMIT_S, f"{kind} took {took_s:.1f} s on {name}"
    if isinstance(result, ParseFailure):
        assert result.reason and len(result.reason) < 2000 and len(result.excerpt) < 100_000
        return
    shown = json.dumps(to_json(result))
    assert len(shown) < 4 * len(text) + 100_000, f"{kind} made {len(shown):,} bytes of {len(text):,} ({name})"


@pytest.mark.parametrize("source", ["/dev/zero", "random file", "stdin"])
def test_gputop_parse_reads_at_most_16_mib_and_says_so(source: str, tmp_path: Path) -> None:
    command = [sys.executable, "-m", "gputop", "parse", "topo"]
    stdin = None
    if source == "/dev/zero":
        command.append("/dev/zero")
    elif source == "random file":
        path = tmp_path / "random"
        path.write_bytes(random_bytes(40 * 1024 * 1024))
        command.append(str(path))
    else:
        stdin = subprocess.DEVNULL
        command = ["sh", "-c", f"head -c 40000000 /dev/urandom | {' '.join(command)} -"]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, stdin=stdin, timeout=120, check=False)
    assert time.perf_counter() - started < 60
    assert done.returncode in (0, 1), done.stderr[-2000:]
    assert b"only the first 16 MiB were read" in done.stderr, done.stderr[-2000:]
    assert len(done.stderr) < 64 * 1024 and len(done.stdout) < 1024 * 1024
    assert b"\x1b" not in done.stderr and b"\x00" not in done.stderr
