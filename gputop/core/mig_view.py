"""What the node screen shows of MIG: per MIG-enabled GPU, its GPU instances (profile, placement, compute
instances), which slice of the placement grid each occupies and which are free, the profiles it offers with
how many more of each fit, its MIG devices as ``nvidia-smi -L`` lists them, and which listing is missing and
why.

Pure: derived from one NodeSample's facts. A MIG device is tied to its GPU instance only where ``-L`` names
it (the R450/R460 UUIDs); the newer UUIDs are opaque, and their order is not documented, so they are listed
per GPU as ``-L`` gives them rather than guessed onto an instance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeVar

from gputop.core.facts import NodeFacts, Reading
from gputop.core.mig_layout import short_name
from gputop.core.models import NodeSample
from gputop.core.parsers.gpu_list import GpuList, ListedMigDevice
from gputop.core.parsers.mig import (
    ComputeInstance,
    GpuInstance,
    MigComputeInstances,
    MigGpuInstances,
    MigPlacements,
    MigProfiles,
    Placement,
)


def listings(facts: NodeFacts) -> tuple[tuple[str, Reading[object]], ...]:
    """The readings the view reads, with the command that fills each (gputop.sources.commands), for
    saying which listing is missing."""
    return (
        ("nvidia-smi mig -lgi", facts.mig_gi),
        ("nvidia-smi mig -lci", facts.mig_ci),
        ("nvidia-smi mig -lgip", facts.mig_gip),
        ("nvidia-smi mig -lgipp", facts.mig_gipp),
        ("nvidia-smi -L", facts.gpu_list),
    )


# Parser notes that mean rows are missing, as opposed to harmless ones ("No MIG-enabled devices found").
_DAMAGE_WORDS: Final = ("cut short", "unreadable")
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class MigInstanceView:
    gi_id: int
    profile: str  # "3g.40gb"
    profile_id: int
    placement: Placement | None  # None where the driver prints none
    compute: tuple[ComputeInstance, ...]
    devices: tuple[ListedMigDevice, ...]  # those -L ties to this GPU instance (old UUID style only)


@dataclass(frozen=True, slots=True)
class ProfileRoom:
    profile: str  # "1g.10gb"
    profile_id: int | None
    free: int | None  # how many more fit now, as -lgip counts them
    total: int | None


@dataclass(frozen=True, slots=True)
class MigGpuView:
    index: int
    model: str
    grid_slices: int | None  # the placement grid (8 on A100/H100); None: -lgipp not read
    instances: tuple[MigInstanceView, ...]  # by start slice; unplaced ones last
    owners: tuple[int | None, ...]  # per grid slice: the GPU instance on it, None where free
    profiles: tuple[ProfileRoom, ...]
    devices: tuple[ListedMigDevice, ...]  # as -L lists them under this GPU
    instances_known: bool = True  # False: -lgi not read, so the instances above say nothing

    @property
    def free_slices(self) -> tuple[int, ...]:
        return tuple(i for i, owner in enumerate(self.owners) if owner is None)


@dataclass(frozen=True, slots=True)
class MigNodeView:
    gpus: tuple[MigGpuView, ...]  # the GPUs with MIG on, or with instances listed
    missing: tuple[tuple[str, str], ...]  # (command, why) for each listing not there
    notes: tuple[str, ...]  # listings read with rows missing

    @property
    def shown(self) -> bool:
        return bool(self.gpus)


def mig_node_view(node: NodeSample) -> MigNodeView:
    facts = node.facts
    lgi = facts.mig_gi.value
    lci = facts.mig_ci.value
    lgip = facts.mig_gip.value
    lgipp = facts.mig_gipp.value
    listed = facts.gpu_list.value
    with_instances = {gi.gpu_index for gi in lgi.instances} if lgi else set()
    gpus = tuple(
        _gpu_view(gpu.index, gpu.name, lgi, lci, lgip, lgipp, listed)
        for gpu in node.gpus
        if gpu.mig_enabled or gpu.index in with_instances
    )
    if not gpus:
        return MigNodeView((), (), ())
    read = listings(node.facts)
    missing = tuple((command, r.why_missing()) for command, r in read if r.current is None)
    notes = tuple(
        f"{command}: {note}"
        for command, r in read
        for note in getattr(r.value, "notes", ())
        if any(word in note for word in _DAMAGE_WORDS)
    )
    return MigNodeView(gpus, missing, notes)


def _gpu_view(
    index: int,
    model: str,
    lgi: MigGpuInstances | None,
    lci: MigComputeInstances | None,
    lgip: MigProfiles | None,
    lgipp: MigPlacements | None,
    listed: GpuList | None,
) -> MigGpuView:
    listed_gpu = listed.gpu(index) if listed else None
    devices = listed_gpu.mig_devices if listed_gpu else ()
    gpu_instances = sorted(
        lgi.for_gpu(index) if lgi else (),
        key=lambda gi: (
            gi.placement is None,
            gi.placement.start_slice if gi.placement else 0,
            gi.instance_id,
        ),
    )
    instances = tuple(_instance_view(gi, lci, devices) for gi in gpu_instances)
    grid = _grid_slices(index, lgipp)
    owners: list[int | None] = [None] * (grid or 0)
    for gi in gpu_instances:
        if gi.placement is not None:
            for s in gi.placement.slices:
                if s < len(owners) and owners[s] is None:
                    owners[s] = gi.instance_id
    profiles = tuple(
        ProfileRoom(short_name(p.name), p.profile_id, p.instances_free, p.instances_total)
        for p in (lgip.for_gpu(index) if lgip else ())
    )
    return MigGpuView(index, model, grid, instances, tuple(owners), profiles, devices, lgi is not None)


def _instance_view(
    gi: GpuInstance, lci: MigComputeInstances | None, devices: tuple[ListedMigDevice, ...]
) -> MigInstanceView:
    return MigInstanceView(
        gi_id=gi.instance_id,
        profile=short_name(gi.name),
        profile_id=gi.profile_id,
        placement=gi.placement,
        compute=lci.for_gpu_instance(gi.gpu_index, gi.instance_id) if lci else (),
        devices=tuple(d for d in devices if d.gi_id == gi.instance_id),
    )


def _grid_slices(index: int, lgipp: MigPlacements | None) -> int | None:
    if lgipp is None:
        return None
    ends = [
        p.start_slice + p.size_slices for e in lgipp.entries if e.gpu_index == index for p in e.placements
    ]
    return max(ends, default=None)
