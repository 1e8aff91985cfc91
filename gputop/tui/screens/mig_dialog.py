"""The MIG repartition dialog: choose a layout for one GPU or several of one model (a configured preset that
fits them, a profile added at a time, or typed), see the planner's commands or its reason for refusing,
and run them (see mig_action for the checks, the run and the re-read)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from gputop.actions.mig import MigRun
from gputop.core.mig_compose import add_profile, fitting_presets, room_next_to
from gputop.core.mig_layout import MigGpu, MigLayout, Refusal, parse_layout, short_name
from gputop.core.mig_plan import GpuPlan, MigPlan, mig_gpu_from_node, plan_matches, plan_repartition
from gputop.core.mig_preconditions import check_preconditions
from gputop.core.models import NodeSample, SlurmState
from gputop.core.safe_text import safe_block, safe_line
from gputop.tui.screens.mig_action import MigActionScreen, Planned, Verdict

_PRESET = "preset:"
_PROFILE = "profile:"


class MigRepartitionScreen(MigActionScreen):
    RUN_LABEL = "Repartition"
    PRECONDITIONS = "MIG on, no processes on the GPUs, the node drained (or not in Slurm)"

    DEFAULT_CSS = """
    MigRepartitionScreen #choices { height: auto; max-height: 10; margin-top: 1; }
    """

    def __init__(self, *args: object, layout: str = "", **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.initial_layout = layout
        self.plan: MigPlan | None = None
        self._choices: tuple[tuple[str, str], ...] = ()
        self._now_gpus: tuple[MigGpu, ...] = ()
        self._now_word = "now"  # what the GPUs' layout shown is: the one to be replaced

    def title_text(self) -> str:
        return f"Repartition MIG on {self.gpus_text}"

    def compose_choices(self) -> ComposeResult:
        yield Static("", id="now", markup=False, classes="line")
        yield Static("Layout: Enter on a preset takes it, on a profile adds one; or type it.", classes="line")
        yield OptionList(id="choices")
        yield Input(self.initial_layout, id="layout", placeholder="for example 3x2g.20gb+1x1g.10gb")

    def disable_choices(self) -> None:
        self.query_one("#choices", OptionList).disabled = True
        self._now_word = "before the run"
        self._show_now(self._now_gpus)

    # -- planning -----------------------------------------------------------------------------------------
    def make_plan(self, node: NodeSample, slurm: SlurmState | None) -> Planned:
        failures = check_preconditions(node, self.gpu_indices, slurm)
        gpus: list[MigGpu] = []
        for index in self.gpu_indices:
            gpu = mig_gpu_from_node(node, index)
            if isinstance(gpu, Refusal):
                self._show_now((), gpu.message)
                return Planned(refusal=gpu.message, failures=failures)
            gpus.append(gpu)
        text = self.query_one("#layout", Input).value
        self._show_now(gpus)
        self._show_choices(gpus[0], text)
        if not text.strip():
            self.plan = None
            return Planned(failures=failures, note="Choose a layout: its commands show here.")
        plan = plan_repartition(gpus, text, self.mig.command_prefix)
        if isinstance(plan, Refusal):
            self.plan = None
            return Planned(refusal=plan.message, failures=failures)
        self.plan = plan
        if not plan.steps:
            return Planned(failures=failures, note=f"Already {plan.layout}: nothing to run.")
        summary = "\n".join(_summary(gpu) for gpu in plan.gpus)
        return Planned(plan.steps, summary, failures=failures)

    def _show_now(self, gpus: Sequence[MigGpu], why: str = "") -> None:
        self._now_gpus = tuple(gpus)
        if not gpus:
            self.query_one("#now", Static).update(safe_line(f"{self._now_word}: unknown ({why})"))
            return
        model = gpus[0].model.removeprefix("NVIDIA ")
        lines = [f"{model}, {self._now_word}:"]
        for gpu in gpus:
            have = Counter(short_name(gi.name) for gi in gpu.gpu_instances)
            held = ", ".join(f"{n}x{name}" for name, n in have.items()) or "no GPU instances"
            lines.append(f"  GPU {gpu.index}: {held}")
        self.query_one("#now", Static).update(safe_block("\n".join(lines)))

    def _show_choices(self, gpu: MigGpu, text: str) -> None:
        """The presets that fit this model, then each profile with how many more fit beside ``text``."""
        layout = parse_layout(text) if text.strip() else MigLayout(())
        rooms = (
            {r.profile: r.more for r in room_next_to(layout, gpu)} if isinstance(layout, MigLayout) else {}
        )
        choices = [(f"{_PRESET}{p}", f"preset   {p}") for p in fitting_presets(self.mig.presets, gpu)]
        for profile in gpu.profiles:
            name = short_name(profile.name)
            room = f"{rooms[name]} more fit" if name in rooms else ""
            choices.append((f"{_PROFILE}{name}", f"+ add    {name:<16}{room}"))
        if tuple(choices) == self._choices:
            return
        self._choices = tuple(choices)
        options = self.query_one("#choices", OptionList)
        options.display = bool(choices)
        highlighted = options.highlighted
        options.clear_options()
        # Text, not str: an OptionList reads a str as markup, and profile names are the node's words
        options.add_options([Option(Text(safe_line(prompt)), id=key) for key, prompt in choices])
        if highlighted is not None and choices:
            options.highlighted = min(highlighted, len(choices) - 1)

    # -- events -------------------------------------------------------------------------------------------
    @on(OptionList.OptionSelected, "#choices")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        key = event.option.id or ""
        layout = self.query_one("#layout", Input)
        if key.startswith(_PRESET):
            layout.value = key.removeprefix(_PRESET)
        elif key.startswith(_PROFILE):
            layout.value = add_profile(layout.value, key.removeprefix(_PROFILE))

    @on(Input.Changed, "#layout")
    def _layout_changed(self) -> None:
        if self.phase == "editing":
            self.replan()

    # -- after the run ------------------------------------------------------------------------------------
    def verify(self, node: NodeSample, run: MigRun, *, last: bool) -> Verdict:
        plan = self.plan
        if plan is None:
            return Verdict("no plan to compare with", final=True)
        lgi = node.facts.mig_gi.value
        lci = node.facts.mig_ci.value
        if lgi is None:
            why = node.facts.mig_gi.why_missing()
            return Verdict(f"nvidia-smi mig -lgi of {node.name}: {why}", final=last)
        report = plan_matches(plan, {node.name: lgi}, {node.name: lci} if lci is not None else None)
        notes = "".join(f"\n{note}" for note in report.notes)
        if report.matches:
            return Verdict(f"Re-read: the GPUs hold {plan.layout}, as planned.{notes}", final=True)
        head = "Re-read: the GPUs do not match the plan" if last else "Re-reading; so far they differ"
        differences = "".join(f"\n  {d}" for d in report.differences)
        return Verdict(f"{head}:{differences}{notes}", final=last)


def _summary(gpu: GpuPlan) -> str:
    created = ", ".join(str(s) for s in gpu.after)
    destroyed = len(gpu.before)
    gone = f"destroys its {destroyed} GPU instance{'s' * (destroyed != 1)}, " if destroyed else ""
    return f"GPU {gpu.gpu_index}: {gone}creates {created or 'nothing'}"
