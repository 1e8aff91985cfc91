"""The text ``nvidia-smi mig -lgip / -lgipp / -lgi / -lci`` and ``nvidia-smi -L`` print, from plain rows:
pure formatting, shared by the simulator (which parses it back into facts) and the fake fleet (which sends
it). Layouts are those of real captures (tests/test_fake_fleet.py checks them byte for byte).

Table layouts follow drivers 470-570, whose name column is 16 wide; 580 widened it to 18 (``name_width``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

NO_MIG_DEVICES: Final = "No MIG-enabled devices found.\n"
NO_GPU_INSTANCES: Final = "No GPU instances found.\n"
NO_COMPUTE_INSTANCES: Final = "No compute instances found.\n"
NAME_WIDTH: Final = 16


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


def format_gpu_list(
    gpus: Iterable[tuple[int, str, str]], mig_devices: Mapping[int, Sequence[tuple[str, str]]]
) -> str:
    """``nvidia-smi -L``: each (index, name, uuid) GPU, then its (profile, MIG uuid) devices in the order
    ``mig_devices`` gives them."""
    lines = []
    for index, name, uuid in gpus:
        lines.append(f"GPU {index}: {name} (UUID: {uuid})\n")
        for n, (profile, mig_uuid) in enumerate(mig_devices.get(index, ())):
            lines.append(f"  MIG {profile:<12}Device {n:>2}: (UUID: {mig_uuid})\n")
    return "".join(lines)
