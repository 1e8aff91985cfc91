"""MIG in the simulator: per-GPU state with each model's real profile tables, nvidia-smi's MIG command lines
answered with its real lines and errors, the node facts the SSH source would read, and the demo's runner."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from gputop.core.mig_layout import MigGpu
from gputop.core.mig_plan import MigPlan, mig_gpu_from_node, plan_matches, plan_repartition
from gputop.core.models import NodeSample
from gputop.core.parsers.gpu_list import GpuList, parse_gpu_list
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
from gputop.sim.demo_actions import SimulatedNodeRunner
from gputop.sim.gpu_models import GPU_MODELS
from gputop.sim.mig_tables import MIG_TABLES
from gputop.sim.simulator import SimulatedCluster
from gputop.sources.commands import default_commands
from gputop.sources.slurm_runner import RunFailed, Runner

T0 = 1_700_000_000.0
MIG_FIXTURES = Path(__file__).parent / "fixtures" / "nvidia-smi-mig"
MIG_UUID = re.compile(r"MIG-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}")

# Real output of one NVIDIA H100 80GB HBM3 (a public nvidia-smi usage note, search index id 8225626544; the
# same tables in ids 41792560749 and 52885409783): `nvidia-smi mig -i 0 -lgip` and `-lgipp` with MIG on and
# nothing created, then `-lgi` and `-lci` after `-cgi 19,19,19,19,19,19,19 -C`, then `-dci` and `-dgi`.
H100_LGIP = """\
+-----------------------------------------------------------------------------+
| GPU instance profiles:                                                      |
| GPU   Name             ID    Instances   Memory     P2P    SM    DEC   ENC  |
|                              Free/Total   GiB              CE    JPEG  OFA  |
|=============================================================================|
|   0  MIG 1g.10gb       19     7/7        9.75       No     16     1     0   |
|                                                             1     1     0   |
+-----------------------------------------------------------------------------+
|   0  MIG 1g.10gb+me    20     1/1        9.75       No     16     1     0   |
|                                                             1     1     1   |
+-----------------------------------------------------------------------------+
|   0  MIG 1g.20gb       15     4/4        19.62      No     26     1     0   |
|                                                             1     1     0   |
+-----------------------------------------------------------------------------+
|   0  MIG 2g.20gb       14     3/3        19.62      No     32     2     0   |
|                                                             2     2     0   |
+-----------------------------------------------------------------------------+
|   0  MIG 3g.40gb        9     2/2        39.50      No     60     3     0   |
|                                                             3     3     0   |
+-----------------------------------------------------------------------------+
|   0  MIG 4g.40gb        5     1/1        39.50      No     64     4     0   |
|                                                             4     4     0   |
+-----------------------------------------------------------------------------+
|   0  MIG 7g.80gb        0     1/1        79.25      No     132    7     0   |
|                                                             8     7     1   |
+-----------------------------------------------------------------------------+
"""
H100_LGIPP = """\
GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1
GPU  0 Profile ID 20 Placements: {0,1,2,3,4,5,6}:1
GPU  0 Profile ID 15 Placements: {0,2,4,6}:2
GPU  0 Profile ID 14 Placements: {0,2,4}:2
GPU  0 Profile ID  9 Placements: {0,4}:4
GPU  0 Profile ID  5 Placement : {0}:4
GPU  0 Profile ID  0 Placement : {0}:8
"""
H100_LGI = """\
+-------------------------------------------------------+
| GPU instances:                                        |
| GPU   Name             Profile  Instance   Placement  |
|                          ID       ID       Start:Size |
|=======================================================|
""" + "".join(
    f"|   0  MIG 1g.10gb         19       {gi:>2}          {start}:1     |\n"
    "+-------------------------------------------------------+\n"
    for start, gi in enumerate(range(7, 14))
)
H100_LCI = """\
+--------------------------------------------------------------------+
| Compute instances:                                                 |
| GPU     GPU       Name             Profile   Instance   Placement  |
|       Instance                       ID        ID       Start:Size |
|         ID                                                         |
|====================================================================|
""" + "".join(
    f"|   0     {gi:>2}       MIG 1g.10gb          0         0          0:1     |\n"
    "+--------------------------------------------------------------------+\n"
    for gi in range(7, 14)
)
H100_DCI = "".join(
    f"Successfully destroyed compute instance ID  0 from GPU  0 GPU instance ID {gi:>2}\n"
    for gi in range(7, 14)
)
H100_DGI = "".join(f"Successfully destroyed GPU instance ID {gi:>2} from GPU  0\n" for gi in range(7, 14))
IN_USE_DGI = (
    "Unable to destroy GPU instance ID  3 from GPU  0: In use by another client\n"
    "Failed to destroy GPU instances: In use by another client\n"
)


def cluster(model: str = "H100") -> SimulatedCluster:
    return SimulatedCluster(gpu_model=model, start_time_s=T0)


def incident(sim: SimulatedCluster, kind: str) -> str:
    return next(i.node for i in sim.incidents if i.kind == kind)


def node(sim: SimulatedCluster, name: str) -> NodeSample:
    return sim.result().nodes[sim.node_names.index(name)]


def smi(sim: SimulatedCluster, name: str, line: str) -> tuple[int, str, str]:
    return sim.nvidia_smi(name, line.split())


def out(sim: SimulatedCluster, name: str, line: str) -> str:
    status, stdout, stderr = smi(sim, name, line)
    assert (status, stderr) == (0, ""), (line, stdout, stderr)
    return stdout


def planned(sim: SimulatedCluster, name: str, gpu: int, layout: str) -> MigPlan:
    view = mig_gpu_from_node(node(sim, name), gpu)
    assert isinstance(view, MigGpu), view
    plan = plan_repartition([view], layout, ("sudo", "-n"))
    assert isinstance(plan, MigPlan), plan
    return plan


# ---- the tables ----------------------------------------------------------------------------------------


def test_every_gpu_model_has_its_mig_table() -> None:
    assert set(MIG_TABLES) == set(GPU_MODELS)
    for table in MIG_TABLES.values():
        ids = [p.profile_id for p in table.profiles]
        assert len(set(ids)) == len(ids)
        for p in table.profiles:
            assert all(s >= 0 and s + p.size_slices <= table.grid_slices for s in p.starts), p
            assert p.instances_total <= len(p.starts)


def test_h100_listings_are_the_real_ones_byte_for_byte() -> None:
    sim = cluster()
    drained = incident(sim, "drained")  # its GPU 0: MIG on, nothing created
    assert out(sim, drained, "nvidia-smi mig -i 0 -lgip") == H100_LGIP
    assert out(sim, drained, "nvidia-smi mig -i 0 -lgipp") == H100_LGIPP
    created = out(sim, drained, "nvidia-smi mig -i 0 -cgi 19,19,19,19,19,19,19 -C").splitlines()
    assert created[:2] == [
        "Successfully created GPU instance ID  7 on GPU  0 using profile MIG 1g.10gb (ID 19)",
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  7 using profile MIG 1g.10gb "
        "(ID  0)",
    ]
    assert len(created) == 14
    assert out(sim, drained, "nvidia-smi mig -i 0 -lgi") == H100_LGI
    assert out(sim, drained, "nvidia-smi mig -i 0 -lci") == H100_LCI
    assert out(sim, drained, "sudo nvidia-smi mig -i 0 -dci") == H100_DCI
    assert out(sim, drained, "sudo nvidia-smi mig -i 0 -dgi") == H100_DGI


def _fixture(kind: str, name: str) -> str:
    return (MIG_FIXTURES / kind / name).read_text(encoding="utf-8")


def test_a100_40gb_reads_as_thetagpu_in_the_same_state() -> None:
    sim = cluster("A100-40GB")
    drained = incident(sim, "drained")
    out(sim, drained, "nvidia-smi mig -i 0 -cgi 9:4,9:0 -C")  # ThetaGPU's 2x3g.20gb
    ours = parse_lgip(out(sim, drained, "nvidia-smi mig -lgip"))
    real = parse_lgip(_fixture("lgip", "a100-sxm4-40gb-thetagpu-drv460era-all-0-free.txt"))
    assert isinstance(ours, MigProfiles) and isinstance(real, MigProfiles)
    assert ours.profiles == real.profiles
    placements = parse_lgipp(out(sim, drained, "nvidia-smi mig -lgipp"))
    real_placements = parse_lgipp(_fixture("lgipp", "a100-sxm4-40gb-thetagpu.txt"))
    assert isinstance(placements, MigPlacements) and isinstance(real_placements, MigPlacements)
    assert placements.entries == real_placements.entries
    instances = parse_lgi(out(sim, drained, "nvidia-smi mig -lgi"))
    real_instances = parse_lgi(_fixture("lgi", "a100-sxm4-40gb-thetagpu-2x3g.20gb.txt"))
    assert isinstance(instances, MigGpuInstances) and isinstance(real_instances, MigGpuInstances)
    # The ids a driver gives differ between drivers (the MIG guide's own examples disagree); names,
    # profiles and placements do not.
    assert {(i.name, i.profile_id, i.placement) for i in instances.instances} == {
        (i.name, i.profile_id, i.placement) for i in real_instances.instances
    }


def test_b200_profiles_begin_as_the_real_b200_listing() -> None:
    sim = cluster("B200")
    ours = parse_lgip(out(sim, incident(sim, "drained"), "nvidia-smi mig -lgip"))
    real = parse_lgip(_fixture("lgip", "b200-TRUNCATED-mig-parted-pr166.txt"))
    assert isinstance(ours, MigProfiles) and isinstance(real, MigProfiles)
    assert len(real.profiles) == 4 and ours.profiles[:4] == real.profiles
    assert [p.name for p in ours.profiles[4:]] == ["MIG 3g.90gb", "MIG 4g.90gb", "MIG 7g.180gb"]


def test_h200_3g_instance_is_the_captured_one() -> None:
    # tests/fixtures/nvidia-smi-default/h200-mig-1x3g.71gb-drv580-nvge-capture.txt: 71424 MiB, 60 SMs,
    # CE 3, DEC 3, JPG 3, OFA 0.
    three = next(p for p in MIG_TABLES["H200"].profiles if p.name == "3g.71gb")
    assert three.memory_gib == 71424 / 1024
    assert (three.sm_count, three.ce_count, three.dec_count, three.jpeg_count, three.ofa_count) == (
        60,
        3,
        3,
        3,
        0,
    )


# ---- the demo's MIG GPUs -------------------------------------------------------------------------------


@pytest.mark.parametrize("model", sorted(GPU_MODELS))
def test_the_mig_gpu_serves_in_seven_small_instances(model: str) -> None:
    sim = cluster(model)
    name = incident(sim, "mig")
    sample = node(sim, name)
    gpu = sample.gpus[7]
    assert gpu.mig_enabled and gpu.util_pct is None and gpu.processes
    smallest = MIG_TABLES[model].profiles[0]
    instances = sample.facts.mig_gi.value
    assert isinstance(instances, MigGpuInstances)
    assert [(i.gpu_index, i.profile_id, i.instance_id, str(i.placement)) for i in instances.instances] == [
        (7, smallest.profile_id, 7 + start, f"{start}:1") for start in range(7)
    ]
    computes = sample.facts.mig_ci.value
    assert isinstance(computes, MigComputeInstances)
    assert [(c.gpu_instance_id, c.instance_id) for c in computes.instances] == [
        (gi, 0) for gi in range(7, 14)
    ]
    listed = sample.facts.gpu_list.value
    assert isinstance(listed, GpuList)
    devices = listed.gpus[7].mig_devices
    assert [d.profile for d in devices] == [smallest.name] * 7
    assert all(MIG_UUID.fullmatch(d.uuid) for d in devices) and len({d.uuid for d in devices}) == 7
    assert listed.gpus[7].uuid == gpu.uuid
    slurm = sim.result().slurm
    assert slurm is not None
    assert any(j.name == "mig-embed-serve" and j.gpus_by_node.get(name) == (7,) for j in slurm.jobs)


def test_the_drained_node_has_an_empty_idle_mig_gpu() -> None:
    sim = cluster()
    name = incident(sim, "drained")
    sample = node(sim, name)
    assert [(g.index, g.util_pct, g.processes) for g in sample.gpus if g.mig_enabled] == [(0, None, ())]
    profiles = sample.facts.mig_gip.value
    assert isinstance(profiles, MigProfiles)
    assert all(p.instances_free == p.instances_total for p in profiles.profiles)
    assert len(profiles.profiles) == 7
    for fact in ("mig_gi", "mig_ci"):
        value = getattr(sample.facts, fact).value
        assert isinstance(value, MigGpuInstances | MigComputeInstances) and not value.instances


def test_facts_are_what_the_listings_parse_to() -> None:
    sim = cluster()
    parsers = {"mig_gip": parse_lgip, "mig_gipp": parse_lgipp, "mig_gi": parse_lgi, "mig_ci": parse_lci}
    specs = default_commands()
    for name in (incident(sim, "mig"), incident(sim, "drained"), "gpu001"):
        facts = node(sim, name).facts
        for fact, parse in parsers.items():
            _, text, _ = sim.nvidia_smi(name, specs[fact].argv)
            assert getattr(facts, fact).value == parse(text), (name, fact)
    mig = incident(sim, "mig")
    assert node(sim, mig).facts.gpu_list.value == parse_gpu_list(out(sim, mig, "nvidia-smi -L"))
    assert node(sim, "gpu001").facts.gpu_list.value is None  # no MIG devices to name


def test_facts_are_reused_while_the_state_stays() -> None:
    sim = cluster()
    name = incident(sim, "drained")
    before = node(sim, name).facts
    sim.advance_to(T0 + 5)
    after = node(sim, name).facts
    assert all(
        getattr(after, f).value is getattr(before, f).value
        for f in ("mig_gip", "mig_gipp", "mig_gi", "mig_ci", "gpu_list")
    )
    healthy = [node(sim, n).facts.mig_gi.value for n in ("gpu001", "gpu002")]
    assert healthy[0] is healthy[1]  # the same "none" listing, shared
    out(sim, name, "nvidia-smi mig -i 0 -cgi 9:0 -C")
    changed = node(sim, name).facts
    assert changed.mig_gipp.value is before.mig_gipp.value  # the placements do not change
    assert (
        changed.mig_gi.value is not before.mig_gi.value and changed.mig_gip.value is not before.mig_gip.value
    )
    assert smi(sim, name, "nvidia-smi mig -i 0 -cgi 9:0")[0] != 0  # refused: nothing changes
    assert node(sim, name).facts.mig_gi.value is changed.mig_gi.value


# ---- changes, and nvidia-smi's words ------------------------------------------------------------------


def test_create_at_placements_or_the_first_free_one() -> None:
    sim = cluster()
    name = incident(sim, "drained")
    assert out(sim, name, "nvidia-smi mig -i 0 -cgi 3g.40gb:4,2g.20gb").splitlines() == [
        "Successfully created GPU instance ID  2 on GPU  0 using profile MIG 3g.40gb (ID  9)",
        "Successfully created GPU instance ID  3 on GPU  0 using profile MIG 2g.20gb (ID 14)",
    ]
    assert sim.nvidia_smi(name, ["nvidia-smi", "mig", "-i", "0", "-cgi", "MIG 1g.10gb", "-C"]) == (
        0,
        "Successfully created GPU instance ID  9 on GPU  0 using profile MIG 1g.10gb (ID 19)\n"
        "Successfully created compute instance ID  0 on GPU  0 GPU instance ID  9 using profile MIG 1g.10gb "
        "(ID  0)\n",
        "",
    )
    listed = parse_lgi(out(sim, name, "nvidia-smi mig -lgi"))
    assert isinstance(listed, MigGpuInstances)
    assert [(i.instance_id, str(i.placement)) for i in listed.instances] == [
        (9, "2:1"),
        (3, "0:2"),
        (2, "4:4"),
    ]
    assert "MIG 1g.10gb     Device  0: (UUID: MIG-" in out(
        sim, name, "nvidia-smi -L -i 0"
    )  # only GI 9 has a CI


def test_impossible_placements_are_insufficient_resources() -> None:
    sim = cluster()
    name = incident(sim, "drained")
    status, text, _ = smi(sim, name, "nvidia-smi mig -i 0 -cgi 9:0,9:4,19:1 -C")
    assert status == 255
    assert text.splitlines()[-2:] == [
        "Unable to create a GPU instance on GPU  0 using profile 19: Insufficient Resources",
        "Failed to create GPU instances: Insufficient Resources",
    ]
    assert text.count("Successfully created GPU instance") == 2  # what came before the failure stays
    # No free placement left for a profile: the same words.
    assert smi(sim, name, "nvidia-smi mig -i 0 -cgi 19")[1].startswith(
        "Unable to create a GPU instance on GPU  0 using profile 19: Insufficient Resources\n"
    )


def test_unknown_profiles_and_placements_are_invalid_arguments() -> None:
    sim = cluster()
    name = incident(sim, "drained")
    assert smi(sim, name, "nvidia-smi mig -i 0 -cgi 7g.40gb") == (
        2,
        "Unable to create a GPU instance on GPU  0 using profile 7g.40gb: Invalid Argument\n"
        "Failed to create GPU instances: Invalid Argument\n",
        "",
    )
    assert "using profile 14: Invalid Argument" in smi(sim, name, "nvidia-smi mig -i 0 -cgi 14:1")[1]
    assert "using profile 99: Invalid Argument" in smi(sim, name, "nvidia-smi mig -i 0 -cgi 99")[1]


def test_a_busy_gpu_keeps_its_instances_and_its_mode() -> None:
    sim = cluster()
    name = incident(sim, "mig")
    before = node(sim, name).facts.mig_gi.value
    assert smi(sim, name, "nvidia-smi mig -i 7 -gi 7 -ci 0 -dci") == (
        255,
        "Unable to destroy compute instance ID  0 from GPU  7 GPU instance ID  7: In use by another client\n"
        "Failed to destroy compute instances: In use by another client\n",
        "",
    )
    status, text, _ = smi(sim, name, "sudo -n nvidia-smi -i 7 -mig 0")
    bus = node(sim, name).gpus[7].pci_bus_id
    assert status == 255
    assert text.startswith(
        f"Warning: MIG mode is in pending disable state for GPU {bus}:In use by another client\n"
        f"{bus} is currently being used by one or more other processes"
    )
    assert text.endswith("All done.\n")
    busy = next(g for g in node(sim, name).gpus if g.processes and not g.mig_enabled)  # a job holds it
    assert smi(sim, name, f"nvidia-smi -i {busy.index} -mig 1")[0] == 255
    assert node(sim, name).facts.mig_gi.value is before
    assert not node(sim, name).gpus[busy.index].mig_enabled


def test_gpu_instances_go_after_their_compute_instances() -> None:
    sim = cluster()
    name = incident(sim, "drained")
    out(sim, name, "nvidia-smi mig -i 0 -cgi 14:0 -C")
    assert smi(sim, name, "nvidia-smi mig -i 0 -dgi") == (255, IN_USE_DGI, "")
    assert out(sim, name, "nvidia-smi mig -i 0 -gi 3 -ci 0 -dci") == (
        "Successfully destroyed compute instance ID  0 from GPU  0 GPU instance ID  3\n"
    )
    assert (
        out(sim, name, "nvidia-smi mig -i 0 -gi 3 -dgi")
        == "Successfully destroyed GPU instance ID  3 from GPU  0\n"
    )
    assert smi(sim, name, "nvidia-smi mig -i 0 -gi 3 -dgi")[:2] == (
        6,
        "Unable to destroy GPU instance ID  3 from GPU  0: Not Found\n"
        "Failed to destroy GPU instances: Not Found\n",
    )
    assert smi(sim, name, "nvidia-smi mig -i 0 -dgi")[:2] == (6, "No GPU instances found.\n")
    assert smi(sim, name, "nvidia-smi mig -i 0 -lci")[:2] == (6, "No compute instances found.\n")


def test_mig_mode_on_and_off_on_an_idle_gpu() -> None:
    sim = cluster()
    name = incident(sim, "drained")
    bus = node(sim, name).gpus[1].pci_bus_id
    assert out(sim, name, "sudo -n nvidia-smi -i 1 -mig 1") == f"Enabled MIG Mode for GPU {bus}\nAll done.\n"
    assert (
        out(sim, name, "nvidia-smi -i 1 -mig 1") == f"Enabled MIG Mode for GPU {bus}\nAll done.\n"
    )  # again: fine
    gpu = node(sim, name).gpus[1]
    assert gpu.mig_enabled and gpu.util_pct is None
    profiles = node(sim, name).facts.mig_gip.value
    assert isinstance(profiles, MigProfiles) and {p.gpu_index for p in profiles.profiles} == {0, 1}
    out(sim, name, "nvidia-smi mig -i 1 -cgi 0 -C")
    assert smi(sim, name, "nvidia-smi -i 1 -mig 0")[0] == 255  # an instance is still there
    out(sim, name, "nvidia-smi mig -i 1 -dci")
    out(sim, name, "nvidia-smi mig -i 1 -dgi")
    assert out(sim, name, "nvidia-smi -i 1 -mig 0") == f"Disabled MIG Mode for GPU {bus}\nAll done.\n"
    assert node(sim, name).gpus[1].mig_enabled is False and node(sim, name).gpus[1].util_pct == 0


def test_what_nvidia_smi_refuses() -> None:
    sim = cluster()
    name = incident(sim, "drained")
    assert smi(sim, name, "nvidia-smi mig -i 9 -lgi") == (6, "No devices were found\n", "")
    assert smi(sim, name, "nvidia-smi mig -i 2 -cgi 19 -C") == (6, "No MIG-enabled devices found.\n", "")
    assert smi(sim, "gpu001", "nvidia-smi mig -lgip") == (6, "No MIG-enabled devices found.\n", "")
    assert smi(sim, name, "nvidia-smi mig -i 0 -lgi") == (6, "No GPU instances found.\n", "")
    assert smi(sim, name, "nvidia-smi mig -i 0 -lgi -lci")[0] == 2  # two things at once
    assert smi(sim, name, "nvidia-smi mig -i 0 -cgi")[0] == 2  # -cgi without profiles
    status, _, err = smi(sim, name, "nvidia-smi -q")
    assert status == 2 and "not simulated" in err
    with pytest.raises(ValueError, match="not an nvidia-smi command line"):
        smi(sim, name, "sudo -n rm -rf /")
    with pytest.raises(ValueError, match="not nodes of this cluster"):
        smi(sim, "gpu999", "nvidia-smi -L")


def test_sudo_and_its_options_are_accepted() -> None:
    sim = cluster()
    name = incident(sim, "drained")
    for prefix in ("sudo", "sudo -n", "sudo -u root --", "/usr/bin/sudo -n -u root"):
        assert (
            out(sim, name, f"{prefix} /usr/bin/nvidia-smi mig --id=0 --list-gpu-instance-profiles")
            == H100_LGIP
        )


# ---- plans ---------------------------------------------------------------------------------------------


def apply(sim: SimulatedCluster, name: str, plan: MigPlan) -> None:
    for step in plan.steps:
        status, text, err = sim.nvidia_smi(name, step.argv)
        assert (status, err) == (0, ""), (step.command_line, text)


@pytest.mark.parametrize("model", sorted(GPU_MODELS))
def test_a_planned_repartition_runs_and_matches(model: str) -> None:
    sim = cluster(model)
    name = incident(sim, "drained")
    first = MIG_TABLES[model].profiles
    half = next(p for p in first if p.size_slices == 4 and len(p.starts) == 2)
    for layout in (f"2x{half.name}", f"1x{half.name}+4x{first[0].name}", f"1x{first[-1].name}"):
        plan = planned(sim, name, 0, layout)
        apply(sim, name, plan)
        facts = node(sim, name).facts
        lgi, lci = facts.mig_gi.value, facts.mig_ci.value
        assert isinstance(lgi, MigGpuInstances) and isinstance(lci, MigComputeInstances)
        assert plan_matches(plan, {name: lgi}, {name: lci}).matches, layout
        again = planned(sim, name, 0, layout)
        assert not again.steps and again.unchanged  # nothing left to do: a second run changes nothing


# ---- the demo's runner ---------------------------------------------------------------------------------


def run(runner: Runner, argv: tuple[str, ...]) -> tuple[int | None, str, str]:
    done = asyncio.run(runner.run(argv, {}, 10.0))
    return done.exit_status, done.stdout, done.stderr


def test_the_demo_runner_runs_a_plan_on_the_simulator() -> None:
    sim = cluster()
    name = incident(sim, "drained")
    runner = SimulatedNodeRunner(lambda: sim, name)
    assert runner.where == "demo"
    plan = planned(sim, name, 0, "3x2g.20gb+1x1g.10gb")
    assert plan.steps[0].argv[:3] == ("sudo", "-n", "nvidia-smi")
    for step in plan.steps:
        assert run(runner, step.argv)[0] == 0
    facts = node(sim, name).facts
    lgi, lci = facts.mig_gi.value, facts.mig_ci.value
    assert isinstance(lgi, MigGpuInstances) and isinstance(lci, MigComputeInstances)
    assert plan_matches(plan, {name: lgi}, {name: lci}).matches
    assert run(runner, ("nvidia-smi", "mig", "-i", "0", "-dgi"))[0] == 255


def test_the_demo_runner_refuses_what_it_cannot_run() -> None:
    sim = cluster()

    def fails(runner: Runner, argv: tuple[str, ...], says: str) -> None:
        with pytest.raises(RunFailed, match=says):
            run(runner, argv)

    drained = incident(sim, "drained")
    fails(SimulatedNodeRunner(lambda: sim, drained), ("sudo", "-n", "reboot"), "only nvidia-smi")
    fails(
        SimulatedNodeRunner(lambda: sim, incident(sim, "unresponsive")),
        ("nvidia-smi", "-L"),
        "does not answer",
    )
    fails(SimulatedNodeRunner(lambda: sim, "gpu999"), ("nvidia-smi", "-L"), "not nodes of this cluster")

    def not_built() -> SimulatedCluster:
        raise RuntimeError("the simulated cluster is built when the source starts")

    fails(SimulatedNodeRunner(not_built, drained), ("nvidia-smi", "-L"), "not ready")
