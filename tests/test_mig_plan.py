"""The MIG planner on real `-lgip`/`-lgipp`/`-lgi`/`-lci` outputs (see fixtures/PROVENANCE.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop.core.mig_layout import MigGpu, Refusal, fit_layout, mig_gpu, parse_layout
from gputop.core.mig_plan import MigPlan, mig_gpu_from_node, plan_matches, plan_mig_mode, plan_repartition
from gputop.core.mig_preconditions import check_preconditions
from gputop.core.models import (
    GpuProcess,
    GpuSample,
    NodeSample,
    Reachability,
    SlurmBaseState,
    SlurmJob,
    SlurmNode,
    SlurmState,
)
from gputop.core.parsers.mig import (
    MigComputeInstances,
    MigGpuInstances,
    MigPlacements,
    MigProfiles,
    parse_lci,
    parse_lgi,
    parse_lgip,
    parse_lgipp,
)
from tests.factories import UNKNOWN_READINGS, facts_of, gpu_sample

MIG = Path(__file__).parent / "fixtures" / "nvidia-smi-mig"

A100 = (
    "NVIDIA A100-SXM4-40GB",
    "a100-sxm4-40gb-thetagpu-drv460era-all-0-free.txt",
    "a100-sxm4-40gb-thetagpu.txt",
)
A30 = ("NVIDIA A30", "a30-24gb-me-profile-all-used.txt", "a30-24gb.txt")
RTX_PRO = (
    "NVIDIA RTX PRO 6000 Blackwell Server Edition",
    "rtx-pro-6000-blackwell-server-COMPLETE-gfx-me.all-minus-me-profiles-8gpu-host.txt",
    "rtx-pro-6000-blackwell-server-12-slot-grid.txt",
)
A100_2X3G = "a100-sxm4-40gb-thetagpu-2x3g.20gb.txt"  # GI 1 at 4:4, GI 2 at 0:4
A100_2X3G_CIS = "a100-sxm4-40gb-thetagpu-2x1c.3g.20gb.txt"  # CI 0 in GI 1 and in GI 2
A100_3CIS_IN_GI1 = "a100-3x1c.3g.20gb-in-one-GI-old-format-no-placement-nvidia-mig-guide-copy.txt"
RTX_PRO_MIXED = (
    "rtx-pro-6000-blackwell-mixed-2g.48gb-plus-2x1g.24gb.txt"  # after -cgi 2g.48gb,1g.24gb,1g.24gb
)


def _read(kind: str, name: str) -> str:
    return (MIG / kind / name).read_text(encoding="utf-8")


def _lgi(name: str) -> MigGpuInstances:
    result = parse_lgi(_read("lgi", name))
    assert isinstance(result, MigGpuInstances)
    return result


def _lci(name: str) -> MigComputeInstances:
    result = parse_lci(_read("lci", name))
    assert isinstance(result, MigComputeInstances)
    return result


def _tables(model: tuple[str, str, str]) -> tuple[MigProfiles, MigPlacements]:
    profiles, placements = parse_lgip(_read("lgip", model[1])), parse_lgipp(_read("lgipp", model[2]))
    assert isinstance(profiles, MigProfiles) and isinstance(placements, MigPlacements)
    return profiles, placements


def _gpu(
    model: tuple[str, str, str], lgi: str | None = None, lci: str | None = None, node: str = "gpu042"
) -> MigGpu:
    profiles, placements = _tables(model)
    instances = _lgi(lgi) if lgi else MigGpuInstances()
    compute = _lci(lci) if lci else MigComputeInstances()
    return mig_gpu(node, 0, model[0], profiles, placements, instances, compute)


def _plan(gpus: list[MigGpu], layout: str, prefix: tuple[str, ...] = ()) -> MigPlan:
    plan = plan_repartition(gpus, layout, prefix)
    assert isinstance(plan, MigPlan), plan
    return plan


# --- layout syntax --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("7x1g.10gb", "7x1g.10gb"),
        ("3x2g.20gb+1x1g.10gb", "3x2g.20gb, 1x1g.10gb"),
        ("1x1g.10gb+me+6x1g.10gb", "1x1g.10gb+me, 6x1g.10gb"),
        ("1g.24gb+me.all + 3x1g.24gb-me", "1x1g.24gb+me.all, 3x1g.24gb-me"),
        ("MIG 1g.10gb+ME , 2X MIG 3g.40gb", "1x1g.10gb+me, 2x3g.40gb"),
        ("2x1g.10gb, 1g.10gb", "3x1g.10gb"),
        (" 1x 4g.96gb+gfx ", "1x4g.96gb+gfx"),
    ],
)
def test_layouts_read_with_variants_counts_and_either_separator(text: str, canonical: str) -> None:
    layout = parse_layout(text)
    assert not isinstance(layout, Refusal), layout
    assert str(layout) == canonical


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "the layout is empty"),
        ("3x", "bad item '3x'"),
        ("0x1g.10gb", "bad item '0x1g.10gb': the count must be at least 1"),
        ("1g.10gb + me", "bad item 'me'"),
        ("2x1g.10gb,,1g.5gb", "empty item in '2x1g.10gb,,1g.5gb'"),
        ("7x1c.1g.10gb", "bad item '7x1c.1g.10gb'"),
        ("3*2g.20gb", "bad item '3*2g.20gb'"),
    ],
)
def test_bad_syntax_names_the_item(text: str, says: str) -> None:
    refused = parse_layout(text)
    assert isinstance(refused, Refusal)
    assert refused.kind == "bad_syntax"
    assert says in refused.message


def test_a_spaced_variant_gets_a_hint() -> None:
    refused = parse_layout("1g.10gb + me")
    assert isinstance(refused, Refusal)
    assert "written joined to its profile, without spaces" in refused.message


# --- valid layouts on real GPUs -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "layout", "created"),
    [
        (A100, "7x1g.5gb", ["19:0", "19:1", "19:2", "19:3", "19:4", "19:5", "19:6"]),
        (A100, "3x2g.10gb+1x1g.5gb", ["14:0", "14:2", "14:4", "19:6"]),
        (A100, "1x7g.40gb", ["0:0"]),
        (A100, "2x3g.20gb", ["9:0", "9:4"]),
        (A100, "4g.20gb + 3g.20gb", ["5:0", "9:4"]),
        # First fit puts 3g at 0 and strands the second 2g; the search moves the 3g to 4.
        (A100, "3g.20gb, 2x2g.10gb", ["14:0", "14:2", "9:4"]),
        # Both fit either way; 3g at 4 takes slice 7, which no 1g can use, and leaves 2-3 free for more.
        (A100, "3g.20gb, 2x1g.5gb", ["19:0", "19:1", "9:4"]),
        (A30, "4x1g.6gb", ["14:0", "14:1", "14:2", "14:3"]),
        (A30, "1g.6gb+me+3x1g.6gb", ["14:0", "14:1", "14:2", "21:3"]),
        (A30, "2x2g.12gb", ["5:0", "5:2"]),
        (A30, "2g.12gb, 2x1g.6gb", ["5:0", "14:2", "14:3"]),
        (A30, "4g.24gb", ["0:0"]),
        (RTX_PRO, "4x1g.24gb", ["14:0", "14:3", "14:6", "14:9"]),
        (RTX_PRO, "2g.48gb+2x1g.24gb", ["5:0", "14:6", "14:9"]),
        (RTX_PRO, "1g.24gb+me.all, 3x1g.24gb-me", ["65:0", "67:3", "67:6", "67:9"]),
        (RTX_PRO, "2x2g.48gb-me", ["66:0", "66:6"]),
        (RTX_PRO, "4g.96gb+gfx", ["32:0"]),
    ],
)
def test_valid_layouts_create_each_instance_at_its_placement(
    model: tuple[str, str, str], layout: str, created: list[str]
) -> None:
    plan = _plan([_gpu(model)], layout)
    assert [step.argv for step in plan.steps] == [
        ("nvidia-smi", "mig", "-i", "0", "-cgi", where, "-C") for where in created
    ]


def test_each_step_says_what_it_does_and_what_it_leaves() -> None:
    plan = _plan([_gpu(A100)], "3x2g.10gb+1x1g.5gb")
    assert (
        plan.steps[0].description
        == "create 2g.10gb at 0:2 (profile 14) with its compute instance on gpu042 GPU 0"
    )
    assert [str(s) for s in plan.steps[1].state_after] == ["2g.10gb at 0:2", "2g.10gb at 2:2"]
    assert plan.steps[-1].state_after == plan.gpus[0].after
    assert all(s.compute_instances == 1 for s in plan.gpus[0].after)
    assert plan.steps[-1].command_line == "nvidia-smi mig -i 0 -cgi 19:6 -C"


# --- refused layouts ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "layout", "kind", "message"),
    [
        (
            A100,
            "3g.40gb",
            "unknown_profile",
            "3g.40gb is not a profile of this GPU (NVIDIA A100-SXM4-40GB); "
            "it has: 1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb",
        ),
        (
            A30,
            "1g.10gb, 2x3g.40gb",
            "unknown_profile",
            "1g.10gb and 3g.40gb are not profiles of this GPU (NVIDIA A30); "
            "it has: 1g.6gb, 1g.6gb+me, 2g.12gb, 4g.24gb",
        ),
        (
            A100,
            "4x2g.10gb",
            "too_big",
            "4x2g.10gb needs 8 compute slices; this GPU (NVIDIA A100-SXM4-40GB) has 7",
        ),
        (
            RTX_PRO,
            "2x2g.48gb+1g.24gb",
            "too_big",
            "2x2g.48gb, 1x1g.24gb needs 5 compute slices; "
            "this GPU (NVIDIA RTX PRO 6000 Blackwell Server Edition) has 4",
        ),
        (A30, "2x1g.6gb+me", "too_many", "2x1g.6gb+me: this GPU (NVIDIA A30) holds at most 1 of 1g.6gb+me"),
        (
            RTX_PRO,
            "1g.24gb+me.all, 1g.24gb",
            "engines",
            "1x1g.24gb+me.all, 1x1g.24gb needs 5 video decoders; "
            "this GPU (NVIDIA RTX PRO 6000 Blackwell Server Edition) has 4, "
            "and an instance does not share them",
        ),
        (
            A100,
            "2x3g.20gb, 1g.5gb",
            "no_fit",
            "2x3g.20gb, 1x1g.5gb does not fit in any arrangement: after 3g.20gb at 0:4 and 4:4, "
            "no placement of 1g.5gb is left (it can start at 0, 1, 2, 3, 4, 5 or 6)",
        ),
        (A100, "7x1g.5gb + 1x", "bad_syntax", "bad item '1x'"),
    ],
)
def test_impossible_layouts_are_refused_with_the_reason(
    model: tuple[str, str, str], layout: str, kind: str, message: str
) -> None:
    refused = plan_repartition([_gpu(model)], layout)
    assert isinstance(refused, Refusal)
    assert refused.kind == kind
    assert message in refused.message


def test_a_cut_short_profile_listing_is_refused_not_trusted() -> None:
    # The -lgipp of the same GPU model names profiles this truncated -lgip copy never reached.
    cut = parse_lgip(_read("lgip", "rtx-pro-6000-blackwell-server-gfx-profiles-TRUNCATED-cubecos-312.txt"))
    _, placements = _tables(RTX_PRO)
    assert isinstance(cut, MigProfiles)
    gpu = mig_gpu("gpu042", 0, RTX_PRO[0], cut, placements, MigGpuInstances(), MigComputeInstances())
    layout = parse_layout("4x1g.24gb")
    assert not isinstance(layout, Refusal)
    refused = fit_layout(layout, gpu)
    assert isinstance(refused, Refusal)
    assert refused.kind == "incomplete_listing"
    assert "lacks profiles 0, 5, 32, 35, 64, 66, 67" in refused.message


def test_a_gpu_without_profiles_is_refused() -> None:
    gpu = mig_gpu(
        "gpu042", 0, A100[0], MigProfiles(), MigPlacements(), MigGpuInstances(), MigComputeInstances()
    )
    refused = plan_repartition([gpu], "7x1g.5gb")
    assert isinstance(refused, Refusal)
    assert (refused.kind, refused.message) == (
        "no_profiles",
        "gpu042 GPU 0 lists no MIG profiles (is MIG mode on?)",
    )


def test_gpus_of_different_models_are_refused() -> None:
    refused = plan_repartition([_gpu(A100), _gpu(A30, node="gpu043")], "1g.5gb")
    assert isinstance(refused, Refusal)
    assert refused.kind == "mixed_models"
    assert "NVIDIA A100-SXM4-40GB: gpu042 GPU 0; NVIDIA A30: gpu043 GPU 0" in refused.message


def test_no_gpus_is_refused() -> None:
    refused = plan_repartition([], "1g.5gb")
    assert isinstance(refused, Refusal) and refused.kind == "no_gpus"


# --- from the current state -----------------------------------------------------------------------


def test_existing_instances_are_destroyed_compute_instances_first() -> None:
    plan = _plan([_gpu(A100, A100_2X3G, A100_2X3G_CIS)], "7x1g.5gb", ("sudo", "-n"))
    smi = ("sudo", "-n", "nvidia-smi", "mig", "-i", "0")
    assert [step.argv for step in plan.steps] == [
        (*smi, "-gi", "1", "-ci", "0", "-dci"),
        (*smi, "-gi", "1", "-dgi"),
        (*smi, "-gi", "2", "-ci", "0", "-dci"),
        (*smi, "-gi", "2", "-dgi"),
        *[(*smi, "-cgi", f"19:{start}", "-C") for start in range(7)],
    ]
    assert plan.steps[0].description == (
        "destroy compute instance 0 of GPU instance 1 (3g.20gb at 4:4) on gpu042 GPU 0"
    )
    assert [(str(s), s.compute_instances) for s in plan.steps[0].state_after] == [
        ("3g.20gb at 4:4", 0),
        ("3g.20gb at 0:4", 1),
    ]
    assert [str(s) for s in plan.steps[1].state_after] == ["3g.20gb at 0:4"]
    assert plan.steps[3].state_after == ()


def test_several_compute_instances_in_one_gpu_instance_go_in_one_command() -> None:
    plan = _plan([_gpu(A100, A100_2X3G, A100_3CIS_IN_GI1)], "1x7g.40gb")
    assert [step.command_line for step in plan.steps] == [
        "nvidia-smi mig -i 0 -gi 1 -ci 0,1,2 -dci",
        "nvidia-smi mig -i 0 -gi 1 -dgi",
        "nvidia-smi mig -i 0 -gi 2 -dgi",  # -lci lists none in GPU instance 2: no -dci to fail
        "nvidia-smi mig -i 0 -cgi 0:0 -C",
    ]


def test_a_gpu_already_in_the_layout_needs_no_command() -> None:
    plan = _plan([_gpu(A100, A100_2X3G, A100_2X3G_CIS)], "2x3g.20gb")
    assert plan.steps == ()
    assert plan.unchanged == plan.gpus
    assert plan.gpus[0].after == plan.gpus[0].before


def test_gpu_instances_without_compute_instances_are_rebuilt() -> None:
    plan = _plan([_gpu(A100, A100_2X3G)], "2x3g.20gb")
    assert [step.command_line for step in plan.steps] == [
        "nvidia-smi mig -i 0 -gi 1 -dgi",
        "nvidia-smi mig -i 0 -gi 2 -dgi",
        "nvidia-smi mig -i 0 -cgi 9:0 -C",
        "nvidia-smi mig -i 0 -cgi 9:4 -C",
    ]


def test_listings_read_at_different_moments_are_refused() -> None:
    # The article's -lci was taken after a later repartition: its GPU instances 3 and 4 are not in this -lgi.
    refused = plan_repartition(
        [_gpu(RTX_PRO, RTX_PRO_MIXED, "rtx-pro-6000-blackwell-4x1g.24gb.txt")], "4x1g.24gb"
    )
    assert isinstance(refused, Refusal)
    assert refused.kind == "state_unknown"
    assert "disagree (compute instances in GPU instance 3, 4, which -lgi does not list)" in refused.message


def test_a_cut_short_instance_listing_is_refused() -> None:
    cut = _lgi("a100-multi-gpu-mixed-1g.10gb-2g.20gb-3g.40gb-TRUNCATED-dcgm-138.txt")
    gpu = mig_gpu(
        "gpu042", 0, "NVIDIA A100-SXM4-80GB", MigProfiles(), MigPlacements(), cut, MigComputeInstances()
    )
    refused = plan_repartition([gpu], "7x1g.10gb")
    assert isinstance(refused, Refusal)
    assert refused.kind == "state_unknown"
    assert refused.message.startswith("the MIG listings of gpu042 are incomplete")


def test_several_gpus_get_the_same_layout_in_turn() -> None:
    busy, empty = _gpu(A100, A100_2X3G, A100_2X3G_CIS), _gpu(A100, node="gpu043")
    plan = _plan([busy, empty], "3x2g.10gb+1x1g.5gb", ("sudo", "-n"))
    assert [(g.node, len(g.steps)) for g in plan.gpus] == [("gpu042", 8), ("gpu043", 4)]
    assert [s.node for s in plan.steps] == ["gpu042"] * 8 + ["gpu043"] * 4
    assert all(step.argv[:3] == ("sudo", "-n", "nvidia-smi") for step in plan.steps)
    assert plan.gpus[0].after == plan.gpus[1].after
    assert plan.model == "NVIDIA A100-SXM4-40GB"


def test_a_refusal_among_several_gpus_says_which() -> None:
    bare = mig_gpu(
        "gpu043", 0, A100[0], MigProfiles(), MigPlacements(), MigGpuInstances(), MigComputeInstances()
    )
    refused = plan_repartition([_gpu(A100), bare], "7x1g.5gb")
    assert isinstance(refused, Refusal)
    assert refused.message == "gpu043 GPU 0: gpu043 GPU 0 lists no MIG profiles (is MIG mode on?)"


# --- after the run --------------------------------------------------------------------------------


def test_the_real_result_of_the_same_layout_matches() -> None:
    # nvidia-smi chose these placements itself for `-cgi 2g.48gb,1g.24gb,1g.24gb -C`: the plan names the same.
    plan = _plan([_gpu(RTX_PRO)], "2g.48gb+2x1g.24gb")
    report = plan_matches(plan, {"gpu042": _lgi(RTX_PRO_MIXED)})
    assert report.matches, report.differences


def test_a_matching_result_with_its_compute_instances() -> None:
    plan = _plan([_gpu(A100)], "2x3g.20gb")
    report = plan_matches(plan, {"gpu042": _lgi(A100_2X3G)}, {"gpu042": _lci(A100_2X3G_CIS)})
    assert report.matches and report.notes == ()


def test_a_different_result_is_told_instance_by_instance() -> None:
    plan = _plan([_gpu(A100)], "3x2g.10gb+1x1g.5gb")
    report = plan_matches(plan, {"gpu042": _lgi(A100_2X3G)})
    assert not report.matches
    assert report.differences == (
        "gpu042 GPU 0: missing 2g.10gb at 0:2",
        "gpu042 GPU 0: missing 2g.10gb at 2:2",
        "gpu042 GPU 0: missing 2g.10gb at 4:2",
        "gpu042 GPU 0: missing 1g.5gb at 6:1",
        "gpu042 GPU 0: unexpected 3g.20gb at 0:4",
        "gpu042 GPU 0: unexpected 3g.20gb at 4:4",
    )


def test_a_gpu_instance_left_without_compute_instance_is_a_difference() -> None:
    plan = _plan([_gpu(A100)], "2x3g.20gb")
    report = plan_matches(plan, {"gpu042": _lgi(A100_2X3G)}, {"gpu042": _lci(A100_3CIS_IN_GI1)})
    assert report.differences == ("gpu042 GPU 0: GPU instance 2 (3g.20gb at 0:4) has no compute instance",)


def test_a_node_not_read_again_is_a_difference() -> None:
    plan = _plan([_gpu(A100)], "2x3g.20gb")
    assert plan_matches(plan, {}).differences == ("gpu042 GPU 0: no -lgi listing after the run",)


# --- reading a node's facts -----------------------------------------------------------------------


def _gpu_sample(index: int, mig: bool | None = True, processes: tuple[GpuProcess, ...] = ()) -> GpuSample:
    return gpu_sample(index, name=A100[0], mig_enabled=mig, processes=processes, **UNKNOWN_READINGS)


def _node(*gpus: GpuSample, reachability: Reachability = Reachability.OK, **facts: object) -> NodeSample:
    return NodeSample("gpu042", reachability, 1000.0, gpus=gpus, facts=facts_of(facts))


def test_the_planner_reads_the_mig_listings_a_source_attached() -> None:
    profiles, placements = _tables(A100)
    node = _node(
        _gpu_sample(0),
        mig_gip=profiles,
        mig_gipp=placements,
        mig_gi=_lgi(A100_2X3G),
        mig_ci=_lci(A100_2X3G_CIS),
    )
    assert mig_gpu_from_node(node, 0) == _gpu(A100, A100_2X3G, A100_2X3G_CIS)


def test_a_listing_not_read_is_a_refusal_with_its_reason() -> None:
    profiles, placements = _tables(A100)
    node = NodeSample(
        "gpu042",
        Reachability.OK,
        1000.0,
        gpus=(_gpu_sample(0),),
        facts=facts_of(
            {"mig_gip": profiles, "mig_gipp": placements, "mig_gi": _lgi(A100_2X3G)},
            {"mig_ci": "timed out after 10 s"},
        ),
    )
    refused = mig_gpu_from_node(node, 0)
    assert refused == Refusal("state_unknown", "nvidia-smi mig -lci of gpu042: timed out after 10 s")
    assert isinstance(mig_gpu_from_node(node, 5), Refusal)


# --- preconditions --------------------------------------------------------------------------------

JOB = SlurmJob("4812035", "train", "alice", "gpu", "RUNNING", {"gpu042": (0, 1)}, nodes=("gpu042",))


def _slurm(
    base: SlurmBaseState, flags: frozenset[str] = frozenset(), jobs: tuple[SlurmJob, ...] = ()
) -> SlurmState:
    return SlurmState({"gpu042": SlurmNode("gpu042", base, flags)}, jobs, 1000.0)


def test_an_idle_drained_mig_gpu_may_be_repartitioned() -> None:
    node = _node(_gpu_sample(0), _gpu_sample(1))
    assert check_preconditions(node, [0, 1], _slurm(SlurmBaseState.IDLE, frozenset({"DRAIN"}))) == ()
    assert check_preconditions(node, [0, 1], None) == ()  # no Slurm on this cluster
    assert check_preconditions(node, [0], SlurmState({}, (), 1000.0)) == ()  # a node Slurm does not manage


@pytest.mark.parametrize(
    ("slurm", "kind", "message"),
    [
        (_slurm(SlurmBaseState.MIXED, jobs=(JOB,)), "not_drained", "drain gpu042 first: it runs job 4812035"),
        (_slurm(SlurmBaseState.IDLE), "not_drained", "drain gpu042 first: Slurm may start jobs on it"),
        (
            _slurm(SlurmBaseState.MIXED, frozenset({"DRAIN"}), (JOB,)),
            "draining",
            "gpu042 is still draining: wait until job 4812035 ends",
        ),
        (
            SlurmState({}, (), None, error="sinfo timed out"),
            "slurm_unknown",
            "Slurm could not be read (sinfo timed out), so whether gpu042 is drained is unknown",
        ),
    ],
)
def test_a_node_slurm_may_use_is_refused_with_what_to_do(slurm: SlurmState, kind: str, message: str) -> None:
    failures = check_preconditions(_node(_gpu_sample(0)), [0], slurm)
    assert [(f.kind, f.gpu_index, f.message) for f in failures] == [(kind, None, message)]


def test_gpu_level_failures_name_the_gpu_and_what_runs() -> None:
    procs = (GpuProcess(1234, "python", 1000.0), GpuProcess(99, "torchrun", 10.0))
    node = _node(_gpu_sample(0, mig=False), _gpu_sample(1, mig=None), _gpu_sample(3, processes=procs))
    failures = check_preconditions(node, [0, 1, 3, 5], None)
    assert [(f.kind, f.gpu_index, f.message) for f in failures] == [
        ("mig_disabled", 0, "MIG mode is off on GPU 0 of gpu042: turn it on first"),
        ("mig_unknown", 1, "the MIG mode of GPU 1 on gpu042 is not known yet; wait a tick"),
        (
            "gpu_busy",
            3,
            "GPU 3 of gpu042 runs 2 processes: python (pid 1234), torchrun (pid 99); end them first",
        ),
        ("gpu_missing", 5, "gpu042 has no GPU 5 in its last sample"),
    ]
    # Turning MIG mode on is the fix for the first two, so that check asks only for idle GPUs.
    assert [f.kind for f in check_preconditions(node, [0, 1, 3], None, need_mig=False)] == ["gpu_busy"]


def test_a_node_not_heard_from_is_refused() -> None:
    failures = check_preconditions(_node(_gpu_sample(0), reachability=Reachability.STALE), [0], None)
    assert [f.kind for f in failures] == ["node_unreachable"]


# --- MIG mode -------------------------------------------------------------------------------------


def test_mig_mode_plan_changes_only_gpus_not_yet_in_that_mode() -> None:
    node = _node(_gpu_sample(0, mig=False), _gpu_sample(1, mig=True))
    plan = plan_mig_mode(node, [0, 1], enable=True, prefix=("sudo", "-n"))
    assert not isinstance(plan, Refusal)
    assert [step.argv for step in plan.steps] == [("sudo", "-n", "nvidia-smi", "-i", "0", "-mig", "1")]
    assert plan.already == (1,)
    assert "needs the GPU idle" in plan.warning and "reset" in plan.warning
    off = plan_mig_mode(node, [0, 1], enable=False)
    assert not isinstance(off, Refusal)
    assert [step.command_line for step in off.steps] == ["nvidia-smi -i 1 -mig 0"]
    assert off.steps[0].description == "turn MIG mode off on gpu042 GPU 1"


def test_mig_mode_plan_refuses_unknown_gpus() -> None:
    refused = plan_mig_mode(_node(_gpu_sample(0)), [0, 7], enable=True)
    assert refused == Refusal("state_unknown", "gpu042 has no GPU 7 in its last sample")
