"""MIG listing parsers against real captured outputs (see fixtures/PROVENANCE.md)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.mig import (
    ComputeInstance,
    GpuInstance,
    MigComputeInstances,
    MigGpuInstances,
    MigPlacements,
    MigProfiles,
    Placement,
    ProfileName,
    parse_lci,
    parse_lgi,
    parse_lgip,
    parse_lgipp,
    profile_name_parts,
)
from gputop.core.parsers.registry import registry

MIG = Path(__file__).parent / "fixtures" / "nvidia-smi-mig"
PARSERS: dict[str, Callable[[str], object]] = {
    "lgip": parse_lgip,
    "lgipp": parse_lgipp,
    "lgi": parse_lgi,
    "lci": parse_lci,
}
RESULTS = {"lgip": MigProfiles, "lgipp": MigPlacements, "lgi": MigGpuInstances, "lci": MigComputeInstances}
SAMPLES = [(kind, path) for kind in PARSERS for path in sorted((MIG / kind).iterdir())]


def _read(kind: str, name: str) -> str:
    return (MIG / kind / name).read_text(encoding="utf-8")


def _profiles(name: str) -> MigProfiles:
    result = parse_lgip(_read("lgip", name))
    assert isinstance(result, MigProfiles), result
    return result


def _placements(name: str) -> MigPlacements:
    result = parse_lgipp(_read("lgipp", name))
    assert isinstance(result, MigPlacements), result
    return result


def _instances(name: str) -> MigGpuInstances:
    result = parse_lgi(_read("lgi", name))
    assert isinstance(result, MigGpuInstances), result
    return result


def _compute(name: str) -> MigComputeInstances:
    result = parse_lci(_read("lci", name))
    assert isinstance(result, MigComputeInstances), result
    return result


@pytest.mark.parametrize(("kind", "path"), SAMPLES, ids=lambda v: getattr(v, "name", v))
def test_every_real_mig_sample_parses(kind: str, path: Path) -> None:
    result = PARSERS[kind](path.read_text(encoding="utf-8"))
    assert isinstance(result, RESULTS[kind])


@pytest.mark.parametrize(("kind", "path"), SAMPLES, ids=lambda v: getattr(v, "name", v))
def test_cut_copies_never_raise(kind: str, path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for end in range(0, len(text), max(1, len(text) // 40)):
        assert isinstance(PARSERS[kind](text[:end]), (RESULTS[kind], ParseFailure))


def test_every_family_has_samples() -> None:
    assert {kind for kind, _ in SAMPLES} == set(PARSERS)


def test_registry_names_the_mig_kinds() -> None:
    kinds = registry()
    for kind in ("mig-lgip", "mig-lgipp", "mig-lgi", "mig-lci"):
        assert kinds[kind].kind == kind


# --- -lgip ---------------------------------------------------------------------------------------


def test_lgip_a100_40gb_fully_used() -> None:
    listing = _profiles("a100-sxm4-40gb-thetagpu-drv460era-all-0-free.txt")
    assert [p.name for p in listing.for_gpu(0)] == [
        "MIG 1g.5gb",
        "MIG 2g.10gb",
        "MIG 3g.20gb",
        "MIG 4g.20gb",
        "MIG 7g.40gb",
    ]
    small = listing.by_name(0, "1g.5gb")
    assert small is not None
    assert (small.profile_id, small.instances_free, small.instances_total) == (19, 0, 7)
    assert small.memory_gib == pytest.approx(4.75)
    assert small.p2p is False
    assert (small.sm_count, small.dec_count, small.enc_count) == (14, 0, 0)
    assert (small.ce_count, small.jpeg_count, small.ofa_count) == (1, 0, 0)
    whole = listing.by_name(0, "MIG 7g.40gb")
    assert whole is not None
    assert (whole.profile_id, whole.instances_total, whole.sm_count) == (0, 1, 98)
    assert (whole.dec_count, whole.ce_count, whole.jpeg_count, whole.ofa_count) == (5, 7, 1, 1)
    assert whole.memory_gib == pytest.approx(39.50)
    assert listing.notes == ()


def test_lgip_a30_me_profile() -> None:
    listing = _profiles("a30-24gb-me-profile-all-used.txt")
    me = listing.by_name(0, "1g.6gb+me")
    assert me is not None
    assert (me.profile_id, me.instances_free, me.instances_total) == (21, 0, 1)
    assert (me.jpeg_count, me.ofa_count) == (1, 1)
    assert me.parts == ProfileName(gpu_slices=1, memory="6gb", variant="+me")
    plain = listing.by_name(0, "1g.6gb")
    assert plain is not None and (plain.profile_id, plain.instances_total) == (14, 4)
    assert plain.parts.variant == ""


def test_lgip_rtx_pro_6000_blackwell_variants() -> None:
    name = "rtx-pro-6000-blackwell-server-COMPLETE-gfx-me.all-minus-me-profiles-8gpu-host.txt"
    listing = _profiles(name)
    assert len(listing.profiles) == 11
    variants = {p.name: (p.profile_id, p.parts.variant) for p in listing.profiles}
    assert variants["MIG 1g.24gb+gfx"] == (47, "+gfx")
    assert variants["MIG 1g.24gb+me.all"] == (65, "+me.all")
    assert variants["MIG 1g.24gb-me"] == (67, "-me")
    assert variants["MIG 4g.96gb+gfx"] == (32, "+gfx")
    me_all = listing.by_name(0, "1g.24gb+me.all")
    assert me_all is not None
    assert (me_all.dec_count, me_all.enc_count, me_all.jpeg_count, me_all.ofa_count) == (4, 4, 4, 1)
    minus_me = listing.by_name(0, "1g.24gb-me")
    assert minus_me is not None
    assert (minus_me.instances_free, minus_me.dec_count, minus_me.jpeg_count) == (4, 0, 0)
    big = listing.by_name(0, "4g.96gb")
    assert big is not None
    assert (big.sm_count, big.instances_total) == (188, 1)
    assert big.memory_gib == pytest.approx(95.12)
    assert listing.notes == ()


def test_lgip_cut_short_listings_keep_what_is_there() -> None:
    cut = _profiles("rtx-pro-6000-blackwell-server-gfx-profiles-TRUNCATED-cubecos-312.txt")
    last = cut.profiles[-1]
    assert last.name == "MIG 1g.24gb+me.all"
    assert (last.profile_id, last.sm_count, last.dec_count) == (65, 46, 4)
    assert last.enc_count is None and last.ce_count is None
    assert any("cut short" in note for note in cut.notes)
    b200 = _profiles("b200-TRUNCATED-mig-parted-pr166.txt")
    assert [p.name for p in b200.profiles] == ["MIG 1g.23gb", "MIG 1g.23gb+me", "MIG 1g.45gb", "MIG 2g.45gb"]
    first = b200.profiles[0]
    assert (first.instances_free, first.instances_total) == (7, 7)
    assert first.memory_gib == pytest.approx(22.0)
    assert any("cut short" in note for note in b200.notes)
    gh200 = _profiles("gh200-144g-hbm3e-TRUNCATED-mig-parted-pr139.txt")
    assert gh200.by_name(0, "1g.18gb+me") is not None
    assert gh200.profiles[-1].name == "MIG 2g.36gb"


# --- -lgipp --------------------------------------------------------------------------------------


def test_lgipp_a100_placements() -> None:
    listing = _placements("a100-sxm4-40gb-thetagpu.txt")
    assert [s.start_slice for s in listing.for_profile(0, 19)] == [0, 1, 2, 3, 4, 5, 6]
    assert listing.for_profile(0, 14) == (Placement(0, 2), Placement(2, 2), Placement(4, 2))
    assert listing.for_profile(0, 9) == (Placement(0, 4), Placement(4, 4))
    assert listing.for_profile(0, 5) == (Placement(0, 4),)  # printed "Placement :"
    assert listing.for_profile(0, 0) == (Placement(0, 8),)
    assert listing.for_profile(1, 0) == ()
    assert listing.notes == ()


def test_lgipp_a30_and_blackwell_grids() -> None:
    a30 = _placements("a30-24gb.txt")
    assert a30.for_profile(0, 21) == tuple(Placement(s, 1) for s in range(4))
    assert a30.for_profile(0, 0) == (Placement(0, 4),)
    rtx = _placements("rtx-pro-6000-blackwell-server-12-slot-grid.txt")
    assert len(rtx.entries) == 11
    assert rtx.for_profile(0, 14) == tuple(Placement(s, 3) for s in (0, 3, 6, 9))
    assert rtx.for_profile(0, 64) == (Placement(0, 6), Placement(6, 6))
    assert rtx.for_profile(0, 32) == (Placement(0, 12),)
    assert list(Placement(6, 3).slices) == [6, 7, 8]
    assert str(Placement(6, 3)) == "6:3"


# --- -lgi ----------------------------------------------------------------------------------------


def test_lgi_a100_two_halves() -> None:
    listing = _instances("a100-sxm4-40gb-thetagpu-2x3g.20gb.txt")
    assert listing.instances == (
        GpuInstance(0, "MIG 3g.20gb", 9, 1, Placement(4, 4)),
        GpuInstance(0, "MIG 3g.20gb", 9, 2, Placement(0, 4)),
    )


def test_lgi_a30_and_blackwell() -> None:
    a30 = _instances("a30-24gb-4x1g.6gb.txt")
    assert [(i.instance_id, str(i.placement)) for i in a30.instances] == [
        (3, "0:1"),
        (4, "1:1"),
        (5, "2:1"),
        (6, "3:1"),
    ]
    assert {i.profile_id for i in a30.instances} == {14}
    rtx = _instances("rtx-pro-6000-blackwell-mixed-2g.48gb-plus-2x1g.24gb.txt")
    assert [(i.name, i.instance_id, i.placement) for i in rtx.instances] == [
        ("MIG 1g.24gb", 5, Placement(6, 3)),
        ("MIG 1g.24gb", 6, Placement(9, 3)),
        ("MIG 2g.48gb", 1, Placement(0, 6)),
    ]


def test_lgi_multi_gpu_cut_short() -> None:
    listing = _instances("a100-multi-gpu-mixed-1g.10gb-2g.20gb-3g.40gb-TRUNCATED-dcgm-138.txt")
    assert len(listing.for_gpu(0)) == 4
    assert len(listing.for_gpu(1)) == 4
    assert listing.for_gpu(2) == ()  # its first row was cut after the name
    gpu1 = {i.instance_id: (i.name, i.profile_id, str(i.placement)) for i in listing.for_gpu(1)}
    assert gpu1[1] == ("MIG 3g.40gb", 9, "4:4")
    assert gpu1[5] == ("MIG 2g.20gb", 14, "0:2")
    assert any("cut short" in note for note in listing.notes)


# --- -lci ----------------------------------------------------------------------------------------


def test_lci_a100_one_ci_per_gi() -> None:
    listing = _compute("a100-sxm4-40gb-thetagpu-2x1c.3g.20gb.txt")
    assert listing.instances == (
        ComputeInstance(0, 1, "MIG 1c.3g.20gb", 0, 0, None),
        ComputeInstance(0, 2, "MIG 1c.3g.20gb", 0, 0, None),
    )
    assert profile_name_parts("MIG 1c.3g.20gb") == ProfileName(3, "20gb", "", compute_slices=1)


def test_lci_old_format_three_cis_in_one_gi() -> None:
    listing = _compute("a100-3x1c.3g.20gb-in-one-GI-old-format-no-placement-nvidia-mig-guide-copy.txt")
    assert [ci.instance_id for ci in listing.for_gpu_instance(0, 1)] == [0, 1, 2]
    assert all(ci.placement is None for ci in listing.instances)


def test_lci_blackwell_with_placement() -> None:
    listing = _compute("rtx-pro-6000-blackwell-4x1g.24gb.txt")
    assert [(ci.gpu_instance_id, ci.name, ci.placement) for ci in listing.instances] == [
        (gi, "MIG 1g.24gb", Placement(0, 1)) for gi in (3, 4, 5, 6)
    ]


# --- answers that are not tables -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        ("lgip", "No MIG-enabled devices found.\n"),
        ("lgipp", "No MIG-enabled devices found.\n"),
        ("lgi", "No GPU instances found: Not Found\n"),
        ("lci", "No compute instances found: Not Found\n"),
    ],
)
def test_nothing_found_is_an_empty_answer_with_a_note(kind: str, text: str) -> None:
    result = PARSERS[kind](text)
    assert isinstance(result, RESULTS[kind])
    assert result.notes == (text.strip(),)  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", sorted(PARSERS))
def test_hopeless_input_is_a_failure(kind: str) -> None:
    for text in ("", "Failed to initialize NVML: Insufficient Permissions\n"):
        failure = PARSERS[kind](text)
        assert isinstance(failure, ParseFailure)
        assert failure.kind == f"mig-{kind}"


def test_a_table_of_the_wrong_listing_is_a_failure() -> None:
    failure = parse_lgi(_read("lci", "rtx-pro-6000-blackwell-4x1g.24gb.txt"))
    assert isinstance(failure, ParseFailure)
    assert "Compute instances" in failure.reason
