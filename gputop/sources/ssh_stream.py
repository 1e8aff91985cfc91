"""A long-running remote command whose output is handed over line by line, as it arrives.

A session callback rather than a process and a reader task: asyncssh calls `data_received` straight from
the packet it decrypted, so a chunk costs no task wake-up, no future and no deadline to push back. On a
thousand nodes each printing eight lines a second the bare transport fell from 5.0 % to 3.8 % of a core.
The deadline is checked instead by one timer callback per stream that runs once per timeout. It runs from
the moment the command started (the channel open and the command accepted), not from the request: under load,
opening the channel can take seconds that are not the command's silence.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import asyncssh

# A "line" this long without a newline is not nvidia-smi's CSV: hand it over rather than hold it forever.
MAX_PARTIAL_BYTES = 65536

# What the callback gets: the complete lines of a chunk, and whether the chunk ended on a line boundary.
OnLines = Callable[[list[bytes], bool], None]


class StreamSilent(TimeoutError):
    """Nothing arrived for ``silent_s``; ``printed``: whether the command had printed anything before."""

    def __init__(self, silent_s: float, printed: bool) -> None:
        super().__init__(f"no output for {silent_s:g}s")
        self.silent_s = silent_s
        self.printed = printed


class _LineSession(asyncssh.SSHClientSession[bytes]):
    def __init__(self, on_lines: OnLines) -> None:
        self._on_lines = on_lines
        self._loop = asyncio.get_running_loop()
        self.last_data_s = self._loop.time()
        self.printed = False
        self.partial = b""
        self.exit_status: int | None = None
        self.error: BaseException | None = None  # the connection's, or the callback's
        self.ended = asyncio.Event()
        self.silent: StreamSilent | None = None  # set when the stream fell silent for too long
        self._limits_s = (0.0, 0.0)  # (between lines, before the first), set by wait_ended
        self._timer: asyncio.TimerHandle | None = None
        self._chan: asyncssh.SSHClientChannel[bytes] | None = None

    def connection_made(self, chan: asyncssh.SSHClientChannel[bytes]) -> None:
        self._chan = chan

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        # stderr (datatype set) joins stdout: nvidia-smi prints its driver errors there
        self.last_data_s = self._loop.time()
        self.printed = True
        lines = (self.partial + data).split(b"\n") if self.partial else data.split(b"\n")
        self.partial = lines.pop()
        if len(self.partial) > MAX_PARTIAL_BYTES:
            lines.append(self.partial)
            self.partial = b""
        try:
            self._on_lines(lines, not self.partial)
        except Exception as err:  # raised here it would reach asyncssh's packet loop, not the stream's owner
            self.error = err
            if self._chan is not None:
                self._chan.close()
            self.ended.set()

    def exit_status_received(self, status: int) -> None:
        self.exit_status = status

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None and self.error is None:
            self.error = exc
        self.ended.set()

    async def wait_ended(self, timeout_s: float, first_timeout_s: float) -> None:
        """Until the command ends; StreamSilent once nothing has arrived for ``timeout_s``, or before the
        first output, for ``first_timeout_s`` since the command started."""
        self.last_data_s = self._loop.time()  # started now: the channel is open and the command runs
        self._limits_s = (timeout_s, first_timeout_s)
        self._timer = self._loop.call_at(self.last_data_s + first_timeout_s, self._check_silence)
        try:
            await self.ended.wait()
        finally:
            self._timer.cancel()
        if self.silent is not None:
            raise self.silent

    def _check_silence(self) -> None:
        # A timer callback, re-armed for when the stream would next count as silent: a thousand streams
        # cost a few microseconds each per timeout, where a task woken by asyncio.timeout paid for a
        # cancellation and two exceptions.
        limit_s = self._limits_s[0] if self.printed else self._limits_s[1]
        due_s = self.last_data_s + limit_s
        if self._loop.time() >= due_s:
            self.silent = StreamSilent(limit_s, self.printed)
            self.ended.set()
        else:
            self._timer = self._loop.call_at(due_s, self._check_silence)


async def run_line_stream(
    conn: Any, command_line: str, on_lines: OnLines, timeout_s: float, first_timeout_s: float | None = None
) -> int | None:
    """Runs ``command_line`` on ``conn`` until it ends, handing its output (stdout and stderr together) to
    ``on_lines`` as it arrives; the last line without a newline comes with the end. Returns the exit
    status (None when the command was killed or the channel dropped). Raises StreamSilent (a
    TimeoutError) when nothing arrives for ``timeout_s``, or for ``first_timeout_s`` (default: the same)
    from the start to the first output, and what broke the connection or the callback."""
    # Bounded: on a connection that died without a word, opening a channel would wait forever.
    chan, session = await asyncio.wait_for(
        conn.create_session(lambda: _LineSession(on_lines), command_line, encoding=None),
        timeout_s if first_timeout_s is None else first_timeout_s,
    )
    try:
        await session.wait_ended(timeout_s, timeout_s if first_timeout_s is None else first_timeout_s)
    finally:
        chan.close()
    if session.error is not None:
        raise session.error
    if session.partial:
        on_lines([session.partial], True)
    await chan.wait_closed()
    status: int | None = session.exit_status
    return status
