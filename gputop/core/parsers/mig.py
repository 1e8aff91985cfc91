"""`nvidia-smi mig -lgip / -lgipp / -lgi / -lci`: MIG profiles, possible placements and live instances.

The listings are boxed tables whose column widths change between drivers and GPU families, so rows are
read as words between the box's bars, anchored on the cells with a fixed shape (`0/7`, `4:4`) rather than
on character positions. "No ... found" is an answer (MIG off, nothing created yet), not a failure.

Placements count slices of the GPU's placement grid: 8 on A100/H100, 4 on A30, 12 on RTX PRO 6000.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gputop.core.parsers.common import ParseFailure, ParserInfo

# "MIG 1g.10gb", "MIG 1g.24gb+me.all", "MIG 1g.24gb-me", "MIG 1c.3g.20gb" (a compute instance)
_PROFILE_NAME = re.compile(r"^(?:MIG\s+)?(?:(\d+)c\.)?(\d+)g\.(\d+(?:\.\d+)?[gm]b)(.*)$", re.IGNORECASE)
_FREE_TOTAL = re.compile(r"^(\d+)/(\d+)$")
_START_SIZE = re.compile(r"^(\d+):(\d+)$")
_NOTHING_FOUND = re.compile(r"^No .* found", re.IGNORECASE)
_TITLES = {
    "mig-lgip": "GPU instance profiles:",
    "mig-lgi": "GPU instances:",
    "mig-lci": "Compute instances:",
}


@dataclass(frozen=True, slots=True)
class ProfileName:
    """The parts of a MIG profile name: `MIG 2g.20gb+me` is 2 GPU slices, 20gb, variant `+me`."""

    gpu_slices: int | None
    memory: str | None  # the memory part as printed: "20gb"
    variant: str  # "" for the plain profile, else "+me", "-me", "+gfx", "+me.all"
    compute_slices: int | None = None  # the `1c.` of a compute-instance name


def profile_name_parts(name: str) -> ProfileName:
    match = _PROFILE_NAME.match(name.strip())
    if not match:
        return ProfileName(None, None, "")
    compute, gpu, memory, variant = match.groups()
    return ProfileName(int(gpu), memory, variant, int(compute) if compute else None)


@dataclass(frozen=True, slots=True)
class Placement:
    start_slice: int
    size_slices: int

    @property
    def slices(self) -> range:
        """The grid slices it covers: 6:3 covers 6, 7 and 8."""
        return range(self.start_slice, self.start_slice + self.size_slices)

    def __str__(self) -> str:
        return f"{self.start_slice}:{self.size_slices}"


@dataclass(frozen=True, slots=True)
class GpuInstanceProfile:
    """One row pair of `-lgip`: a profile a GPU offers and how many more instances of it fit."""

    gpu_index: int
    name: str  # "MIG 1g.10gb"
    profile_id: int | None = None
    instances_free: int | None = None
    instances_total: int | None = None
    memory_gib: float | None = None
    p2p: bool | None = None  # peer-to-peer between instances
    sm_count: int | None = None
    dec_count: int | None = None  # video decoders
    enc_count: int | None = None  # video encoders
    ce_count: int | None = None  # copy engines
    jpeg_count: int | None = None
    ofa_count: int | None = None  # optical-flow accelerators

    @property
    def parts(self) -> ProfileName:
        return profile_name_parts(self.name)


@dataclass(frozen=True, slots=True)
class MigProfiles:
    profiles: tuple[GpuInstanceProfile, ...] = ()
    notes: tuple[str, ...] = ()

    def for_gpu(self, gpu_index: int) -> tuple[GpuInstanceProfile, ...]:
        return tuple(p for p in self.profiles if p.gpu_index == gpu_index)

    def by_name(self, gpu_index: int, name: str) -> GpuInstanceProfile | None:
        wanted = name if name.startswith("MIG ") else f"MIG {name}"
        return next((p for p in self.for_gpu(gpu_index) if p.name == wanted), None)


@dataclass(frozen=True, slots=True)
class ProfilePlacements:
    """One `-lgipp` line: where instances of one profile may start on one GPU."""

    gpu_index: int
    profile_id: int
    placements: tuple[Placement, ...]


@dataclass(frozen=True, slots=True)
class MigPlacements:
    entries: tuple[ProfilePlacements, ...] = ()
    notes: tuple[str, ...] = ()

    def for_profile(self, gpu_index: int, profile_id: int) -> tuple[Placement, ...]:
        for entry in self.entries:
            if entry.gpu_index == gpu_index and entry.profile_id == profile_id:
                return entry.placements
        return ()


@dataclass(frozen=True, slots=True)
class GpuInstance:
    gpu_index: int
    name: str  # "MIG 3g.40gb"
    profile_id: int
    instance_id: int
    placement: Placement | None


@dataclass(frozen=True, slots=True)
class MigGpuInstances:
    instances: tuple[GpuInstance, ...] = ()
    notes: tuple[str, ...] = ()

    def for_gpu(self, gpu_index: int) -> tuple[GpuInstance, ...]:
        return tuple(i for i in self.instances if i.gpu_index == gpu_index)


@dataclass(frozen=True, slots=True)
class ComputeInstance:
    gpu_index: int
    gpu_instance_id: int
    name: str  # "MIG 1c.3g.20gb", or the GPU instance's name when the CI takes it whole
    profile_id: int
    instance_id: int
    placement: Placement | None  # None on drivers that print no Placement column


@dataclass(frozen=True, slots=True)
class MigComputeInstances:
    instances: tuple[ComputeInstance, ...] = ()
    notes: tuple[str, ...] = ()

    def for_gpu_instance(self, gpu_index: int, gpu_instance_id: int) -> tuple[ComputeInstance, ...]:
        return tuple(
            i for i in self.instances if i.gpu_index == gpu_index and i.gpu_instance_id == gpu_instance_id
        )


# --- boxed tables ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Table:
    rows: tuple[tuple[str, ...], ...]  # the words of each data row, in order
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Nothing:
    """The "No MIG-enabled devices found" kind of answer: no table, and nothing wrong."""

    messages: tuple[str, ...]


def _is_border(line: str) -> bool:
    return line.startswith("+-")


def _table(kind: str, text: str) -> _Table | _Nothing | ParseFailure:
    lines = [line.strip() for line in text.splitlines()]
    nothing = tuple(line for line in lines if _NOTHING_FOUND.match(line))
    title = _TITLES[kind]
    titles = [line.strip("|").strip() for line in lines if line.strip("|").strip() in _TITLES.values()]
    if not titles:
        if nothing:
            return _Nothing(nothing)
        excerpt = "\n".join(line for line in lines if line)[:200]
        return ParseFailure(kind, f"no '{title}' table" if excerpt else "empty output", excerpt)
    if titles[0] != title:
        return ParseFailure(kind, f"expected a '{title}' table, found '{titles[0]}'", titles[0])
    start = next((i for i, line in enumerate(lines) if line.startswith("|=")), None)
    if start is None:
        return ParseFailure(kind, "table header has no '|===' line (output cut short?)", title)
    notes = list(nothing)
    rows: list[tuple[str, ...]] = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            rows.append(tuple(line[1:].rstrip("|").split()))
    body = [line for line in lines[start + 1 :] if line]
    width = len(lines[start])
    last = body[-1] if body else ""
    # A whole table ends with a full-width border; a copy cut mid-row or mid-border does not.
    if not (_is_border(last) and len(last) >= width):
        notes.append("output cut short: the table's last line is incomplete")
    return _Table(tuple(rows), tuple(notes))


def _int(word: str | None) -> int | None:
    return int(word) if word is not None and word.isdigit() else None


def _float(word: str | None) -> float | None:
    try:
        return float(word) if word else None
    except ValueError:
        return None


# --- -lgip ----------------------------------------------------------------------------------------


def _profile(
    first: tuple[str, ...], second: tuple[str, ...] | None, notes: list[str]
) -> GpuInstanceProfile | None:
    gpu = _int(first[0])
    if gpu is None or len(first) < 2:
        notes.append(f"unreadable profile row: {' '.join(first)}")
        return None
    at = next((i for i, w in enumerate(first) if _FREE_TOTAL.match(w)), None)
    if at is None or at < 3:
        # Cut before Instances: the name still says what the row is; the numbers are unknown.
        notes.append(f"profile row cut short: {' '.join(first)}")
        return GpuInstanceProfile(gpu, " ".join(w for w in first[1:3] if not w.isdigit()))
    name = " ".join(first[1 : at - 1])
    free_total = _FREE_TOTAL.match(first[at])
    after = list(first[at + 1 :])
    if len(after) < 5:
        notes.append(f"{name} on GPU {gpu}: row cut short")
    memory, p2p, sm, dec, enc = (after + [""] * 5)[:5]
    if second is None:
        notes.append(f"{name} on GPU {gpu}: no CE/JPEG/OFA row")
    elif len(second) < 3:
        notes.append(f"{name} on GPU {gpu}: CE/JPEG/OFA row cut short")
    ce, jpeg, ofa = (list(second or ()) + [""] * 3)[:3]
    if memory and _float(memory) is None:
        notes.append(f"{name} on GPU {gpu}: memory {memory!r} unreadable")
    return GpuInstanceProfile(
        gpu_index=gpu,
        name=name,
        profile_id=_int(first[at - 1]),
        instances_free=int(free_total.group(1)) if free_total else None,
        instances_total=int(free_total.group(2)) if free_total else None,
        memory_gib=_float(memory),
        p2p={"Yes": True, "No": False}.get(p2p),
        sm_count=_int(sm),
        dec_count=_int(dec),
        enc_count=_int(enc),
        ce_count=_int(ce),
        jpeg_count=_int(jpeg),
        ofa_count=_int(ofa),
    )


def _is_counts_row(words: tuple[str, ...]) -> bool:
    return 0 < len(words) <= 3 and all(w.isdigit() for w in words)


def parse_lgip(text: str) -> MigProfiles | ParseFailure:
    table = _table("mig-lgip", text)
    if isinstance(table, ParseFailure):
        return table
    if isinstance(table, _Nothing):
        return MigProfiles(notes=table.messages)
    notes = list(table.notes)
    profiles: list[GpuInstanceProfile] = []
    rows = table.rows
    i = 0
    while i < len(rows):
        first = rows[i]
        if not first or _is_counts_row(first):
            notes.append(f"stray row: {' '.join(first)}")
            i += 1
            continue
        # A profile is two rows: the named one, then its CE/JPEG/OFA counts alone.
        second = rows[i + 1] if i + 1 < len(rows) and _is_counts_row(rows[i + 1]) else None
        profile = _profile(first, second, notes)
        if profile is not None:
            profiles.append(profile)
        i += 2 if second is not None else 1
    return MigProfiles(tuple(profiles), tuple(notes))


# --- -lgipp ---------------------------------------------------------------------------------------

_PLACEMENT_LINE = re.compile(
    r"^GPU\s+(\d+)\s+Profile\s+ID\s+(\d+)\s+Placements?\s*:\s*\{([\d,\s]*)\}\s*:\s*(\d+)$"
)


def parse_lgipp(text: str) -> MigPlacements | ParseFailure:
    entries: list[ProfilePlacements] = []
    notes: list[str] = []
    nothing = False
    for line in text.splitlines():
        stripped = line.strip()
        match = _PLACEMENT_LINE.match(stripped)
        if match:
            gpu, profile, starts, size = match.groups()
            placements = tuple(Placement(int(s), int(size)) for s in re.findall(r"\d+", starts))
            entries.append(ProfilePlacements(int(gpu), int(profile), placements))
        elif _NOTHING_FOUND.match(stripped):
            nothing = True
            notes.append(stripped)
        elif stripped:
            notes.append(f"ignored line: {stripped[:120]}")
    if not entries and not nothing:
        excerpt = text.strip()[:200]
        reason = "no 'GPU n Profile ID m Placements: {..}:size' lines" if excerpt else "empty output"
        return ParseFailure("mig-lgipp", reason, excerpt)
    return MigPlacements(tuple(entries), tuple(notes))


# --- -lgi / -lci ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _InstanceRow:
    ids: tuple[int, ...]  # GPU, then GPU instance for -lci
    name: str
    profile_id: int
    instance_id: int
    placement: Placement | None


def _instance_row(words: tuple[str, ...], leading: int) -> _InstanceRow | None:
    """`GPU [GI] Name... ProfileID InstanceID [start:size]`; None when the row is cut short."""
    placement = _START_SIZE.match(words[-1]) if words else None
    body = words[:-1] if placement else words
    if len(body) < leading + 3:
        return None
    ids = tuple(_int(w) for w in body[:leading])
    profile_id, instance_id = _int(body[-2]), _int(body[-1])
    if None in ids or profile_id is None or instance_id is None:
        return None
    return _InstanceRow(
        ids=tuple(i for i in ids if i is not None),
        name=" ".join(body[leading:-2]),
        profile_id=profile_id,
        instance_id=instance_id,
        placement=Placement(int(placement.group(1)), int(placement.group(2))) if placement else None,
    )


def parse_lgi(text: str) -> MigGpuInstances | ParseFailure:
    table = _table("mig-lgi", text)
    if isinstance(table, ParseFailure):
        return table
    if isinstance(table, _Nothing):
        return MigGpuInstances(notes=table.messages)
    notes = list(table.notes)
    instances: list[GpuInstance] = []
    for words in table.rows:
        row = _instance_row(words, leading=1)
        if row is None:
            notes.append(f"row cut short or unreadable: {' '.join(words)}")
            continue
        if row.placement is None:
            notes.append(f"GPU {row.ids[0]} instance {row.instance_id}: no placement printed")
        instances.append(GpuInstance(row.ids[0], row.name, row.profile_id, row.instance_id, row.placement))
    return MigGpuInstances(tuple(instances), tuple(notes))


def parse_lci(text: str) -> MigComputeInstances | ParseFailure:
    table = _table("mig-lci", text)
    if isinstance(table, ParseFailure):
        return table
    if isinstance(table, _Nothing):
        return MigComputeInstances(notes=table.messages)
    notes = list(table.notes)
    instances: list[ComputeInstance] = []
    for words in table.rows:
        row = _instance_row(words, leading=2)
        if row is None:
            notes.append(f"row cut short or unreadable: {' '.join(words)}")
            continue
        gpu, gpu_instance = row.ids
        instances.append(
            ComputeInstance(gpu, gpu_instance, row.name, row.profile_id, row.instance_id, row.placement)
        )
    return MigComputeInstances(tuple(instances), tuple(notes))


PARSERS: dict[str, ParserInfo] = {
    "mig-lgip": ParserInfo("mig-lgip", "nvidia-smi mig -lgip", parse_lgip),
    "mig-lgipp": ParserInfo("mig-lgipp", "nvidia-smi mig -lgipp", parse_lgipp),
    "mig-lgi": ParserInfo("mig-lgi", "nvidia-smi mig -lgi", parse_lgi),
    "mig-lci": ParserInfo("mig-lci", "nvidia-smi mig -lci", parse_lci),
}
