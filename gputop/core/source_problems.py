"""What the header says is failing: a source whose last good data is still on screen."""

from __future__ import annotations

from dataclasses import dataclass

from gputop.core.summary import ClusterView


@dataclass(frozen=True, slots=True)
class SourceProblem:
    badge: str  # "SLURM", "SOURCE"
    text: str
    kept_since_s: float | None = None  # when the data still shown was read


def problems_of(view: ClusterView) -> list[SourceProblem]:
    """What the header says is failing: Slurm's read error and any source that missed its deadline or
    raised."""
    found: list[SourceProblem] = []
    slurm = view.snapshot.slurm
    if slurm is not None and slurm.error:
        found.append(SourceProblem("SLURM", slurm.error, slurm.sampled_at_s))
    found.extend(SourceProblem("SOURCE", error) for error in view.source_errors)
    return found
