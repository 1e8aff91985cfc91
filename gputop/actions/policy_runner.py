"""Runs the auto-drain policy (gputop.core.drain_policy) on each view: records every decision, acts on
the ones that act, keeps the policy's state on disk, and tells the webhook.

The order for a drain, so that stopping at any point leaves the audit log, the state file and Slurm
consistent:
1. the decision record (if it cannot be written, nothing more happens: no record, no deed);
2. the policy's state with the drain as unconfirmed, saved;
3. the drain through `gputop.actions.execute` (its intent before scontrol runs, its outcome after; a
   SIGTERM while scontrol runs writes an "unknown" outcome);
4. the state confirmed (done) or the drain forgotten (failed); an unknown one stays unconfirmed, and the
   next tick settles it by what Slurm shows (drained with a ``gputop:`` reason: it was made).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gputop.actions.actor import Actor
from gputop.actions.audit import AuditError, AuditLog
from gputop.actions.execute import ActionOutcome, execute
from gputop.actions.state_file import HeldLock, load_json, save_json
from gputop.actions.webhook import Webhook
from gputop.core.drain_policy import Decision, DrainPolicy, PolicyState
from gputop.core.node_actions import NodeAction, Refused, plan_node_action
from gputop.core.summary import ClusterView

Say = Callable[[str], None]
MAX_WEBHOOKS_IN_FLIGHT = 32  # past this, a decision's webhook is dropped and said: never a backlog


@dataclass(frozen=True, slots=True)
class Step:
    """One decision and what came of it."""

    decision: Decision
    outcome: ActionOutcome | None = None  # None: nothing was run (dry-run, or a decision that does not act)
    error: str | None = None  # why it was not acted on (the audit log, a refused plan)

    @property
    def line(self) -> str:
        """One line for a terminal or a log: when, what, where, why."""
        d = self.decision
        verb = f"would {d.verdict}" if d.dry_run and d.acts else d.verdict
        text = f"{verb} {d.node}: {d.why}"
        if d.reason and d.acts:
            text += f" [reason: {d.reason}]"
        if self.outcome is not None and not self.outcome.ok:
            text += f" -> {self.outcome.result or 'refused'}: {self.outcome.output.strip()[:300]}"
        if self.error:
            text += f" -> not acted on: {self.error}"
        return text


def outcome_fields(outcome: ActionOutcome | None) -> dict[str, Any] | None:
    if outcome is None:
        return None
    return {
        "result": outcome.result or "refused",
        "exit_status": outcome.exit_status,
        "output": outcome.output[:2000],
    }


class PolicyRunner:
    def __init__(
        self,
        policy: DrainPolicy,
        *,
        actor: Actor | None,
        audit: AuditLog,
        state_path: Path,
        webhook: Webhook | None = None,
        say: Say = lambda _text: None,
    ) -> None:
        self.policy = policy
        self.actor = actor
        self.audit = audit
        self.state_path = state_path
        self.webhook = webhook
        self.say = say
        self.lock = HeldLock(state_path)
        self.reset_request_path = state_path.with_name(state_path.name + ".reset")
        self._webhooks: set[asyncio.Task[None]] = set()

    # -- life cycle ---------------------------------------------------------------------------------------
    def start(self) -> str | None:
        """Takes the cluster's policy lock and reads the saved state; why it cannot run, or None."""
        held = self.lock.acquire()
        if held is not None:
            return held
        problem = self.audit.problem()
        if problem is not None:
            self.lock.release()
            return f"every decision is recorded, and {problem}"
        loaded = load_json(self.state_path, "the policy's state")
        if loaded.message is not None:
            self.say(loaded.message)
        if loaded.document is not None:
            state = PolicyState.from_document(loaded.document)
            if isinstance(state, str):
                from gputop.actions.state_file import set_aside

                self.say(set_aside(self.state_path, "the policy's state", state))
            else:
                self.policy.state = state
        return None

    async def close(self) -> None:
        self.save()
        if self._webhooks:
            await asyncio.wait(self._webhooks, timeout=self.webhook.timeout_s if self.webhook else 1.0)
        if self.webhook is not None:
            await self.webhook.close()
        self.lock.release()

    def save(self) -> None:
        """Saves the policy's state; in dry-run nothing (what it would have done is not what it did)."""
        if self.policy.config.dry_run:
            return
        problem = save_json(self.state_path, self.policy.state.to_document())
        if problem is not None:
            self.say(f"the policy's state could not be saved: {problem}")

    # -- each tick --------------------------------------------------------------------------------------
    async def step(self, view: ClusterView, now_s: float) -> list[Step]:
        self._take_reset_request()
        steps: list[Step] = []
        breaker_was_open = self.policy.state.breaker_open
        for decision in self.policy.decide(view, now_s):
            step = await self._carry_out(decision, view)
            steps.append(step)
            self.say(step.line)
            self._notify(step)
        if self.policy.state.breaker_open != breaker_was_open or any(s.decision.acts for s in steps):
            self.save()
        return steps

    async def _carry_out(self, decision: Decision, view: ClusterView) -> Step:
        try:
            self.audit.decision({"action": "policy", **decision.to_record()})
        except AuditError as err:
            self.policy.failed(decision)
            return Step(decision, error=str(err))
        if not decision.acts:
            return Step(decision)
        if decision.dry_run:
            if decision.verdict == "drain":
                self.policy.drained(decision)
            else:
                self.policy.resumed(decision)
            return Step(decision)
        if self.actor is None:
            self.policy.failed(decision)
            return Step(decision, error="nothing here can act on Slurm (no Slurm source)")
        slurm = view.snapshot.slurm
        action: NodeAction = "drain" if decision.verdict == "drain" else "resume"
        plan = plan_node_action(action, [decision.node], view.rows.keys(), decision.reason or None, slurm)
        if isinstance(plan, Refused):
            self.policy.failed(decision)
            return Step(decision, error=plan.reason)
        if action == "drain":
            self.policy.drained(decision, confirmed=False)
            self.save()  # the state before the deed: stopped during scontrol, the next start settles it
        actor = self.actor
        outcome = await execute(plan, actor.runner, self.audit, env=actor.env, reread=actor.reread)
        actor.after()
        if action == "drain":
            if outcome.ok:
                self.policy.confirm(decision)
            elif outcome.result != "unknown":
                self.policy.undrain(decision)
        elif outcome.ok:
            self.policy.resumed(decision)
        else:
            self.policy.failed(decision)
        return Step(decision, outcome)

    # -- the breaker -------------------------------------------------------------------------------------
    def reset_breaker(self, by: str) -> str:
        """A person closes the breaker: recorded in the audit log, saved; what it said."""
        was = self.policy.state.breaker_why
        self.audit.decision({"action": "policy", "decision": "breaker-reset", "by": by, "was": was})
        why = self.policy.reset_breaker()
        self.save()
        return f"circuit breaker reset by {by}" + (f" (it said: {why})" if why else " (it was closed)")

    def _take_reset_request(self) -> None:
        """`gputop watch --reset-breaker`, run while this policy holds the lock, leaves a request file."""
        try:
            by = self.reset_request_path.read_text(encoding="utf-8", errors="replace")[:200].strip()
        except OSError:
            return
        try:
            os.unlink(self.reset_request_path)
        except OSError:
            return
        try:
            self.say(self.reset_breaker(by or "unknown"))
        except AuditError as err:
            self.say(f"the breaker reset was not recorded, so not made: {err}")

    # -- the webhook -------------------------------------------------------------------------------------
    def _notify(self, step: Step) -> None:
        webhook = self.webhook
        if webhook is None:
            return
        if len(self._webhooks) >= MAX_WEBHOOKS_IN_FLIGHT:
            self.say(f"webhook {webhook.shown}: {len(self._webhooks)} posts pending, this decision not sent")
            return

        async def post() -> None:
            problem = await webhook.send(step.decision, outcome_fields(step.outcome))
            if problem is not None:
                self.say(problem)

        task = asyncio.get_running_loop().create_task(post())
        self._webhooks.add(task)
        task.add_done_callback(self._webhooks.discard)
