"""Runs planned MIG commands on one node, in order, and records each: repartitioning (gputop.core.mig_plan
MigStep) and MIG mode changes (ModeStep) go the same way.

Each step has its timeout; its intent is in the audit log before it starts (or it does not start) and its
outcome (done, failed, unknown) before it is reported; the first step that does not exit 0 stops the run,
and the rest are not run. Nothing is retried: a failed step may have done part of its work (``-dci`` of
several compute instances), and only a fresh read of the listings says what the GPU holds now.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gputop.actions.audit import AuditError, AuditLog, Result
from gputop.sources.slurm_runner import LocalRunner, RunFailed, Runner

if TYPE_CHECKING:
    from gputop.sim.demo import SimulatorSource

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
    audit_error: str | None = None  # its intent is on disk but its outcome is not: say so loudly
    result: Result | None = "done"  # None: not run, its intent could not be recorded

    @property
    def ok(self) -> bool:
        return self.result == "done" and self.exit_status == 0


@dataclass(frozen=True, slots=True)
class MigRun:
    node: str
    where: str  # "local", the node's ssh host, or "demo"
    outcomes: tuple[StepOutcome, ...]  # the steps that ran (or were refused), in order
    not_run: tuple[Step, ...]  # the steps after a failure

    @property
    def ok(self) -> bool:
        return not self.not_run and all(o.ok for o in self.outcomes)


async def run_steps(
    steps: Sequence[Step],
    runner: Runner,
    audit: AuditLog,
    *,
    node: str,
    timeout_s: float,
    on_step: Callable[[StepOutcome], None] = lambda _outcome: None,
) -> MigRun:
    """Runs ``steps`` on ``node`` through ``runner``, each with its intent recorded before it starts and
    its outcome after; ``on_step`` hears each outcome once it is logged. A step whose intent cannot be
    recorded is not run, and neither is any after it."""
    outcomes: list[StepOutcome] = []
    for at, step in enumerate(steps):
        target = [f"{node}:GPU{step.gpu_index}"]
        try:
            intent = audit.intent(AUDIT_ACTION, step.argv, target, runner.where)
        except AuditError as err:
            outcome = StepOutcome(step, None, f"not run: {err}", result=None)
        else:
            try:
                result, status, output = await _run_one(step, runner, timeout_s)
            except asyncio.CancelledError:
                audit.outcome(intent, "unknown", None, "", why="gputop was stopped while the step ran")
                raise
            audit_error = audit.outcome(intent, result, status, output)
            outcome = StepOutcome(step, status, output, audit_error, result)
        outcomes.append(outcome)
        on_step(outcome)
        if not outcome.ok:
            return MigRun(node, runner.where, tuple(outcomes), tuple(steps[at + 1 :]))
    return MigRun(node, runner.where, tuple(outcomes), ())


async def _run_one(step: Step, runner: Runner, timeout_s: float) -> tuple[Result, int | None, str]:
    try:
        done = await asyncio.wait_for(runner.run(step.argv, {}, timeout_s), timeout_s + RUNNER_GRACE_S)
    except RunFailed as failed:
        return ("unknown" if failed.started else "failed"), None, failed.reason
    except TimeoutError:
        return "unknown", None, f"{step.argv[0]} did not finish within {timeout_s:g}s (abandoned)"
    output = done.output
    if done.exit_status is None:
        return "unknown", None, "\n".join(filter(None, ("killed by a signal", output)))
    return ("done" if done.exit_status == 0 else "failed"), done.exit_status, output


def node_runner_for(sources: Iterable[object], node: str) -> Runner | None:
    """Where commands for ``node`` run: over SSH with its cluster's settings, here for a local NVML
    cluster, on the simulator in the demo; None where no source reads that node."""
    from gputop.sim.demo import SimulatorSource
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
    from gputop.sim.demo_actions import SimulatedNodeRunner

    # Looked up at each command: the simulator is built when its source starts.
    return SimulatedNodeRunner(lambda: source.cluster, node)
