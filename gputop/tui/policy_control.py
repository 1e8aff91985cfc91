"""The dashboard's side of the auto-drain policy and the event history.

- The event history (gputop.core.event_history) is fed by every view and kept in its file in the state
  directory; the drains made from the dashboard's dialog are recorded in it with their cause, so the
  "drained twice for the same cause" rule sees them too. The demo keeps its history in memory only: its
  past is simulated afresh at each start.
- The policy is the one `gputop watch` runs (gputop.actions.policy_runner), switched on and off with P,
  or on from the start by ``policy.enabled``. Each decision is a notice; the header says whether it is on,
  in dry-run, or stopped by its circuit breaker. Only one policy acts on a cluster: where `gputop watch`
  already runs it, switching it on here says so and does nothing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from gputop.actions.audit import AuditError, AuditLog
from gputop.actions.execute import ActionOutcome
from gputop.actions.history_keeper import HistoryKeeper
from gputop.actions.policy_runner import PolicyRunner, Step
from gputop.actions.state_file import history_path, policy_path
from gputop.actions.webhook import webhook_for
from gputop.core.drain_policy import DrainPolicy
from gputop.core.event_history import EventHistory, cause_key
from gputop.core.models import Severity
from gputop.core.summary import ClusterView

if TYPE_CHECKING:
    from gputop.tui.app import GputopApp

Notify = Callable[[str, str], None]  # (message, severity)


class PolicyControl:
    def __init__(self, app: GputopApp) -> None:
        self.app = app
        settings = app.settings
        self.history = EventHistory()
        self.keeper: HistoryKeeper | None = None
        if not settings.is_demo and settings.replay is None:  # a replay's past is not this cluster's now
            path = history_path(settings.cluster_name, os.environ)
            self.keeper = HistoryKeeper(path, self.history, self._say_warning)
        self.runner: PolicyRunner | None = None
        self._busy = False

    # -- life cycle -------------------------------------------------------------------------------------
    def start(self) -> None:
        """Reads the history; switches the policy on where the config says so."""
        if self.keeper is not None:
            self.keeper.load()
        if self.app.settings.config.policy.enabled and not self.app.read_only:
            self.switch(on=True)

    def close(self) -> None:
        """At exit: the policy's state and the history on disk, the lock let go (webhooks still in
        flight are dropped with the loop)."""
        runner, self.runner = self.runner, None
        if runner is not None:
            # nothing to tell if it cannot be written: the app is going, and no deed waits on it
            with contextlib.suppress(AuditError):
                runner.audit.decision({"action": "policy", "decision": "stopped", "from": "dashboard"})
            runner.save()
            runner.lock.release()
        if self.keeper is not None:
            self.keeper.maybe_save(self.app.clock.now(), force=True)

    @property
    def badge(self) -> str | None:
        """What the header says of the policy (None: off)."""
        runner = self.runner
        if runner is None:
            return None
        dry = runner.policy.config.dry_run
        if runner.policy.state.breaker_open:
            return "POLICY DRY-RUN: BREAKER OPEN" if dry else "POLICY STOPPED: BREAKER OPEN"
        return "POLICY DRY-RUN" if dry else "POLICY ON"

    # -- the switch -------------------------------------------------------------------------------------
    def switch(self, *, on: bool | None = None) -> None:
        wanted = self.runner is None if on is None else on
        if wanted and self.runner is None:
            self._start_runner()
        elif not wanted and self.runner is not None:
            self.app.run_worker(self._stop_runner(), group="policy-switch")
            self.app.notify("auto-drain policy off", timeout=5)

    def _start_runner(self) -> None:
        app = self.app
        if app.actor is None:
            app.notify(
                "the auto-drain policy needs Slurm to act on (slurm.enabled is false)", severity="error"
            )
            return
        settings = app.settings
        config = settings.config.policy
        audit = AuditLog(settings.audit_log, cluster=settings.cluster_name, demo=settings.is_demo)
        webhook = webhook_for(config, settings.cluster_name)
        state_path = policy_path(config.state_file, settings.cluster_name, os.environ, demo=settings.is_demo)
        runner = PolicyRunner(
            DrainPolicy(config, history=self.history),
            actor=app.actor,
            audit=audit,
            state_path=state_path,
            webhook=webhook,
            say=self._say_warning,
        )
        problem = runner.start()
        if problem is not None:
            app.notify(f"auto-drain policy not started: {problem}", severity="error", timeout=15)
            return
        try:
            audit.decision(
                {"action": "policy", "decision": "started", "dry_run": config.dry_run, "from": "dashboard"}
            )
        except AuditError as err:
            runner.lock.release()
            app.notify(f"auto-drain policy not started: {err}", severity="error", timeout=15)
            return
        self.runner = runner
        mode = "dry run: it decides and records, and does not act" if config.dry_run else "it drains nodes"
        app.notify(f"auto-drain policy on ({mode}); P switches it off", severity="warning", timeout=8)

    async def _stop_runner(self) -> None:
        runner, self.runner = self.runner, None
        if runner is None:
            return
        try:
            runner.audit.decision({"action": "policy", "decision": "stopped", "from": "dashboard"})
        except AuditError as err:
            self._say_warning(str(err))
        await runner.close()

    def reset_breaker(self, by: str) -> None:
        runner = self.runner
        if runner is None:
            self.app.notify("the auto-drain policy is off: P switches it on", severity="warning")
            return
        try:
            self.app.notify(runner.reset_breaker(by), timeout=8)
        except AuditError as err:
            self.app.notify(f"breaker not reset: the reset could not be recorded: {err}", severity="error")

    # -- each view ----------------------------------------------------------------------------------------
    def on_view(self, view: ClusterView) -> None:
        if self.keeper is not None:
            self.keeper.maybe_save(view.snapshot.taken_at_s)
        if self.runner is not None and not self._busy:
            self._busy = True
            self.app.run_worker(self._step(self.runner, view), group="policy", exit_on_error=False)

    async def _step(self, runner: PolicyRunner, view: ClusterView) -> None:
        # a stop asked for while it runs waits for it: a drain is recorded before gputop goes
        token = self.app.begin_action("the auto-drain policy")
        try:
            steps = await runner.step(view, self.app.clock.now())
        finally:
            self._busy = False
            self.app.end_action(token)
        for step in steps:
            self._show(step)

    def _show(self, step: Step) -> None:
        acts = step.decision.acts or step.decision.verdict == "breaker"
        failed = step.error is not None or (step.outcome is not None and not step.outcome.ok)
        severity = (
            "error" if failed or step.decision.verdict == "breaker" else "warning" if acts else "information"
        )
        self.app.notify(f"policy: {step.line}", severity=severity, timeout=15 if acts else 6)  # type: ignore[arg-type]

    def _say_warning(self, text: str) -> None:
        if self.app.is_running:
            self.app.notify(text, severity="warning", timeout=10)

    # -- drains made from the dialog ------------------------------------------------------------------------
    def note_dialog_drain(self, outcome: ActionOutcome, view: ClusterView | None) -> None:
        """A drain made from the dialog counts for the repeat rule, under its node's worst problem."""
        if not outcome.ok or outcome.plan.action != "drain" or view is None:
            return
        now_s = self.app.clock.now()
        for name in outcome.plan.nodes:
            row = view.rows.get(name)
            if row is None:
                continue
            ranked = [p for p in row.problems if p.kind != "slurm" and p.severity is not Severity.OK]
            if ranked:
                worst = min(ranked, key=lambda p: p.sort_key)
                self.history.note_drain(name, cause_key(worst.kind, worst.subject), now_s, "dashboard")
