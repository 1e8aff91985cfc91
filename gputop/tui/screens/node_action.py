"""The drain/resume dialog: the exact command, the nodes and the jobs it touches, a required reason, and
Cancel focused, so nothing runs by accident. More than one node asks for the count to be typed, and so does
a resume of a node that still has critical problems; a resume shows why each node was drained and what is
still wrong with it. All of it shows from the start, before a reason is typed (the command with a
placeholder); keys typed while a button has the focus go to the reason.

Nothing runs unless its intent can be recorded: an audit log that cannot be written is said at once and
the run button stays off. Once the command is started the dialog stays until its outcome is known and on
record (Escape and Cancel wait), and an outcome that is unknown is said as unknown, with what Slurm says
of the nodes now."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from gputop.actions.actor import Actor
from gputop.actions.audit import AuditLog
from gputop.actions.execute import ActionOutcome, execute
from gputop.core.health import Problem
from gputop.core.models import SlurmState
from gputop.core.node_actions import NodeAction, NodeActionPlan, Refused, plan_node_action, resume_context
from gputop.core.nodeset import fold_nodes
from gputop.core.safe_text import safe_block, safe_line
from gputop.tui.typed_keys import type_into

MAX_JOBS_SHOWN = 8
MAX_REASON_SHOWN = 1000
REASON_PLACEHOLDER = "(type a reason)"


class NodeActionScreen(ModalScreen[ActionOutcome | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    DEFAULT_CSS = """
    NodeActionScreen { align: center middle; }
    #dialog { width: 90; max-width: 100%; height: auto; border: thick $error; background: $surface;
              padding: 1 2; }
    #title { text-style: bold; }
    #command { background: $boost; padding: 0 1; margin: 1 0; }
    #refused { color: $error; display: none; }
    #refused.shown { display: block; }
    #outcome { margin-top: 1; display: none; }
    #outcome.shown { display: block; }
    #buttons { height: auto; margin-top: 1; }
    #buttons Button { margin-right: 2; }
    """

    def __init__(
        self,
        action: NodeAction,
        nodes: Sequence[str],
        cluster_nodes: Collection[str],
        slurm: SlurmState | None,
        actor: Actor,
        *,
        cluster: str,
        audit_log: str,
        reason: str = "",
        on_done: Callable[[ActionOutcome], None] | None = None,
        problems: Mapping[str, Sequence[Problem]] | None = None,
    ) -> None:
        super().__init__()
        self.action_name = action
        self.nodes = tuple(nodes)
        self.cluster_nodes = cluster_nodes
        self.slurm = slurm
        self.actor = actor
        self.cluster = cluster
        self.audit = AuditLog(audit_log, cluster=cluster, demo=actor.demo)
        self.initial_reason = reason
        self.on_done = on_done
        self.plan: NodeActionPlan | Refused = self._plan(reason)
        self.outcome: ActionOutcome | None = None
        self.running = False
        self.context = resume_context(self.nodes, slurm, problems or {}) if action == "resume" else None
        count = len(set(self.nodes))
        # the count typed: for several nodes, and for a resume of a node that still has CRIT problems
        self.count_asked = count > 1 or bool(self.context and self.context.still_critical)

    def _plan(self, reason: str) -> NodeActionPlan | Refused:
        plan = plan_node_action(self.action_name, self.nodes, self.cluster_nodes, reason, self.slurm)
        problem = self.audit.problem()
        if problem is not None and isinstance(plan, NodeActionPlan):
            return Refused(f"{problem}; gputop does not act without a record")
        return plan

    # -- layout -----------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        verb = "Drain" if self.action_name == "drain" else "Resume"
        count = len(set(self.nodes))
        with Vertical(id="dialog"):
            yield Static(f"{verb} {count} node{'s' if count != 1 else ''}", id="title")
            yield Static("", id="nodes", markup=False)
            if self.context is not None and self.context.lines:
                yield Static(safe_block("\n".join(self.context.lines)), id="context", markup=False)
            if self.action_name == "drain":
                yield Static("Reason (required; Slurm shows it to whoever resumes the node):")
                yield Input(self.initial_reason, id="reason", select_on_focus=False)
            if self.count_asked:
                why = ""
                if self.context is not None and self.context.still_critical:
                    why = f"{fold_nodes(self.context.still_critical)} still has CRIT problems. "
                yield Static(safe_line(f"{why}Type {count} to confirm:"), markup=False)
                yield Input("", id="count", restrict=r"[0-9]*")
            yield Static("", id="command", markup=False)
            yield Static("", id="jobs", markup=False)
            yield Static("", id="refused", markup=False)
            yield Static("", id="outcome", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button(verb, id="run", variant="error", disabled=True)

    def on_mount(self) -> None:
        self._show_plan()
        self.query_one("#cancel", Button).focus()

    def _show_plan(self) -> None:
        plan = self.plan
        refused = self.query_one("#refused", Static)
        if isinstance(plan, Refused):
            refused.update(f"Refused: {safe_block(plan.reason)}")
            refused.add_class("shown")
            self.query_one("#run", Button).disabled = True
            # what it would do, all the same: the reason is what is missing, not the targets
            preview = plan_node_action(
                self.action_name, self.nodes, self.cluster_nodes, REASON_PLACEHOLDER, self.slurm
            )
            if isinstance(preview, NodeActionPlan):
                self._show_targets(preview)
            else:
                self.query_one("#command", Static).update("")
            return
        refused.remove_class("shown")
        self._show_targets(plan)
        self.query_one("#run", Button).disabled = not self._confirmed(plan)

    def _show_targets(self, plan: NodeActionPlan) -> None:
        already = ""
        if plan.already:
            state = "drained or draining" if plan.action == "drain" else "not drained"
            already = f"\nalready {state} (no harm in running it): {', '.join(plan.already)}"
        self.query_one("#nodes", Static).update(safe_block(f"nodes: {plan.nodeset}{already}"))
        where = "in the demo simulator" if self.actor.demo else f"on {self.actor.runner.where}"
        self.query_one("#command", Static).update(
            f"runs {safe_line(where)}:\n{safe_line(plan.command_line, 2 * MAX_REASON_SHOWN)}"
        )
        self.query_one("#jobs", Static).update(self._jobs_text(plan))

    @staticmethod
    def _jobs_text(plan: NodeActionPlan) -> str:
        if not plan.running_jobs:
            return "no running jobs on these nodes" if plan.action == "drain" else ""
        lines = [
            safe_line(
                f"  {job.job_id} {job.user} {job.name} on {','.join(job.nodes or tuple(job.gpus_by_node))}"
            )
            for job in plan.running_jobs[:MAX_JOBS_SHOWN]
        ]
        more = len(plan.running_jobs) - MAX_JOBS_SHOWN
        if more > 0:
            lines.append(f"  and {more} more")
        head = "jobs that keep running until they end:" if plan.action == "drain" else "running jobs:"
        return "\n".join([head, *lines])

    def _confirmed(self, plan: NodeActionPlan) -> bool:
        if self.outcome is not None:
            return False
        if not self.count_asked:
            return True
        return self.query_one("#count", Input).value == str(len(plan.nodes))

    # -- events -----------------------------------------------------------------------------------------
    def on_key(self, event: events.Key) -> None:
        """A key typed while a button has the focus (Cancel has it at first): text goes to the reason,
        as it was meant; with no reason to type, say why the key did nothing."""
        if not event.is_printable or event.character is None or self.running:
            return
        if not isinstance(self.focused, Button):  # the reason or the count takes its own keys
            return
        event.stop()
        reasons = self.query("#reason")
        if reasons and not reasons.first(Input).disabled:
            reason = reasons.first(Input)
            if reason.value == self.initial_reason:
                reason.value = ""  # typing starts a reason of one's own, as typing over a selection does
            self.set_focus(reason)
            type_into(reason, event.character)
            return
        self.notify(
            "nothing to type here: Tab moves between the buttons, Enter presses the one with the focus, "
            "Esc cancels",
            timeout=4,
        )

    @on(Input.Changed, "#reason")
    def _reason_changed(self, event: Input.Changed) -> None:
        self.plan = self._plan(event.value)
        self._show_plan()

    @on(Input.Changed, "#count")
    def _count_changed(self) -> None:
        self._show_plan()

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        if self.running:
            # scontrol is running: closing now would leave its outcome unseen (it is still recorded)
            self.notify("the command is running: its outcome is on its way", severity="warning", timeout=3)
            return
        self.dismiss(self.outcome)

    @on(Button.Pressed, "#run")
    def _run_pressed(self) -> None:
        if isinstance(self.plan, NodeActionPlan) and self._confirmed(self.plan):
            self.running = True
            self.query_one("#run", Button).disabled = True
            self.query_one("#cancel", Button).disabled = True
            for widget in self.query(Input):
                widget.disabled = True
            outcome = self.query_one("#outcome", Static)
            outcome.update("running ...")
            outcome.add_class("shown")
            self._run(self.plan)

    @work(exclusive=True, group="node-action")
    async def _run(self, plan: NodeActionPlan) -> None:
        app = self.app
        token = app.begin_action(f"{plan.action} {plan.nodeset}")  # type: ignore[attr-defined]
        try:
            outcome = await execute(
                plan, self.actor.runner, self.audit, env=self.actor.env, reread=self.actor.reread
            )
        finally:
            app.end_action(token)  # type: ignore[attr-defined]
        self.outcome = outcome
        self.running = False
        self.actor.after()
        self.query_one("#outcome", Static).update(safe_block(outcome_text(outcome)))
        cancel = self.query_one("#cancel", Button)
        cancel.label = "Close"
        cancel.disabled = False
        cancel.focus()
        if self.on_done is not None:
            self.on_done(outcome)


def outcome_text(outcome: ActionOutcome) -> str:
    """What became of the action, in words: done, failed and why, refused, or unknown and what Slurm
    says of the nodes now."""
    if outcome.refused:
        lines = ["REFUSED: nothing was run", outcome.output]
    elif outcome.ok:
        lines = ["done", outcome.output]
    elif outcome.result == "unknown":
        lines = [f"OUTCOME UNKNOWN ({outcome.output or 'no exit status'}): it may have taken effect"]
        if outcome.states_now is not None:
            lines.append("Slurm now says:")
            lines += [f"  {node}: {state}" for node, state in outcome.states_now.items()]
        elif outcome.reread_error is not None:
            lines.append(f"the nodes could not be read again: {outcome.reread_error}")
    elif outcome.exit_status is None:
        lines = ["FAILED: it did not run", outcome.output]
    else:
        lines = [f"FAILED (exit status {outcome.exit_status})", outcome.output]
    if outcome.audit_error:
        lines.append(f"WARNING: {outcome.audit_error}")
    return "\n".join(line for line in lines if line)
