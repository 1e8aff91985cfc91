"""Turns the lines of a streaming `nvidia-smi --query-gpu ... -lms N` into complete per-node GPU sets.

nvidia-smi prints one line per GPU, in index order, every interval. A set is complete when the index
goes back down (the next interval began) or when a line for every expected GPU has arrived; a set is
never half-published, so the map never shows GPUs from two different moments as one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from gputop.core.models import GpuProcess, GpuSample
from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.driver_errors import detect_driver_error
from gputop.core.parsers.escapes import strip_terminal_escapes
from gputop.core.parsers.query_gpu import StreamLineReader

ProcessesByUuid = Mapping[str, tuple[GpuProcess, ...]]

# What nvidia-smi prints, failing the whole query, for a field its driver does not know (an older driver
# asked for remapped_rows.pending, or a site's field list written for another version).
_REJECTED_FIELD = re.compile(r'Field "([^"]+)" is not a valid field to query')

# After this many unreadable lines in a row the stream counts as broken (not one glitch).
GARBAGE_LIMIT = 8


@dataclass
class MetricsAssembler:
    fields: Sequence[str]
    expected_gpus: int | None = None
    complete: tuple[GpuSample, ...] | None = None  # the last complete set
    error: str | None = None  # a reason when the stream is telling us something is broken
    bad_lines: int = 0
    # The node's compute processes by GPU UUID, joined into each sample as its line is read.
    processes: ProcessesByUuid = field(default_factory=dict)
    # The processes `complete` was read with; None when they changed while its lines came in.
    complete_processes: ProcessesByUuid | None = None
    # A field nvidia-smi refused to query ('Field "x" is not a valid field to query.'), once it said so.
    rejected_field: str | None = None
    _pending: list[GpuSample] = field(default_factory=list)
    _pending_processes: ProcessesByUuid | None = None
    _garbage_run: int = 0
    _reader: StreamLineReader = field(init=False)

    def __post_init__(self) -> None:
        self._reader = StreamLineReader(self.fields)

    def feed(self, raw: bytes) -> bool:
        """One line as received (bytes: nodes may print anything). True when a new set is complete."""
        return self.feed_lines((raw,))

    def feed_lines(self, lines: Iterable[bytes]) -> bool:
        """Lines as received, in order; True when a new set completed among them. One call per chunk of
        the stream: this loop runs for 8,000 lines a second on a thousand nodes."""
        published = False
        read = self._reader.read
        expected = self.expected_gpus
        pending = self._pending
        for raw in lines:
            line = raw.decode("utf-8", errors="replace").strip()
            if "\x1b" in line or "\x9b" in line:  # ESC or the 8-bit CSI (one-character tests: 30 ns a line)
                line = strip_terminal_escapes(line).strip()
            if not line:
                continue
            parsed = read(line, self.processes)
            if parsed is None:
                continue
            if isinstance(parsed, ParseFailure):
                self._bad(line)
                continue
            self._garbage_run = 0
            if pending and parsed.index <= pending[-1].index:
                published = self._publish() or published
                pending = self._pending
            if not pending:
                self._pending_processes = self.processes
            pending.append(parsed)
            if expected is not None and len(pending) >= expected:
                published = self._publish() or published
                pending = self._pending
        return published

    def burst_complete(self) -> bool:
        """Whether the lines since the last set make a whole set: as many GPUs as expected, else at least
        as many as the last set had (a node that lost a GPU then publishes one interval later)."""
        if not self._pending:
            return False
        whole = self.expected_gpus if self.expected_gpus is not None else len(self.complete or ())
        return whole > 0 and len(self._pending) >= whole

    def flush(self) -> bool:
        """The stream paused or ended: what has arrived is a set."""
        return self._publish() if self._pending else False

    def _publish(self) -> bool:
        self.complete = tuple(self._pending)
        self.complete_processes = self.processes if self._pending_processes is self.processes else None
        self._pending = []
        self.error = None
        return True

    def _bad(self, line: str) -> None:
        rejected = _REJECTED_FIELD.search(line)
        if rejected is not None:  # not garbage: the node said which field it does not know
            self.rejected_field = rejected.group(1)
            return
        self.bad_lines += 1
        self._garbage_run += 1
        driver = detect_driver_error(line)
        if driver is not None:
            self.error = driver
        elif self._garbage_run >= GARBAGE_LIMIT:
            shown = line[:60] + ("..." if len(line) > 60 else "")
            self.error = f"nvidia-smi prints unreadable output: {shown!r}"
