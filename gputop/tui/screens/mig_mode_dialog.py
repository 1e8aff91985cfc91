"""The MIG mode dialog: turning MIG on or off (``nvidia-smi -i N -mig 1|0``) on one GPU or several, with
its warning (the GPU must be idle, and the change may wait for a reset); see mig_action for the checks, the
run and the re-read."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Static

from gputop.actions.mig import MigRun
from gputop.core.mig_layout import Refusal
from gputop.core.mig_plan import plan_mig_mode
from gputop.core.mig_preconditions import check_preconditions
from gputop.core.models import NodeSample, SlurmState
from gputop.core.safe_text import safe_block
from gputop.tui.screens.mig_action import MigActionScreen, Planned, Verdict


class MigModeScreen(MigActionScreen):
    DEFAULT_CSS = """
    MigModeScreen #warning { color: $warning; margin-top: 1; }
    """

    def __init__(self, *args: object, enable: bool, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.enable = enable
        self.RUN_LABEL = f"Turn MIG {self.state}"
        self.warning = ""

    @property
    def state(self) -> str:
        return "on" if self.enable else "off"

    def title_text(self) -> str:
        return f"Turn MIG mode {self.state}: {self.gpus_text}"

    def compose_choices(self) -> ComposeResult:
        yield Static("", id="warning", markup=False)

    def make_plan(self, node: NodeSample, slurm: SlurmState | None) -> Planned:
        failures = check_preconditions(node, self.gpu_indices, slurm, need_mig=False)
        plan = plan_mig_mode(node, self.gpu_indices, self.enable, self.mig.command_prefix)
        if isinstance(plan, Refusal):
            return Planned(refusal=plan.message, failures=failures)
        self.query_one("#warning", Static).update(safe_block(plan.warning))
        already = ", ".join(map(str, plan.already))
        summary = f"already {self.state} (nothing runs for them): GPU {already}" if plan.already else ""
        note = None if plan.steps else f"MIG mode is already {self.state}: nothing to run."
        return Planned(plan.steps, summary, failures=failures, note=note)

    def verify(self, node: NodeSample, run: MigRun, *, last: bool) -> Verdict:
        changed = [o.step.gpu_index for o in run.outcomes if o.ok]
        if not changed:
            return Verdict("Nothing was changed.", final=True)
        by_index = {gpu.index: gpu for gpu in node.gpus}
        pending = [i for i in changed if i not in by_index or by_index[i].mig_enabled is not self.enable]
        if not pending:
            shown = ", ".join(map(str, changed))
            return Verdict(f"Re-read: MIG mode is now {self.state} on GPU {shown}.", final=True)
        shown = ", ".join(map(str, pending))
        if not last:
            return Verdict(f"Re-reading; GPU {shown} does not show MIG {self.state} yet ...", final=False)
        return Verdict(
            f"Re-read: GPU {shown} still does not show MIG {self.state}: the change is pending until the GPU "
            "is reset (nvidia-smi -r) or the node rebooted.",
            final=True,
        )
