"""MIG on a fake node: the profiles a GPU model offers, the simulator's seven-slice layout, and the
``nvidia-smi mig -lgip/-lgipp/-lgi/-lci`` tables and ``-L`` device lines that describe them.

Table layouts follow drivers 470-570, whose name column is 16 wide; 580 widened it to 18
(``name_width``).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from gputop.sources.gpu_models import GpuModel

NO_MIG_DEVICES: Final = "No MIG-enabled devices found.\n"
NO_MIG_EXIT_STATUS: Final = 6  # NVML_ERROR_NOT_FOUND, as nvidia-smi returns it here

MEMORY_SLICES: Final = 8
NAME_WIDTH: Final = 16

# MIG device UUIDs are name-based (version 5) UUIDs; any fixed namespace keeps them stable per GPU.
_MIG_NAMESPACE: Final = uuid.UUID("6f7c1f0e-2b1d-5c55-9d0a-6d1c4b7f2a10")


@dataclass(frozen=True, slots=True)
class MigProfile:
    gpcs: int  # compute slices ("3g")
    mem_slices: int  # memory slices out of eight
    profile_id: int
    total: int  # how many fit on one GPU
    sm: int
    dec: int
    enc: int
    ce: int
    jpeg: int
    ofa: int
    starts: tuple[int, ...]  # where an instance may be placed
    media_extension: bool = False  # "+me": the only profile that gets the OFA and JPEG engines

    @property
    def size(self) -> int:
        """Memory slices an instance spans, which is what a placement counts in."""
        return self.mem_slices

    def name(self, nominal_gb: int) -> str:
        gb = math.floor(nominal_gb * self.mem_slices / MEMORY_SLICES + 0.5)
        return f"{self.gpcs}g.{gb}gb" + ("+me" if self.media_extension else "")


_ALL_1G: Final = (0, 1, 2, 3, 4, 5, 6)

# Per architecture, in the order nvidia-smi lists them (small to large).
_HOPPER: Final = (
    MigProfile(1, 1, 19, 7, 16, 1, 0, 1, 1, 0, _ALL_1G),
    MigProfile(1, 1, 20, 1, 16, 1, 0, 1, 1, 1, _ALL_1G, media_extension=True),
    MigProfile(1, 2, 15, 4, 26, 1, 0, 1, 1, 0, (0, 2, 4, 6)),
    MigProfile(2, 2, 14, 3, 32, 2, 0, 2, 2, 0, (0, 2, 4)),
    MigProfile(3, 4, 9, 2, 60, 3, 0, 3, 3, 0, (0, 4)),
    MigProfile(4, 4, 5, 1, 64, 4, 0, 4, 4, 0, (0,)),
    MigProfile(7, 8, 0, 1, 132, 7, 0, 8, 7, 1, (0,)),
)
_AMPERE: Final = (
    MigProfile(1, 1, 19, 7, 14, 0, 0, 1, 0, 0, _ALL_1G),
    MigProfile(1, 1, 20, 1, 14, 1, 0, 1, 1, 1, _ALL_1G, media_extension=True),
    MigProfile(2, 2, 14, 3, 28, 1, 0, 2, 0, 0, (0, 2, 4)),
    MigProfile(3, 4, 9, 2, 42, 2, 0, 3, 0, 0, (0, 4)),
    MigProfile(4, 4, 5, 1, 56, 2, 0, 4, 0, 0, (0,)),
    MigProfile(7, 8, 0, 1, 98, 5, 0, 7, 1, 1, (0,)),
)
_BLACKWELL: Final = (
    MigProfile(1, 1, 19, 7, 18, 1, 0, 2, 1, 0, _ALL_1G),
    MigProfile(1, 1, 20, 1, 18, 1, 0, 2, 1, 1, _ALL_1G, media_extension=True),
    MigProfile(1, 2, 15, 4, 30, 1, 0, 2, 1, 0, (0, 2, 4, 6)),
    MigProfile(2, 2, 14, 3, 36, 2, 0, 4, 2, 0, (0, 2, 4)),
    MigProfile(3, 4, 9, 2, 54, 3, 0, 6, 3, 0, (0, 4)),
    MigProfile(4, 4, 5, 1, 72, 4, 0, 8, 4, 0, (0,)),
    MigProfile(7, 8, 0, 1, 148, 7, 0, 14, 7, 1, (0,)),
)


def profiles_for(model: GpuModel) -> tuple[MigProfile, ...]:
    if model.key.startswith("A100"):
        return _AMPERE
    if model.key.startswith("B"):
        return _BLACKWELL
    return _HOPPER


def nominal_gb(model: GpuModel) -> int:
    """The marketing size profile names are cut from: 81559 MiB -> 80, 143771 MiB -> 141."""
    return math.ceil(model.mem_total_mib / 1024)


@dataclass(frozen=True, slots=True)
class GpuInstance:
    gpu_index: int
    profile: MigProfile
    gi_id: int
    start: int
    mig_uuid: str


@dataclass(frozen=True, slots=True)
class MigLayout:
    """One MIG-enabled GPU: its model's profiles and the GPU instances on it (one compute instance each)."""

    gpu_index: int
    model: GpuModel
    instances: tuple[GpuInstance, ...]

    @property
    def profiles(self) -> tuple[MigProfile, ...]:
        return profiles_for(self.model)

    def profile_name(self, profile: MigProfile) -> str:
        return profile.name(nominal_gb(self.model))

    def free(self, profile: MigProfile) -> int:
        """How many more instances of ``profile`` fit: placements whose slices are all unused."""
        used = {s for inst in self.instances for s in range(inst.start, inst.start + inst.profile.size)}
        fits = 0
        for start in profile.starts:
            wanted = set(range(start, start + profile.size))
            if not wanted & used:
                fits += 1
                used |= wanted
        same = sum(1 for inst in self.instances if inst.profile.profile_id == profile.profile_id)
        return max(0, min(fits, profile.total - same))

    def devices(self) -> list[tuple[str, str]]:
        """(profile name, MIG UUID) per device, in the order ``nvidia-smi -L`` numbers them."""
        return [(self.profile_name(inst.profile), inst.mig_uuid) for inst in self.instances]


# The GPU instance IDs a driver hands out when a GPU is split into seven 1g instances.
_SEVEN_1G_GI_IDS: Final = (7, 8, 9, 11, 12, 13, 14)


def seven_small_instances(gpu_index: int, gpu_uuid: str, model: GpuModel) -> MigLayout:
    """The simulator's MIG GPU: seven 1g instances, one per compute slice."""
    small = profiles_for(model)[0]
    instances = tuple(
        GpuInstance(gpu_index, small, gi, start, f"MIG-{uuid.uuid5(_MIG_NAMESPACE, f'{gpu_uuid}/{gi}')}")
        for start, gi in enumerate(_SEVEN_1G_GI_IDS)
    )
    return MigLayout(gpu_index, model, instances)


# ---- tables: plain rows in, nvidia-smi's text out -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProfileRow:
    gpu: int
    name: str  # without "MIG "
    profile_id: int
    free: int
    total: int
    memory_gib: float
    sm: int
    dec: int
    enc: int
    ce: int
    jpeg: int
    ofa: int


@dataclass(frozen=True, slots=True)
class PlacementRow:
    gpu: int
    profile_id: int
    starts: tuple[int, ...]
    size: int


@dataclass(frozen=True, slots=True)
class InstanceRow:
    """A GPU instance (``-lgi``) or, with ``ci_id``, a compute instance inside one (``-lci``)."""

    gpu: int
    gi_id: int
    name: str
    profile_id: int
    start: int
    size: int
    ci_id: int | None = None


def profile_rows(layouts: Sequence[MigLayout]) -> list[ProfileRow]:
    rows = []
    for layout in layouts:
        slice_gib = layout.model.mig_slice_mib / 1024
        for p in layout.profiles:
            rows.append(
                ProfileRow(
                    layout.gpu_index,
                    layout.profile_name(p),
                    p.profile_id,
                    layout.free(p),
                    p.total,
                    p.mem_slices * slice_gib,
                    p.sm,
                    p.dec,
                    p.enc,
                    p.ce,
                    p.jpeg,
                    p.ofa,
                )
            )
    return rows


def placement_rows(layouts: Sequence[MigLayout]) -> list[PlacementRow]:
    return [
        PlacementRow(lay.gpu_index, p.profile_id, p.starts, p.size) for lay in layouts for p in lay.profiles
    ]


def gpu_instance_rows(layouts: Sequence[MigLayout]) -> list[InstanceRow]:
    return [
        InstanceRow(
            i.gpu_index, i.gi_id, lay.profile_name(i.profile), i.profile.profile_id, i.start, i.profile.size
        )
        for lay in layouts
        for i in sorted(lay.instances, key=lambda i: i.gi_id)
    ]


def compute_instance_rows(layouts: Sequence[MigLayout]) -> list[InstanceRow]:
    """One compute instance per GPU instance, spanning all of it: profile 0, CI 0, placed at 0."""
    return [
        InstanceRow(i.gpu_index, i.gi_id, lay.profile_name(i.profile), 0, 0, i.profile.gpcs, ci_id=0)
        for lay in layouts
        for i in sorted(lay.instances, key=lambda i: i.gi_id)
    ]


def _framed(inner: int, title: str, header: Sequence[str], blocks: Sequence[Sequence[str]]) -> str:
    rule = "+" + "-" * inner + "+"
    lines = [rule, "| " + title.ljust(inner - 1) + "|", *header, "|" + "=" * inner + "|"]
    for block in blocks:
        lines.extend(block)
        lines.append(rule)
    return "\n".join(lines) + "\n"


def format_lgip(rows: Sequence[ProfileRow], name_width: int = NAME_WIDTH) -> str:
    """``nvidia-smi mig -lgip``: two lines per profile."""
    w = name_width
    header = (
        "| GPU   " + "Name".ljust(w + 1) + "ID    Instances   Memory     P2P    SM    DEC   ENC  |",
        "|" + " " * (w + 14) + "Free/Total   GiB              CE    JPEG  OFA  |",
    )
    blocks = [
        (
            f"|{r.gpu:>4}  {'MIG ' + r.name:<{w}}{r.profile_id:>4}{r.free:>6}/{r.total:<9}"
            f"{r.memory_gib:<11.2f}{'No':<7}{r.sm:<5}{r.dec:>3}{r.enc:>6}   |",
            "|" + " " * (w + 44) + f"{r.ce:>2}{r.jpeg:>6}{r.ofa:>6}   |",
        )
        for r in rows
    ]
    return _framed(w + 61, "GPU instance profiles:", header, blocks)


def format_lgipp(rows: Sequence[PlacementRow]) -> str:
    """``nvidia-smi mig -lgipp``: one line per profile."""
    out = []
    for r in rows:
        word = "Placements:" if len(r.starts) > 1 else "Placement :"
        starts = ",".join(str(s) for s in r.starts)
        out.append(f"GPU {r.gpu:>2} Profile ID {r.profile_id:>2} {word} {{{starts}}}:{r.size}\n")
    return "".join(out)


def format_lgi(rows: Sequence[InstanceRow], name_width: int = NAME_WIDTH) -> str:
    """``nvidia-smi mig -lgi``."""
    w = name_width
    header = (
        "| GPU   " + "Name".ljust(w + 1) + "Profile  Instance   Placement  |",
        "|" + " " * (w + 10) + "ID       ID       Start:Size |",
    )
    blocks = [
        (
            f"|{r.gpu:>4}  {'MIG ' + r.name:<{w}}{r.profile_id:>6}{r.gi_id:>9}"
            f"{f'{r.start}:{r.size}':>13}     |",
        )
        for r in rows
    ]
    return _framed(w + 39, "GPU instances:", header, blocks)


_CI_HEADER: Final = (
    "| GPU     GPU       Name             Profile   Instance   Placement  |",
    "|       Instance                       ID        ID       Start:Size |",
    "|         ID                                                         |",
)


def format_lci(rows: Sequence[InstanceRow]) -> str:
    """``nvidia-smi mig -lci``."""
    blocks = [
        (
            f"|{r.gpu:>4}{r.gi_id:>7}       {'MIG ' + r.name:<16}{r.profile_id:>6}{r.ci_id or 0:>10}"
            f"{f'{r.start}:{r.size}':>13}     |",
        )
        for r in rows
    ]
    return _framed(68, "Compute instances:", _CI_HEADER, blocks)
