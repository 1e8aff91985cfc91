"""MIG layouts: the text a user or a config preset gives (`3x2g.20gb, 1x1g.10gb`) and where its GPU
instances can sit on one GPU, decided from that GPU's own `-lgip` profiles and `-lgipp` placements.

Syntax: items separated by `,` or by a `+` that is followed by a count (`3x2g.20gb+1x1g.10gb`) or has
spaces on both sides (`3x2g.20gb + 1g.10gb+me`). A `+` joined to letters belongs to the profile name:
NVIDIA's variants are `+me`, `+me.all`, `+gfx` and `-me`, so `1x1g.10gb+me+6x1g.10gb` reads as one
`1g.10gb+me` and six `1g.10gb`. An item is `COUNTxPROFILE` or a profile alone (one instance), any case,
with or without the `MIG ` prefix.

A layout that cannot be placed is refused with the reason; placements are never guessed.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Literal

from gputop.core.parsers.mig import (
    ComputeInstance,
    GpuInstance,
    GpuInstanceProfile,
    MigComputeInstances,
    MigGpuInstances,
    MigPlacements,
    MigProfiles,
    Placement,
    ProfilePlacements,
)

RefusalKind = Literal[
    "bad_syntax",
    "no_gpus",
    "mixed_models",
    "state_unknown",
    "no_profiles",
    "incomplete_listing",
    "unknown_profile",
    "too_big",
    "too_many",
    "engines",
    "no_fit",
]

_SEPARATOR = re.compile(r",|\s+\+\s+|\+(?=\s*\d)")
_ITEM = re.compile(
    r"^(?:(\d+)\s*x\s*)?(?:mig\s+)?(\d+g\.\d+(?:\.\d+)?[gm]b(?:[+-][a-z][a-z0-9.]*)*)$", re.IGNORECASE
)
# How the MIG parsers' notes say a listing lost rows: the instances it shows may not be all there are.
_DAMAGE_WORDS = ("cut short", "unreadable")
# Media engines are dedicated to one GPU instance each, so a layout cannot hold more than the whole GPU.
_ENGINES = (
    ("dec_count", "video decoders"),
    ("enc_count", "video encoders"),
    ("jpeg_count", "JPEG decoders"),
    ("ofa_count", "optical-flow accelerators"),
)


@dataclass(frozen=True, slots=True)
class Refusal:
    kind: RefusalKind  # for the UI to act on ("not this GPU's profile", ...)
    message: str  # what is wrong, said so a person can fix it


@dataclass(frozen=True, slots=True)
class LayoutItem:
    count: int
    profile: str  # lower case, without "MIG ": "1g.10gb+me"


@dataclass(frozen=True, slots=True)
class MigLayout:
    items: tuple[LayoutItem, ...]  # one per profile, in the order first written

    def __str__(self) -> str:
        return ", ".join(f"{item.count}x{item.profile}" for item in self.items)


def parse_layout(text: str) -> MigLayout | Refusal:
    chunks = [chunk.strip() for chunk in _SEPARATOR.split(text)]
    if not any(chunks):
        return Refusal("bad_syntax", "the layout is empty: name at least one profile, e.g. 7x1g.10gb")
    counts: Counter[str] = Counter()
    for chunk in chunks:
        if not chunk:
            return Refusal(
                "bad_syntax", f"empty item in {text.strip()!r}: two separators in a row or one at an end"
            )
        match = _ITEM.match(chunk)
        if not match:
            hint = ""
            if re.fullmatch(r"[+-]?[a-z][a-z0-9.]*", chunk, re.IGNORECASE):
                hint = "; a variant such as +me is written joined to its profile, without spaces"
            return Refusal(
                "bad_syntax",
                f"bad item {chunk!r}: expected COUNTxPROFILE such as 3x2g.20gb, or one profile such as "
                f"1g.10gb+me{hint}",
            )
        count = int(match.group(1)) if match.group(1) else 1
        if count < 1:
            return Refusal("bad_syntax", f"bad item {chunk!r}: the count must be at least 1")
        counts[match.group(2).lower()] += count
    return MigLayout(tuple(LayoutItem(n, profile) for profile, n in counts.items()))


def short_name(profile_name: str) -> str:
    """`MIG 2g.20gb` -> `2g.20gb`: how layouts and messages write a profile."""
    return profile_name.removeprefix("MIG ")


@dataclass(frozen=True, slots=True)
class MigGpu:
    """One GPU as the planner sees it: where it is, its model, its MIG tables and what it holds now."""

    node: str
    index: int
    model: str  # "NVIDIA A100-SXM4-40GB", as nvidia-smi names it
    profiles: tuple[GpuInstanceProfile, ...]  # its -lgip rows
    placements: tuple[ProfilePlacements, ...]  # its -lgipp lines
    gpu_instances: tuple[GpuInstance, ...]  # its -lgi rows now
    compute_instances: tuple[ComputeInstance, ...]  # its -lci rows now
    damage: tuple[str, ...] = ()  # the -lgi/-lci parsers' notes about rows or tables cut short

    @property
    def where(self) -> str:
        return f"{self.node} GPU {self.index}"

    def placements_of(self, profile_id: int) -> tuple[Placement, ...]:
        return next((e.placements for e in self.placements if e.profile_id == profile_id), ())


def mig_gpu(
    node: str,
    index: int,
    model: str,
    lgip: MigProfiles,
    lgipp: MigPlacements,
    lgi: MigGpuInstances,
    lci: MigComputeInstances,
) -> MigGpu:
    """The planner's view of GPU ``index`` from a node's parsed MIG listings (which may cover all GPUs)."""
    return MigGpu(
        node=node,
        index=index,
        model=model,
        profiles=lgip.for_gpu(index),
        placements=tuple(e for e in lgipp.entries if e.gpu_index == index),
        gpu_instances=lgi.for_gpu(index),
        compute_instances=tuple(c for c in lci.instances if c.gpu_index == index),
        damage=tuple(n for n in (*lgi.notes, *lci.notes) if any(w in n for w in _DAMAGE_WORDS)),
    )


@dataclass(frozen=True, slots=True)
class PlacedInstance:
    """A GPU instance the plan creates: its profile and the slices it will occupy."""

    profile_id: int
    name: str  # "MIG 2g.20gb"
    placement: Placement

    def __str__(self) -> str:
        return f"{short_name(self.name)} at {self.placement}"


@dataclass(frozen=True, slots=True)
class _Wanted:
    profile: GpuInstanceProfile
    profile_id: int
    count: int
    placements: tuple[Placement, ...]


def fit_layout(layout: MigLayout, gpu: MigGpu) -> tuple[PlacedInstance, ...] | Refusal:
    """Where each instance of ``layout`` goes on ``gpu`` (in placement order), or why it cannot go."""
    this_gpu = f"this GPU ({gpu.model})" if gpu.model else "this GPU"
    if not gpu.profiles:
        return Refusal("no_profiles", f"{gpu.where} lists no MIG profiles (is MIG mode on?)")
    listed = {p.profile_id for p in gpu.profiles}
    unlisted = sorted(e.profile_id for e in gpu.placements if e.profile_id not in listed)
    if unlisted:
        # -lgipp names profiles -lgip lacks: the -lgip copy was cut short, so its capacities are unknown.
        ids = ", ".join(map(str, unlisted))
        return Refusal(
            "incomplete_listing", f"the -lgip listing of {gpu.where} lacks profiles {ids}; read it again"
        )
    wanted = _wanted(layout, gpu, this_gpu)
    if isinstance(wanted, Refusal):
        return wanted
    for check in (_check_slices, _check_counts, _check_engines):
        refusal = check(layout, wanted, gpu, this_gpu)
        if refusal is not None:
            return refusal
    return _place(layout, wanted, gpu)


def _wanted(layout: MigLayout, gpu: MigGpu, this_gpu: str) -> list[_Wanted] | Refusal:
    by_name = {short_name(p.name).lower(): p for p in gpu.profiles}
    unknown = [item.profile for item in layout.items if item.profile not in by_name]
    if unknown:
        offered = ", ".join(short_name(p.name) for p in gpu.profiles)
        subject = (
            f"{unknown[0]} is not a profile" if len(unknown) == 1 else f"{_and(unknown)} are not profiles"
        )
        return Refusal("unknown_profile", f"{subject} of {this_gpu}; it has: {offered}")
    wanted = []
    for item in layout.items:
        profile = by_name[item.profile]
        if profile.profile_id is None:
            return Refusal(
                "incomplete_listing", f"the -lgip row of {item.profile} on {gpu.where} is cut short"
            )
        placements = gpu.placements_of(profile.profile_id)
        if not placements:
            return Refusal(
                "incomplete_listing",
                f"-lgipp lists no placements for {item.profile} (id {profile.profile_id}) on {gpu.where}",
            )
        wanted.append(_Wanted(profile, profile.profile_id, item.count, placements))
    return wanted


def _whole_gpu(gpu: MigGpu) -> GpuInstanceProfile | None:
    """The profile that takes the whole GPU (its only placement covers the grid): the GPU's totals."""
    grid = max((p.start_slice + p.size_slices for e in gpu.placements for p in e.placements), default=0)
    whole = [
        p
        for p in gpu.profiles
        if p.profile_id is not None and gpu.placements_of(p.profile_id) == (Placement(0, grid),)
    ]
    plain = [p for p in whole if not p.parts.variant]
    return next(iter(plain or whole), None)


def _check_slices(layout: MigLayout, wanted: list[_Wanted], gpu: MigGpu, this_gpu: str) -> Refusal | None:
    whole = _whole_gpu(gpu)
    total = whole.parts.gpu_slices if whole else None
    if total is None or any(w.profile.parts.gpu_slices is None for w in wanted):
        return None
    need = sum(w.count * (w.profile.parts.gpu_slices or 0) for w in wanted)
    if need > total:
        return Refusal("too_big", f"{layout} needs {need} compute slices; {this_gpu} has {total}")
    return None


def _check_counts(layout: MigLayout, wanted: list[_Wanted], gpu: MigGpu, this_gpu: str) -> Refusal | None:
    for w in wanted:
        total = w.profile.instances_total
        if total is not None and w.count > total:
            name = short_name(w.profile.name)
            return Refusal("too_many", f"{w.count}x{name}: {this_gpu} holds at most {total} of {name}")
    return None


def _check_engines(layout: MigLayout, wanted: list[_Wanted], gpu: MigGpu, this_gpu: str) -> Refusal | None:
    whole = _whole_gpu(gpu)
    if whole is None:
        return None
    for field, label in _ENGINES:
        total = getattr(whole, field)
        counts = [getattr(w.profile, field) for w in wanted]
        if total is None or None in counts:
            continue
        need = sum(w.count * n for w, n in zip(wanted, counts, strict=True))
        if need > total:
            return Refusal(
                "engines",
                f"{layout} needs {need} {label}; {this_gpu} has {total}, and an instance does not share them",
            )
    return None


def _place(layout: MigLayout, wanted: list[_Wanted], gpu: MigGpu) -> tuple[PlacedInstance, ...] | Refusal:
    # Larger instances first: they have the fewest placements, so the search fails fast.
    order = sorted(
        (w for w in wanted for _ in range(w.count)),
        key=lambda w: (-w.placements[0].size_slices, w.profile_id),
    )
    every = tuple(p for e in gpu.placements for p in e.placements)
    best: tuple[int, tuple[Placement, ...]] | None = None

    def search(i: int, chosen: tuple[Placement, ...], used: frozenset[int]) -> None:
        nonlocal best
        if i == len(order):
            score = _reachable_free(used, every)
            if best is None or score > best[0]:
                best = (score, chosen)
            return
        # Instances of one profile are interchangeable: take their placements in rising order only.
        floor = chosen[i - 1].start_slice if i and order[i - 1] is order[i] else -1
        for placement in order[i].placements:
            if placement.start_slice > floor and used.isdisjoint(placement.slices):
                search(i + 1, (*chosen, placement), used | frozenset(placement.slices))

    search(0, (), frozenset())
    if best is None:
        return Refusal("no_fit", _no_fit_reason(layout, order))
    placed = (PlacedInstance(w.profile_id, w.profile.name, p) for w, p in zip(order, best[1], strict=True))
    return tuple(sorted(placed, key=lambda p: p.placement.start_slice))


def _reachable_free(used: frozenset[int], every: Sequence[Placement]) -> int:
    """Free slices some later instance could still occupy: among fits, keep the most room for more."""
    return len({s for p in every if used.isdisjoint(p.slices) for s in p.slices})


def _no_fit_reason(layout: MigLayout, order: Sequence[_Wanted]) -> str:
    """Why nothing fits, told along the first-fit attempt: no arrangement does better (the search saw all)."""
    placed: list[tuple[str, Placement]] = []
    used: set[int] = set()
    for w in order:
        name = short_name(w.profile.name)
        free = next((p for p in w.placements if used.isdisjoint(p.slices)), None)
        if free is None:
            groups = groupby(placed, key=lambda x: x[0])
            before = "; ".join(f"{n} at {_and([str(p) for _, p in group])}" for n, group in groups)
            starts = _and([str(p.start_slice) for p in w.placements], "or")
            return (
                f"{layout} does not fit in any arrangement: after {before}, no placement of {name} is left "
                f"(it can start at {starts})"
            )
        placed.append((name, free))
        used.update(free.slices)
    return f"{layout} does not fit in any arrangement"


def _and(words: Sequence[str], last: str = "and") -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {last} {words[-1]}"
