"""The audit log: the record before the deed.

Every action gputop takes on a cluster (drain, resume, each MIG step) writes two JSON lines to the audit
log, each written whole and flushed to disk (fsync) before gputop goes on:

1. an **intent** record, before the command starts: who, when, where, the exact argv, the targets. If it
   cannot be written whole (a directory in the way, a read-only mount, a full disk), the command does not
   run, and the dialog says why;
2. an **outcome** record, once the command has ended or been given up on, with the same ``id``:
   ``result`` is ``done`` (exit 0), ``failed`` (it ran and failed, or it never started), or ``unknown``
   (it may have acted: the connection dropped, it timed out, gputop was stopped while it ran); then the
   exit status and what it printed.

After an unknown outcome gputop reads the targets' state again and appends a ``reread`` record with what
Slurm (or the GPU) says now. So a line of intent without an outcome means gputop died while the command
ran (``kill -9``, power loss): its effect is unknown and must be checked; `unfinished` lists such records.

A write is whole or not at all: a short write (a full disk) is cut back to where it began, so the log
never holds half a line from gputop, and the caller hears the error. Lines are appended with O_APPEND,
so two gputop instances never interleave within a line.
"""

from __future__ import annotations

import getpass
import json
import os
import socket
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Result = Literal["done", "failed", "unknown"]

# Below this much free space an intent is refused before anything is written: its outcome must fit too.
MIN_FREE_BYTES = 64 * 1024
OUTPUT_MAX_CHARS = 16_000  # what a command printed, kept in its outcome record
UNFINISHED_READ_BYTES = 256 * 1024  # how much of the log's end `unfinished` reads


def audit_log_path(configured: str | None, environ: Mapping[str, str], *, demo: bool = False) -> str:
    """Where the audit log is: the configured file, else ``$XDG_STATE_HOME/gputop/audit.jsonl`` (an
    absolute XDG_STATE_HOME, as the XDG spec requires; else ``~/.local/state``). The demo's pretend actions
    go to ``demo-audit.jsonl`` beside it, never into the record of real ones."""
    if configured is not None:
        path = configured
    else:
        state = environ.get("XDG_STATE_HOME", "")
        path = os.path.join(state if os.path.isabs(state) else "~/.local/state", "gputop", "audit.jsonl")
    if demo:
        head, tail = os.path.split(path)
        path = os.path.join(head, f"demo-{tail}")
    return path


class AuditError(Exception):
    """The audit log cannot be written: the message says why, in words to show."""


@dataclass(frozen=True, slots=True)
class Intent:
    """An intent on disk: what its outcome record refers to."""

    id: str
    action: str
    argv: tuple[str, ...]
    targets: tuple[str, ...]
    where: str


class AuditLog:
    """One audit log file (``~`` expanded); created with its directory at the first record, mode 0600."""

    def __init__(self, path: str | Path, *, cluster: str, demo: bool = False) -> None:
        self.shown_path = str(path)
        self.path = Path(os.path.expanduser(str(path)))
        self.cluster = cluster
        self.demo = demo

    # -- before acting --------------------------------------------------------------------------------
    def problem(self) -> str | None:
        """Why a record could not be written now (None: it can): for a dialog to say before anything is
        asked of the user. The intent's own write is the check that counts."""
        path = self.path
        if path.is_dir():
            return self._cannot("it is a directory")
        parent = _existing_parent(path)
        if parent is None:
            return self._cannot("none of its parent directories exists")
        if not parent.is_dir():
            return self._cannot(f"{parent} is not a directory")
        target = path if path.exists() else parent
        if not os.access(target, os.W_OK):
            return self._cannot(f"{target} is not writable (permissions or a read-only mount)")
        try:
            stats = os.statvfs(parent)
        except OSError as err:
            return self._cannot(err.strerror or str(err))
        if stats.f_bavail * stats.f_frsize < MIN_FREE_BYTES:
            return self._cannot(f"the disk holding it is full ({stats.f_bavail * stats.f_frsize} bytes free)")
        return None

    def _cannot(self, why: str) -> str:
        return f"the audit log {self.shown_path} cannot be written: {why}"

    # -- records ----------------------------------------------------------------------------------------
    def intent(self, action: str, argv: Sequence[str], targets: Sequence[str], where: str) -> Intent:
        """Writes the intent record; raises `AuditError` when it is not on disk whole (then do not act)."""
        problem = self.problem()
        if problem is not None:
            raise AuditError(problem)
        intent = Intent(uuid.uuid4().hex[:16], action, tuple(argv), tuple(targets), where)
        self._append(
            {
                "phase": "intent",
                "id": intent.id,
                "action": action,
                "argv": list(argv),
                "targets": list(targets),
                "where": where,
            }
        )
        return intent

    def outcome(
        self,
        intent: Intent,
        result: Result,
        exit_status: int | None,
        output: str,
        *,
        why: str | None = None,
    ) -> str | None:
        """Writes the outcome of ``intent``; None when it is on disk, else why not (to show loudly: the
        action happened, or may have, and its record has only the intent)."""
        record: dict[str, Any] = {
            "phase": "outcome",
            "id": intent.id,
            "action": intent.action,
            "argv": list(intent.argv),
            "targets": list(intent.targets),
            "where": intent.where,
            "result": result,
            "exit_status": exit_status,  # None: no exit status (it did not start, timed out, link lost)
            "output": _bounded(output),
        }
        if why is not None:
            record["why"] = why
        return self._try(record)

    def reread(self, intent: Intent, states: dict[str, str], error: str | None = None) -> str | None:
        """After an unknown outcome: what the targets' state is now, as read again."""
        record: dict[str, Any] = {"phase": "reread", "id": intent.id, "action": intent.action}
        record["states"] = states
        if error is not None:
            record["error"] = error
        return self._try(record)

    def decision(self, fields: Mapping[str, Any]) -> None:
        """One decision of the auto-drain policy (acted on or not, and why), or a change to the policy
        itself (switched on, its breaker reset); raises `AuditError` when it is not on disk whole: then
        the decision is not acted on."""
        problem = self.problem()
        if problem is not None:
            raise AuditError(problem)
        self._append({"phase": "decision", **fields})

    def _try(self, record: dict[str, Any]) -> str | None:
        try:
            self._append(record)
        except AuditError as err:
            return str(err)
        return None

    def _append(self, fields: dict[str, Any]) -> None:
        record = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "time_s": round(time.time(), 3),
            "user": _user(),
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "cluster": self.cluster,
            "demo": self.demo,
            **fields,
        }
        data = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8", errors="replace")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as err:
            raise AuditError(self._cannot(err.strerror or str(err))) from None
        try:
            _write_whole(fd, data)
        except OSError as err:
            raise AuditError(self._cannot(err.strerror or str(err))) from None
        finally:
            os.close(fd)


def _write_whole(fd: int, data: bytes) -> None:
    """Writes all of ``data`` and syncs it, or leaves the file as it found it and raises OSError."""
    start = os.fstat(fd).st_size
    written = 0
    try:
        while written < len(data):
            count = os.write(fd, data[written:])
            if count <= 0:
                raise OSError(28, "no space left on device (nothing more was written)")
            written += count
        os.fsync(fd)
    except OSError:
        if written:
            _cut_back(fd, start, written)
        raise


def _cut_back(fd: int, start: int, written: int) -> None:
    # Only where the file ends with our own partial line: another gputop may have appended after it.
    try:
        if os.fstat(fd).st_size == start + written:
            os.ftruncate(fd, start)
            os.fsync(fd)
    except OSError:
        pass  # the half line stays; a reader skips a line that is not JSON


def _existing_parent(path: Path) -> Path | None:
    for parent in path.parents:
        if parent.exists():
            return parent
    return None


def _bounded(output: str) -> str:
    if len(output) <= OUTPUT_MAX_CHARS:
        return output
    return output[:OUTPUT_MAX_CHARS] + f"\n... ({len(output) - OUTPUT_MAX_CHARS} more characters not kept)"


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


def read_records(path: str | Path, tail_bytes: int = UNFINISHED_READ_BYTES) -> Iterator[dict[str, Any]]:
    """The records in the last ``tail_bytes`` of the log (a line cut by that window, or one that is not
    JSON, is skipped)."""
    target = Path(os.path.expanduser(str(path)))
    try:
        with target.open("rb") as file:
            size = file.seek(0, os.SEEK_END)
            file.seek(max(0, size - tail_bytes))
            data = file.read(tail_bytes)
    except OSError:
        return
    lines = data.split(b"\n")
    if size > tail_bytes:
        lines = lines[1:]  # the first line is cut by the window
    for line in lines:
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # a line cut short, or not gputop's
            continue
        if isinstance(record, dict):
            yield record


def unfinished(path: str | Path, *, pid: int | None = None) -> list[dict[str, Any]]:
    """Intent records with no outcome after them (gputop died while the command ran), oldest first;
    ``pid``: only those of that process."""
    open_intents: dict[str, dict[str, Any]] = {}
    for record in read_records(path):
        key = str(record.get("id"))
        if record.get("phase") == "intent":
            open_intents[key] = record
        elif record.get("phase") == "outcome":
            open_intents.pop(key, None)
    found = list(open_intents.values())
    return [r for r in found if pid is None or r.get("pid") == pid]
