"""Running a command and reading at most so many bytes of what it prints, here or over SSH.

``process.communicate()`` and asyncssh's ``conn.run()`` keep everything a command prints: a node (or a
broken Slurm client) that prints without end would fill gputop's memory. These read stdout and stderr as
they come, keep up to ``limit_bytes`` of them together, and stop the command when it prints more.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

CHUNK_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class Printed:
    exit_status: int | None  # None: killed by a signal, or stopped for printing too much
    stdout: bytes
    stderr: bytes
    cut: bool  # it printed more than the limit and was stopped


class _Budget:
    def __init__(self, limit_bytes: int) -> None:
        self.left = limit_bytes
        self.cut = False
        self.over = asyncio.Event()

    async def drain(self, read: Any, into: bytearray) -> None:
        while True:
            chunk = await read(CHUNK_BYTES)
            if not chunk:
                return
            if len(chunk) > self.left:
                into += chunk[: self.left]
                self.left = 0
                self.cut = True
                self.over.set()
                return
            into += chunk
            self.left -= len(chunk)


async def _until_done_or_over(budget: _Budget, work: asyncio.Future[Any]) -> None:
    over = asyncio.ensure_future(budget.over.wait())
    try:
        await asyncio.wait((work, over), return_when=asyncio.FIRST_COMPLETED)
    finally:
        over.cancel()


async def _discard(read: Any) -> None:
    while await read(CHUNK_BYTES):
        pass


async def run_local(process: asyncio.subprocess.Process, limit_bytes: int) -> Printed:
    """Reads a started process to its end; kills it when it prints more than ``limit_bytes``."""
    if process.stdout is None or process.stderr is None:
        raise ValueError("run_local needs a process started with stdout and stderr piped")
    budget = _Budget(limit_bytes)
    out, err = bytearray(), bytearray()
    work = asyncio.gather(budget.drain(process.stdout.read, out), budget.drain(process.stderr.read, err))
    await _until_done_or_over(budget, work)
    if budget.cut:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        work.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await work
        # Read the pipes to their end (what the pipe held when the command died): a pipe whose reading
        # was paused for a full buffer never sees its end, and asyncio's wait() waits for both ends.
        await asyncio.gather(_discard(process.stdout.read), _discard(process.stderr.read))
    else:
        await work
    status = await process.wait()
    return Printed(None if budget.cut else status, bytes(out), bytes(err), budget.cut)


async def run_ssh(conn: Any, command: str, limit_bytes: int) -> Printed:
    """Runs ``command`` on ``conn`` (stdin closed); closes the channel when it prints more than
    ``limit_bytes``. Raises what asyncssh raises."""
    process = await conn.create_process(command, encoding=None)
    process.stdin.write_eof()
    budget = _Budget(limit_bytes)
    out, err = bytearray(), bytearray()
    try:
        work = asyncio.gather(budget.drain(process.stdout.read, out), budget.drain(process.stderr.read, err))
        await _until_done_or_over(budget, work)
        if budget.cut:
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await work
            return Printed(None, bytes(out), bytes(err), True)
        await work
        await process.wait_closed()
        status = process.exit_status
    finally:
        process.close()
    return Printed(status if status is None or status >= 0 else None, bytes(out), bytes(err), False)
