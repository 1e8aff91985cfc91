"""Kernel log lines ``NVRM: Xid (PCI:0000:3b:00): 79, ...`` from journalctl, dmesg or /dev/kmsg.

The prefix decides what a line's time means, and `XidLog.time_base` says which it was:

* ``2024-05-01T10:11:12+0000 host kernel: ...`` (journalctl -o short-iso, what gputop runs),
  ``[Wed May  1 10:11:12 2024] ...`` (dmesg -T): EPOCH, seconds since 1970. A time without a zone is
  read as UTC, with a note.
* ``[12345.678901] ...`` (dmesg), ``<4>[...]`` and ``4,1234,12345678901,-;...`` (/dev/kmsg): BOOT,
  seconds since the node booted; `XidLog.since_boot_to_epoch` turns them into epoch seconds once the
  boot time is known (the parser has no clock to ask).
* ``Jul 01 22:55:07 host kernel: ...`` (syslog, journalctl's default): no year, so EPOCH only when the
  caller passes one; otherwise NONE.
* no prefix at all: NONE, and `time_s` is 0.0 (XidEvent has no "unknown" time; 0.0 compares equal,
  where NaN would not).

The PCI address stays as the kernel prints it (``0000:3b:00``) and `gpu_index` is None: `bus_key` makes
it comparable with nvidia-smi's ``00000000:3B:00.0`` so `XidLog.with_gpu_indices` can fill the index in.
The message keeps everything after the code (``pid=..., name=...`` in newer drivers), as printed.

A GPU that fell off the bus is not always logged with an Xid. The driver's own message, "The NVIDIA GPU
0000:5d:00.0 (PCI ID: ...) installed in this system has fallen off the bus and is not responding to
commands", comes over up to three lines (dmesg continuation lines, or separate syslog records), and
"GPU 0000:5d:00.0: GPU has fallen off the bus." follows an Xid 79 or stands alone. Either counts as an
Xid 79 on that bus (`NO_XID_NOTE` in its message), unless an Xid 79 on the same bus is logged within
`SAME_EVENT_S` of it.
"""

from __future__ import annotations

import calendar
import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Final, NamedTuple

from gputop.core.models import XidEvent
from gputop.core.parsers.common import ParserInfo

KIND: Final = "xid"


class TimeBase(StrEnum):
    EPOCH = "epoch"  # seconds since 1970
    BOOT = "boot"  # seconds since the node booted
    NONE = "none"  # the lines carried no usable time; time_s is 0.0


_MONTHS: Final = {
    name: number
    for number, name in enumerate(
        ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"), 1
    )
}
_ISO_PREFIX: Final = re.compile(
    r"^(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?)(Z|[+-]\d{2}:?\d{2})?\s+(.*)$"
)
_DMESG_PREFIX: Final = re.compile(r"^(?:<\d+>)?\[\s*(\d+(?:\.\d+)?)\]\s?(.*)$")
_DMESG_T_PREFIX: Final = re.compile(r"^\[\w{3} (\w{3})\s+(\d{1,2}) (\d{2}):(\d{2}):(\d{2}) (\d{4})\]\s?(.*)$")
_KMSG_PREFIX: Final = re.compile(r"^\d+,\d+,(\d+),[^;]*;(.*)$")
_SYSLOG_PREFIX: Final = re.compile(r"^(\w{3})\s+(\d{1,2}) (\d{2}):(\d{2}):(\d{2})\s+(.*)$")

_XID: Final = re.compile(r"NVRM: Xid \(([^)]*)\):\s*(\d+)\s*,?\s*(.*?)\s*$")
_BUS: Final = re.compile(r"(?:PCI:)?([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-9a-fA-F])?)")
_GPU_AT: Final = re.compile(r"NVRM: GPU at PCI:([0-9a-fA-F:.]+):\s+(GPU-\S+)")
# "NVRM: The NVIDIA GPU 0000:5d:00.0" (the message goes on, on this line or the next two)
_BUS_ID: Final = r"([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-9a-fA-F])?)"
_THE_GPU: Final = re.compile(r"NVRM: The NVIDIA GPU " + _BUS_ID)
# "NVRM: GPU 0000:5d:00.0: GPU has fallen off the bus."
_GPU_FELL: Final = re.compile(r"NVRM: GPU " + _BUS_ID + r": GPU has fallen off the bus")
_FALLEN: Final = "fallen off the bus"
FALLEN_OFF_CODE: Final = 79  # what a fallen-off-the-bus message without an Xid counts as
NO_XID_NOTE: Final = "GPU has fallen off the bus (logged without an Xid number)"
SAME_EVENT_S: Final = 10.0  # an Xid 79 this close on the same bus is the same event
_CONTINUATION_LINES: Final = 2  # the driver's message takes at most two more lines
_BUS_PARTS: Final = re.compile(
    r"^(?:PCI:)?(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})(?:\.[0-9a-fA-F])?$"
)


def bus_key(bus_id: str) -> str | None:
    """A PCI address as kernel and nvidia-smi both can be matched on: ``0000:3b:00`` from
    ``PCI:0000:3b:00``, ``00000000:3B:00.0`` or ``0000:3B:00.0``; None when it is not an address."""
    match = _BUS_PARTS.match(bus_id.strip())
    if match is None:
        return None
    domain, bus, device = match.groups()
    return f"{int(domain or '0', 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}"


@dataclass(frozen=True, slots=True)
class XidLog:
    events: tuple[XidEvent, ...]
    time_base: TimeBase = TimeBase.EPOCH
    # bus id as the kernel prints it -> GPU UUID, from "NVRM: GPU at PCI:...: GPU-..." lines
    gpu_uuids: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def since_boot_to_epoch(self, boot_time_s: float) -> XidLog:
        """Boot-relative times made absolute; a log in any other time base comes back unchanged."""
        if self.time_base is not TimeBase.BOOT:
            return self
        events = tuple(dataclasses.replace(e, time_s=boot_time_s + e.time_s) for e in self.events)
        return dataclasses.replace(self, events=events, time_base=TimeBase.EPOCH)

    def with_gpu_indices(self, index_by_bus: Mapping[str, int]) -> XidLog:
        """Each event's gpu_index from a map of PCI address (any spelling `bus_key` reads) -> index."""
        by_key = {bus_key(bus): index for bus, index in index_by_bus.items()}
        by_key.pop(None, None)
        events = tuple(
            dataclasses.replace(e, gpu_index=by_key.get(bus_key(e.pci_bus_id) if e.pci_bus_id else None))
            for e in self.events
        )
        return dataclasses.replace(self, events=events)


def _epoch(year: int, month: int, day: int, hour: int, minute: int, second: int) -> float:
    return float(calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)))


def _iso_time(stamp: str, zone: str | None) -> float:
    text = stamp.replace(",", ".").replace(" ", "T")
    if zone == "Z":
        zone = "+00:00"
    elif zone and ":" not in zone:
        zone = f"{zone[:3]}:{zone[3:]}"
    moment = datetime.fromisoformat(text + (zone or "+00:00"))
    return moment.timestamp()  # an aware datetime: no clock and no local zone involved


class _Line:
    """A log line with its time prefix taken off."""

    __slots__ = ("base", "rest", "time_s")

    def __init__(self, time_s: float, base: TimeBase, rest: str) -> None:
        self.time_s, self.base, self.rest = time_s, base, rest


def _split_prefix(line: str, year: int | None, notes: set[str]) -> _Line:
    iso = _ISO_PREFIX.match(line)
    if iso is not None:
        try:
            time_s = _iso_time(iso.group(1), iso.group(2))
        except ValueError:
            notes.add(f"unreadable time {iso.group(1)!r}")
            return _Line(0.0, TimeBase.NONE, iso.group(3))
        if iso.group(2) is None:
            notes.add("times without a zone read as UTC")
        return _Line(time_s, TimeBase.EPOCH, iso.group(3))
    dmesg = _DMESG_PREFIX.match(line)
    if dmesg is not None:
        return _Line(float(dmesg.group(1)), TimeBase.BOOT, dmesg.group(2))
    kmsg = _KMSG_PREFIX.match(line)
    if kmsg is not None:
        return _Line(int(kmsg.group(1)) / 1_000_000, TimeBase.BOOT, kmsg.group(2))
    dated = _DMESG_T_PREFIX.match(line)
    if dated is not None and dated.group(1) in _MONTHS:
        month, day, hour, minute, second, year_text, rest = dated.groups()
        notes.add("times without a zone read as UTC")
        stamp = (int(year_text), _MONTHS[month], int(day), int(hour), int(minute), int(second))
        return _Line(_epoch(*stamp), TimeBase.EPOCH, rest)
    syslog = _SYSLOG_PREFIX.match(line)
    if syslog is not None and syslog.group(1) in _MONTHS:
        month, day, hour, minute, second, rest = syslog.groups()
        if year is None:
            notes.add("syslog times carry no year: times not kept (pass the year)")
            return _Line(0.0, TimeBase.NONE, rest)
        notes.add("times without a zone read as UTC")
        stamp = (year, _MONTHS[month], int(day), int(hour), int(minute), int(second))
        return _Line(_epoch(*stamp), TimeBase.EPOCH, rest)
    return _Line(0.0, TimeBase.NONE, line)


def parse_xid(text: str, year: int | None = None) -> XidLog:
    """Every Xid line in a kernel log; other lines are ignored. `year` dates syslog-style lines."""
    notes: list[str] = []
    time_notes: set[str] = set()
    events: list[XidEvent] = []
    bases: list[TimeBase] = []
    uuids: dict[str, str] = {}
    fell: list[_Fell] = []  # off the bus without an Xid, kept unless an Xid 79 matches
    waiting: _Waiting | None = None  # "The NVIDIA GPU <bus>", awaiting "fallen off the bus"
    for number, raw in enumerate(text.splitlines(), 1):
        if "NVRM: " not in raw:
            continue  # journalctl's "-- No entries --", elisions, other kernel lines
        gpu_at = _GPU_AT.search(raw)
        if gpu_at is not None:
            uuids[gpu_at.group(1)] = gpu_at.group(2)
            continue
        if "NVRM: Xid" not in raw:
            found = _off_the_bus(raw, number, year, time_notes, waiting)
            if isinstance(found, _Fell):
                fell.append(found)
                waiting = None
            elif isinstance(found, _Waiting):
                waiting = found
            elif waiting is not None and number - waiting.number >= _CONTINUATION_LINES:
                waiting = None
            continue
        line = _split_prefix(raw.strip(), year, time_notes)
        xid = _XID.search(line.rest)
        if xid is None:
            notes.append(f"line {number}: Xid line not understood: {raw.strip()[:120]!r}")
            continue
        bus = _BUS.search(xid.group(1))
        events.append(
            XidEvent(
                time_s=line.time_s,
                code=int(xid.group(2)),
                pci_bus_id=bus.group(1) if bus else None,
                gpu_index=None,
                message=xid.group(3),
            )
        )
        bases.append(line.base)
    for event, base in fell:
        if not _logged_with_an_xid(event, events):
            events.append(event)
            bases.append(base)
    events.sort(key=lambda e: e.time_s)
    time_base = bases[0] if bases else TimeBase.EPOCH
    if any(base is not time_base for base in bases):
        notes.append(f"lines mix time formats ({', '.join(sorted(set(bases)))}); times read as {time_base}")
    return XidLog(tuple(events), time_base, uuids, tuple(notes) + tuple(sorted(time_notes)))


class _Waiting(NamedTuple):
    line: _Line
    bus: str
    number: int


class _Fell(NamedTuple):
    event: XidEvent
    base: TimeBase


def _off_the_bus(
    raw: str, number: int, year: int | None, time_notes: set[str], waiting: _Waiting | None
) -> _Waiting | _Fell | None:
    """One non-Xid NVRM line: the start of the driver's fallen-off-the-bus message (to wait on), the
    event it completes, or None."""
    the_gpu = _THE_GPU.search(raw)
    if the_gpu is not None:
        line = _split_prefix(raw.strip(), year, time_notes)
        if _FALLEN in raw:  # all on one line
            return _Fell(_fell_event(line, the_gpu.group(1)), line.base)
        return _Waiting(line, the_gpu.group(1), number)
    gpu_fell = _GPU_FELL.search(raw)
    if gpu_fell is not None:
        line = _split_prefix(raw.strip(), year, time_notes)
        return _Fell(_fell_event(line, gpu_fell.group(1)), line.base)
    if waiting is not None and _FALLEN in raw and number - waiting.number <= _CONTINUATION_LINES:
        return _Fell(_fell_event(waiting.line, waiting.bus), waiting.line.base)
    return None


def _fell_event(line: _Line, bus: str) -> XidEvent:
    return XidEvent(
        time_s=line.time_s, code=FALLEN_OFF_CODE, pci_bus_id=bus, gpu_index=None, message=NO_XID_NOTE
    )


def _logged_with_an_xid(event: XidEvent, events: list[XidEvent]) -> bool:
    key = bus_key(event.pci_bus_id or "")
    return any(
        other.code == FALLEN_OFF_CODE
        and bus_key(other.pci_bus_id or "") == key
        and abs(other.time_s - event.time_s) <= SAME_EVENT_S
        for other in events
    )


def _parse(text: str) -> XidLog:
    return parse_xid(text)


PARSERS: Final = {
    KIND: ParserInfo(
        KIND, "kernel log NVRM: Xid lines (journalctl -k -o short-iso, dmesg, /dev/kmsg)", _parse
    )
}
