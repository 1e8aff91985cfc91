"""What a recording keeps of each tick (gputop.core.recording's frames): the readings, and whatever
changed since the last tick. Pure: a view in, a frame's document and arrays out; and back, frame by frame,
as the samples and Slurm state a replay hands to the same view stage as live data.

Changes are found by identity first (a node's sample, row and Slurm entry are the same objects while
nothing moved) and by value where identity says "maybe", so an unchanged cluster costs a frame of
zeros and a few bytes of JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from gputop.core.history_store import gather
from gputop.core.models import (
    ClusterSnapshot,
    GpuSample,
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
from gputop.core.recording import TickDecoder, TickEncoder
from gputop.core.summary import ClusterView

MAX_TEXT = 2000  # an error, a reason or a kernel line, bounded as the live ones are


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


def _gpu_static(gpu: GpuSample) -> list[Any]:
    return [list(v) if isinstance(v, tuple) else v for v in (getattr(gpu, f) for f in _GPU_FIELDS)]


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
        if self._states.get(name) != state:
            changes.setdefault("states", {})[name] = state
            self._states[name] = state
        if node.gpus:
            static = [[gpu.index, *_gpu_static(gpu)] for gpu in node.gpus]
            if self._static.get(name) != static:
                changes.setdefault("gpus", {})[name] = static
                self._static[name] = static
        known = self._xids.get(name, ())
        if node.xid_events is not known and node.xid_events != known:
            events = [[e.time_s, e.code, e.pci_bus_id, e.gpu_index, _t(e.message)] for e in node.xid_events]
            changes.setdefault("xid", {})[name] = events
        self._xids[name] = node.xid_events

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

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.decoder = TickDecoder()
        self.states: dict[str, list[Any]] = {}
        self.static: dict[str, dict[int, list[Any]]] = {}
        self.xids: dict[str, tuple[XidEvent, ...]] = {}
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
            # a GPU's fields as a list, the five readings put in place: built as the simulator and
            # the SSH source build theirs (8,000 a tick at 1,000 nodes)
            fields = self._template(node, index).copy()
            fields[4], fields[6], fields[8], fields[9], fields[11] = (None if v != v else v for v in values)
            by_node.setdefault(node, []).append(new_gpu_sample(GpuSample, tuple(fields)))
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


_REACHABILITY = frozenset(r.value for r in Reachability)
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
