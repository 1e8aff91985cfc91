"""Recording files on disk: the writer `gputop record` and `--record` use, and the reader `gputop replay`
and `gputop export` use (the format is gputop.core.recording's).

The writer appends each frame with one write of the whole frame to a file opened O_APPEND, and syncs it
to disk at most every SYNC_EVERY_S: `kill -9` loses nothing already written (the page cache outlives the
process), a power cut at most the last seconds, and a frame cut short is where a reader stops. It never
overwrites: an existing file is rotated aside first. It rotates by size and by age, keeping the newest
`keep` old files as ``FILE.<start time>``.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gputop.core.recording import Frames, RecordingError, header, read_frames, read_header

SYNC_EVERY_S = 2.0
AUDIT_LINE_MAX_BYTES = 64 * 1024


class RecordFile:
    def __init__(
        self,
        path: str | Path,
        meta: Mapping[str, Any],
        *,
        max_bytes: int = 1024**3,
        max_age_s: float = 24 * 3600.0,
        keep: int = 7,
        clock: Any = time.time,
    ) -> None:
        self.path = Path(os.path.expanduser(str(path)))
        self.meta = dict(meta)
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s
        self.keep = keep
        self.clock = clock
        self._fd: int | None = None
        self._opened_at_s = 0.0
        self._size = 0
        self._synced_at_s = 0.0

    def open(self) -> None:
        """Starts a new file (an existing one is rotated aside, never overwritten); OSError if it cannot."""
        if self.path.exists():
            self._rotate_aside()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
        self._fd = fd
        self._opened_at_s = self.clock()
        self._size = 0
        self._write(header({**self.meta, "started_s": self._opened_at_s}))
        os.fsync(fd)
        self._synced_at_s = self._opened_at_s

    def write(self, frame: bytes) -> None:
        if self._fd is None:
            self.open()
        now_s = self.clock()
        if self._size + len(frame) > self.max_bytes or now_s - self._opened_at_s >= self.max_age_s:
            self.close()
            self.open()
        self._write(frame)
        if now_s - self._synced_at_s >= SYNC_EVERY_S:
            os.fsync(self._fd)  # type: ignore[arg-type]
            self._synced_at_s = now_s

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]  # type: ignore[arg-type]
        self._size += len(data)

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None

    def _rotate_aside(self) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(self.path.stat().st_mtime))
        aside = self.path.with_name(f"{self.path.name}.{stamp}")
        number = 1
        while aside.exists():
            aside = self.path.with_name(f"{self.path.name}.{stamp}-{number}")
            number += 1
        os.replace(self.path, aside)
        old = sorted(self.path.parent.glob(f"{self.path.name}.*"), key=lambda p: p.stat().st_mtime)
        for stale in old[: max(0, len(old) - self.keep)]:
            with contextlib.suppress(OSError):
                stale.unlink()


class AuditTail:
    """The audit log's records appended since the recorder started: its actions go into the recording."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(os.path.expanduser(str(path)))
        try:
            self._offset = self.path.stat().st_size
        except OSError:
            self._offset = 0
        self._partial = b""

    def read(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as file:
                file.seek(self._offset)
                data = file.read(16 * AUDIT_LINE_MAX_BYTES)
        except OSError:
            return []
        self._offset += len(data)
        lines = (self._partial + data).split(b"\n")
        self._partial = lines.pop()[:AUDIT_LINE_MAX_BYTES]
        records = []
        for line in lines:
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(record, dict):
                records.append(record)
        return records


@dataclass(frozen=True, slots=True)
class Recording:
    meta: dict[str, Any]
    frames: Frames


def read_recording(path: str | Path) -> Recording:
    """The recording in ``path``; RecordingError (or OSError) saying why it cannot be read."""
    target = Path(os.path.expanduser(str(path)))
    with target.open("rb") as file:
        size = os.fstat(file.fileno()).st_size
        if size == 0:
            raise RecordingError(f"{target} is empty")
        # Mapped, not read: the frames keep their packed arrays as views of the file's pages, which
        # the system pages in as a replay shows them and may drop again (a day is about a gigabyte).
        # The map outlives the file object (it holds its own descriptor) and goes with the frames.
        data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    meta, start = read_header(bytes(data[: min(size, 70_000)]))
    frames = read_frames(memoryview(data), start)
    return Recording(meta, frames)
