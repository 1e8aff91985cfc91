"""dcgm-exporter's series, as a Prometheus-compatible store or the exporter itself hands them over, joined
into gputop's samples: one NodeSample per host, one GpuSample per GPU, with the fields the site exports
and None (shown as "not exported") for the ones it does not, never 0.

The names and labels as sites really have them:

- the host: the `Hostname` label (dcgm-exporter 2.x and 3.x), `hostname` (some relabelling setups), else
  the scrape's `instance` without its port; or the label a site's config names. Hosts are matched by
  their short name, lower-case, as Slurm names nodes.
- the GPU: `gpu` (its index); `UUID` or `uuid`; `pci_bus_id`; `modelName`. A MIG instance is a series of
  its own with `GPU_I_PROFILE` and `GPU_I_ID`: the GPU is then in MIG mode, and its utilization is the
  instances' (whole-GPU utilization is not reported under MIG).
- DCGM's "blank" values (no reading: 9223372036854775794 and its neighbours, 2147483632-47, 2^47 for
  floats) are no reading, never a number.

Pure: series in, samples out.
"""

from __future__ import annotations

import operator
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from math import isnan
from typing import Final, NamedTuple

import msgspec

from gputop.core.dcgm_fields import (
    CLOCK_REASONS,
    COUNTERS,
    ECC_DBE,
    FB_FREE,
    FB_RESERVED,
    FB_USED,
    GAUGES,
    GPU_TEMP,
    GPU_UTIL,
    HOST_LABELS,
    MAX_SM_CLOCK,
    MEM_COPY_UTIL,
    METRICS,
    MIG_PROFILE_LABEL,
    NVLINK_COUNTERS,
    POWER_LIMIT,
    POWER_USAGE,
    PROFILE_UTIL,
    ROW_REMAP_FAILURE,
    ROW_REMAP_PENDING,
    SM_CLOCK,
    UUID_LABELS,
    XID,
)
from gputop.core.facts import NO_FACTS, UNREAD, NodeFacts, Reading
from gputop.core.models import GpuSample, NodeSample, Reachability, XidEvent, new_gpu_sample
from gputop.core.parsers.nvlink_errors import GpuLinkErrors, LinkErrors, NvlinkErrors
from gputop.core.parsers.query_gpu import NOT_THROTTLING, THROTTLE_REASON_BITS
from gputop.core.parsers.smi_counters import GpuCounters, SmiCounters

MAX_NODES: Final = 200_000
MAX_GPUS_PER_NODE: Final = 64
MAX_LABELS: Final = 32  # labels of one series: an aggregated answer has a handful


class Series(NamedTuple):
    """One series' latest value: its metric, labels, value and when it was sampled (None: unknown). A
    NamedTuple: a refresh of 80,000 GPUs makes about a million of these."""

    metric: str
    labels: Mapping[str, str]
    value: float
    time_s: float | None = None


# A store's answer for when each GPU was last sampled, with the GPU's identity labels (UUID, model, PCI
# bus): one series per GPU whose value is that time. The other metrics' answers carry only the labels
# that place a series (host, GPU, MIG instance), so they are a fraction of the size.
SAMPLE_TIME: Final = "@time"


@dataclass(slots=True)
class _Gpu:
    index: int
    host: str
    values: dict[str, float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    mig: bool = False
    mig_seen: int = 0  # the joiner's last update with a series that says the GPU is under MIG
    xid: int | None = None  # the last Xid the exporter reports
    seen: int = 0  # the joiner's last update with a sample time for it
    mem_total_mib: float | None = None  # used + free + reserved, as of the last update that read free


class _Place(NamedTuple):
    """Where a series goes, by its labels: its GPU, and whether it is of a MIG instance."""

    gpu: _Gpu | None
    mig: bool


_UNPLACED: Final = _Place(None, False)
_LABELS_OF_RAW: Final = msgspec.json.Decoder(dict[str, str])


@dataclass(frozen=True, slots=True)
class JoinedNode:
    sample: NodeSample
    newest_s: float | None  # the newest sample time of its series (its data age)
    exported: frozenset[str]  # the GpuSample fields some series of this host gave


@dataclass(frozen=True, slots=True)
class Joined:
    nodes: Mapping[str, JoinedNode]
    unplaced: int = 0  # series without a host or a GPU label: counted, left out
    notes: tuple[str, ...] = ()


def is_blank(value: float) -> bool:
    """DCGM's "no value" sentinels (dcgm_structs.h: DCGM_INT32_BLANK, DCGM_INT64_BLANK, DCGM_FP64_BLANK
    and the NOT_FOUND / NOT_SUPPORTED / NOT_PERMISSIONED values just above each)."""
    return (
        value >= 9.2233720368547748e18
        or (2147483632.0 <= value <= 2147483647.0 and value.is_integer())
        or 140737488355328.0 <= value <= 140737488355333.0
    )


def host_of(labels: Mapping[str, str], host_label: str | None = None) -> str | None:
    """The series' host as gputop names nodes: the short name, lower-case; None where the label is not
    a host name (anyone who can push series can write any text there, and it becomes a node's name)."""
    for label in (host_label,) if host_label else HOST_LABELS:
        value = labels.get(label)
        if value and type(value) is str:
            if label == "instance":
                value = value.rsplit(":", 1)[0] if value.count(":") == 1 else value
            host = value.split(".", 1)[0].strip().lower()
            return host if HOST_NAME.fullmatch(host) else None
    return None


HOST_NAME: Final = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
# identity labels as drivers print them; anything else is left out rather than shown
_IDENTITY: Final = {
    "UUID": re.compile(r"(GPU|MIG)-[0-9A-Za-z/-]{1,120}"),
    "uuid": re.compile(r"(GPU|MIG)-[0-9A-Za-z/-]{1,120}"),
    "pci_bus_id": re.compile(r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"),
    "modelName": re.compile(r"[ -~]{1,100}"),  # printable; shown through safe_line like every name
}


def join(series: Iterable[Series], *, host_label: str | None = None) -> Joined:
    """Series one by one (an exporter's /metrics): grouped by metric, each sample time as SAMPLE_TIME."""
    answers: dict[str, list[tuple[Mapping[str, str], float]]] = {}
    for one in series:
        answers.setdefault(one.metric, []).append((one.labels, one.value))
        if one.time_s is not None:
            answers.setdefault(SAMPLE_TIME, []).append((one.labels, one.time_s))
    return join_answers(answers, host_label=host_label)


def join_answers(
    answers: Mapping[str, Sequence[tuple[Mapping[str, str], float]]], *, host_label: str | None = None
) -> Joined:
    """Each metric's (labels, value) pairs, SAMPLE_TIME's values being sample times, as nodes."""
    return DcgmJoiner(host_label).update(answers)


class DcgmJoiner:
    """The join kept between refreshes: each GPU stays, and an update that does not ask for a metric (the
    slow ones, asked every few refreshes) leaves that metric's last values; an update with sample times
    drops the GPUs it has none for (an exporter gone from the store).

    About a million pairs a refresh at 80,000 GPUs: each host's name is worked out once and each GPU is
    found by its labels' text in one look-up."""

    def __init__(self, host_label: str | None = None) -> None:
        self.host_label = host_label
        # the labels that name a series' host, in the order they are tried
        self._host_labels: tuple[str, ...] = (host_label,) if host_label else HOST_LABELS
        self._hosts: dict[str, dict[str, _Gpu]] = {}
        self._host_of_raw: dict[str, str | None] = {}
        # each GPU by the raw text of its series' host label and its gpu label: most series are found
        # with this one look-up (forgotten whenever a GPU is dropped, and filled again as series come)
        self._gpu_at: dict[tuple[object, object], _Gpu] = {}
        # where each series goes, by its labels' JSON text as a store wrote it (`add_raw`); forgotten
        # with `_gpu_at`, and when it holds far more than the GPUs (labels that change every refresh)
        self._known_raw: dict[bytes, _Place] = {}
        # the same, for `add_columns`: the labels' text -> its GPU's values (`_nowhere` for a series
        # that is placed nowhere), and the texts of the series of MIG instances and of those placed nowhere
        self._values_at: dict[bytes, dict[str, float]] = {}
        self._mig_at: dict[bytes, _Gpu] = {}
        self._nowhere_at: set[bytes] = set()
        self._nowhere: dict[str, float] = {}  # written to by the series placed nowhere, never read
        self._every_values: list[dict[str, float]] | None = None  # each GPU's values (None: to be listed)
        self._newest: dict[str, float] = {}
        self._generation = 0
        self._facts: dict[str, NodeFacts] = {}  # by host: kept while no counter is asked
        # the fields a host exports, by which of its samples' columns are all None (`_joined_nodes`)
        self._exported_by_mask: dict[tuple[bool, ...], frozenset[str]] = {}
        # the update under way (begin, add, finish)
        self._timed = False  # the sample times were added: GPUs without one are gone
        self._counted = False  # a counter was added: the nodes' counter facts are worked out again
        self._unplaced = 0
        self._added: set[str] = set()  # the metrics added since `begin`

    def update(self, answers: Mapping[str, Sequence[tuple[Mapping[str, str], float]]]) -> Joined:
        """Every answer at once: `begin`, `add` each metric's pairs, `finish`."""
        self.begin()
        for metric, pairs in answers.items():
            self.add(metric, pairs)
        return self.finish()

    def begin(self) -> None:
        """A new update: then `add` each answer as it is decoded (so that one answer's million label
        dicts at 80,000 GPUs are freed before the next is decoded), then `finish`."""
        self._generation += 1
        if len(self._known_raw) > 4 * len(self._gpu_at) + 4096:
            self._forget_raw()
        self._timed = False
        self._counted = False
        self._unplaced = 0
        self._added = set()

    def add(self, metric: str, pairs: Iterable[tuple[Mapping[str, str], float]]) -> None:
        """One metric's answer, or a part of it (SAMPLE_TIME's values being sample times): the update's
        values replace the last ones; a GPU that no longer has the metric loses it."""
        self._open(metric)
        generation = self._generation
        is_time = metric == SAMPLE_TIME
        plain = not is_time and metric != XID and metric != PROFILE_UTIL
        unplaced = 0
        for labels, value in pairs:
            gpu = self._gpu_of(labels)
            if gpu is None:
                unplaced += 1
                continue
            if labels.get(MIG_PROFILE_LABEL):
                gpu.mig, gpu.mig_seen = True, generation
            if plain and _IDENTITY_KEYS.isdisjoint(labels):
                if value == value and not is_blank(value):
                    gpu.values[metric] = value
                continue
            self._other(gpu, metric, labels, value)
        self._unplaced += unplaced

    def add_raw(self, metric: str, entries: Iterable[tuple[bytes, str | float]]) -> None:
        """As `add`, with each series as the store wrote it: its labels' JSON object as text, undecoded,
        and its value's text. A GPU's labels come back as the very same text in every answer of every
        refresh, so that text is looked up as it is and decoded only the first time it is seen (when
        the GPU's identity labels in it are taken): a refresh at 80,000 GPUs is some 700,000 series, and
        a dict of labels made for each was most of the join's cost. A value that is not a number is
        left out."""
        self._open(metric)
        known = self._known_raw
        generation = self._generation
        is_time, is_xid, is_profile = metric == SAMPLE_TIME, metric == XID, metric == PROFILE_UTIL
        plain = not (is_time or is_xid or is_profile)
        newest = self._newest
        unplaced = 0
        for raw, text in entries:
            # the hot loop: most series are found in `known`
            place = known.get(raw)
            if place is None:
                place = self._learn(raw)
            gpu, mig = place
            if gpu is None:
                unplaced += 1
                continue
            try:
                value = float(text)
            except ValueError:
                continue
            if mig:
                gpu.mig, gpu.mig_seen = True, generation
            if is_time:
                gpu.seen = generation
                if value > newest.get(gpu.host, 0.0):
                    newest[gpu.host] = value
            # a reading, not DCGM's blank or NaN (is_blank, written out: this runs a million times)
            elif (
                value == value
                and value < 9.2233720368547748e18
                and not (2147483632.0 <= value <= 2147483647.0 and value.is_integer())
                and not (140737488355328.0 <= value <= 140737488355333.0)
            ):
                if plain or (is_profile and not mig):  # not an instance's activity (see _take)
                    gpu.values[metric] = value
                elif is_xid and value >= 1.0:
                    gpu.xid = int(value)
        self._unplaced += unplaced

    def add_columns(self, metric: str, raws: Sequence[bytes], values: Sequence[float]) -> None:
        """As `add_raw`, with the answer as two columns: each series' labels' JSON text, and its value
        as a number. A plain reading (all but the sample times, the Xid and the profiling utilization)
        is written into its GPU's values by loops in C: some 700,000 series a refresh at 80,000 GPUs,
        where a loop in Python over each was most of the decoding process's CPU."""
        if metric in (SAMPLE_TIME, XID, PROFILE_UTIL):
            self.add_raw(metric, zip(raws, values, strict=True))
            return
        self._open(metric)
        values_at = self._values_at
        targets: list[dict[str, float] | None] = list(map(values_at.get, raws))
        if None in targets:  # labels not seen before: learnt one by one, then never again
            for at, target in enumerate(targets):
                if target is None:
                    raw = raws[at]
                    place = self._known_raw.get(raw) or self._learn(raw)
                    targets[at] = values_at.get(raw) or self._values_of_place(raw, place)
        nowhere_at = self._nowhere_at
        if nowhere_at:
            self._unplaced += sum(map(nowhere_at.__contains__, raws))
        mig_at = self._mig_at
        if mig_at:
            generation = self._generation
            for gpu in map(mig_at.__getitem__, filter(mig_at.__contains__, raws)):
                gpu.mig, gpu.mig_seen = True, generation
        if any(map(isnan, values)) or (values and max(values) >= _FIRST_BLANK):
            # NaN, DCGM's blanks, or a large value that may be one: no reading, series by series
            kept = [not (value != value or is_blank(value)) for value in values]
            targets, values = list(compress(targets, kept)), list(compress(values, kept))
        deque(map(operator.setitem, targets, repeat(metric), values), maxlen=0)  # type: ignore[arg-type]
        self._nowhere.clear()

    def _values_of_place(self, raw: bytes, place: _Place) -> dict[str, float]:
        gpu = place.gpu
        if gpu is None:
            self._nowhere_at.add(raw)
            target = self._values_at[raw] = self._nowhere
        else:
            target = self._values_at[raw] = gpu.values
            if place.mig:
                self._mig_at[raw] = gpu
        return target

    def _forget_raw(self) -> None:
        self._known_raw = {}
        self._values_at = {}
        self._mig_at = {}
        self._nowhere_at = set()

    def _learn(self, raw: bytes) -> _Place:
        """Where a series whose labels are this JSON text goes, decoded once and kept (`_known_raw`); the
        GPU takes the identity labels the text has (as `_identity`, whatever the metric: the same text
        gives the same labels every time)."""
        try:
            labels = _LABELS_OF_RAW.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):  # labels that are not text: left out
            labels = None
        gpu = self._gpu_of(labels) if labels is not None and len(labels) <= MAX_LABELS else None
        if gpu is None or labels is None:
            place = _UNPLACED
        else:
            _identity(gpu, labels)
            place = _Place(gpu, bool(labels.get(MIG_PROFILE_LABEL)))
        self._known_raw[raw] = place
        return place

    def _open(self, metric: str) -> None:
        """The first part of a metric's answer in an update (a store's answer may come in parts) clears
        that metric's last values."""
        if metric in self._added:
            return
        self._added.add(metric)
        if metric == SAMPLE_TIME:
            self._timed = True
            self._newest = {}
            return
        if metric == XID:
            for kept in self._hosts.values():
                for earlier in kept.values():
                    earlier.xid = None
        # every GPU's last value of the metric dropped, in one loop in C (80,000 GPUs, each metric)
        every = self._every_values
        if every is None:
            every = self._every_values = [
                gpu.values for kept in self._hosts.values() for gpu in kept.values()
            ]
        deque(map(operator.methodcaller("pop", metric, None), every), maxlen=0)
        if metric in COUNTERS or metric in NVLINK_COUNTERS:
            self._counted = True

    def _gpu_of(self, labels: Mapping[str, str]) -> _Gpu | None:
        """The GPU the series of these labels is of: found by its host label's and gpu label's text in
        one look-up, else placed (made where new); None where they name no host or GPU."""
        raw = None
        for label in self._host_labels:
            raw = labels.get(label)
            if raw:
                break
        gpu_text = labels.get("gpu")
        try:
            gpu = self._gpu_at.get((raw, gpu_text))
        except TypeError:  # a label that is not text (a damaged answer): the slow path says no
            gpu = None
        return gpu if gpu is not None else self._place(labels, raw, gpu_text)

    def _other(self, gpu: _Gpu, metric: str, labels: Mapping[str, str], value: float) -> None:
        """A series other than a plain reading: a sample time, an Xid, an exporter's own series."""
        if metric == SAMPLE_TIME:
            gpu.seen = self._generation
            host = gpu.host
            if value > self._newest.get(host, 0.0):
                self._newest[host] = value
            _identity(gpu, labels)
            return
        _take(gpu, metric, labels, value)

    def _place(self, labels: Mapping[str, str], raw: object, gpu_text: object) -> _Gpu | None:
        """The GPU a series is of, made where new; None where the series names no host or GPU, or one
        past the bounds."""
        if type(raw) is not str or type(gpu_text) is not str:
            return None
        host_of_raw = self._host_of_raw
        host = host_of_raw.get(raw)
        if host is None:
            if raw in host_of_raw:
                return None
            host = host_of_raw[raw] = host_of(labels, self.host_label)
            if host is None:
                return None
        hosts = self._hosts
        gpus = hosts.get(host)
        if gpus is None:
            if len(hosts) >= MAX_NODES:
                return None
            gpus = hosts[host] = {}
        gpu = gpus.get(gpu_text)
        if gpu is None:
            if not gpu_text.isdigit() or len(gpu_text) > 3 or len(gpus) >= MAX_GPUS_PER_NODE:
                return None
            gpu = gpus[gpu_text] = _Gpu(int(gpu_text), host)
            self._every_values = None
        self._gpu_at[(raw, gpu_text)] = gpu
        return gpu

    def finish(self) -> Joined:
        """The nodes as the answers added since `begin` leave them."""
        nodes, notes = self.finish_lazily()
        return Joined({node.sample.name: node for node in nodes}, self._unplaced, notes)

    def finish_lazily(self) -> tuple[Iterator[JoinedNode], tuple[str, ...]]:
        """As `finish`: the nodes made one by one as they are taken (a refresh at 80,000 GPUs makes some
        10,000 nodes in a third of a second: the decoding process sends the first of them while it
        makes the rest), and the notes. The nodes are to be taken before the next `begin`."""
        self._conclude()
        unplaced = self._unplaced
        notes = (f"{unplaced} series had no host or GPU label and were left out",) if unplaced else ()
        return self._joined_nodes(), notes

    def _conclude(self) -> None:
        """What the whole update decides: GPUs out of MIG, GPUs gone from the store, memory totals."""
        hosts = self._hosts
        generation = self._generation
        timed = self._timed
        if timed:
            # a GPU is under MIG while its series say so: as of the sample times' answer, which lists
            # every GPU the store has
            for kept in hosts.values():
                for gpu in kept.values():
                    if gpu.mig and gpu.mig_seen != generation:
                        gpu.mig = False
        if timed:
            dropped = False
            for host in list(hosts):
                kept = hosts[host]
                for text in [t for t, g in kept.items() if g.seen != generation]:
                    del kept[text]
                    dropped = True
                if not kept:
                    del hosts[host]
            if dropped:
                self._every_values = None
                self._gpu_at = {}
                self._forget_raw()
        if FB_FREE in self._added:
            for kept in hosts.values():
                for gpu in kept.values():
                    values = gpu.values
                    used, free = values.get(FB_USED), values.get(FB_FREE)
                    gpu.mem_total_mib = (
                        used + free + values.get(FB_RESERVED, 0.0)
                        if used is not None and free is not None
                        else None
                    )

    def _joined_nodes(self) -> Iterator[JoinedNode]:
        newest = self._newest
        counted = self._counted
        facts = self._facts
        exported_by_mask = self._exported_by_mask
        for host, by_text in self._hosts.items():
            ordered = sorted(by_text.values(), key=lambda g: g.index)
            samples = tuple(map(_sample, ordered))
            # the fields some GPU of the host has a value for: which columns are all None, found in C,
            # and the few such patterns a fleet has named once each
            none = (None,) * len(samples)
            columns = _field_columns(tuple(zip(*samples, strict=True))) if samples else ()
            mask = tuple(map(none.__eq__, columns))
            exported = exported_by_mask.get(mask)
            if exported is None:
                if len(exported_by_mask) >= _MAX_MASKS:
                    exported_by_mask.clear()
                exported = exported_by_mask[mask] = frozenset(
                    name for name, unread in zip(_FIELDS, mask, strict=False) if not unread
                )
            xids = tuple(_xid(g, newest.get(host)) for g in ordered if g.xid is not None)
            if counted:
                facts[host] = _counter_facts(ordered, newest.get(host))
            node_facts = facts.get(host, NO_FACTS)
            sample = NodeSample(
                host,
                Reachability.OK,
                newest.get(host),
                samples,
                None,
                None,
                (),
                xids,
                node_facts,
                not_exported=EXPORTABLE - exported,
            )
            yield JoinedNode(sample, newest.get(host), exported)


_FIRST_BLANK: Final = 2147483632.0  # the smallest of DCGM's blanks (is_blank)
_FIELDS: Final = tuple(sorted({name for name, _ in GAUGES.values()} | {"mem_total_mib", "throttle_reasons"}))
# the readings a host may or may not export (the clock-event reasons are a list, empty when not exported)
EXPORTABLE: Final = frozenset(_FIELDS) - {"throttle_reasons"}
# _FIELDS' columns, picked from the columns of a host's samples (a GpuSample is a tuple)
_field_columns: Final = operator.itemgetter(*(GpuSample._fields.index(name) for name in _FIELDS))
_MAX_MASKS: Final = 4096  # patterns of unexported fields kept named (a fleet has a handful)
_IDENTITY_KEYS: Final = frozenset({*UUID_LABELS, "modelName"})  # in an exporter's own series


def _identity(gpu: _Gpu, labels: Mapping[str, str]) -> None:
    for label, form in _IDENTITY.items():
        text = labels.get(label)
        if type(text) is str and label not in gpu.labels and form.fullmatch(text):
            gpu.labels[label] = text


def _take(gpu: _Gpu, metric: str, labels: Mapping[str, str], value: float) -> None:
    if "UUID" in labels or "uuid" in labels or "modelName" in labels:  # an exporter's own series
        _identity(gpu, labels)
    if value != value or is_blank(value):  # NaN or DCGM's blank: no reading
        return
    if metric == PROFILE_UTIL and labels.get(MIG_PROFILE_LABEL):
        return  # an instance's activity; the GPU's utilization is not reported under MIG
    if metric == XID:
        if value >= 1.0:  # (not -Inf, which int() refuses)
            gpu.xid = int(value)
        return
    gpu.values[metric] = value


def _sample(gpu: _Gpu) -> GpuSample:
    """The GPU's values as a sample (80,000 of these a refresh: written out, field by field)."""
    values = gpu.values
    get = values.get
    util = get(GPU_UTIL)
    if util is None and PROFILE_UTIL in values:
        util = values[PROFILE_UTIL] * 100.0
    if gpu.mig:
        util = None  # whole-GPU utilization is not reported under MIG (as nvidia-smi)
    used = get(FB_USED)
    total = gpu.mem_total_mib
    reasons: tuple[str, ...] = ()
    for metric in CLOCK_REASONS:
        if metric in values:
            reasons = _reasons(int(values[metric]))
            break
    ecc = get(ECC_DBE)
    failure = get(ROW_REMAP_FAILURE)
    pending = get(ROW_REMAP_PENDING)
    labels = gpu.labels
    return new_gpu_sample(
        GpuSample,
        (
            gpu.index,
            labels.get("UUID") or labels.get("uuid") or "",
            labels.get("modelName", ""),
            labels.get("pci_bus_id"),
            util,
            get(MEM_COPY_UTIL),
            used,
            total if used is not None else None,
            get(GPU_TEMP),
            get(POWER_USAGE),
            get(POWER_LIMIT),
            get(SM_CLOCK),
            get(MAX_SM_CLOCK),
            int(ecc) if ecc is not None else None,
            gpu.mig,
            reasons,
            (),
            None,
            pending > 0 if pending is not None else None,
            failure > 0 if failure is not None else None,
            None,
            None,
            None,
            None,
        ),
    )


def _counter_facts(gpus: Sequence[_Gpu], read_at_s: float | None) -> NodeFacts:
    """The node's counters as the facts the counter rules read, read at the node's sample time."""
    counters = []
    links = []
    for gpu in gpus:
        values = gpu.values
        found = {field: values[metric] for metric, field in COUNTERS.items() if metric in values}
        if found:
            ints = {
                k: (bool(v) if k == "retired_pages_pending" else v if k == "memory_temp_c" else int(v))
                for k, v in found.items()
            }
            counters.append(GpuCounters(gpu.labels.get("pci_bus_id", ""), **ints))  # type: ignore[arg-type]
        printed = tuple((name, int(values[m])) for m, name in NVLINK_COUNTERS.items() if m in values)
        if printed:
            uuid = gpu.labels.get("UUID") or gpu.labels.get("uuid")
            links.append(GpuLinkErrors(gpu.index, uuid, (LinkErrors(0, printed),)))
    smi = Reading(SmiCounters(tuple(counters)), read_at_s) if counters else UNREAD
    nvlink = Reading(NvlinkErrors(tuple(links)), read_at_s) if links else UNREAD
    if smi is UNREAD and nvlink is UNREAD:
        return NO_FACTS
    return NodeFacts(counters=smi, nvlink_errors=nvlink)


def _xid(gpu: _Gpu, seen_s: float | None) -> XidEvent:
    # dcgm-exporter keeps the GPU's last Xid as a value: when it happened is not said, only when it was
    # seen (the source keeps the first sight of each)
    code = gpu.xid or 0
    words = f"Xid {code} (the last Xid dcgm-exporter reports on GPU{gpu.index})"
    return XidEvent(seen_s or 0.0, code, gpu.labels.get("pci_bus_id"), gpu.index, words)


def _reasons(mask: int) -> tuple[str, ...]:
    return tuple(name for bit, name in THROTTLE_REASON_BITS if mask & bit and name not in NOT_THROTTLING)


def series_of_text(samples: Sequence[object]) -> list[Series]:
    """The samples of an exporter's /metrics (gputop.core.parsers.prom_text) as series."""
    from gputop.core.parsers.prom_text import PromSample

    return [
        Series(s.name, s.labels, s.value, s.timestamp_ms / 1000.0 if s.timestamp_ms is not None else None)
        for s in samples
        if isinstance(s, PromSample) and s.name in METRICS
    ]
