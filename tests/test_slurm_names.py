"""Slurm's node names matched with the watched names by short name, without regard to case: the rows get
Slurm's state, jobs land on their nodes, and scontrol is handed Slurm's own spelling."""

from __future__ import annotations

from gputop.clock import FrozenClock
from gputop.core.models import SlurmBaseState, SlurmJob, SlurmNode, SlurmState, SourceResult
from gputop.core.node_actions import NodeActionPlan, plan_node_action
from gputop.core.slurm_names import SlurmNameAligner, align_slurm_names, slurm_renames
from tests.test_poller import T0, FakeSource, Recorder, make_poller, node


def slurm_of(*names: str, jobs: tuple[SlurmJob, ...] = ()) -> SlurmState:
    nodes = {
        name: SlurmNode(name, SlurmBaseState.IDLE, frozenset({"DRAIN"}) if i == 0 else frozenset())
        for i, name in enumerate(names)
    }
    return SlurmState(nodes=nodes, jobs=jobs, sampled_at_s=T0)


def test_case_and_domain_are_ignored_and_exact_names_are_kept() -> None:
    renames = slurm_renames(
        ["GPU001", "gpu002.cluster.example", "gpu003", "login1"], ["gpu001", "gpu002", "gpu003"]
    )
    assert renames == {"GPU001": "gpu001", "gpu002.cluster.example": "gpu002"}


def test_an_ambiguous_match_is_left_alone() -> None:
    # two watched spellings of one host: neither may take Slurm's state on a guess
    assert slurm_renames(["GPU001"], ["gpu001", "Gpu001"]) == {}
    # two Slurm names after one watched name: neither is moved
    assert slurm_renames(["GPU001", "gpu001.a"], ["Gpu001"]) == {}
    # Slurm lists the watched spelling itself: the other spelling stays where it is
    assert slurm_renames(["gpu001", "GPU001"], ["gpu001"]) == {}


def test_jobs_follow_the_rename_and_nothing_renamed_is_the_same_object() -> None:
    job = SlurmJob("7", "train", "alice", "gpu", "RUNNING", {"GPU002": (0, 1)}, nodes=("GPU002",))
    slurm = slurm_of("GPU001", "GPU002", jobs=(job,))
    aligned = align_slurm_names(slurm, {"gpu001", "gpu002"})
    assert set(aligned.nodes) == {"gpu001", "gpu002"}
    assert aligned.nodes["gpu001"].name == "GPU001"  # Slurm's spelling kept for scontrol
    assert aligned.jobs[0].nodes == ("gpu002",)
    assert dict(aligned.jobs[0].gpus_by_node) == {"gpu002": (0, 1)}
    same = slurm_of("gpu001")
    assert align_slurm_names(same, {"gpu001"}) is same


def test_the_aligner_works_again_only_on_a_new_state() -> None:
    aligner = SlurmNameAligner()
    slurm = slurm_of("GPU001")
    first = aligner.align(slurm, ["gpu001"])
    assert first is not None and "gpu001" in first.nodes
    assert aligner.align(slurm, ["gpu001"]) is first
    assert aligner.align(None, ["gpu001"]) is None


async def test_rows_of_upper_case_slurm_names_carry_slurm_state() -> None:
    job = SlurmJob("7", "train", "alice", "gpu", "RUNNING", {"GPU002.ib": (0,)}, nodes=("GPU002.ib",))
    slurm = slurm_of("GPU001.ib", "GPU002.ib", jobs=(job,))
    source = FakeSource("a", SourceResult(nodes=(node("gpu001", T0), node("gpu002", T0)), slurm=slurm))
    view = await make_poller([source], FrozenClock(T0), Recorder()).tick()
    assert view.rows["gpu001"].slurm_state is not None
    assert "drain" in view.rows["gpu001"].slurm_state.lower()
    assert view.rows["gpu002"].slurm_state is not None
    assert view.snapshot.slurm is not None
    assert view.snapshot.slurm.job_on_gpu("gpu002", 0) is not None


def test_scontrol_gets_slurm_spelling() -> None:
    slurm = align_slurm_names(slurm_of("GPU001", "GPU002"), {"gpu001", "gpu002"})
    plan = plan_node_action("drain", ["gpu001", "gpu002"], {"gpu001", "gpu002"}, "Xid 79", slurm)
    assert isinstance(plan, NodeActionPlan)
    assert plan.argv[2] == "NodeName=GPU[001-002]"
    assert plan.nodes == ("gpu001", "gpu002")  # the audit names the nodes as the screen does
    assert plan.already == ("gpu001",)  # Slurm's DRAIN flag found through the rename
