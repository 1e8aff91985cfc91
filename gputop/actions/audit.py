"""The audit log: one JSON line per action gputop ran, written and flushed to disk before the outcome is
shown, so an action that happened is never missing from the log (even if gputop dies right after)."""

from __future__ import annotations

import getpass
import json
import os
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def append_audit(
    path: str | Path,
    *,
    cluster: str,
    action: str,
    argv: Sequence[str],
    targets: Sequence[str],
    exit_status: int | None,
    output: str,
    where: str = "local",
    demo: bool = False,
) -> None:
    """Appends one record; raises OSError when it cannot (the caller shows that it could not log)."""
    record = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "time_s": round(time.time(), 3),
        "user": _user(),
        "host": socket.gethostname(),
        "cluster": cluster,
        "action": action,
        "argv": list(argv),
        "targets": list(targets),
        "where": where,  # "local", or the ssh host it ran on
        "exit_status": exit_status,  # None: it did not run to completion (timeout, connection lost)
        "output": output,
        "demo": demo,
    }
    line = json.dumps(record, ensure_ascii=False) + "\n"
    target = Path(os.path.expanduser(str(path)))
    target.parent.mkdir(parents=True, exist_ok=True)
    # O_APPEND: two gputop instances appending never interleave within a line of this size.
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def audit_or_reason(path: str | Path, **record: Any) -> str | None:
    """`append_audit`, for callers that must show the outcome either way: None when the line is on disk,
    else why it is not (to be shown loudly beside the outcome)."""
    try:
        append_audit(path, **record)
    except OSError as err:
        return f"could not write the audit log {path}: {err.strerror or err}"
    return None


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
