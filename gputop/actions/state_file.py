"""gputop's small state files beside the audit log ($XDG_STATE_HOME/gputop): the event history and the
auto-drain policy's state, one JSON document each, per cluster.

A write is atomic: the document goes to a temporary file in the same directory, is synced, and replaces
the old one by rename, so a crash leaves the old file or the new one, never half of either. A file that
cannot be read (not JSON, a newer format, cut short by another program, too large) is said, moved aside
as ``<name>.corrupt-<time>`` so nothing is lost, and started afresh; a missing one is said once and
created at the first save.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gputop.actions.audit import audit_log_path

MAX_STATE_BYTES = 16 * 1024 * 1024  # a state file larger than this is not gputop's: set aside


def state_dir(environ: Mapping[str, str]) -> str:
    """$XDG_STATE_HOME/gputop (an absolute XDG_STATE_HOME, else ~/.local/state/gputop)."""
    return os.path.dirname(audit_log_path(None, environ))


def _safe_name(cluster: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", cluster)[:100] or "cluster"


def history_path(cluster: str, environ: Mapping[str, str], *, demo: bool = False) -> Path:
    prefix = "demo-" if demo else ""
    return Path(
        os.path.expanduser(os.path.join(state_dir(environ), f"{prefix}history-{_safe_name(cluster)}.json"))
    )


def policy_path(
    configured: str | None, cluster: str, environ: Mapping[str, str], *, demo: bool = False
) -> Path:
    if configured is not None:
        return Path(os.path.expanduser(configured))
    prefix = "demo-" if demo else ""
    return Path(
        os.path.expanduser(os.path.join(state_dir(environ), f"{prefix}policy-{_safe_name(cluster)}.json"))
    )


@dataclass(frozen=True, slots=True)
class Loaded:
    document: Any  # None: nothing read (missing or set aside)
    message: str | None  # what to tell the user (a missing file, a corrupt one set aside); None: read fine


def load_json(path: Path, what: str) -> Loaded:
    """The document in ``path``; a missing or unreadable file is said (``what``: "the event history")."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_STATE_BYTES + 1)
    except FileNotFoundError:
        return Loaded(None, f"{what}: {path} does not exist yet, starting afresh")
    except OSError as err:
        return Loaded(
            None, f"{what} {path} cannot be read ({err.strerror or err}): starting afresh, not saved over"
        )
    why: str | None = None
    if len(data) > MAX_STATE_BYTES:
        why = f"larger than {MAX_STATE_BYTES // (1024 * 1024)} MiB"
    else:
        try:
            return Loaded(json.loads(data), None)
        except (ValueError, RecursionError) as err:
            why = f"not valid JSON: {str(err)[:200]}"
    return Loaded(None, set_aside(path, what, why))


def set_aside(path: Path, what: str, why: str) -> str:
    """Moves an unreadable file aside (kept for a person to look at) and says so."""
    aside = path.with_name(f"{path.name}.corrupt-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    try:
        os.replace(path, aside)
    except OSError as err:
        kept = f"could not be moved aside ({err.strerror})"
        return f"{what} {path} is unreadable ({why}) and {kept}: starting afresh"
    return f"{what} {path} was unreadable ({why}): kept as {aside.name}, starting afresh"


def save_json(path: Path, document: Any) -> str | None:
    """Writes ``document`` atomically (mode 0600); None when it is on disk, else why not."""
    data = (json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n").encode()
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
        with contextlib.suppress(OSError):
            directory = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
    except OSError as err:
        with contextlib.suppress(OSError):
            temporary.unlink()
        return f"{path} cannot be written: {err.strerror or err}"
    return None


class HeldLock:
    """An exclusive lock on ``<path>.lock`` for as long as the process lives (or `release`): one policy
    acts on a cluster at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path.with_name(path.name + ".lock")
        self._fd: int | None = None

    def acquire(self) -> str | None:
        """None when held; else who holds it, in words."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as err:
            return f"{self.path} cannot be opened: {err.strerror or err}"
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 200).decode(errors="replace").strip() or "another process"
            os.close(fd)
            return f"the policy already runs for this cluster ({holder}; lock {self.path})"
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}".encode())
        self._fd = fd
        return None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
