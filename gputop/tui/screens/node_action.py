"""The drain/resume dialog: the exact command, the nodes and the jobs it touches, a required reason, and
Cancel focused, so nothing runs by accident. More than one node asks for the count to be typed."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from gputop.actions.actor import Actor
from gputop.actions.execute import ActionOutcome, execute
from gputop.core.models import SlurmState
from gputop.core.node_actions import NodeAction, NodeActionPlan, Refused, plan_node_action

MAX_JOBS_SHOWN = 8


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
    ) -> None:
        super().__init__()
        self.action_name = action
        self.nodes = tuple(nodes)
        self.cluster_nodes = cluster_nodes
        self.slurm = slurm
        self.actor = actor
        self.cluster = cluster
        self.audit_log = audit_log
        self.initial_reason = reason
        self.on_done = on_done
        self.plan: NodeActionPlan | Refused = self._plan(reason)
        self.outcome: ActionOutcome | None = None

    def _plan(self, reason: str) -> NodeActionPlan | Refused:
        return plan_node_action(self.action_name, self.nodes, self.cluster_nodes, reason, self.slurm)

    # -- layout -----------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        verb = "Drain" if self.action_name == "drain" else "Resume"
        count = len(set(self.nodes))
        with Vertical(id="dialog"):
            yield Static(f"{verb} {count} node{'s' if count != 1 else ''}", id="title")
            yield Static("", id="nodes", markup=False)
            if self.action_name == "drain":
                yield Static("Reason (required; Slurm shows it to whoever resumes the node):")
                yield Input(self.initial_reason, id="reason")
            if count > 1:
                yield Static(f"Type {count} to confirm:")
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
            refused.update(f"Refused: {plan.reason}")
            refused.add_class("shown")
            self.query_one("#command", Static).update("")
            self.query_one("#run", Button).disabled = True
            return
        refused.remove_class("shown")
        already = ""
        if plan.already:
            state = "drained or draining" if plan.action == "drain" else "not drained"
            already = f"\nalready {state} (no harm in running it): {', '.join(plan.already)}"
        self.query_one("#nodes", Static).update(f"nodes: {plan.nodeset}{already}")
        self.query_one("#command", Static).update(
            f"runs {'in the demo simulator' if self.actor.demo else 'on ' + self.actor.runner.where}:\n"
            f"{plan.command_line}"
        )
        self.query_one("#jobs", Static).update(self._jobs_text(plan))
        self.query_one("#run", Button).disabled = not self._confirmed(plan)

    @staticmethod
    def _jobs_text(plan: NodeActionPlan) -> str:
        if not plan.running_jobs:
            return "no running jobs on these nodes" if plan.action == "drain" else ""
        lines = [
            f"  {job.job_id} {job.user} {job.name} on {','.join(job.nodes or tuple(job.gpus_by_node))}"
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
        if not plan.needs_count_typed:
            return True
        return self.query_one("#count", Input).value == str(len(plan.nodes))

    # -- events -----------------------------------------------------------------------------------------
    @on(Input.Changed, "#reason")
    def _reason_changed(self, event: Input.Changed) -> None:
        self.plan = self._plan(event.value)
        self._show_plan()

    @on(Input.Changed, "#count")
    def _count_changed(self) -> None:
        self._show_plan()

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(self.outcome)

    @on(Button.Pressed, "#run")
    def _run_pressed(self) -> None:
        if isinstance(self.plan, NodeActionPlan) and self._confirmed(self.plan):
            self.query_one("#run", Button).disabled = True
            for widget in self.query(Input):
                widget.disabled = True
            outcome = self.query_one("#outcome", Static)
            outcome.update("running ...")
            outcome.add_class("shown")
            self._run(self.plan)

    @work(exclusive=True, group="node-action")
    async def _run(self, plan: NodeActionPlan) -> None:
        outcome = await execute(
            plan,
            self.actor.runner,
            cluster=self.cluster,
            audit_log=self.audit_log,
            env=self.actor.env,
            demo=self.actor.demo,
        )
        self.outcome = outcome
        self.actor.after()
        text = "done" if outcome.ok else f"FAILED (exit status {outcome.exit_status})"
        if outcome.exit_status is None:
            text = "FAILED: it did not run to an exit"
        lines = [text]
        if outcome.output:
            lines.append(outcome.output)
        if outcome.audit_error:
            lines.append(f"WARNING: {outcome.audit_error}")
        self.query_one("#outcome", Static).update("\n".join(lines))
        self.query_one("#cancel", Button).label = "Close"
        self.query_one("#cancel", Button).focus()
        if self.on_done is not None:
            self.on_done(outcome)
