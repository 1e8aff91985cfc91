"""One finding of the health rules, and the verdict it gives a GPU."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from gputop.core.models import Severity


@dataclass(frozen=True, slots=True)
class Problem:
    severity: Severity
    node: str
    gpu_index: int | None
    kind: str  # stable key: "temp", "mem", "ecc", "xid", "down", ...
    message: str  # short, for a table cell: "GPU3 91 C"
    # what, within its node, kind and GPU, this problem is about, where there can be several: the Xid
    # code, the IB port, the job; with the others it names one alert that lasts while its words change
    subject: str = ""
    # when it began, where the source says (the Xid's kernel log time, when the drain reason was set, the
    # last data of a node gone quiet); None: gputop's first sight of it is all there is
    since_s: float | None = None
    # what to do about it, in words an on-call engineer acts on ("drain gpu042, then reset GPU3"); ""
    # where the message says it all
    action: str = ""
    # the kind of action it calls for (xid_codes.ACTION_CLASSES: "reset", "reboot", "support", ...);
    # "" where it calls for none the auto-drain policy could take
    action_class: str = ""

    @property
    def sort_key(self) -> tuple[int, str, int]:
        return (-self.severity.rank, self.node, -1 if self.gpu_index is None else self.gpu_index)


class GpuVerdict(NamedTuple):
    """What one GPU's worst problem says: its severity and message."""

    severity: Severity
    reason: str


def gpu_verdicts(problems: Iterable[Problem]) -> Mapping[int, GpuVerdict]:
    """By GPU index, the verdict of the GPUs that have a problem (a GPU not listed is OK): its worst
    problem's severity and words. Problems come worst first (as assess_node returns them), so the first
    one seen for a GPU is its worst."""
    verdicts: dict[int, GpuVerdict] = {}
    for problem in problems:
        index = problem.gpu_index
        if index is not None and index not in verdicts:
            verdicts[index] = GpuVerdict(problem.severity, problem.message)
    return verdicts


def kind_severity(problems: Iterable[Problem], kind: str) -> Severity | None:
    """The worst severity of the problems of one kind (None: none of that kind). A cell that shows the
    reading a rule judges takes its colour from here, so it says what the problem list says: after the
    rule's sustain time, with its hysteresis, never from the raw threshold."""
    worst: Severity | None = None
    for problem in problems:
        if problem.kind == kind and (worst is None or problem.severity.rank > worst.rank):
            worst = problem.severity
    return worst


def gpu_kind_severities(problems: Iterable[Problem]) -> Mapping[tuple[int, str], Severity]:
    """By (GPU index, kind), the worst severity of each GPU's problems: the node screen's GPU cells."""
    worst: dict[tuple[int, str], Severity] = {}
    for problem in problems:
        if problem.gpu_index is None:
            continue
        key = (problem.gpu_index, problem.kind)
        seen = worst.get(key)
        if seen is None or problem.severity.rank > seen.rank:
            worst[key] = problem.severity
    return worst
