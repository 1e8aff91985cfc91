"""The cluster map's cell codes of every node at once, with numpy: what `heatmap.cell_codes` gives node by
node, for a whole snapshot.

Why: switching the map's metric at 10,000 nodes asks for 80,000 cells; node by node in Python that is
some 60-80 ms, which a key press waits for. Most nodes are plain (they answer, their GPUs are numbered
0..n-1, no problem or idle mark, every field exported), and their codes are the heat steps of one column
of readings: one pass in numpy. A field a store's host does not export is plain too (its readings are
None: NOT_EXPORTED rather than NA, as `cell_codes` says it): on the store path every host lacks some
field, and node by node the map's metrics cost 100 ms a refresh at 10,000 nodes. The rest (down, stale,
problems, marks, gaps in the numbering) go through `cell_codes` itself, so there is one definition of a
cell and this is only a faster road to it.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping, Sequence
from itertools import chain
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from gputop.core.heatmap import MIG_NA, NA, NOT_EXPORTED, CellCodes, cell_codes
from gputop.core.metrics import HEAT_STEPS, HeatScale, Metric
from gputop.core.models import GpuSample, NodeSample, Reachability
from gputop.core.slices import run_to_end

if TYPE_CHECKING:
    from gputop.core.summary import NodeRow

_TOP_STEP = HEAT_STEPS - 1
_INDEX = itemgetter(GpuSample._fields.index("index"))
_MIG = attrgetter("mig_enabled")
_OK = Reachability.OK
NODES_PER_SLICE = 2500  # nodes split between two yields: some 3 ms
OTHERS_PER_SLICE = 200  # nodes through `cell_codes` between two yields

# each metric as its fields: one read straight, or a percentage of two (`models.percent`'s arithmetic)
_PART_OF: dict[Metric, tuple[str, str | None]] = {
    Metric.UTIL: ("util_pct", None),
    Metric.TEMP: ("temp_c", None),
    Metric.MEM: ("mem_used_mib", "mem_total_mib"),
    Metric.POWER: ("power_w", "power_limit_w"),
}


def _column(gpus: Sequence[GpuSample], field: str) -> npt.NDArray[np.float64]:
    # None reads as NaN
    return np.fromiter(map(itemgetter(GpuSample._fields.index(field)), gpus), np.float64, len(gpus))


def _values(gpus: Sequence[GpuSample], metric: Metric) -> Generator[None, None, npt.NDArray[np.float64]]:
    """The metric's reading of each GPU, yielding after each field read (some 3-5 ms at 80,000 GPUs)."""
    part_field, whole_field = _PART_OF[metric]
    part = _column(gpus, part_field)
    if whole_field is None:
        return part
    yield
    whole = _column(gpus, whole_field)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = 100.0 * part / whole
    values[(whole == 0) | np.isnan(whole)] = np.nan  # `percent`: no whole, no share
    return values


def heat_steps(values: npt.NDArray[np.float64], scale: HeatScale, judged: bool) -> npt.NDArray[np.int64]:
    """`cell_codes`' heat step of each reading (NaN: any step; the caller marks them). ``judged``: the
    metric has a rule and none of these GPUs is flagged, so the top step is out of reach."""
    low, warn = scale.low, scale.warn
    with np.errstate(invalid="ignore"):
        # the same arithmetic in the same order as `cell_codes`, in float64: the same step at every boundary
        middle = ((values - low) / (warn - low) * _TOP_STEP).astype(np.int64, copy=False)
        np.minimum(middle, _TOP_STEP - 1, out=middle)
        steps = np.where(values >= warn, _TOP_STEP, np.where(values <= low, 0, middle))
    if judged:
        np.minimum(steps, _TOP_STEP - 1, out=steps)
    return steps


def all_cell_codes(
    nodes: Sequence[NodeSample], rows: Mapping[str, NodeRow], metric: Metric, scale: HeatScale
) -> dict[str, CellCodes]:
    """``cell_codes`` of every node that has a row, by name, in ``nodes``' order."""
    return CellColumns(nodes, rows).codes(metric, scale)


class CellColumns:
    """Nodes split once into the plain (their GPUs side by side in one column) and the rest, so that each
    metric's codes are then one numpy pass: a view works out several metrics from one split."""

    def __init__(self, nodes: Sequence[NodeSample], rows: Mapping[str, NodeRow]) -> None:
        run_to_end(self._split_steps(nodes, rows))

    @classmethod
    def steps(
        cls, nodes: Sequence[NodeSample], rows: Mapping[str, NodeRow]
    ) -> Generator[None, None, CellColumns]:
        """The split a slice at a time (a store's refresh hands 10,000 changed nodes to it)."""
        split = cls.__new__(cls)
        yield from split._split_steps(nodes, rows)
        return split

    def _split_steps(
        self, nodes: Sequence[NodeSample], rows: Mapping[str, NodeRow]
    ) -> Generator[None, None, None]:
        self.rows = rows
        self.order: dict[str, CellCodes] = {}  # every node with a row, in ``nodes``' order
        self.others: list[NodeSample] = []  # nodes that go through `cell_codes`
        plain: list[NodeSample] = []
        order, others = self.order, self.others
        row_of = rows.get
        for count, node in enumerate(nodes, 1):
            if not count % NODES_PER_SLICE:
                yield
            row = row_of(node.name)
            if row is None:
                continue
            order[node.name] = ()
            expected = node.expected_gpu_count
            if (
                row.problems
                or row.idle_gpu_indices
                or node.reachability is not _OK
                or not node.gpus
                or (expected is not None and expected != len(node.gpus))
            ):
                others.append(node)
            else:
                plain.append(node)
        self.gpus: list[GpuSample] = []
        self.names: list[str] = []
        self.spans: list[tuple[int, int]] | None = None  # each plain node's GPUs; None: all of one size
        self.size = 0
        # each plain node's fields its host does not export (empty nearly everywhere but on a store)
        self.not_exported = [node.not_exported for node in plain]
        self.counts = np.zeros(0, np.int64)
        if not plain:
            return
        yield
        counts = self.counts = np.fromiter(map(len, map(attrgetter("gpus"), plain)), np.int64, len(plain))
        ends = np.cumsum(counts)
        starts = ends - counts
        gpus = self.gpus = list(chain.from_iterable(node.gpus for node in plain))
        yield
        # a plain node's GPUs are numbered 0..n-1 in order; one that is not goes the long way
        indices = np.fromiter(map(_INDEX, gpus), np.int64, len(gpus))
        numbered = indices == np.arange(len(gpus)) - np.repeat(starts, counts)
        if not numbered.all():
            misnumbered = set(np.searchsorted(ends, np.flatnonzero(~numbered), side="right").tolist())
            others.extend(plain[k] for k in sorted(misnumbered))
        self.names = [node.name for node in plain]
        self.size = int(counts[0])
        if not (counts == self.size).all():
            self.spans = list(zip(starts.tolist(), ends.tolist(), strict=True))

    def codes(self, metric: Metric, scale: HeatScale) -> dict[str, CellCodes]:
        """Every node's codes for ``metric``, by name, in the nodes' order."""
        return run_to_end(self.codes_steps(metric, scale))

    def codes_steps(self, metric: Metric, scale: HeatScale) -> Generator[None, None, dict[str, CellCodes]]:
        """`codes`, yielding between its passes over the GPUs (each some 3-5 ms at 80,000 GPUs)."""
        done = dict(self.order)
        gpus = self.gpus
        if gpus:
            values = yield from _values(gpus, metric)
            yield
            steps = heat_steps(values, scale, metric.rule_kind is not None)
            unread = np.isnan(values)
            if unread.any():
                # no reading: a MIG GPU's, or one its host does not export, or simply none
                mig = np.fromiter(map(_MIG, gpus), bool, len(gpus))
                fields = metric.fields
                unexported = np.fromiter(
                    (bool(gone) and not gone.isdisjoint(fields) for gone in self.not_exported),
                    bool,
                    len(self.not_exported),
                )
                why = np.where(np.repeat(unexported, self.counts), NOT_EXPORTED, NA)
                steps = np.where(unread, np.where(mig, MIG_NA, why), steps)
                yield
            codes = steps.tolist()
            names = self.names
            size = self.size
            for start in range(0, len(names), NODES_PER_SLICE):
                yield
                end = min(start + NODES_PER_SLICE, len(names))
                if self.spans is None:
                    # the usual cluster, every node the same size: the tuples cut in C
                    part = codes[start * size : end * size]
                    done.update(zip(names[start:end], zip(*[iter(part)] * size, strict=True), strict=True))
                else:
                    done.update(
                        (name, tuple(codes[first:last]))
                        for name, (first, last) in zip(names[start:end], self.spans[start:end], strict=True)
                    )
        rows = self.rows
        for count, node in enumerate(self.others, 1):
            if not count % OTHERS_PER_SLICE:
                yield
            row = rows[node.name]
            done[node.name] = cell_codes(node, row.problems, metric, scale, row.idle_gpu_indices)
        return done
