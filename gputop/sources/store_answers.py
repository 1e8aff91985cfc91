"""A Prometheus-compatible store's answers read: each instant query's JSON decoded (orjson) and its series
joined into samples, answer by answer, with what is kept between refreshes (the slow metrics' last values,
the InfiniBand ports' last rates).

Neither I/O nor aiohttp: the source runs it in a process of its own (gputop.sources.digest_worker), where
seconds of decoding at 80,000 GPUs do not hold the interpreter the screen is drawn by, or on a thread of
the source's when that process cannot be started.
"""

from __future__ import annotations

import operator
import zlib
from collections.abc import Iterator
from typing import Any, Final, NamedTuple

import msgspec
import orjson

from gputop.core.dcgm_join import MAX_LABELS, DcgmJoiner
from gputop.core.models import GpuSample, IbPort, NodeSample, Reachability, XidEvent
from gputop.core.node_exporter_ib import IB_METRICS, ib_ports

MAX_RESPONSE_BYTES: Final = 256 * 1024 * 1024  # 80,000 GPUs x a dozen metrics, with room
# Content-Encoding -> zlib's wbits: gzip's header, or zlib's (HTTP's "deflate")
_WBITS: Final = {"gzip": 31, "x-gzip": 31, "deflate": 15}


class Bare(NamedTuple):
    """A node's sample as the decoding worker sends it, without its facts and IB ports (defined here, not
    in the worker's own module, which runs as __main__). A NamedTuple, as a tuple pickles: a frozen
    dataclass's pickling asks `dataclasses.fields` of each of the 10,000 nodes a refresh, twice the
    time of the whole pickling."""

    name: str
    reachability: Reachability
    sampled_at_s: float | None
    gpus: tuple[GpuSample, ...]
    xid_events: tuple[XidEvent, ...]
    not_exported: frozenset[str]


class StoreError(Exception):
    """The store could not be asked or did not answer as a Prometheus API does (safe to show)."""


def inflate(body: bytes, encoding: str, what: str) -> bytes:
    """An answer as its Content-Encoding gave it, inflated, and never past MAX_RESPONSE_BYTES: the source
    reads answers compressed (a tenth of the bytes through gputop's event loop and its pipe to the
    worker) and they are inflated where they are decoded."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    wbits = _WBITS.get(encoding)
    if wbits is None:
        raise StoreError(f"{what}: the answer is encoded as {encoding[:40]!r}, which gputop does not read")
    inflater = zlib.decompressobj(wbits)
    try:
        inflated = inflater.decompress(body, MAX_RESPONSE_BYTES + 1)
    except zlib.error:
        raise StoreError(f"{what}: the {encoding} answer does not inflate") from None
    if len(inflated) > MAX_RESPONSE_BYTES or inflater.unconsumed_tail:
        raise StoreError(f"{what}: the answer is larger than {MAX_RESPONSE_BYTES >> 20} MiB")
    return inflated


def parse_vector(body: bytes, metric: str) -> tuple[list[tuple[dict[str, str], float]], str | None]:
    """An instant query's answer: (labels, value) per series, and a note on a partial answer."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise StoreError(f"{metric}: the answer is not JSON") from None
    if not isinstance(document, dict):
        raise StoreError(f"{metric}: the answer is not a Prometheus API document")
    if document.get("status") != "success":
        kind = str(document.get("errorType", "error"))[:40]
        words = str(document.get("error", ""))[:200]
        raise StoreError(f"{metric}: the store answered {kind}: {words}")
    data = document.get("data")
    if (
        not isinstance(data, dict)
        or data.get("resultType") != "vector"
        or not isinstance(data.get("result"), list)
    ):
        raise StoreError(f"{metric}: the answer holds no instant vector")
    result = data["result"]
    try:
        # the labels as decoded, no copy (a refresh holds about a million); values checked where read
        found = [
            (labels, float(entry["value"][1]))
            for entry in result
            if type(labels := entry["metric"]) is dict and len(labels) <= MAX_LABELS
        ]
    except (TypeError, ValueError, KeyError, IndexError):
        found = _one_by_one(result)
    return found, _partial(metric, document.get("warnings"))


class _Series(msgspec.Struct):
    metric: msgspec.Raw  # the labels' JSON object, undecoded: the joiner looks its text up
    value: tuple[float, str]


class _Vector(msgspec.Struct):
    resultType: str
    result: list[_Series]


class _Answer(msgspec.Struct):
    status: str
    data: _Vector
    warnings: tuple[str, ...] = ()


# An instant query's answer of the usual shape, checked whole by msgspec as it decodes (a series whose
# labels or value do not fit fails the answer, which parse_vector then reads leniently). Neither a
# dict per series nor one of labels is made: decoding this way takes a fifth of orjson's time here.
_ANSWER: Final = msgspec.json.Decoder(_Answer)


class _NumberSeries(msgspec.Struct):
    metric: msgspec.Raw
    value: tuple[float, float]  # the value's text read as a number by msgspec (not strict)


class _NumberVector(msgspec.Struct):
    resultType: str
    result: list[_NumberSeries]


class _NumberAnswer(msgspec.Struct):
    status: str
    data: _NumberVector
    warnings: tuple[str, ...] = ()


# The same answer with each value read as a number as it is decoded. Not strict, msgspec reads a number
# from text; it refuses "+Inf" (Prometheus's spelling of infinity) and anything but a plain number, and
# such an answer is read as text instead (read_vector).
_NUMBER_ANSWER: Final = msgspec.json.Decoder(_NumberAnswer, strict=False)
_LABELS_TEXT: Final = operator.attrgetter("metric")
_VALUE: Final = operator.attrgetter("value")
_SECOND: Final = operator.itemgetter(1)
_SAMPLE: Final = operator.attrgetter("sample")


def read_columns(body: bytes) -> tuple[list[bytes], list[float], tuple[str, ...]] | None:
    """A successful instant vector as two columns, each series' labels' JSON text and its value, and
    its warnings; None for any other answer, or one with a value that is not a plain number (read_vector
    reads it). The columns are made by loops in C."""
    decoded = _vector_of(_NUMBER_ANSWER, body)
    if decoded is None:
        return None
    result, warnings = decoded
    return list(map(bytes, map(_LABELS_TEXT, result))), list(map(_SECOND, map(_VALUE, result))), warnings


def read_vector(body: bytes) -> tuple[list[tuple[bytes, str]], tuple[str, ...]] | None:
    """A successful instant vector's series as (labels' JSON text, value's text), and its warnings; None
    for any other answer (an error, another result type, a damaged series), which parse_vector reads."""
    decoded = _vector_of(_ANSWER, body)
    if decoded is None:
        return None
    result, warnings = decoded
    return [(bytes(series.metric), series.value[1]) for series in result], warnings


def _vector_of(
    decoder: msgspec.json.Decoder[_Answer] | msgspec.json.Decoder[_NumberAnswer], body: bytes
) -> tuple[list[Any], tuple[str, ...]] | None:
    """An answer's series (the decoder's _Series or _NumberSeries) and warnings, where it decodes as a
    successful instant vector."""
    try:
        answer = decoder.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    if answer.status != "success" or answer.data.resultType != "vector":
        return None
    return answer.data.result, answer.warnings


def _partial(metric: str, warnings: object) -> str | None:
    return (
        f"{metric}: partial answer ({str(warnings[0])[:120]})"
        if isinstance(warnings, list | tuple) and warnings
        else None
    )


def _one_by_one(result: list[object]) -> list[tuple[dict[str, str], float]]:
    """The answer's series one at a time: an entry that is not a series is left out (a damaged answer)."""
    found = []
    for entry in result:
        try:
            labels = entry["metric"]  # type: ignore[index]
            if type(labels) is dict and len(labels) <= MAX_LABELS:
                found.append((labels, float(entry["value"][1])))  # type: ignore[index]
        except (TypeError, ValueError, KeyError, IndexError):
            continue
    return found


class Digest:
    """One refresh's answers, added as each arrives (`begin`, `add` or `failed` per query, `finish`), and
    what stays between refreshes. Each answer is joined as soon as it is decoded and let go before the
    next: at 80,000 GPUs one answer is some 80,000 label dicts, all of them together several hundred
    megabytes."""

    def __init__(self, host_label: str | None, store: str) -> None:
        self.host_label = host_label
        self.store = store  # as messages name it (scheme, host, port)
        self.joiner = DcgmJoiner(host_label)
        # the ports' answers kept between refreshes, as the joiner keeps the slow metrics: a refresh that
        # asks only for the states keeps the last rates
        self._ib_answers: dict[str, list[tuple[dict[str, str], float]]] = {}
        self.ib: dict[str, tuple[IbPort, ...]] = {}  # by host, as of the last refresh
        self._notes: list[str] = []
        self._answered = 0

    def begin(self) -> None:
        self.joiner.begin()
        self._notes = []
        self._answered = 0

    def add(self, metric: str, body: bytes, encoding: str = "") -> None:
        """One query's answer, as its Content-Encoding gave it (a StoreError in it becomes a note: the
        other answers still read)."""
        try:
            body = inflate(body, encoding, metric)
            columns = as_text = None
            if metric not in IB_METRICS:
                columns = read_columns(body)
                if columns is None:
                    as_text = read_vector(body)
            if columns is not None:
                raws, values, warnings = columns
                note = _partial(metric, warnings)
            elif as_text is not None:
                series, warnings = as_text
                note = _partial(metric, warnings)
            else:
                found, note = parse_vector(body, metric)
        except StoreError as err:
            self._notes.append(str(err))
            return
        del body
        self._answered += 1
        if note:
            self._notes.append(note)
        if columns is not None:
            self.joiner.add_columns(metric, raws, values)
        elif as_text is not None:
            self.joiner.add_raw(metric, series)
        elif metric in IB_METRICS:
            self._ib_answers[metric] = found
        else:
            self.joiner.add(metric, found)

    def failed(self, why: str) -> None:
        """A query that got no answer (said in the refresh's notes)."""
        self._notes.append(why)

    def finish(self) -> tuple[list[NodeSample], tuple[str, ...]]:
        """The nodes as the store's hosts name them, and the notes on what could not be read; StoreError
        when no query answered at all."""
        nodes, notes = self.finish_lazily()
        return list(nodes), notes

    def finish_lazily(self) -> tuple[Iterator[NodeSample], tuple[str, ...]]:
        """As `finish`, the nodes made as they are taken (before the next `begin`); `ib` is ready."""
        if not self._answered:
            why = self._notes[0] if self._notes else "no reason given"
            raise StoreError(f"{self.store}: no query answered ({why})")
        joined, notes = self.joiner.finish_lazily()
        if any(metric in self._ib_answers for metric in IB_METRICS):
            self.ib = ib_ports(self._ib_answers, self.host_label)
        return map(_SAMPLE, joined), tuple(self._notes) + notes
