"""Runs a planned node action and records it: the audit line is on disk before the outcome is shown.

Nothing is retried: a failed scontrol is shown verbatim and left for the user to judge, since running it
again could act twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gputop.actions.audit import audit_or_reason
from gputop.core.node_actions import NodeActionPlan
from gputop.sources.slurm_runner import RunFailed, Runner

ACTION_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class ActionOutcome:
    plan: NodeActionPlan
    where: str  # "local", the ssh host, or "demo"
    exit_status: int | None  # None: no exit status (timed out, connection lost, not found)
    output: str  # what scontrol printed (stdout then stderr), or why it did not run
    audit_error: str | None = None  # the action happened but could not be logged: say so loudly

    @property
    def ok(self) -> bool:
        return self.exit_status == 0


async def execute(
    plan: NodeActionPlan,
    runner: Runner,
    *,
    cluster: str,
    audit_log: str,
    env: Mapping[str, str] | None = None,
    timeout_s: float = ACTION_TIMEOUT_S,
    demo: bool = False,
) -> ActionOutcome:
    try:
        done = await runner.run(plan.argv, dict(env or {}), timeout_s)
        status: int | None = done.exit_status
        output = done.output
    except RunFailed as failed:
        status, output = None, failed.reason
    audit_error = audit_or_reason(
        audit_log,
        cluster=cluster,
        action=plan.action,
        argv=plan.argv,
        targets=plan.nodes,
        exit_status=status,
        output=output,
        where=runner.where,
        demo=demo,
    )
    return ActionOutcome(plan, runner.where, status, output, audit_error)
