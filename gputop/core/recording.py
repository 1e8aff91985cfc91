"""The recording format: what `gputop record` writes and `gputop replay` and `gputop export` read.

A file is a header line, then frames, each whole or not at all:

    GPUTOPREC {"format": "gputop-recording", "version": [1, 0], ...}\\n
    frame: b"GTf1" | payload length (u32 LE) | CRC-32 of the payload (u32 LE) | payload

A payload is zstandard-compressed: a JSON document, a newline, then the raw bytes of the arrays the
document lists (name, dtype, shape). A reader stops at the first frame that is cut short or whose CRC does
not match: a recorder killed mid-write loses that frame alone, and a truncated file replays up to its end.
A reader refuses a file whose major version is newer than its own, and says so.

Each tick is one frame: the time, every answering GPU's five readings quantized as the history store
keeps them (so a reading takes one or two bytes before compression), stored as the difference from the
previous tick (mostly zeros, which compress to almost nothing), with a full frame whenever the set of
GPUs changes and at least every KEYFRAME_EVERY_S; and whatever changed since the last tick: a node's
state or error, a GPU's name, limits and processes, a node's Xid events, InfiniBand ports and slow facts
(topology, NVLink, MIG, counters: gputop.core.fact_codec), Slurm's nodes and jobs, the problems.
Format 1.1 added the processes, ports and facts; a 1.0 reader passes over them.

Pure: bytes in, bytes out; the writer and the reader of files are `gputop.record`.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt
import zstandard

from gputop.core.history_store import METRICS, dequantize, gap_value, quantize

MAGIC: Final = b"GPUTOPREC "
FORMAT: Final = "gputop-recording"
VERSION: Final = (1, 1)  # 1.1: slow facts, InfiniBand ports and processes; a 1.0 reader passes over them
FRAME_MAGIC: Final = b"GTf1"
_FRAME_HEAD: Final = struct.Struct("<4sII")
MAX_FRAME_BYTES: Final = 64 * 1024 * 1024  # a frame larger than this is not one of ours: stop reading
MAX_HEADER_BYTES: Final = 64 * 1024
KEYFRAME_EVERY_S: Final = 60.0
COMPRESSION_LEVEL: Final = 6


class RecordingError(Exception):
    """A file that is not a recording this gputop can read: the message says why, for the user."""


def header(meta: Mapping[str, Any]) -> bytes:
    document = {"format": FORMAT, "version": list(VERSION), **meta}
    return MAGIC + json.dumps(document, sort_keys=True).encode() + b"\n"


def read_header(data: bytes) -> tuple[dict[str, Any], int]:
    """The header's document and where the frames start; RecordingError when it is not ours or newer."""
    if not data.startswith(MAGIC):
        raise RecordingError("not a gputop recording (it does not start with GPUTOPREC)")
    end = data.find(b"\n", 0, MAX_HEADER_BYTES)
    if end < 0:
        raise RecordingError("the recording's header is cut short or too long")
    try:
        document = json.loads(data[len(MAGIC) : end])
    except ValueError as err:
        raise RecordingError(f"the recording's header is not valid JSON: {err}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise RecordingError("not a gputop recording (its header names another format)")
    version = document.get("version")
    if not (isinstance(version, list) and len(version) == 2 and all(isinstance(v, int) for v in version)):
        raise RecordingError("the recording's header has no format version")
    if version[0] > VERSION[0]:
        raise RecordingError(
            f"recorded in format {version[0]}.{version[1]}, newer than this gputop reads "
            f"({VERSION[0]}.{VERSION[1]}): update gputop to replay it"
        )
    return document, end + 1


def frame(document: Mapping[str, Any], arrays: Mapping[str, npt.NDArray[Any]] | None = None) -> bytes:
    arrays = arrays or {}
    listed = [[name, str(a.dtype), list(a.shape)] for name, a in arrays.items()]
    body = json.dumps({**document, "arrays": listed}, separators=(",", ":")).encode() + b"\n"
    body += b"".join(np.ascontiguousarray(a).tobytes() for a in arrays.values())
    payload = zstandard.ZstdCompressor(level=COMPRESSION_LEVEL).compress(body)
    return _FRAME_HEAD.pack(FRAME_MAGIC, len(payload), zlib.crc32(payload)) + payload


class Frame:
    """One frame: its document read at once (times, changes), its arrays only when asked for. A day's
    recording of 1,000 nodes is about a gigabyte compressed and five unpacked: a replay keeps the
    compressed bytes (the file's own pages, mapped) and unpacks the arrays of the frames it shows."""

    __slots__ = ("_listed", "_payload", "document", "offset")

    def __init__(
        self, document: dict[str, Any], offset: int, payload: bytes | memoryview, listed: list[Any]
    ) -> None:
        self.document = document
        self.offset = offset  # where the frame starts in the file
        self._payload = payload
        self._listed = listed

    @property
    def arrays(self) -> dict[str, npt.NDArray[Any]]:
        """The frame's arrays, unpacked now (ValueError: they do not read as the document lists them)."""
        if not self._listed:
            return {}
        try:
            body = zstandard.ZstdDecompressor().decompress(self._payload, max_output_size=MAX_FRAME_BYTES * 4)
        except zstandard.ZstdError as err:
            raise ValueError(f"the frame's arrays cannot be unpacked: {err}") from None
        at = body.index(b"\n") + 1
        arrays: dict[str, npt.NDArray[Any]] = {}
        for name, dtype, shape in self._listed:
            count = int(np.prod(shape)) if shape else 1
            size = count * np.dtype(dtype).itemsize
            if at + size > len(body):
                raise ValueError(f"array {name!r} is cut short")
            arrays[str(name)] = np.frombuffer(body, dtype=dtype, count=count, offset=at).reshape(shape)
            at += size
        return arrays


@dataclass(slots=True)
class Frames:
    """The frames of a recording's bytes, and why reading stopped early (None: it reached the end)."""

    frames: list[Frame] = field(default_factory=list)
    stopped: str | None = None


_ALLOWED_DTYPES: Final = {"uint8", "uint16", "int16", "int32", "int64", "float32", "float64"}
_DOCUMENT_CHUNK: Final = 64 * 1024


def read_frames(data: bytes | memoryview, start: int) -> Frames:
    """Every whole frame from ``start`` on: each one's CRC checked and its document read; its arrays stay
    packed in ``data`` (which the frames keep) until asked for."""
    found = Frames()
    at = start
    view = memoryview(data)
    decompressor = zstandard.ZstdDecompressor()
    while at < len(data):
        if len(data) - at < _FRAME_HEAD.size:
            found.stopped = (
                f"the last {len(data) - at} bytes are a frame cut short (the recorder stopped mid-write)"
            )
            break
        magic, length, crc = _FRAME_HEAD.unpack_from(data, at)
        if magic != FRAME_MAGIC or length > MAX_FRAME_BYTES:
            found.stopped = f"bytes at offset {at} are not a frame: the rest is not read"
            break
        payload = view[at + _FRAME_HEAD.size : at + _FRAME_HEAD.size + length]
        if len(payload) < length:
            found.stopped = "the last frame is cut short (the recorder stopped mid-write)"
            break
        if zlib.crc32(payload) != crc:
            found.stopped = f"the frame at offset {at} is damaged (CRC mismatch): the rest is not read"
            break
        try:
            parsed = _parse(_document_bytes(decompressor, payload), payload, at)
        except (zstandard.ZstdError, ValueError, KeyError, TypeError, RecursionError) as err:
            found.stopped = f"the frame at offset {at} cannot be read ({err}): the rest is not read"
            break
        found.frames.append(parsed)
        at += _FRAME_HEAD.size + length
    return found


def _document_bytes(decompressor: zstandard.ZstdDecompressor, payload: memoryview) -> bytes:
    """The payload's first line (the JSON document), unpacking no more of it than that takes."""
    chunks: list[bytes] = []
    size = 0
    with decompressor.stream_reader(payload) as reader:
        while True:
            chunk = reader.read(_DOCUMENT_CHUNK)
            if not chunk:
                raise ValueError("a frame's document has no end")
            end = chunk.find(b"\n")
            if end >= 0:
                chunks.append(chunk[:end])
                return b"".join(chunks)
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_FRAME_BYTES:
                raise ValueError("a frame's document is too long")


def _parse(document_bytes: bytes, payload: memoryview, offset: int) -> Frame:
    document = json.loads(document_bytes)
    if not isinstance(document, dict):
        raise ValueError("a frame's document is not an object")
    listed = document.pop("arrays", [])
    if not isinstance(listed, list):
        raise ValueError("a frame's array list is not a list")
    for entry in listed:
        if not (isinstance(entry, list) and len(entry) == 3):
            raise ValueError("a frame's array entry is not [name, dtype, shape]")
        name, dtype, shape = entry
        if (
            dtype not in _ALLOWED_DTYPES
            or not isinstance(shape, list)
            or not all(
                isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_FRAME_BYTES for n in shape
            )
        ):
            raise ValueError(f"array {name!r} has an unexpected type")
    return Frame(document, offset, payload, listed)


# -- ticks -------------------------------------------------------------------------------------------------
QUANTIZED_DTYPES: Final = tuple(np.dtype(m.dtype) for m in METRICS)


def quantize_readings(readings: npt.NDArray[np.float32]) -> list[npt.NDArray[Any]]:
    """A (GPUs x 5) array of readings (NaN: none) as the five quantized columns."""
    return [quantize(readings[:, k].copy(), spec) for k, spec in enumerate(METRICS)]


def readings_of(columns: Sequence[npt.NDArray[Any]]) -> npt.NDArray[np.float32]:
    """The five quantized columns back as a (GPUs x 5) float array, NaN for a gap."""
    if not columns or not len(columns[0]):
        return np.empty((0, len(METRICS)), dtype=np.float32)
    return np.stack([dequantize(c, spec) for c, spec in zip(columns, METRICS, strict=True)], axis=1)


class TickEncoder:
    """Each tick's readings as a frame's arrays: a full frame, or the difference from the last one."""

    def __init__(self) -> None:
        self._layout: list[tuple[str, int]] | None = None
        self._last: list[npt.NDArray[Any]] | None = None
        self._key_at_s = -1e18

    def encode(
        self, time_s: float, layout: list[tuple[str, int]], readings: npt.NDArray[np.float32]
    ) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
        columns = quantize_readings(readings)
        key = layout != self._layout or self._last is None or time_s - self._key_at_s >= KEYFRAME_EVERY_S
        document: dict[str, Any] = {"key": key}
        arrays: dict[str, npt.NDArray[Any]] = {}
        if key:
            if layout != self._layout:
                document["layout"] = [[node, gpu] for node, gpu in layout]
            for spec, column in zip(METRICS, columns, strict=True):
                arrays[spec.name] = column
            self._key_at_s = time_s
        else:
            for spec, column, last in zip(METRICS, columns, self._last or columns, strict=True):
                # the difference, wrapped in the column's own type: exact, and mostly zeros
                arrays[spec.name] = (column - last).astype(column.dtype)
        self._layout = list(layout)
        self._last = columns
        return document, arrays


class TickDecoder:
    """The inverse of TickEncoder, frame by frame; a delta before any full frame cannot be read."""

    def __init__(self) -> None:
        self.layout: list[tuple[str, int]] = []
        self._last: list[npt.NDArray[Any]] | None = None

    def skip(self, document: Mapping[str, Any]) -> None:
        """Passes over a tick without its arrays (a seek to a later full frame): its layout is kept, the
        readings are not, so only a full frame can follow."""
        self._take_layout(document)
        self._last = None

    def _take_layout(self, document: Mapping[str, Any]) -> None:
        if "layout" in document:
            layout = document["layout"]
            if not isinstance(layout, list):
                raise ValueError("layout is not a list")
            self.layout = [(str(node), int(gpu)) for node, gpu in layout]

    def decode(
        self, document: Mapping[str, Any], arrays: Mapping[str, npt.NDArray[Any]]
    ) -> npt.NDArray[np.float32] | None:
        """The tick's readings (GPUs in `layout` order x 5), or None for a delta with nothing to add to."""
        self._take_layout(document)
        columns = [np.asarray(arrays[spec.name], dtype=np.dtype(spec.dtype)) for spec in METRICS]
        if any(len(c) != len(self.layout) for c in columns):
            raise ValueError("a tick's arrays do not match its layout")
        if document.get("key"):
            self._last = [c.copy() for c in columns]
        elif self._last is None:
            return None
        else:
            self._last = [
                (last + delta).astype(last.dtype) for last, delta in zip(self._last, columns, strict=True)
            ]
        return readings_of(self._last)


GAPS: Final = tuple(gap_value(m.dtype) for m in METRICS)
