"""One simulated GPU's MIG state: whether MIG is on, and its GPU instances, each at a placement of its model's
grid, with their compute instances. It changes only through what nvidia-smi can do, checked as the driver
checks it, and gives the rows the listings print.

Failures are NVML's error strings (what nvidia-smi prints after the colon), so the command line can say
them as nvidia-smi does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Final

from gputop.sim.mig_tables import CI_PROFILE_IDS, GiProfile, MigTable
from gputop.sim.mig_text import InstanceRow, PlacementRow, ProfileRow

# nvmlErrorString() of the NVML errors these operations meet.
INSUFFICIENT_RESOURCES: Final = "Insufficient Resources"
INVALID_ARGUMENT: Final = "Invalid Argument"
IN_USE: Final = "In use by another client"
NOT_FOUND: Final = "Not Found"

# MIG device UUIDs (R470 and later) are opaque; name-based UUIDs keep them stable for a seed while a
# re-created instance still gets a new one, as on a real GPU.
_MIG_NAMESPACE: Final = uuid.UUID("6f7c1f0e-2b1d-5c55-9d0a-6d1c4b7f2a10")


@dataclass(frozen=True, slots=True)
class ComputeInstance:
    ci_id: int
    profile_id: int  # NVML's compute instance profile, by compute slices
    compute_slices: int
    mig_uuid: str  # the MIG device it makes: "MIG-<uuid>"


@dataclass(frozen=True, slots=True)
class GpuInstance:
    gi_id: int
    profile: GiProfile
    start: int
    compute: tuple[ComputeInstance, ...] = ()

    @property
    def size_slices(self) -> int:
        return self.profile.size_slices

    @property
    def slices(self) -> range:
        return range(self.start, self.start + self.size_slices)


class GpuMig:
    """MIG on one GPU. ``instances`` by GPU instance id; change it through the methods only."""

    def __init__(self, index: int, gpu_uuid: str, table: MigTable, *, enabled: bool = False) -> None:
        self.index = index
        self.gpu_uuid = gpu_uuid
        self.table = table
        self.enabled = enabled
        self.instances: dict[int, GpuInstance] = {}
        self._created = 0  # compute instances made so far: a new one gets a new UUID

    def profile(self, word: str) -> GiProfile | None:
        """The profile ``word`` names as -cgi takes it: its id (``19``), its name (``1g.10gb``) or its full
        name (``MIG 1g.10gb``)."""
        if word.isdigit():
            return next((p for p in self.table.profiles if p.profile_id == int(word)), None)
        name = word.removeprefix("MIG ")
        return next((p for p in self.table.profiles if p.name == name), None)

    def _used(self) -> set[int]:
        return {s for gi in self.instances.values() for s in gi.slices}

    def free_count(self, profile: GiProfile) -> int:
        """How many more instances of ``profile`` fit now, as -lgip's Free column counts them."""
        used = self._used()
        fits = 0
        for start in profile.starts:
            wanted = range(start, start + profile.size_slices)
            if used.isdisjoint(wanted):
                fits += 1
                used.update(wanted)
        same = sum(1 for gi in self.instances.values() if gi.profile.profile_id == profile.profile_id)
        return max(0, min(fits, profile.instances_total - same))

    def _gi_id(self, profile: GiProfile, start: int) -> int:
        """The id the driver gives an instance at this placement: the slots of the grid numbered as a
        binary tree, whole grid 0, halves 1-2, quarters 3-6, eighths 7-14, as real listings show (7x1g.10gb
        on an H100 at 0..6 get 7..13; on a 12-slot RTX PRO 6000, 2g.48gb at 0:6 gets 1 and 1g.24gb at 6:3
        gets 5)."""
        size = profile.size_slices
        return self.table.grid_slices // size - 1 + start // size

    def create_gpu_instance(self, profile: GiProfile, start: int | None) -> GpuInstance | str:
        """A new GPU instance at ``start``, or, with None, at the first free placement of the profile (left
        to choose, drivers differ: one put a 3g.40gb at 0, another at 4)."""
        if start is not None and start not in profile.starts:
            return INVALID_ARGUMENT
        same = sum(1 for gi in self.instances.values() if gi.profile.profile_id == profile.profile_id)
        if same >= profile.instances_total:
            return INSUFFICIENT_RESOURCES
        used = self._used()
        for candidate in profile.starts if start is None else (start,):
            if used.isdisjoint(range(candidate, candidate + profile.size_slices)):
                created = GpuInstance(self._gi_id(profile, candidate), profile, candidate)
                self.instances[created.gi_id] = created
                return created
        return INSUFFICIENT_RESOURCES

    def create_compute_instance(self, gi_id: int) -> ComputeInstance | str:
        """The default compute instance of GPU instance ``gi_id`` (``-C``): all its compute slices."""
        gi = self.instances.get(gi_id)
        if gi is None:
            return NOT_FOUND
        if gi.compute:
            return INSUFFICIENT_RESOURCES  # the default one takes every slice
        slices = gi.profile.compute_slices
        self._created += 1
        name = f"{self.gpu_uuid}/{gi_id}/0/{self._created}"
        ci = ComputeInstance(0, CI_PROFILE_IDS[slices], slices, f"MIG-{uuid.uuid5(_MIG_NAMESPACE, name)}")
        self.instances[gi_id] = replace(gi, compute=(ci,))
        return ci

    def destroy_compute_instance(self, gi_id: int, ci_id: int) -> str | None:
        gi = self.instances.get(gi_id)
        if gi is None or all(ci.ci_id != ci_id for ci in gi.compute):
            return NOT_FOUND
        self.instances[gi_id] = replace(gi, compute=tuple(ci for ci in gi.compute if ci.ci_id != ci_id))
        return None

    def destroy_gpu_instance(self, gi_id: int) -> str | None:
        gi = self.instances.get(gi_id)
        if gi is None:
            return NOT_FOUND
        if gi.compute:
            return IN_USE  # its compute instances hold it
        del self.instances[gi_id]
        return None

    # ---- what the listings print

    def listed(self) -> list[GpuInstance]:
        """GPU instances in -lgi's order: by profile as -lgip lists them, then by id (real listings put
        1g.10gb rows before 2g.20gb before 3g.40gb, whatever their placements)."""
        order = {p.profile_id: n for n, p in enumerate(self.table.profiles)}
        return sorted(self.instances.values(), key=lambda gi: (order[gi.profile.profile_id], gi.gi_id))

    def profile_rows(self) -> list[ProfileRow]:
        return [
            ProfileRow(
                self.index,
                p.name,
                p.profile_id,
                self.free_count(p),
                p.instances_total,
                p.memory_gib,
                p.sm_count,
                p.dec_count,
                p.enc_count,
                p.ce_count,
                p.jpeg_count,
                p.ofa_count,
            )
            for p in self.table.profiles
        ]

    def placement_rows(self) -> list[PlacementRow]:
        return [PlacementRow(self.index, p.profile_id, p.starts, p.size_slices) for p in self.table.profiles]

    def gpu_instance_rows(self) -> list[InstanceRow]:
        rows = []
        for gi in self.listed():
            p = gi.profile
            rows.append(InstanceRow(self.index, gi.gi_id, p.name, p.profile_id, gi.start, gi.size_slices))
        return rows

    def compute_instance_rows(self) -> list[InstanceRow]:
        """A compute instance is placed within its GPU instance, in compute slices."""
        return [
            InstanceRow(self.index, gi.gi_id, gi.profile.name, ci.profile_id, 0, ci.compute_slices, ci.ci_id)
            for gi in self.listed()
            for ci in gi.compute
        ]

    def devices(self) -> list[tuple[str, str]]:
        """(profile, MIG UUID) per MIG device, in ``nvidia-smi -L`` order: by GPU instance id, as real
        listings number them (GI 1 is device 0, GI 5 device 1, GI 13 device 2)."""
        return [
            (gi.profile.name, ci.mig_uuid)
            for gi in sorted(self.instances.values(), key=lambda gi: gi.gi_id)
            for ci in gi.compute
        ]
