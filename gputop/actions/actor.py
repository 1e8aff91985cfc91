"""Where a cluster's node actions run: the Slurm source's runner (locally or on slurm.run_on, with its
environment), or in demo mode the simulator, which answers scontrol as a cluster would."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gputop.sources.slurm_runner import Runner

if TYPE_CHECKING:
    from gputop.sources.demo import SimulatorSource


@dataclass(frozen=True, slots=True)
class Actor:
    runner: Runner
    env: Mapping[str, str] = field(default_factory=dict)
    after: Callable[[], None] = lambda: None  # read Slurm again at once, to show the new state soon
    demo: bool = False


def actor_for(sources: Iterable[object]) -> Actor | None:
    """The first source that can act; None where nothing can (no Slurm: drain and resume are refused)."""
    from gputop.sources.demo import SimulatorSource
    from gputop.sources.slurm import SlurmSource

    for source in sources:
        if isinstance(source, SlurmSource):
            return Actor(source.runner, dict(source.env), source.refresh)
        if isinstance(source, SimulatorSource):
            return _demo_actor(source)
    return None


def _demo_actor(source: SimulatorSource) -> Actor:
    from gputop.sources.demo_actions import SimulatedScontrol

    # The simulator is built when its source starts: look it up when an action runs.
    return Actor(SimulatedScontrol(lambda: source.cluster), demo=True)
