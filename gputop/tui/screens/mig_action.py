"""What the two MIG dialogs (repartition, MIG mode) share: the GPUs they act on, the preconditions checked
against every new snapshot until the run starts (with the offer to drain a node that is not drained), the
exact commands with where they run, the count typed for several GPUs, Cancel focused, then the run step by
step (each step's outcome shown once its audit line is on disk), and a re-read of the node that says
whether the GPUs reached what was planned.

A subclass plans (`make_plan`), may add controls (`compose_choices`) and judges the re-read (`verify`).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from gputop.actions.audit import AuditLog
from gputop.actions.mig import MigRun, Step, StepOutcome, run_steps
from gputop.core.config import MigConfig
from gputop.core.mig_preconditions import PreconditionFailure
from gputop.core.models import NodeSample, SlurmState
from gputop.core.safe_text import safe_block, safe_line
from gputop.core.summary import ClusterView
from gputop.sources.slurm_runner import Runner

Phase = Literal["editing", "running", "rereading", "done"]
# Step marks: the glyph says it, so colour is never the only sign.
# The dialog's rows besides its scrolled body: border, and the buttons with their margin.
_FRAME_ROWS = 6
_MARKS = {"planned": " ", "ok": "\u2713", "failed": "\u2717", "not_run": "-"}


@dataclass(frozen=True, slots=True)
class Planned:
    """What a dialog would run now, or why it may not."""

    steps: tuple[Step, ...] = ()
    summary: str = ""  # what the steps do, in words
    refusal: str | None = None  # the planner's reason this cannot be done
    failures: tuple[PreconditionFailure, ...] = ()
    note: str | None = None  # shown instead of steps: nothing chosen yet, or the GPUs already are as asked


@dataclass(frozen=True, slots=True)
class Verdict:
    text: str
    final: bool  # False: say it, and keep looking at the next reads


class MigActionScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    RUN_LABEL = "Run"
    PRECONDITIONS = "no processes on the GPUs, the node drained (or not in Slurm)"
    # How long after a run the dialog watches new reads of the node before it gives its last word.
    REREAD_WAIT_S = 20.0

    DEFAULT_CSS = """
    MigActionScreen { align: center middle; }
    MigActionScreen #dialog { width: 100; max-width: 100%; height: auto; max-height: 100%;
        border: thick $error; background: $surface; padding: 0 1; }
    MigActionScreen #body { height: auto; }
    MigActionScreen #title { text-style: bold; }
    MigActionScreen .line { margin-top: 1; }
    MigActionScreen #checks { margin-top: 1; }
    MigActionScreen #drain { display: none; margin-top: 1; }
    MigActionScreen #drain.shown { display: block; }
    MigActionScreen #steps { background: $boost; padding: 0 1; margin-top: 1; }
    MigActionScreen #verdict { margin-top: 1; display: none; }
    MigActionScreen #verdict.shown { display: block; }
    MigActionScreen #buttons { height: auto; margin-top: 1; }
    MigActionScreen #buttons Button { margin-right: 2; }
    """

    def __init__(
        self,
        node: str,
        gpu_indices: Sequence[int],
        view: ClusterView,
        *,
        runner: Runner | None,
        mig: MigConfig,
        cluster: str,
        audit_log: str,
        refresh: Callable[[], None],
        demo: bool = False,
    ) -> None:
        super().__init__()
        self.node = node
        self.gpu_indices = tuple(sorted(set(gpu_indices)))
        self.view = view
        self.runner = runner
        self.mig = mig
        self.cluster = cluster
        self.audit = AuditLog(audit_log, cluster=cluster, demo=demo)
        self.refresh_source = refresh
        self.demo = demo
        self.phase: Phase = "editing"
        self.planned = Planned()
        self.outcomes: list[StepOutcome] = []
        self.run: MigRun | None = None

    # -- for subclasses -----------------------------------------------------------------------------------
    def title_text(self) -> str:
        raise NotImplementedError

    def compose_choices(self) -> ComposeResult:
        yield from ()

    def make_plan(self, node: NodeSample, slurm: SlurmState | None) -> Planned:
        raise NotImplementedError

    def verify(self, node: NodeSample, run: MigRun, *, last: bool) -> Verdict:
        """What the node shows after ``run``; ``last``: the wait is over, so the verdict must be final."""
        raise NotImplementedError

    # -- layout -------------------------------------------------------------------------------------------
    @property
    def gpus_text(self) -> str:
        shown = ", ".join(map(str, self.gpu_indices))
        return f"{self.node} GPU {shown}" if len(self.gpu_indices) == 1 else f"{self.node} GPUs {shown}"

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            with VerticalScroll(id="body"):
                yield Static(self.title_text(), id="title", markup=False)
                yield Static("", id="checks", markup=False)
                yield Button(f"Drain {self.node} first", id="drain", variant="warning")
                yield from self.compose_choices()
                if len(self.gpu_indices) > 1:
                    count = len(self.gpu_indices)
                    yield Static(f"Type {count} (the number of GPUs) to confirm:", classes="line")
                    yield Input("", id="count", restrict=r"[0-9]*")
                yield Static("", id="steps", markup=False)
                yield Static("", id="verdict", markup=False)
            # Outside the scrolled part: on a small terminal the buttons stay in sight.
            with Horizontal(id="buttons"):
                yield Button("Cancel", id="cancel")
                yield Button(self.RUN_LABEL, id="run", variant="error", disabled=True)

    def on_resize(self, event: events.Resize) -> None:
        self.query_one("#body").styles.max_height = max(3, event.size.height - _FRAME_ROWS)

    def on_mount(self) -> None:
        self.replan()
        self.query_one("#cancel", Button).focus()

    # -- planning -----------------------------------------------------------------------------------------
    def apply_view(self, view: ClusterView) -> None:
        """New data while the dialog is on top: plan again before the run, judge the result after it."""
        self.view = view
        node = view.snapshot.node(self.node)
        if self.phase == "editing":
            self.replan()
        elif self.phase == "rereading" and node is not None and self.run is not None:
            self._judge(self.verify(node, self.run, last=False))

    def on_screen_resume(self) -> None:
        # Back from the drain dialog: the node may be drained now.
        view = getattr(self.app, "view", None)
        if isinstance(view, ClusterView):
            self.apply_view(view)

    def replan(self) -> None:
        node = self.view.snapshot.node(self.node)
        if node is None:
            self.planned = Planned(refusal=f"{self.node} is no longer in the cluster")
        elif self.runner is None:
            self.planned = Planned(refusal=f"gputop has no way to run commands on {self.node}")
        elif (problem := self.audit.problem()) is not None:
            self.planned = Planned(refusal=f"{problem}; gputop does not act without a record")
        else:
            self.planned = self.make_plan(node, self.view.snapshot.slurm)
        self._show_plan()

    def _show_plan(self) -> None:
        planned = self.planned
        checks = Text()
        if planned.failures:
            checks.append("Refused until this is done:\n", style="bold")
            for failure in planned.failures:
                checks.append(f" {_MARKS['failed']} {safe_line(failure.message)}\n")
        elif planned.refusal is None:
            checks.append(f" {_MARKS['ok']} preconditions met: {self.PRECONDITIONS}")
        if planned.refusal is not None:
            checks.append(f"Refused: {safe_line(planned.refusal)}", style="bold")
        checks.rstrip()
        self.query_one("#checks", Static).update(checks)
        self.query_one("#drain", Button).set_class(
            any(f.kind == "not_drained" for f in planned.failures), "shown"
        )
        self._show_steps()
        self.query_one("#run", Button).disabled = not self._runnable()

    def _runnable(self) -> bool:
        planned = self.planned
        if self.phase != "editing" or not planned.steps or planned.failures or planned.refusal:
            return False
        if len(self.gpu_indices) > 1:
            return self.query_one("#count", Input).value == str(len(self.gpu_indices))
        return True

    def _where(self) -> str:
        where = self.runner.where if self.runner is not None else "?"
        if where == "demo":
            return "in the demo simulator"
        if where == "local":
            return "on this machine"
        return f"on {where} over SSH"

    def _show_steps(self) -> None:
        planned = self.planned
        text = Text()
        if planned.note and not planned.steps:
            text.append(safe_block(planned.note))
        elif planned.steps:
            if planned.summary:
                text.append(safe_block(planned.summary) + "\n")
            count = len(planned.steps)
            text.append(
                f"{count} commands, run one after the other {self._where()}:\n"
                if count > 1
                else f"1 command, run {self._where()}:\n"
            )
            done = {id(o.step): o for o in self.outcomes}
            stopped = self.run is not None and not self.run.ok
            for n, step in enumerate(planned.steps, 1):
                outcome = done.get(id(step))
                state = "planned"
                if outcome is not None:
                    state = "ok" if outcome.ok else "failed"
                elif stopped:
                    state = "not_run"
                text.append(f"{_MARKS[state]} {n:>2} ", style="bold")
                text.append(safe_line(shlex.join(step.argv)))
                if state == "not_run":
                    text.append("  (not run)", style="dim")
                text.append("\n")
                if outcome is not None:
                    text.append(_outcome_text(outcome), style="dim" if outcome.ok else "bold")
        text.rstrip()
        self.query_one("#steps", Static).update(text)

    # -- events -------------------------------------------------------------------------------------------
    @on(Input.Changed, "#count")
    def _count_changed(self) -> None:
        self.query_one("#run", Button).disabled = not self._runnable()

    @on(Button.Pressed, "#drain")
    def _drain(self) -> None:
        self.app.open_node_action("drain", [self.node])  # type: ignore[attr-defined]

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        if self.phase != "running":
            self.dismiss(None)

    @on(Button.Pressed, "#run")
    def _run_pressed(self) -> None:
        if not self._runnable() or self.runner is None:
            return
        self.phase = "running"
        for widget in self.query(Input):
            widget.disabled = True
        self.disable_choices()
        self.query_one("#run", Button).disabled = True
        self.query_one("#cancel", Button).disabled = True
        self.query_one("#drain", Button).remove_class("shown")
        self._run(self.runner, self.planned.steps)

    def disable_choices(self) -> None:
        """Freeze a subclass's own controls once the run starts."""

    @work(exclusive=True, group="mig-action")
    async def _run(self, runner: Runner, steps: tuple[Step, ...]) -> None:
        try:
            run = await run_steps(
                steps,
                runner,
                self.audit,
                node=self.node,
                timeout_s=self.mig.step_timeout_s,
                on_step=self._step_done,
            )
        finally:
            await runner.close()
        self.run = run
        self.phase = "rereading"
        self._show_steps()
        cancel = self.query_one("#cancel", Button)
        cancel.label = "Close"
        cancel.disabled = False
        cancel.focus()
        ran = "every step ran" if run.ok else f"stopped at step {len(run.outcomes)}: nothing after it ran"
        self._judge(Verdict(f"{ran}; re-reading {self.node} (up to {self.REREAD_WAIT_S:g} s) ...", False))
        self.set_timer(self.REREAD_WAIT_S, self._last_word)
        self.refresh_source()

    def _step_done(self, outcome: StepOutcome) -> None:
        self.outcomes.append(outcome)
        self._show_steps()
        self._follow()
        if outcome.audit_error:
            self.notify(outcome.audit_error, severity="error", timeout=30)

    def _judge(self, verdict: Verdict) -> None:
        if self.phase != "rereading":
            return
        shown = self.query_one("#verdict", Static)
        shown.update(safe_block(verdict.text))
        shown.add_class("shown")
        self._follow()
        if verdict.final:
            self.phase = "done"

    def _follow(self) -> None:
        """Keeps the newest outcome in sight while the run goes on below the fold."""
        body = self.query_one("#body", VerticalScroll)
        self.call_after_refresh(body.scroll_end, animate=False)

    def _last_word(self) -> None:
        if self.phase != "rereading" or self.run is None:
            return
        node = self.view.snapshot.node(self.node)
        if node is None:
            self._judge(Verdict(f"{self.node} is no longer in the cluster: the result cannot be read", True))
            return
        verdict = self.verify(node, self.run, last=True)
        self._judge(Verdict(verdict.text, final=True))


def _outcome_text(outcome: StepOutcome) -> str:
    status = "exit 0" if outcome.ok else f"exit {outcome.exit_status}"
    if outcome.result is None:
        status = "refused: nothing was run"
    elif outcome.result == "unknown":
        status = "OUTCOME UNKNOWN: it may have acted; the listings read next say what the GPU holds"
    elif outcome.exit_status is None:
        status = "no exit status"
    lines = [f"      {status}"] + [f"      {line}" for line in safe_block(outcome.output).splitlines()]
    if outcome.audit_error:
        lines.append(f"      WARNING: {outcome.audit_error}")
    return "\n".join(lines) + "\n"
