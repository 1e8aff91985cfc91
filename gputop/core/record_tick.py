"""What a recording keeps of each tick (gputop.core.recording's frames): the readings, and whatever
changed since the last tick. Pure: a view in, a frame's document and arrays out; and back, frame by frame,
as the samples and Slurm state a replay hands to the same view stage as live data.

Changes are found by identity first (a node's sample, row and Slurm entry are the same objects while
nothing moved) and by value where identity says "maybe", so an unchanged cluster costs a frame of
zeros and a few bytes of JSON.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from operator import itemgetter
from typing import Any

import numpy as np
import numpy.typing as npt

from gputop.core.fact_codec import CodecError, decode, encode
from gputop.core.facts import FACT_NAMES, NO_FACTS, UNREAD, NodeFacts, Reading
from gputop.core.history_store import METRICS, gather
from gputop.core.models import (
    GPU_PROCESSES_AT,
    ClusterSnapshot,
    GpuProcess,
    GpuSample,
    IbFailure,
    IbPort,
    NodeSample,
    Reachability,
    SlurmBaseState,
    SlurmJob,
    SlurmNode,
    SlurmState,
    XidEvent,
    new_gpu_sample,
)
from gputop.core.nodeset import natural_key
from gputop.core.parsers.compute_apps import ComputeAppsResult
from gputop.core.parsers.gpu_list import GpuList
from gputop.core.parsers.ib import IbStat
from gputop.core.parsers.mig import MigComputeInstances, MigGpuInstances, MigPlacements, MigProfiles
from gputop.core.parsers.nvlink import NvlinkStatus
from gputop.core.parsers.nvlink_errors import NvlinkErrors
from gputop.core.parsers.smi_counters import SmiCounters
from gputop.core.parsers.topo import Topology
from gputop.core.parsers.xid import XidLog
from gputop.core.recording import TickDecoder, TickEncoder
from gputop.core.summary import ClusterView

MAX_TEXT = 2000  # an error, a reason or a kernel line, bounded as the live ones are
FACT_MEMO_SIZE = 4096  # distinct recorded facts kept read


def _t(value: object, limit: int = MAX_TEXT) -> str:
    return str(value)[:limit] if value is not None else ""


# A GPU's fields besides the five readings, recorded when they change: its identity and limits, and the
# states the health rules read (uncorrected ECC, MIG, throttling, memory repair, the PCIe link).
_GPU_FIELDS = (
    "uuid",
    "name",
    "pci_bus_id",
    "mem_total_mib",
    "power_limit_w",
    "sm_clock_max_mhz",
    "ecc_uncorrected",
    "mig_enabled",
    "throttle_reasons",
    "retired_pages_pending",
    "remapped_rows_pending",
    "remapped_rows_failure",
    "pcie_link_gen",
    "pcie_link_gen_max",
    "pcie_link_width_lanes",
    "pcie_link_width_max_lanes",
)
_MIB_PER_GIB = 1024.0
_READINGS = itemgetter(*(GpuSample._fields.index(m.name) for m in METRICS))  # the five, in METRICS order

# Each slow fact's parsed type, by its name in NodeFacts: what a recorded fact is read back as (since 1.1).
FACT_TYPES: dict[str, type] = {
    "gpu_list": GpuList,
    "topology": Topology,
    "nvlink": NvlinkStatus,
    "mig_gip": MigProfiles,
    "mig_gipp": MigPlacements,
    "mig_gi": MigGpuInstances,
    "mig_ci": MigComputeInstances,
    "ibstat": IbStat,
    "xid": XidLog,
    "processes": ComputeAppsResult,
    "counters": SmiCounters,
    "nvlink_errors": NvlinkErrors,
}


def _gpu_static(gpu: GpuSample) -> list[Any]:
    return [list(v) if isinstance(v, tuple) else v for v in (getattr(gpu, f) for f in _GPU_FIELDS)]


def _processes(node: NodeSample) -> list[tuple[int, tuple[tuple[object, ...], ...]]]:
    """What decides whether the node's processes are recorded again: one starting or ending, or its
    memory moving by a GiB (a process's memory creeps every tick; recording each creep would cost more
    than the readings themselves). What is recorded then is the exact value of that moment."""
    return [
        (gpu.index, tuple((p.pid, p.name, _gib(p.used_mib), p.user) for p in gpu.processes))
        for gpu in node.gpus
        if gpu.processes
    ]


def _gib(mib: float | None) -> int | None:
    return round(mib / _MIB_PER_GIB) if mib is not None else None


def _reading(reading: Reading[object]) -> list[Any]:
    value = encode(reading.value) if reading.value is not None else None
    return [value, reading.read_at_s, _t(reading.error) if reading.error is not None else None]


def _read_back(name: str, entry: Any) -> Reading[object]:
    """A recorded fact as its Reading; one that does not read as its type comes back unread."""
    value_json, read_at_s, error = entry
    value = decode(value_json, FACT_TYPES[name]) if value_json is not None else None
    return Reading(
        value,
        float(read_at_s) if isinstance(read_at_s, int | float) and not isinstance(read_at_s, bool) else None,
        _t(error) if isinstance(error, str) else None,
    )


def _slurm_node(node: SlurmNode) -> list[Any]:
    return [node.base_state.value, sorted(node.flags), node.reason, node.reason_user, list(node.partitions)]


def _job(job: SlurmJob) -> list[Any]:
    gpus = {name: list(indices) for name, indices in job.gpus_by_node.items()}
    return [
        job.job_id, job.user, _t(job.name, 200), job.partition, job.state, list(job.nodes), gpus,
        job.start_time_s, job.time_limit_s, _t(job.pending_reason, 200) or None, job.nodelist,
        job.gpus_requested,
    ]  # fmt: skip


def _problem(problem: Any) -> list[Any]:
    return [problem.severity.value, problem.kind, problem.gpu_index, problem.message, problem.action]


class TickRecorder:
    """A view per call, the frame of what it holds that the last one did not."""

    def __init__(self) -> None:
        self.encoder = TickEncoder()
        self._states: dict[str, list[Any]] = {}
        self._static: dict[str, list[list[Any]]] = {}
        self._xids: dict[str, tuple[XidEvent, ...]] = {}
        # by node: the facts record last recorded, and its readings (a reading unchanged is the same object)
        self._facts: dict[str, tuple[NodeFacts, dict[str, Reading[object]]]] = {}
        self._ib: dict[str, tuple[tuple[IbPort, ...], tuple[IbFailure, ...]]] = {}
        self._processes: dict[str, list[tuple[int, tuple[tuple[object, ...], ...]]]] = {}
        self._slurm_nodes: dict[str, list[Any]] = {}
        self._jobs: list[list[Any]] | None = None
        self._problems: dict[str, list[list[Any]]] = {}

    def frame(
        self, view: ClusterView, audit: list[dict[str, Any]] | None = None
    ) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
        snapshot = view.snapshot
        answering, flat = gather(snapshot.nodes)
        layout = [(node.name, gpu.index) for node in answering for gpu in node.gpus]
        document, arrays = self.encoder.encode(snapshot.taken_at_s, layout, flat[1:].T)
        document["kind"] = "tick"
        document["t"] = snapshot.taken_at_s
        changes: dict[str, Any] = {}
        for node in snapshot.nodes:
            self._node_changes(node, changes)
        if snapshot.slurm is not None:
            self._slurm_changes(snapshot.slurm, changes)
        problems = {}
        for name, row in view.rows.items():
            listed = [_problem(p) for p in row.problems]
            if self._problems.get(name, []) != listed:
                problems[name] = listed
                self._problems[name] = listed
        if problems:
            changes["problems"] = problems
        if audit:
            changes["audit"] = audit
        if changes:
            document["changes"] = changes
        return document, arrays

    def _node_changes(self, node: NodeSample, changes: dict[str, Any]) -> None:
        name = node.name
        state = [
            node.reachability.value,
            _t(node.error) if node.error else None,
            node.expected_gpu_count,
            node.sampled_at_s if node.reachability is not Reachability.OK else None,
        ]
        state_changed = self._states.get(name) != state
        if state_changed:
            changes.setdefault("states", {})[name] = state
            self._states[name] = state
        if node.gpus:
            static = [[gpu.index, *_gpu_static(gpu)] for gpu in node.gpus]
            if self._static.get(name) != static:
                changes.setdefault("gpus", {})[name] = static
                self._static[name] = static
            if state_changed and node.reachability is not Reachability.OK:
                # A node gone quiet shows its last good readings, aged; the ticks carry only answering
                # GPUs, so a node quiet since before the recording began has its kept ones here.
                changes.setdefault("kept", {})[name] = [[gpu.index, *_READINGS(gpu)] for gpu in node.gpus]
        known = self._xids.get(name, ())
        if node.xid_events is not known and node.xid_events != known:
            events = [[e.time_s, e.code, e.pci_bus_id, e.gpu_index, _t(e.message)] for e in node.xid_events]
            changes.setdefault("xid", {})[name] = events
        self._xids[name] = node.xid_events
        ib = (node.ib_ports, node.ib_failures)
        known_ib = self._ib.get(name, ((), ()))
        if ib[0] is not known_ib[0] or ib[1] is not known_ib[1]:
            if ib != known_ib:
                changes.setdefault("ib", {})[name] = [encode(ib[0]), encode(ib[1])]
            self._ib[name] = ib
        if node.gpus:
            processes = _processes(node)
            if self._processes.get(name, []) != processes:
                exact = [[gpu.index, encode(gpu.processes)] for gpu in node.gpus if gpu.processes]
                changes.setdefault("processes", {})[name] = exact
                self._processes[name] = processes
        self._fact_changes(node, changes)

    def _fact_changes(self, node: NodeSample, changes: dict[str, Any]) -> None:
        """The node's slow facts that changed: a fact is re-read every few minutes, and a reading whose
        output did not change is the same object, so most ticks cost one identity check per node."""
        facts = node.facts
        known = self._facts.get(node.name)
        if known is not None and known[0] is facts:
            return
        before = known[1] if known is not None else {}
        readings: dict[str, Reading[object]] = {}
        changed: dict[str, list[Any]] = {}
        for name in FACT_NAMES:
            reading = readings[name] = getattr(facts, name)
            if reading is before.get(name, UNREAD):
                continue
            changed[name] = _reading(reading)
        if changed:
            changes.setdefault("facts", {})[node.name] = changed
        self._facts[node.name] = (facts, readings)

    def _slurm_changes(self, slurm: SlurmState, changes: dict[str, Any]) -> None:
        nodes = {}
        for name, node in slurm.nodes.items():
            listed = _slurm_node(node)
            if self._slurm_nodes.get(name) != listed:
                nodes[name] = listed
                self._slurm_nodes[name] = listed
        if nodes:
            changes["slurm_nodes"] = nodes
        jobs = [_job(j) for j in slurm.jobs]
        if jobs != self._jobs:
            changes["jobs"] = jobs
            self._jobs = jobs


class TickPlayer:
    """Frames back into snapshots, in order: the same samples and Slurm state the view stage derived."""

    def __init__(self, cluster: str, fact_memo: dict[tuple[str, str], Reading[object]] | None = None) -> None:
        """``fact_memo``: facts already read, shared by the players of one replay (a jump back starts a
        new player from the first frame)."""
        self.cluster = cluster
        self.decoder = TickDecoder()
        self.states: dict[str, list[Any]] = {}
        self.static: dict[str, dict[int, list[Any]]] = {}
        self.xids: dict[str, tuple[XidEvent, ...]] = {}
        self.facts: dict[str, NodeFacts] = {}
        self.ib: dict[str, tuple[tuple[IbPort, ...], tuple[IbFailure, ...]]] = {}
        self.processes: dict[str, dict[int, tuple[GpuProcess, ...]]] = {}
        self._fact_memo = fact_memo if fact_memo is not None else {}
        self.slurm_nodes: dict[str, SlurmNode] = {}
        self.jobs: tuple[SlurmJob, ...] = ()
        self.problems: dict[str, list[list[Any]]] = {}
        self.audit: list[dict[str, Any]] = []
        self._typed: dict[tuple[str, int], list[Any]] = {}
        self._last_gpus: dict[str, tuple[GpuSample, ...]] = {}

    def play(
        self, document: Mapping[str, Any], arrays: Mapping[str, npt.NDArray[Any]]
    ) -> ClusterSnapshot | None:
        """The snapshot of one tick frame (None: a delta before any full frame, which cannot be shown)."""
        readings = self.advance(document, arrays)
        time_s = float(document["t"])
        if readings is None:
            return None
        by_node: dict[str, list[GpuSample]] = {}
        for (node, index), values in zip(self.decoder.layout, readings.tolist(), strict=True):
            by_node.setdefault(node, []).append(self._sample(node, index, values))
        nodes = []
        for name in sorted({*self.states, *by_node}, key=natural_key):
            state = self.states.get(name, ["ok", None, None, None])
            reach = Reachability(state[0]) if state[0] in _REACHABILITY else Reachability.DOWN
            if reach is Reachability.OK:
                gpus = self._last_gpus[name] = tuple(by_node.get(name, ()))
            else:  # as live: a node gone quiet keeps its last good readings, shown aged
                gpus = self._last_gpus.get(name, ())
            nodes.append(
                NodeSample(
                    name=name,
                    gpus=gpus,
                    reachability=reach,
                    sampled_at_s=time_s if reach is Reachability.OK else state[3],
                    error=state[1],
                    expected_gpu_count=state[2],
                    xid_events=self.xids.get(name, ()),
                    ib_ports=self.ib.get(name, ((), ()))[0],
                    facts=self.facts.get(name, NO_FACTS),
                    ib_failures=self.ib.get(name, ((), ()))[1],
                )
            )
        slurm = SlurmState(dict(self.slurm_nodes), self.jobs, time_s) if self.slurm_nodes else None
        return ClusterSnapshot.build(self.cluster, time_s, tuple(nodes), slurm)

    def advance(
        self, document: Mapping[str, Any], arrays: Mapping[str, npt.NDArray[Any]]
    ) -> npt.NDArray[np.float32] | None:
        """Takes in a frame without building its samples (a tick a fast replay passes over): its changes
        and its readings, which the next frame's differences build on."""
        self._take(document.get("changes") or {})
        return self.decoder.decode(document, arrays)

    def pass_over(self, document: Mapping[str, Any]) -> None:
        """Takes in a frame's changes alone, its readings left packed: for the ticks before the full frame
        a seek starts from (the readings of a tick before a full frame are never needed)."""
        self._take(document.get("changes") or {})
        self.decoder.skip(document)

    def _sample(self, node: str, index: int, values: list[Any]) -> GpuSample:
        # a GPU's fields as a list, the five readings put in place: built as the simulator and the SSH
        # source build theirs (8,000 a tick at 1,000 nodes)
        fields = self._template(node, index).copy()
        fields[4], fields[6], fields[8], fields[9], fields[11] = (None if v != v else v for v in values)
        fields[GPU_PROCESSES_AT] = self.processes.get(node, _NO_PROCESSES).get(index, ())
        return new_gpu_sample(GpuSample, tuple(fields))

    def _template(self, node: str, index: int) -> list[Any]:
        """A GPU's fields in GpuSample's order, in their types, readings empty: worked out once per change."""
        key = (node, index)
        found = self._typed.get(key)
        if found is None:
            typed = _typed(dict(zip(_GPU_FIELDS, self.static.get(node, {}).get(index, ()), strict=False)))
            typed["uuid"] = typed["uuid"] or f"GPU-{node}-{index}"
            fields = {**typed, "index": index, "processes": ()}
            found = self._typed[key] = [fields.get(name) for name in GpuSample._fields]
        return found

    def _take(self, changes: Mapping[str, Any]) -> None:
        for name, state in (changes.get("states") or {}).items():
            self.states[str(name)] = list(state)
        for name, gpus in (changes.get("gpus") or {}).items():
            self.static[str(name)] = {int(g[0]): list(g[1 : 1 + len(_GPU_FIELDS)]) for g in gpus}
            for key in [k for k in self._typed if k[0] == name]:
                del self._typed[key]
        for name, events in (changes.get("xid") or {}).items():
            self.xids[str(name)] = tuple(
                XidEvent(
                    float(t),
                    int(code),
                    _t(bus, 64) if isinstance(bus, str) else None,
                    int(gpu) if isinstance(gpu, int) and not isinstance(gpu, bool) else None,
                    _t(message),
                )
                for t, code, bus, gpu, message in events
            )
        for name, kept in (changes.get("kept") or {}).items():
            self._last_gpus[str(name)] = tuple(
                self._sample(str(name), int(entry[0]), [_number(v) for v in entry[1:6]]) for entry in kept
            )
        for name, recorded in (changes.get("facts") or {}).items():
            self._take_facts(str(name), recorded)
        for name, listed in (changes.get("processes") or {}).items():
            try:
                self.processes[str(name)] = {
                    int(index): decode(processes, tuple[GpuProcess, ...]) for index, processes in listed
                }
            except (CodecError, ValueError, TypeError):
                self.processes.pop(str(name), None)
        for name, ib in (changes.get("ib") or {}).items():
            try:
                self.ib[str(name)] = (decode(ib[0], tuple[IbPort, ...]), decode(ib[1], tuple[IbFailure, ...]))
            except CodecError:
                self.ib.pop(str(name), None)
        for name, listed in (changes.get("slurm_nodes") or {}).items():
            base, flags, reason, user, partitions = listed
            state = (
                SlurmBaseState(base) if base in {s.value for s in SlurmBaseState} else SlurmBaseState.UNKNOWN
            )
            self.slurm_nodes[str(name)] = SlurmNode(
                str(name), state, frozenset(map(str, flags)), reason, user, None, tuple(map(str, partitions))
            )
        if "jobs" in changes:
            self.jobs = tuple(
                SlurmJob(
                    job_id=str(j[0]), user=str(j[1]), name=str(j[2]), partition=str(j[3]), state=str(j[4]),
                    nodes=tuple(map(str, j[5])), gpus_by_node={str(k): tuple(v) for k, v in j[6].items()},
                    start_time_s=j[7], time_limit_s=j[8], pending_reason=j[9], nodelist=str(j[10]),
                    gpus_requested=j[11],
                )
                for j in changes["jobs"]
            )  # fmt: skip
        for name, listed in (changes.get("problems") or {}).items():
            self.problems[str(name)] = list(listed)
        self.audit.extend(changes.get("audit") or ())

    def _take_facts(self, name: str, recorded: Mapping[str, Any]) -> None:
        readings = {f: getattr(self.facts.get(name, NO_FACTS), f) for f in FACT_NAMES}
        for fact, entry in recorded.items():
            if fact not in FACT_TYPES:
                continue  # a fact a later gputop records: this one has no pane for it
            readings[fact] = self._read_fact(fact, entry)
        self.facts[name] = NodeFacts(**readings)

    def _read_fact(self, fact: str, entry: Any) -> Reading[object]:
        # The nodes of a fleet mostly print the same topology and NVLink listing: each different one is
        # read once (at 1,000 nodes the first frame's facts read in a fraction of the time).
        try:
            key = (fact, json.dumps(entry, separators=(",", ":")))
        except (TypeError, ValueError, RecursionError):
            return UNREAD
        found = self._fact_memo.get(key)
        if found is None:
            try:
                found = _read_back(fact, entry)
            except (CodecError, ValueError, TypeError):
                found = UNREAD  # damaged: shown as not read rather than wrong
            if len(self._fact_memo) >= FACT_MEMO_SIZE:
                self._fact_memo.clear()
            self._fact_memo[key] = found
        return found


def _number(value: object) -> float:
    """A recorded reading: a number, else a gap (NaN, as the ticks' arrays read)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return math.nan


_REACHABILITY = frozenset(r.value for r in Reachability)
_NO_PROCESSES: dict[int, tuple[GpuProcess, ...]] = {}
_FLOATS = frozenset({"mem_total_mib", "power_limit_w", "sm_clock_max_mhz"})
_INTS = frozenset({"ecc_uncorrected", "pcie_link_gen", "pcie_link_gen_max", "pcie_link_width_lanes"})
_INTS = _INTS | {"pcie_link_width_max_lanes"}
_BOOLS = frozenset({"mig_enabled", "retired_pages_pending", "remapped_rows_pending", "remapped_rows_failure"})


def _typed(fields: dict[str, Any]) -> dict[str, Any]:
    """A file's values in the types the rules expect; anything else reads as unknown (None)."""
    for name in _GPU_FIELDS:  # a field an older recording lacks reads as unknown
        value = fields.get(name)
        number = value if isinstance(value, int | float) and not isinstance(value, bool) else None
        if name in _FLOATS:
            fields[name] = float(number) if number is not None else None
        elif name in _INTS:
            fields[name] = int(number) if number is not None else None
        elif name in _BOOLS:
            fields[name] = value if isinstance(value, bool) else None
        elif name == "pci_bus_id":
            fields[name] = _t(value, 64) if isinstance(value, str) else None
        elif name in ("uuid", "name"):
            fields[name] = _t(value, 200) if isinstance(value, str) else ""
        elif name == "throttle_reasons":
            fields[name] = tuple(_t(v, 100) for v in value) if isinstance(value, list) else ()

    return fields
