"""Processes, read from /proc: whether one runs, its name, the files it holds, and ending a set of them."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from tests.infra.procnet import read_text


def stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name: [state, ppid, ...]; [] when there is no such pid."""
    text = read_text(Path(f"/proc/{pid}/stat"))
    return text.rpartition(")")[2].split() if text else []


def alive(pid: int) -> bool:
    """Running: exists and is not a zombie (kill -0 succeeds on zombies, which a container's init reaps
    late)."""
    fields = stat_fields(pid)
    return bool(fields) and fields[0] not in ("Z", "X")


def comm(pid: int) -> str:
    return read_text(Path(f"/proc/{pid}/comm")).strip()


def pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def holds_file_under(pid: int, directory: Path) -> bool:
    prefix = f"{directory}/"
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(prefix):
                    return True
    return False


def terminate(pids: set[int], timeout_s: float) -> None:
    """SIGTERM, up to ``timeout_s`` for them to go, then SIGKILL. Gone includes a zombie: our own children
    are reaped by their Popen afterwards, the others by init."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
