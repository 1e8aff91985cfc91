"""The last hour from the store, at start: one range query per reading the history keeps (utilization,
memory used, temperature, power, SM clock), its steps joined into snapshots as a refresh joins an instant
answer, and handed to the poller (`take_history`) so the charts and trends have an hour at once, as the
demo's do.

Bounded: the steps are as many as a budget of values allows (a reading a minute up to 1,000 nodes of 8
GPUs, fewer beyond), and a fleet too large for even a few steps starts without a past and says so.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final

import msgspec
import orjson

from gputop.core.dcgm_fields import HOST_LABELS, PLACE_LABELS
from gputop.core.dcgm_join import HOST_NAME, MAX_LABELS, SAMPLE_TIME, DcgmJoiner, Joined

HISTORY_S: Final = 3600.0
MIN_STEP_S: Final = 60.0
MIN_STEPS: Final = 4
# values read at start, all steps of all readings: about two seconds of CPU here
VALUE_BUDGET: Final = 2_000_000
READINGS: Final = (
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_SM_CLOCK",
)

Post = Callable[[dict[str, str], str], Awaitable[bytes]]


def step_for(gpus: int) -> float | None:
    """The step that keeps the hour within the budget; None: not even MIN_STEPS fit."""
    series = max(1, gpus) * (len(READINGS) - 1)  # a site exports one of the two utilizations
    steps = min(HISTORY_S / MIN_STEP_S, VALUE_BUDGET / series)
    if steps < MIN_STEPS:
        return None
    return max(MIN_STEP_S, HISTORY_S / int(steps))


async def past_hour(
    post: Post, now_s: float, gpus: int, host_label: str | None
) -> tuple[list[tuple[float, Joined]], str]:
    """(time, joined) per step, oldest first, and a line saying what was filled or why not."""
    step_s = step_for(gpus)
    if step_s is None:
        return [], f"no history from the store at start: {gpus} GPUs are more than a few steps of an hour"
    form_base = {"start": f"{now_s - HISTORY_S + step_s:.3f}", "end": f"{now_s:.3f}", "step": f"{step_s:g}"}
    queries = [(metric, f"max by ({','.join(PLACE_LABELS)}) ({metric})") for metric in READINGS]
    past = await _stepped(post, form_base, queries, now_s, host_label)
    return past, f"history from the store: {len(past)} steps of {step_s:g} s"


async def node_steps(
    post: Post, host: str, host_label: str | None, window_s: float, step_s: float, now_s: float
) -> list[tuple[float, Joined]]:
    """One node's readings over the last ``window_s``, a step each ``step_s``, as `past_hour` gives the
    fleet's: (time, joined) per step, oldest first. ``host``: the node's name as the join gives it (the
    short name, lower-case); only its series are asked, and only they are kept. The steps are joined on
    a thread: a day of a node's steps is some 700 joins, which would hold the event loop."""
    if not HOST_NAME.fullmatch(host):
        raise ValueError(f"not a host name: {host!r}")
    form_base = {"start": f"{now_s - window_s + step_s:.3f}", "end": f"{now_s:.3f}", "step": f"{step_s:g}"}
    queries = [
        (metric, f"max by ({','.join(PLACE_LABELS)}) ({of_host(metric, host, host_label)})")
        for metric in READINGS
    ]
    bodies = [(metric, await post({**form_base, "query": query}, metric)) for metric, query in queries]
    # up to the range's end: the chart's newest step is now
    past = await asyncio.to_thread(_join_steps, bodies, now_s + step_s, host_label)
    return [(at_s, Joined({host: joined.nodes[host]})) for at_s, joined in past if host in joined.nodes]


def of_host(metric: str, host: str, host_label: str | None) -> str:
    """``metric``'s series whose host label names ``host`` as `host_of` reads it (any case, spaces before
    it, a domain or a port after it): a selector per label it may be in, joined by `or`. Broad on
    purpose: the join then keeps the series `host_of` gives to ``host`` alone (a series whose `Hostname`
    names another host and whose `instance` names this one is the other host's). A host name (HOST_NAME)
    holds no character that a regular expression or a PromQL string reads."""
    pattern = r"(?i)\\s*" + host + r"([.:].*)?"
    labels = (host_label,) if host_label else HOST_LABELS
    return " or ".join(f'{metric}{{{label}=~"{pattern}"}}' for label in labels)


async def _stepped(
    post: Post,
    form_base: dict[str, str],
    queries: list[tuple[str, str]],
    now_s: float,
    host_label: str | None,
) -> list[tuple[float, Joined]]:
    """Each reading's range answer, its steps joined into snapshots as a refresh joins an instant answer:
    (time, joined) per step before ``now_s``, oldest first. One answer is held at a time."""
    by_step: dict[float, dict[str, list[tuple[bytes, str]]]] = {}
    for metric, query in queries:
        _by_step(by_step, metric, await post({**form_base, "query": query}, metric))
    return _joined(by_step, now_s, host_label)


def _join_steps(
    bodies: list[tuple[str, bytes]], now_s: float, host_label: str | None
) -> list[tuple[float, Joined]]:
    """`_stepped` for answers already read, all held at once (one node's are small) and joined on a
    thread; `_stepped` reads and files one answer at a time (the fleet's hour at start is large)."""
    by_step: dict[float, dict[str, list[tuple[bytes, str]]]] = {}
    for metric, body in bodies:
        _by_step(by_step, metric, body)
    return _joined(by_step, now_s, host_label)


def _by_step(by_step: dict[float, dict[str, list[tuple[bytes, str]]]], metric: str, body: bytes) -> None:
    """One range answer's points, filed by step: each series' labels as their JSON text, one bytes object
    a series shared by its steps (a dict of labels a point was most of the memory the hour took at
    start)."""
    for labels, values in _matrix(body):
        for at_s, text in values:
            answers = by_step.setdefault(at_s, {})
            answers.setdefault(metric, []).append((labels, text))
            if metric == "DCGM_FI_DEV_FB_USED":
                answers.setdefault(SAMPLE_TIME, []).append((labels, repr(at_s)))


def _joined(
    by_step: dict[float, dict[str, list[tuple[bytes, str]]]], now_s: float, host_label: str | None
) -> list[tuple[float, Joined]]:
    past = []
    for at_s in sorted(by_step):
        if at_s >= now_s:
            continue  # the present is the first refresh's
        answers = by_step.pop(at_s)
        joiner = DcgmJoiner(host_label)  # each step on its own, as a refresh with no past
        joiner.begin()
        for metric, entries in answers.items():
            joiner.add_raw(metric, entries)
        past.append((at_s, joiner.finish()))
    return past


class _RangeSeries(msgspec.Struct):
    metric: msgspec.Raw  # the labels' JSON object, undecoded (DcgmJoiner.add_raw)
    values: list[tuple[float, str]]


class _Matrix(msgspec.Struct):
    resultType: str
    result: list[_RangeSeries]


class _RangeAnswer(msgspec.Struct):
    status: str
    data: _Matrix


_RANGE_ANSWER: Final = msgspec.json.Decoder(_RangeAnswer)


def _matrix(body: bytes) -> list[tuple[bytes, list[tuple[float, str]]]]:
    """A range query's series: (labels' JSON text, [(time, value's text)]); [] for an error or anything
    that is not a matrix. An answer of the usual shape is checked and decoded by msgspec, without a dict
    per series; any other is read leniently, series by series."""
    try:
        answer = _RANGE_ANSWER.decode(body)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return _matrix_one_by_one(body)
    if answer.status != "success" or answer.data.resultType != "matrix":
        return []
    return [(bytes(series.metric), series.values) for series in answer.data.result]


def _matrix_one_by_one(body: bytes) -> list[tuple[bytes, list[tuple[float, str]]]]:
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError:
        return []
    data = (
        document.get("data") if isinstance(document, dict) and document.get("status") == "success" else None
    )
    result = data.get("result") if isinstance(data, dict) and data.get("resultType") == "matrix" else None
    if not isinstance(result, list):
        return []
    found = []
    for entry in result:
        if not isinstance(entry, dict):
            continue
        labels, values = entry.get("metric"), entry.get("values")
        if type(labels) is not dict or len(labels) > MAX_LABELS or not isinstance(values, list):
            continue
        points = []
        for point in values:
            try:
                points.append((float(point[0]), str(point[1])))
            except (TypeError, ValueError, IndexError, KeyError):
                continue
        found.append((orjson.dumps(labels), points))
    return found
