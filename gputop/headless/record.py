"""`gputop record FILE`: the same sources and config as the dashboard, no UI, every tick into a recording
(gputop.core.recording): the readings, the changes of node states, Xid events, Slurm's nodes and jobs and
the problems, and the audit log's new records. Runs for days: it rotates FILE by size and age, keeping
the newest old files beside it. SIGTERM, SIGINT or SIGHUP stop it (128 + the signal)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from collections.abc import Sequence

from gputop import __version__
from gputop.actions.audit import audit_log_path
from gputop.cli import add_source_arguments
from gputop.core.record_tick import TickRecorder
from gputop.core.recording import frame
from gputop.core.safe_text import safe_block, safe_line
from gputop.core.summary import ClusterView
from gputop.headless.command import CannotCheck, Target, choose_target
from gputop.headless.views_loop import Stopped, run_views
from gputop.sources.recording_file import AuditTail, RecordFile


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gputop record",
        description="Record the cluster without the UI, for gputop replay and gputop export.",
    )
    parser.add_argument(
        "file", metavar="FILE", help="the recording to write (an existing one is rotated aside)"
    )
    add_source_arguments(parser)
    parser.add_argument(
        "--max-mb", type=float, default=1024.0, metavar="MB", help="rotate past this size (1024)"
    )
    parser.add_argument(
        "--max-hours", type=float, default=24.0, metavar="H", help="rotate past this age (24)"
    )
    parser.add_argument("--keep", type=int, default=7, metavar="N", help="old files to keep beside FILE (7)")
    parser.set_defaults(timeout=None)
    return parser


class Recorder:
    """A view in, a frame written: what `gputop record` and the dashboard's --record share."""

    def __init__(
        self, path: str, target_name: str, interval_s: float, *, audit_log: str, **limits: float
    ) -> None:
        meta = {"cluster": target_name, "interval_s": interval_s, "gputop": __version__}
        self.file = RecordFile(
            path,
            meta,
            max_bytes=int(limits.get("max_bytes", 1024**3)),
            max_age_s=limits.get("max_age_s", 24 * 3600.0),
            keep=int(limits.get("keep", 7)),
        )
        self.ticks = TickRecorder()
        self.audit = AuditTail(audit_log)
        self.frames = 0

    def open(self) -> None:
        self.file.open()

    def record(self, view: ClusterView) -> None:
        document, arrays = self.ticks.frame(view, self.audit.read())
        self.file.write(frame(document, arrays))
        self.frames += 1

    def close(self) -> None:
        self.file.close()


class BackgroundRecorder:
    """The dashboard's --record: each view is recorded on a thread of its own, so the frame's work (at
    1,000 nodes, the first frame's slow facts take seconds) never holds up a key press. Views are
    immutable, and a frame holds the changes since the last one recorded, so a view that comes while
    the thread is busy replaces the one waiting: the recording skips a tick rather than falling behind."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.file = recorder.file
        self._lock = threading.Condition()
        self._waiting: ClusterView | None = None
        self._closing = False
        self.error: OSError | None = None
        self._thread = threading.Thread(target=self._run, name="gputop-record", daemon=True)
        self._thread.start()

    def submit(self, view: ClusterView) -> None:
        with self._lock:
            self._waiting = view
            self._lock.notify()

    def _run(self) -> None:
        while True:
            with self._lock:
                while self._waiting is None and not self._closing:
                    self._lock.wait()
                view, self._waiting = self._waiting, None
                if view is None:
                    return
            try:
                self.recorder.record(view)
            except OSError as err:
                self.error = err
                return

    def close(self, timeout_s: float = 10.0) -> None:
        """Records the view still waiting, then closes the file."""
        with self._lock:
            self._closing = True
            self._lock.notify()
        self._thread.join(timeout_s)
        self.recorder.close()


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        target = choose_target(args)
    except CannotCheck as err:
        print(safe_block(str(err)), file=sys.stderr)
        return 2
    if args.max_mb <= 0 or args.max_hours <= 0 or args.keep < 0:
        print(
            "gputop record: --max-mb and --max-hours must be more than 0, --keep at least 0", file=sys.stderr
        )
        return 2
    recorder = Recorder(
        args.file,
        target.cluster_name,
        target.config.poll.interval_s,
        audit_log=audit_log_path(target.config.audit_log, os.environ, demo=target.is_demo),
        max_bytes=args.max_mb * 1024 * 1024,
        max_age_s=args.max_hours * 3600.0,
        keep=args.keep,
    )
    try:
        recorder.open()
    except OSError as err:
        print(safe_line(f"gputop record: {args.file}: {err.strerror or err}"), file=sys.stderr)
        return 2
    return asyncio.run(_record(target, recorder))


async def _record(target: Target, recorder: Recorder) -> int:
    started = time.monotonic()
    print(safe_line(f"recording {target.cluster_name} to {recorder.file.path}"), flush=True)

    async def write(view: ClusterView) -> None:
        recorder.record(view)

    try:
        await run_views(target, write)
    except Stopped as stopped:
        print(
            safe_line(f"stopped by {stopped}: {recorder.frames} ticks in {time.monotonic() - started:.0f} s"),
            flush=True,
        )
        return 128 + stopped.signum
    except OSError as err:
        print(
            safe_line(f"gputop record: cannot write {recorder.file.path}: {err.strerror or err}"),
            file=sys.stderr,
        )
        return 2
    finally:
        recorder.close()
    return 0
