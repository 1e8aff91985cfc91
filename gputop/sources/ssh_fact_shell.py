"""A node's long-lived fact shell: one ``sh`` per connection that runs each round of slow facts
(gputop.sources.fact_round) from its stdin, each command with its own timeout.

A session callback collects stdout and stderr and notes when each command begins (its begin marker), so
the command that hangs is the one timed out, after its own timeout, and the ones before it keep their
outputs. A shell whose round timed out, or that ended, is closed and a new one started for the next
round: a hung command must not hold up the rounds after it. So is one that prints more than a round may
hold (`OUTPUT_MAX_BYTES`): a node that prints without end must not fill gputop's memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncssh

from gputop.core.parsers.common import OUTPUT_MAX_BYTES
from gputop.sources.fact_round import (
    MARKER,
    SHELL_COMMAND,
    StepOutput,
    new_nonce,
    round_script,
    split_round_output,
)

# A marker split across two packets is found when the rest arrives: look back this far.
_MARKER_LOOKBACK_BYTES = 64


@dataclass(frozen=True, slots=True)
class RoundResult:
    steps: tuple[StepOutput, ...]
    timed_out: int | None  # the step cut off by its timeout, or for printing too much, if one was
    # the shell was started for this round and ended without running any of it: the node does not run
    # gputop's scripts (a restricted shell, a forced command)
    refused: bool = False
    overflowed: bool = False  # timed_out is the step that printed more than OUTPUT_MAX_BYTES


class _ShellSession(asyncssh.SSHClientSession[bytes]):
    def __init__(self) -> None:
        self._loop = asyncio.get_running_loop()
        self.ended = False
        self.error: BaseException | None = None
        self._round_over: asyncio.Future[None] | None = None
        self.begin_round(b"", 0)

    def begin_round(self, nonce: bytes, count: int) -> None:
        self.end_round()
        self.step = -1  # the command running now (-1: none has begun)
        self.step_began_s = self._loop.time()
        self._nonce = nonce
        last = count - 1
        # the last command's end markers, on both streams: sshd may forward the two in either order
        self._last_out_end = b"\n%s end %d " % (nonce, last)
        self._last_err_end = b"\n%s end %d\n" % (nonce, last)
        self._round_over = self._loop.create_future() if count else None

    def end_round(self) -> None:
        """Lets go of the round's output: a thousand idle shells holding theirs add up."""
        self.stdout = bytearray()
        self.stderr = bytearray()
        self._scanned = 0
        self._out_end_at = -1  # where the last command's end marker was found on each stream
        self._err_end_at = -1
        self.overflowed: int | None = None  # the step that printed more than a round may hold

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if self.overflowed is not None:
            return
        if len(self.stdout) + len(self.stderr) + len(data) > OUTPUT_MAX_BYTES:
            self.overflowed = max(self.step, 0)
            self._finish()
            return
        if datatype:
            start = max(0, len(self.stderr) - len(self._last_err_end))
            self.stderr += data
            if self._err_end_at < 0:
                self._err_end_at = self.stderr.find(self._last_err_end, start)
        else:
            start = max(0, len(self.stdout) - len(self._last_out_end))
            self.stdout += data
            for found in MARKER.finditer(self.stdout, max(0, self._scanned - _MARKER_LOOKBACK_BYTES)):
                step = int(found[3])
                if found[1] == self._nonce and found[2] == b"begin" and step > self.step:
                    self.step, self.step_began_s = step, self._loop.time()
            self._scanned = len(self.stdout)
            # each packet is searched once (plus a marker's length before it), not the whole output again
            end_at = self.stdout.find(self._last_out_end, start)
            if end_at >= 0:
                self._out_end_at = end_at
        if self._round_complete():
            self._finish()

    def _round_complete(self) -> bool:
        at = self._out_end_at
        return at >= 0 and self.stdout.find(b"\n", at + 1) >= 0 and self._err_end_at >= 0

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        if exc is not None:
            self.error = exc
        self._finish()

    def _finish(self) -> None:
        if self._round_over is not None and not self._round_over.done():
            self._round_over.set_result(None)

    async def wait(self, timeouts_s: Sequence[float]) -> int | None:
        """Until the round is over or the shell ends (None), or a command outruns its timeout (its
        step)."""
        over = self._round_over
        if over is None:
            return None
        started_s = self._loop.time()
        while not over.done():
            step = max(self.step, 0)
            began_s = self.step_began_s if self.step >= 0 else started_s
            remaining_s = began_s + timeouts_s[min(step, len(timeouts_s) - 1)] - self._loop.time()
            if remaining_s <= 0:
                return step
            await asyncio.wait((over,), timeout=remaining_s)
        return self.overflowed


class FactShell:
    """The node's fact shell on ``conn``, started at the first round and again after one ended."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        self._chan: asyncssh.SSHClientChannel[bytes] | None = None
        self._session: _ShellSession | None = None

    async def run(self, argvs: Sequence[Sequence[str]], timeouts_s: Sequence[float]) -> RoundResult:
        """Runs the commands one after another in the shell; each gets ``timeouts_s[i]`` from when it
        begins. Raises what breaks the connection, or keeps the shell from starting."""
        while True:
            current = self._current()
            fresh = current is None
            if current is None:
                self.close()
                current = await self._conn.create_session(_ShellSession, SHELL_COMMAND, encoding=None)
                self._chan, self._session = current
            chan, session = current
            nonce = new_nonce()
            session.begin_round(nonce.encode(), len(argvs))
            try:
                chan.write(round_script(argvs, nonce).encode())
            except BrokenPipeError:  # it ended, and the news has not come yet
                session.connection_lost(None)
            timed_out = await session.wait(timeouts_s)
            if timed_out is not None or session.ended:
                self.close()  # a hung command holds the shell: the next round starts a new one
            if session.error is not None and timed_out is None:
                raise session.error
            steps = split_round_output(bytes(session.stdout), bytes(session.stderr), nonce, len(argvs))
            overflowed = session.overflowed is not None
            session.end_round()
            if session.ended and timed_out is None and not steps[0].started:
                if not fresh:
                    continue  # the shell ended between rounds: once more, in a new one
                return RoundResult(tuple(steps), None, refused=True)
            return RoundResult(tuple(steps), timed_out, overflowed=overflowed)

    def _current(self) -> tuple[asyncssh.SSHClientChannel[bytes], _ShellSession] | None:
        """The running shell's channel and session; None before the first round and after one ended."""
        if self._chan is None or self._session is None or self._session.ended:
            return None
        return self._chan, self._session

    def close(self) -> None:
        if self._chan is not None:
            self._chan.close()
        self._chan = self._session = None
