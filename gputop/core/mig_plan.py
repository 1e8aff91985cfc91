"""Repartitioning MIG GPUs, planned before anything runs: the exact commands, in order, and what each leaves.

Pure: a plan is built from the GPUs' parsed MIG listings and a layout (see ``gputop.core.mig_layout``), and
either comes back whole or is refused with the reason. Per GPU it destroys what the listings show, compute
instances first (a GPU instance that still holds one cannot go), then creates each GPU instance with its
default compute instance at an explicit placement (``-cgi <profile id>:<start> -C``): left to choose, the
driver takes its own first free placement, which can leave no room for the rest of the layout.

Each command names the instances it acts on, as listed: when the GPU changed since it was read, a command
fails and the run stops there, rather than destroying something nobody saw in the preview.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from gputop.core.facts import Reading
from gputop.core.mig_layout import (
    MigGpu,
    MigLayout,
    PlacedInstance,
    Refusal,
    fit_layout,
    mig_gpu,
    parse_layout,
    short_name,
)
from gputop.core.models import NodeSample
from gputop.core.parsers.mig import (
    MigComputeInstances,
    MigGpuInstances,
    Placement,
)

# The NodeSample facts holding a node's parsed MIG listings: the names of the commands that read them.
_Listing = TypeVar("_Listing")


@dataclass(frozen=True, slots=True)
class InstanceState:
    """A GPU instance as listed now, or as a step leaves it."""

    name: str  # "MIG 2g.20gb"
    profile_id: int
    placement: Placement | None  # None where the driver prints no placement
    gpu_instance_id: int | None  # None until the driver assigns one to a new instance
    compute_instances: int

    def __str__(self) -> str:
        where = f" at {self.placement}" if self.placement else ""
        return f"{short_name(self.name)}{where}"


@dataclass(frozen=True, slots=True)
class MigStep:
    node: str
    gpu_index: int
    argv: tuple[str, ...]
    description: str
    state_after: tuple[InstanceState, ...]  # this GPU's instances once the step has run

    @property
    def command_line(self) -> str:
        """The argv as a user would type it: for showing, never for running."""
        return shlex.join(self.argv)


@dataclass(frozen=True, slots=True)
class GpuPlan:
    node: str
    gpu_index: int
    before: tuple[InstanceState, ...]
    after: tuple[InstanceState, ...]  # what -lgi should list once every step ran
    steps: tuple[MigStep, ...]  # empty: the GPU already holds the layout


@dataclass(frozen=True, slots=True)
class MigPlan:
    model: str
    layout: MigLayout
    gpus: tuple[GpuPlan, ...]

    @property
    def steps(self) -> tuple[MigStep, ...]:
        return tuple(step for gpu in self.gpus for step in gpu.steps)

    @property
    def unchanged(self) -> tuple[GpuPlan, ...]:
        """GPUs that already hold the layout: nothing runs on them (not an error)."""
        return tuple(gpu for gpu in self.gpus if not gpu.steps)


def mig_gpu_from_node(node: NodeSample, gpu_index: int) -> MigGpu | Refusal:
    """The planner's view of one GPU from the MIG listings a source attached to its node."""
    gpu = next((g for g in node.gpus if g.index == gpu_index), None)
    if gpu is None:
        return Refusal("state_unknown", f"{node.name} has no GPU {gpu_index} in its last sample")
    facts = node.facts
    lgip = _listing(node, "lgip", facts.mig_gip)
    if isinstance(lgip, Refusal):
        return lgip
    lgipp = _listing(node, "lgipp", facts.mig_gipp)
    if isinstance(lgipp, Refusal):
        return lgipp
    lgi = _listing(node, "lgi", facts.mig_gi)
    if isinstance(lgi, Refusal):
        return lgi
    lci = _listing(node, "lci", facts.mig_ci)
    if isinstance(lci, Refusal):
        return lci
    return mig_gpu(node.name, gpu_index, gpu.name, lgip, lgipp, lgi, lci)


def _listing(node: NodeSample, option: str, reading: Reading[_Listing]) -> _Listing | Refusal:
    if reading.value is not None:
        return reading.value
    return Refusal("state_unknown", f"nvidia-smi mig -{option} of {node.name}: {reading.why_missing()}")


def plan_repartition(
    gpus: Sequence[MigGpu], layout: str | MigLayout, prefix: Sequence[str] = ()
) -> MigPlan | Refusal:
    """The commands that give each of ``gpus`` (one model) the ``layout``, or why that cannot be done.

    ``prefix`` goes before every argv, e.g. ``("sudo", "-n")``.
    """
    if isinstance(layout, str):
        parsed = parse_layout(layout)
        if isinstance(parsed, Refusal):
            return parsed
        layout = parsed
    if not gpus:
        return Refusal("no_gpus", "no GPUs chosen: select a GPU or mark several of one model")
    models = sorted({gpu.model for gpu in gpus})
    if len(models) > 1:
        shown = "; ".join(f"{m}: {', '.join(g.where for g in gpus if g.model == m)}" for m in models)
        return Refusal(
            "mixed_models", f"the GPUs are of different models ({shown}); choose GPUs of one model"
        )
    plans = []
    for gpu in gpus:
        placed = _state_refusal(gpu) or fit_layout(layout, gpu)
        if isinstance(placed, Refusal):
            return replace(placed, message=f"{gpu.where}: {placed.message}") if len(gpus) > 1 else placed
        plans.append(_gpu_plan(gpu, placed, tuple(prefix)))
    return MigPlan(models[0], layout, tuple(plans))


def _state_refusal(gpu: MigGpu) -> Refusal | None:
    """Why the listings cannot be trusted to name every instance to destroy, if they cannot."""
    if gpu.damage:
        return Refusal(
            "state_unknown",
            f"the MIG listings of {gpu.node} are incomplete ({gpu.damage[0]}); read them again",
        )
    orphans = sorted(
        {ci.gpu_instance_id for ci in gpu.compute_instances} - {gi.instance_id for gi in gpu.gpu_instances}
    )
    if orphans:
        # -lci was read at another moment than -lgi.
        return Refusal(
            "state_unknown",
            f"the -lgi and -lci listings of {gpu.where} disagree (compute instances in GPU instance "
            f"{', '.join(map(str, orphans))}, which -lgi does not list); wait for the next read",
        )
    return None


def _gpu_plan(gpu: MigGpu, placed: tuple[PlacedInstance, ...], prefix: tuple[str, ...]) -> GpuPlan:
    cis_by_gi: dict[int, list[int]] = {}
    for ci in gpu.compute_instances:
        cis_by_gi.setdefault(ci.gpu_instance_id, []).append(ci.instance_id)
    listed = sorted(gpu.gpu_instances, key=lambda gi: gi.instance_id)
    before = tuple(
        InstanceState(
            gi.name, gi.profile_id, gi.placement, gi.instance_id, len(cis_by_gi.get(gi.instance_id, ()))
        )
        for gi in listed
    )
    have = Counter(state.profile_id for state in before)
    if have == Counter(p.profile_id for p in placed) and all(s.compute_instances for s in before):
        return GpuPlan(gpu.node, gpu.index, before, before, ())
    nvsmi = (*prefix, "nvidia-smi", "mig", "-i", str(gpu.index))
    state = list(before)
    steps: list[MigStep] = []

    def step(argv: tuple[str, ...], description: str) -> None:
        steps.append(MigStep(gpu.node, gpu.index, argv, f"{description} on {gpu.where}", tuple(state)))

    for listing, current in zip(listed, before, strict=True):
        gi = str(listing.instance_id)
        ci_ids = sorted(cis_by_gi.get(listing.instance_id, ()))
        if ci_ids:
            emptied = replace(current, compute_instances=0)
            state[state.index(current)] = emptied
            ids = ",".join(map(str, ci_ids))
            noun = "compute instance" if len(ci_ids) == 1 else "compute instances"
            step(
                (*nvsmi, "-gi", gi, "-ci", ids, "-dci"),
                f"destroy {noun} {ids} of GPU instance {gi} ({current})",
            )
            current = emptied
        state.remove(current)
        step((*nvsmi, "-gi", gi, "-dgi"), f"destroy GPU instance {gi} ({current})")
    for new in placed:
        state.append(InstanceState(new.name, new.profile_id, new.placement, None, 1))
        argv = (*nvsmi, "-cgi", f"{new.profile_id}:{new.placement.start_slice}", "-C")
        step(argv, f"create {new} (profile {new.profile_id}) with its compute instance")
    return GpuPlan(gpu.node, gpu.index, before, tuple(state), tuple(steps))


@dataclass(frozen=True, slots=True)
class MatchReport:
    differences: tuple[str, ...]  # one line per mismatch, naming node, GPU and instance
    notes: tuple[str, ...] = ()  # what could not be compared

    @property
    def matches(self) -> bool:
        return not self.differences


def plan_matches(
    plan: MigPlan,
    lgi_after: Mapping[str, MigGpuInstances],
    lci_after: Mapping[str, MigComputeInstances] | None = None,
) -> MatchReport:
    """Compare the listings re-read after the run (by node) with what the plan meant to leave."""
    differences: list[str] = []
    notes: list[str] = []
    for gpu in plan.gpus:
        where = f"{gpu.node} GPU {gpu.gpu_index}"
        listing = lgi_after.get(gpu.node)
        if listing is None:
            differences.append(f"{where}: no -lgi listing after the run")
            continue
        actual = listing.for_gpu(gpu.gpu_index)
        # Without printed placements (old drivers) only the profiles can be compared.
        unplaced = any(gi.placement is None for gi in actual)
        want = Counter((s.profile_id, None if unplaced else s.placement) for s in gpu.after)
        got = Counter((gi.profile_id, None if unplaced else gi.placement) for gi in actual)
        names = {s.profile_id: s.name for s in gpu.after} | {gi.profile_id: gi.name for gi in actual}
        for (pid, placement), n in sorted((want - got).items(), key=_by_start):
            differences.append(f"{where}: missing {_count(n)}{_label(names[pid], placement)}")
        for (pid, placement), n in sorted((got - want).items(), key=_by_start):
            differences.append(f"{where}: unexpected {_count(n)}{_label(names[pid], placement)}")
        if unplaced:
            notes.append(f"{where}: -lgi prints no placements, so only the profiles were compared")
        if lci_after is not None and gpu.node in lci_after:
            for gi in actual:
                if not lci_after[gpu.node].for_gpu_instance(gpu.gpu_index, gi.instance_id):
                    label = _label(gi.name, gi.placement)
                    differences.append(
                        f"{where}: GPU instance {gi.instance_id} ({label}) has no compute instance"
                    )
    return MatchReport(tuple(differences), tuple(notes))


def _by_start(entry: tuple[tuple[int, Placement | None], int]) -> tuple[int, int]:
    (pid, placement), _ = entry
    return (placement.start_slice if placement else -1, pid)


def _count(n: int) -> str:
    return f"{n}x" if n > 1 else ""


def _label(name: str, placement: Placement | None) -> str:
    return f"{short_name(name)} at {placement}" if placement else short_name(name)


# --- MIG mode -------------------------------------------------------------------------------------

_MODE_WARNING = (
    "Changing MIG mode needs the GPU idle: no processes, and no agent holding it (nvidia-persistenced, DCGM "
    "or nvsm may have to be stopped). Depending on the GPU, the driver resets it to apply the change, or the "
    "change stays pending until the GPU is reset (nvidia-smi -r) or the node rebooted; on some cloud VMs "
    "only a reboot applies it. Check mig.mode.pending afterwards."
)
_ENABLE_NOTE = " With MIG on, the GPU runs no CUDA work until GPU instances are created on it."
_DISABLE_NOTE = " With MIG off, its MIG devices are gone: jobs that name their UUIDs will not find them."


@dataclass(frozen=True, slots=True)
class ModeStep:
    gpu_index: int
    argv: tuple[str, ...]
    description: str

    @property
    def command_line(self) -> str:
        return shlex.join(self.argv)


@dataclass(frozen=True, slots=True)
class MigModePlan:
    node: str
    enable: bool
    steps: tuple[ModeStep, ...]  # one per GPU whose mode changes
    already: tuple[int, ...]  # GPUs already in that mode: nothing runs for them (not an error)
    warning: str


def plan_mig_mode(
    node: NodeSample, gpu_indices: Sequence[int], enable: bool, prefix: Sequence[str] = ()
) -> MigModePlan | Refusal:
    """``nvidia-smi -i N -mig 1|0`` for each GPU not yet in that mode; check_preconditions(need_mig=False)
    says whether it may run."""
    if not gpu_indices:
        return Refusal("no_gpus", "no GPUs chosen: select a GPU or mark several")
    by_index = {gpu.index: gpu for gpu in node.gpus}
    missing = [i for i in gpu_indices if i not in by_index]
    if missing:
        return Refusal(
            "state_unknown", f"{node.name} has no GPU {', '.join(map(str, missing))} in its last sample"
        )
    already = tuple(i for i in gpu_indices if by_index[i].mig_enabled is enable)
    verb = "turn MIG mode on" if enable else "turn MIG mode off"
    steps = tuple(
        ModeStep(
            i,
            (*prefix, "nvidia-smi", "-i", str(i), "-mig", "1" if enable else "0"),
            f"{verb} on {node.name} GPU {i}",
        )
        for i in gpu_indices
        if i not in already
    )
    return MigModePlan(
        node.name, enable, steps, already, _MODE_WARNING + (_ENABLE_NOTE if enable else _DISABLE_NOTE)
    )
