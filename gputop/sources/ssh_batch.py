"""Runs a batch of slow-fact commands (gputop.sources.fact_batch) in one exec, each with its own timeout.

A session callback collects stdout and stderr and notes when each command begins (its begin marker), so
the command that hangs is the one timed out, after its own timeout, and the ones before it keep their
outputs.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncssh

from gputop.sources.fact_batch import MARKER, StepOutput, batch_command_line, new_nonce, split_batch_output

# A begin marker split across two packets is found when the rest arrives: look back this far.
_MARKER_LOOKBACK_BYTES = 64


@dataclass(frozen=True, slots=True)
class BatchResult:
    steps: tuple[StepOutput, ...]
    timed_out: int | None  # the step cut off by its timeout, if one was
    exit_status: int | None


class _BatchSession(asyncssh.SSHClientSession[bytes]):
    def __init__(self, nonce: str) -> None:
        self._loop = asyncio.get_running_loop()
        self._nonce = nonce.encode()
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.exit_status: int | None = None
        self.error: BaseException | None = None
        self.ended = asyncio.Event()
        self.step = -1  # the command running now (-1: none has begun)
        self.step_began_s = self._loop.time()
        self._scanned = 0

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if datatype:
            self.stderr += data
            return
        self.stdout += data
        for found in MARKER.finditer(self.stdout, max(0, self._scanned - _MARKER_LOOKBACK_BYTES)):
            step = int(found[3])
            if found[1] == self._nonce and found[2] == b"begin" and step > self.step:
                self.step, self.step_began_s = step, self._loop.time()
        self._scanned = len(self.stdout)

    def exit_status_received(self, status: int) -> None:
        self.exit_status = status

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None:
            self.error = exc
        self.ended.set()

    async def wait(self, timeouts_s: Sequence[float]) -> int | None:
        """Until the batch ends (None) or a command outruns its timeout (its step)."""
        started_s = self._loop.time()
        while not self.ended.is_set():
            step = max(self.step, 0)
            began_s = self.step_began_s if self.step >= 0 else started_s
            remaining_s = began_s + timeouts_s[min(step, len(timeouts_s) - 1)] - self._loop.time()
            if remaining_s <= 0:
                return step
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining_s):
                    await self.ended.wait()
        return None


async def run_batch(conn: Any, argvs: Sequence[Sequence[str]], timeouts_s: Sequence[float]) -> BatchResult:
    """Runs the commands one after another in one exec on ``conn``; each gets ``timeouts_s[i]`` from
    when it begins. Raises what breaks the connection."""
    nonce = new_nonce()
    command_line = batch_command_line(argvs, nonce)
    chan, session = await conn.create_session(lambda: _BatchSession(nonce), command_line, encoding=None)
    try:
        # stdin stays open, as asyncssh's run() leaves it: an EOF would cost every batch one more packet
        # (and a send), and none of the facts reads its input
        timed_out = await session.wait(timeouts_s)
    finally:
        chan.close()
    if session.error is not None and timed_out is None:
        raise session.error
    steps = split_batch_output(bytes(session.stdout), bytes(session.stderr), nonce, len(argvs))
    return BatchResult(tuple(steps), timed_out, session.exit_status)
