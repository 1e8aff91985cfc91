"""Runs planned MIG commands on one node, in order, and records each: repartitioning (gputop.core.mig_plan
MigStep) and MIG mode changes (ModeStep) go the same way.

Each step has its timeout and is appended to the audit log before its outcome is reported; the first step
that does not exit 0 stops the run, and the rest are not run. Nothing is retried: a failed step may have
done part of its work (``-dci`` of several compute instances), and only a fresh read of the listings says
what the GPU holds now.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gputop.actions.audit import audit_or_reason
from gputop.sources.slurm_runner import LocalRunner, RunFailed, Runner

if TYPE_CHECKING:
    from gputop.sources.demo import SimulatorSource

AUDIT_ACTION = "mig"
# Past the step's own timeout, how long a runner gets to report it in its own words before the step is
# abandoned here: a runner that ignored its timeout must not hold the dialog forever.
RUNNER_GRACE_S = 2.0


class Step(Protocol):
    @property
    def gpu_index(self) -> int: ...

    @property
    def argv(self) -> tuple[str, ...]: ...

    @property
    def description(self) -> str: ...


@dataclass(frozen=True, slots=True)
class StepOutcome:
    step: Step
    exit_status: int | None  # None: no exit status (timed out, connection lost, refused)
    output: str  # stdout then stderr, or why it did not run
    audit_error: str | None = None  # it ran but could not be logged: say so loudly

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


@dataclass(frozen=True, slots=True)
class MigRun:
    node: str
    where: str  # "local", the node's ssh host, or "demo"
    outcomes: tuple[StepOutcome, ...]  # the steps that ran, in order
    not_run: tuple[Step, ...]  # the steps after a failure

    @property
    def ok(self) -> bool:
        return not self.not_run and all(o.ok for o in self.outcomes)


async def run_steps(
    steps: Sequence[Step],
    runner: Runner,
    *,
    node: str,
    cluster: str,
    audit_log: str,
    timeout_s: float,
    demo: bool = False,
    on_step: Callable[[StepOutcome], None] = lambda _outcome: None,
) -> MigRun:
    """Runs ``steps`` on ``node`` through ``runner``; ``on_step`` hears each outcome once it is logged."""
    outcomes: list[StepOutcome] = []
    for at, step in enumerate(steps):
        status, output = await _run_one(step, runner, timeout_s)
        audit_error = audit_or_reason(
            audit_log,
            cluster=cluster,
            action=AUDIT_ACTION,
            argv=step.argv,
            targets=[f"{node}:GPU{step.gpu_index}"],
            exit_status=status,
            output=output,
            where=runner.where,
            demo=demo,
        )
        outcome = StepOutcome(step, status, output, audit_error)
        outcomes.append(outcome)
        on_step(outcome)
        if not outcome.ok:
            return MigRun(node, runner.where, tuple(outcomes), tuple(steps[at + 1 :]))
    return MigRun(node, runner.where, tuple(outcomes), ())


async def _run_one(step: Step, runner: Runner, timeout_s: float) -> tuple[int | None, str]:
    try:
        done = await asyncio.wait_for(runner.run(step.argv, {}, timeout_s), timeout_s + RUNNER_GRACE_S)
    except RunFailed as failed:
        return None, failed.reason
    except TimeoutError:
        return None, f"{step.argv[0]} did not finish within {timeout_s:g}s (abandoned)"
    output = done.output
    if done.exit_status is None:
        output = "\n".join(filter(None, ("killed by a signal", output)))
    return done.exit_status, output


def node_runner_for(sources: Iterable[object], node: str) -> Runner | None:
    """Where commands for ``node`` run: over SSH with its cluster's settings, here for a local NVML
    cluster, on the simulator in the demo; None where no source reads that node."""
    from gputop.sources.demo import SimulatorSource
    from gputop.sources.nvml import NvmlSource
    from gputop.sources.ssh import SshSource

    for source in sources:
        if isinstance(source, SshSource) and node in source.cluster.node_names:
            from gputop.sources.slurm_runner import SshRunner

            return SshRunner(node, source.settings)
        if isinstance(source, NvmlSource) and source.node_name == node:
            return LocalRunner()
        if isinstance(source, SimulatorSource):
            return _simulated(source, node)
    return None


def _simulated(source: SimulatorSource, node: str) -> Runner:
    from gputop.sources.demo_actions import SimulatedNodeRunner

    # Looked up at each command: the simulator is built when its source starts.
    return SimulatedNodeRunner(lambda: source.cluster, node)
