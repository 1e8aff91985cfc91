"""The MIG GPU instance profiles of each GPU model the simulator plays, as ``nvidia-smi mig -lgip`` and
``-lgipp`` print them: id, name, memory, how many fit, SMs and engines, and where an instance may start on
the placement grid. Data only; each table says where its figures come from.

Sources, quoted below by these names:
- ThetaGPU: ALCF ThetaGPU MIG page, an A100-SXM4-40GB on a 2021 driver (tests/fixtures/nvidia-smi-mig, see
  PROVENANCE.md): a complete real ``-lgip`` and ``-lgipp``.
- H100 notes: a public nvidia-smi usage note (search index id 8225626544; the same tables in the
  ``io-io-gpu-05`` notes, ids 41792560749 and 52885409783, and at https://jbarrow.ai/field_notes/nvidia-mig/):
  real ``-lgip``, ``-lgipp``, ``-cgi``, ``-lgi``, ``-lci`` of one NVIDIA H100 80GB HBM3.
- A100 80GB doc: a real ``-lgip`` of an NVIDIA A100 80GB PCIe, driver 515.86.01, in a translated GPU operator
  walkthrough (index id 37196432096).
- B200 PR: NVIDIA/mig-parted#166 (tests/fixtures/nvidia-smi-mig/lgip/b200-TRUNCATED-mig-parted-pr166.txt):
  the first four profiles of a real B200 ``-lgip``, cut short there.
- H200 capture: utkuozdemir/nvidia_gpu_exporter's H200 capture (tests/fixtures/nvidia-smi-default): one
  3g.71gb instance with 71424 MiB, 60 SMs, 3 CE/DEC/JPG and no OFA.
- MIG guide: NVIDIA's MIG User Guide (docs.nvidia.com/datacenter/tesla/mig-user-guide, v580), "Supported MIG
  Profiles" (names, instance counts, copy engines, media engines per profile) and its ``-lgipp`` example.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

# NVML's compute instance profile ids (NVML_COMPUTE_INSTANCE_PROFILE_<n>_SLICE), by compute slices: the
# default compute instance of a GPU instance (``-C``) takes all its slices. Real ``-cgi ... -C`` output shows
# them: 1g.10gb gets CI profile 0, 2g.48gb 1, 3g.20gb 2, 4g.40gb 3.
CI_PROFILE_IDS: Final = MappingProxyType({1: 0, 2: 1, 3: 2, 4: 3, 7: 4, 8: 5, 6: 6})


@dataclass(frozen=True, slots=True)
class GiProfile:
    profile_id: int
    name: str  # without "MIG ": "1g.10gb"
    memory_gib: float  # as -lgip prints it
    instances_total: int
    sm_count: int
    dec_count: int
    enc_count: int
    ce_count: int
    jpeg_count: int
    ofa_count: int
    starts: tuple[int, ...]  # grid slices an instance may start at (-lgipp)
    size_slices: int  # grid slices an instance covers

    @property
    def compute_slices(self) -> int:
        """The ``3`` of ``3g.40gb``."""
        return int(self.name.partition("g.")[0])


@dataclass(frozen=True, slots=True)
class MigTable:
    grid_slices: int
    profiles: tuple[GiProfile, ...]  # in -lgip order


_ALL_1G: Final = (0, 1, 2, 3, 4, 5, 6)
_EVEN: Final = (0, 2, 4, 6)
_HALF: Final = (0, 2, 4)
_QUARTERS: Final = (0, 4)
_FIRST: Final = (0,)

# Profiles, ids and placements: H100 notes (-lgip and -lgipp, byte for byte).
_H100: Final = MigTable(
    8,
    (
        GiProfile(19, "1g.10gb", 9.75, 7, 16, 1, 0, 1, 1, 0, _ALL_1G, 1),
        GiProfile(20, "1g.10gb+me", 9.75, 1, 16, 1, 0, 1, 1, 1, _ALL_1G, 1),
        GiProfile(15, "1g.20gb", 19.62, 4, 26, 1, 0, 1, 1, 0, _EVEN, 2),
        GiProfile(14, "2g.20gb", 19.62, 3, 32, 2, 0, 2, 2, 0, _HALF, 2),
        GiProfile(9, "3g.40gb", 39.50, 2, 60, 3, 0, 3, 3, 0, _QUARTERS, 4),
        GiProfile(5, "4g.40gb", 39.50, 1, 64, 4, 0, 4, 4, 0, _FIRST, 4),
        GiProfile(0, "7g.80gb", 79.25, 1, 132, 7, 0, 8, 7, 1, _FIRST, 8),
    ),
)

# No real -lgip of an H200 was found. Names, instance counts and copy/media engines: MIG guide, "GPU Instance
# Profiles on H200" (the same engines per profile as the H100's). Ids and placements: those of every Hopper
# GPU (H100 notes; the MIG guide's -lgipp). SMs: the H100's, the same GH100 chip, as the H200 capture
# confirms for 3g. Memory: 69.75 GiB for four slices from the H200 capture; one, two and eight slices follow
# by halving less 0.25 GiB and doubling plus 0.25, the steps the real tables show (H100 39.50 -> 79.25,
# B200 22.00 -> 44.25).
_H200: Final = MigTable(
    8,
    (
        GiProfile(19, "1g.18gb", 17.25, 7, 16, 1, 0, 1, 1, 0, _ALL_1G, 1),
        GiProfile(20, "1g.18gb+me", 17.25, 1, 16, 1, 0, 1, 1, 1, _ALL_1G, 1),
        GiProfile(15, "1g.35gb", 34.75, 4, 26, 1, 0, 1, 1, 0, _EVEN, 2),
        GiProfile(14, "2g.35gb", 34.75, 3, 32, 2, 0, 2, 2, 0, _HALF, 2),
        GiProfile(9, "3g.71gb", 69.75, 2, 60, 3, 0, 3, 3, 0, _QUARTERS, 4),
        GiProfile(5, "4g.71gb", 69.75, 1, 64, 4, 0, 4, 4, 0, _FIRST, 4),
        GiProfile(0, "7g.141gb", 139.75, 1, 132, 7, 0, 8, 7, 1, _FIRST, 8),
    ),
)

# Profiles: A100 80GB doc (a PCIe card; the SXM4 80GB has the same GA100 profiles, MIG guide). Placements:
# the MIG guide's A100 -lgipp, which ThetaGPU's real -lgipp matches for every id they share.
_A100_80GB: Final = MigTable(
    8,
    (
        GiProfile(19, "1g.10gb", 9.50, 7, 14, 0, 0, 1, 0, 0, _ALL_1G, 1),
        GiProfile(20, "1g.10gb+me", 9.50, 1, 14, 1, 0, 1, 1, 1, _ALL_1G, 1),
        GiProfile(14, "2g.20gb", 19.50, 3, 28, 1, 0, 2, 0, 0, _HALF, 2),
        GiProfile(9, "3g.40gb", 39.25, 2, 42, 2, 0, 3, 0, 0, _QUARTERS, 4),
        GiProfile(5, "4g.40gb", 39.25, 1, 56, 2, 0, 4, 0, 0, _FIRST, 4),
        GiProfile(0, "7g.80gb", 79.00, 1, 98, 5, 0, 7, 1, 1, _FIRST, 8),
    ),
)

# Profiles and placements: ThetaGPU, both complete (a driver that had no +me profile yet).
_A100_40GB: Final = MigTable(
    8,
    (
        GiProfile(19, "1g.5gb", 4.75, 7, 14, 0, 0, 1, 0, 0, _ALL_1G, 1),
        GiProfile(14, "2g.10gb", 9.75, 3, 28, 1, 0, 2, 0, 0, _HALF, 2),
        GiProfile(9, "3g.20gb", 19.62, 2, 42, 2, 0, 3, 0, 0, _QUARTERS, 4),
        GiProfile(5, "4g.20gb", 19.62, 1, 56, 2, 0, 4, 0, 0, _FIRST, 4),
        GiProfile(0, "7g.40gb", 39.50, 1, 98, 5, 0, 7, 1, 1, _FIRST, 8),
    ),
)

# The first four profiles: B200 PR (real). 3g.90gb, 4g.90gb, 7g.180gb: names, instance counts, copy engines
# and OFA from the MIG guide's B200 table, whose NVDEC/JPEG columns read 1 for every profile where the real
# 2g.45gb has 2, so decoders and JPEG follow the compute slices as in the real rows; SMs likewise (18 per
# slice), the 7g all 148 of a B200; memory by doubling plus 0.25 GiB as from 22.00 to 44.25. Ids and
# placements: the Hopper scheme, which the real B200 rows keep (19, 20, 15, 14), as the MIG guide's B200
# diagram draws it.
_B200: Final = MigTable(
    8,
    (
        GiProfile(19, "1g.23gb", 22.00, 7, 18, 1, 0, 2, 1, 0, _ALL_1G, 1),
        GiProfile(20, "1g.23gb+me", 22.00, 1, 18, 1, 0, 2, 1, 1, _ALL_1G, 1),
        GiProfile(15, "1g.45gb", 44.25, 4, 30, 1, 0, 2, 1, 0, _EVEN, 2),
        GiProfile(14, "2g.45gb", 44.25, 3, 36, 2, 0, 4, 2, 0, _HALF, 2),
        GiProfile(9, "3g.90gb", 88.75, 2, 54, 3, 0, 6, 3, 0, _QUARTERS, 4),
        GiProfile(5, "4g.90gb", 88.75, 1, 72, 4, 0, 8, 4, 0, _FIRST, 4),
        GiProfile(0, "7g.180gb", 177.75, 1, 148, 7, 0, 16, 7, 1, _FIRST, 8),
    ),
)

# By gputop.sim.gpu_models key.
MIG_TABLES: Mapping[str, MigTable] = MappingProxyType(
    {"H100": _H100, "H200": _H200, "A100-80GB": _A100_80GB, "A100-40GB": _A100_40GB, "B200": _B200}
)
