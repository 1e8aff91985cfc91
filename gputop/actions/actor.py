"""Where a cluster's node actions run: the Slurm source's runner (locally or on slurm.run_on, with its
environment), or in demo mode the simulator, which answers scontrol as a cluster would; and how the
nodes' state is read again after an action whose outcome is unknown."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gputop.core.models import SlurmState
from gputop.core.slurm_names import align_slurm_names
from gputop.sources.slurm_runner import Runner

if TYPE_CHECKING:
    from gputop.actions.execute import Reread
    from gputop.sim.demo import SimulatorSource
    from gputop.sources.slurm import SlurmSource


@dataclass(frozen=True, slots=True)
class Actor:
    runner: Runner
    env: Mapping[str, str] = field(default_factory=dict)
    after: Callable[[], None] = lambda: None  # read Slurm again at once, to show the new state soon
    demo: bool = False
    reread: Reread | None = None  # the nodes' state now, for an outcome that is unknown


def actor_for(sources: Iterable[object]) -> Actor | None:
    """The first source that can act; None where nothing can (no Slurm: drain and resume are refused)."""
    from gputop.sim.demo import SimulatorSource
    from gputop.sources.slurm import SlurmSource

    for source in sources:
        if isinstance(source, SlurmSource):
            return Actor(source.runner, dict(source.env), source.refresh, reread=_slurm_reread(source))
        if isinstance(source, SimulatorSource):
            return _demo_actor(source)
    return None


def states_of(nodes: Sequence[str], slurm: SlurmState) -> dict[str, str]:
    """Each node's Slurm state in words, with its reason: what the dialog and the audit log say after an
    unknown outcome."""
    states: dict[str, str] = {}
    slurm = align_slurm_names(slurm, frozenset(nodes))  # read afresh: keyed by Slurm's own spelling
    for name in nodes:
        node = slurm.nodes.get(name)
        if node is None:
            states[name] = "not listed by Slurm"
            continue
        reason = f" (reason: {node.reason})" if node.reason else ""
        states[name] = f"{node.label}{reason}"
    return states


def _slurm_reread(source: SlurmSource) -> Reread:
    async def reread(nodes: tuple[str, ...]) -> Mapping[str, str] | str:
        state = await source.read_once()
        if state.error:
            return f"Slurm could not be read again: {state.error}"
        return states_of(nodes, state)

    return reread


def _demo_actor(source: SimulatorSource) -> Actor:
    from gputop.sim.demo_actions import SimulatedScontrol

    async def reread(nodes: tuple[str, ...]) -> Mapping[str, str] | str:
        result = source.cluster.result()
        return states_of(nodes, result.slurm) if result.slurm is not None else "the demo has no Slurm"

    # The simulator is built when its source starts: look it up when an action runs.
    return Actor(SimulatedScontrol(lambda: source.cluster), demo=True, reread=reread)
