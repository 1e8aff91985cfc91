"""Runs a planned node action with its record before and after (`gputop.actions.audit`).

The intent is on disk before scontrol starts, or scontrol does not start. The outcome follows once it has
ended: done, failed, or unknown. Unknown is said as unknown, never as failed: when the link to the login
node drops after ``scontrol update`` was sent, or the time runs out, or gputop is stopped while it runs,
the node may well be drained. Then the nodes' state is read again, and what Slurm says now is shown and
recorded.

Nothing is retried: a failed scontrol is shown verbatim and left for the user to judge, since running it
again could act twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace

from gputop.actions.audit import AuditError, AuditLog, Intent, Result
from gputop.core.node_actions import NodeActionPlan
from gputop.sources.slurm_runner import RunFailed, Runner

ACTION_TIMEOUT_S = 30.0
REREAD_TIMEOUT_S = 15.0

# Reads the named nodes' state again: {node: state words} or why it could not.
Reread = Callable[[tuple[str, ...]], Awaitable[Mapping[str, str] | str]]


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    plan: NodeActionPlan
    where: str  # "local", the ssh host, or "demo"
    result: Result | None  # None: refused before it ran (the intent could not be recorded)
    exit_status: int | None  # None: no exit status (it did not start, timed out, connection lost)
    output: str  # what scontrol printed (stdout then stderr), or why it did not run
    audit_error: str | None = None  # the intent is on disk but the outcome is not: say so loudly
    states_now: Mapping[str, str] | None = None  # after an unknown outcome: what Slurm says now
    reread_error: str | None = None  # ... or why it could not be read

    @property
    def ok(self) -> bool:
        return self.result == "done"

    @property
    def refused(self) -> bool:
        return self.result is None


async def execute(
    plan: NodeActionPlan,
    runner: Runner,
    audit: AuditLog,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = ACTION_TIMEOUT_S,
    reread: Reread | None = None,
) -> ActionOutcome:
    try:
        intent = audit.intent(plan.action, plan.argv, plan.nodes, runner.where)
    except AuditError as err:
        return ActionOutcome(plan, runner.where, None, None, f"not run: {err}")
    result: Result
    try:
        done = await runner.run(plan.argv, dict(env or {}), timeout_s)
    except RunFailed as failed:
        status: int | None = None
        output = failed.reason
        result = "unknown" if failed.started else "failed"
    except asyncio.CancelledError:
        # gputop is stopping (SIGTERM, SIGHUP) while scontrol runs: what it did is unknown.
        audit.outcome(intent, "unknown", None, "", why="gputop was stopped while the command ran")
        raise
    else:
        status, output = done.exit_status, done.output
        result = "done" if status == 0 else "failed"
        if status is None:
            result, output = "unknown", "\n".join(filter(None, ("killed by a signal", output)))
    why = "connection lost or timed out after the command was sent" if result == "unknown" else None
    audit_error = audit.outcome(intent, result, status, output, why=why)
    outcome = ActionOutcome(plan, runner.where, result, status, output, audit_error)
    if result == "unknown" and reread is not None:
        outcome = await _read_again(outcome, reread, audit, intent)
    return outcome


async def _read_again(
    outcome: ActionOutcome, reread: Reread, audit: AuditLog, intent: Intent
) -> ActionOutcome:
    try:
        states = await asyncio.wait_for(reread(outcome.plan.nodes), REREAD_TIMEOUT_S)
    except TimeoutError:
        states = f"no answer within {REREAD_TIMEOUT_S:g}s"
    if isinstance(states, str):
        audit.reread(intent, {}, error=states)
        return replace(outcome, reread_error=states)
    audit.reread(intent, dict(states))
    return replace(outcome, states_now=dict(states))
