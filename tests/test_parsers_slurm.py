"""Slurm parsers against real captured outputs (see fixtures/PROVENANCE.md). Input written here rather
than captured (gputop's own text formats, shapes no real sample covers, bad input) is tested in
test_parsers_slurm_written.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputop.core.models import SlurmBaseState, SlurmJob, SlurmNode
from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.registry import registry
from gputop.core.parsers.slurm import (
    SQUEUE_FORMAT,
    SlurmJobs,
    SlurmNodes,
)
from gputop.parse_command import main as gputop_parse

FIXTURES = Path(__file__).parent / "fixtures"
SLURM = FIXTURES / "slurm"
LOOPBACK = FIXTURES / "slurm-22.05-loopback"

IDLE, MIXED, ALLOCATED, DOWN = (
    SlurmBaseState.IDLE,
    SlurmBaseState.MIXED,
    SlurmBaseState.ALLOCATED,
    SlurmBaseState.DOWN,
)
UNKNOWN = SlurmBaseState.UNKNOWN
# node04 of the loopback cluster was drained at 2026-12-02T17:06:39 (the capture host ran in UTC)
DRAINED_AT = 1796231199.0
KINDS = ("squeue-json", "sinfo-json", "scontrol-node", "scontrol-job", "squeue", "sinfo")

# Every real sample and the kind that reads it.
SAMPLES: dict[str, str] = {
    "slurm-22.05-loopback/squeue.json": "squeue-json",
    "slurm-22.05-loopback/sinfo.json": "sinfo-json",
    "slurm-22.05-loopback/scontrol-show-node-d.txt": "scontrol-node",
    "slurm-22.05-loopback/scontrol-o-show-node.txt": "scontrol-node",
    "slurm-22.05-loopback/scontrol-show-job-d.txt": "scontrol-job",
    "slurm-22.05-loopback/squeue.txt": "squeue",
    "slurm-22.05-loopback/sinfo.txt": "sinfo",
    "slurm-22.05-loopback/sinfo-N-l.txt": "sinfo",
    "slurm/json/slurmrestd-v0.0.42-jobs-RUNNING-gres_detail-h100-h200-24.11.5-slurm-web.json": "squeue-json",
    "slurm/json/slurmrestd-v0.0.42-node-IDLE+DRAIN-reason-ECC-24.11.5-slurm-web.json": "sinfo-json",
    "slurm/scontrol-show-node/a100-80g-vm-MIXED-23.11.5-CoreSpec-OS-field-truncated-trailing-spaces.txt": (
        "scontrol-node"
    ),
    "slurm/scontrol-show-node/tesla-t4x4-MIXED-22.05.2-gres-socket-S0-1-no-gres-in-CfgTRES-zh-doc.txt": (
        "scontrol-node"
    ),
    "slurm/scontrol-show-job/PENDING-Priority-gres-gpu-1-v100-StartTime-Unknown-pitt-crc-USER-MASKED.txt": (
        "scontrol-job"
    ),
    "slurm/scontrol-show-job/RUNNING-multinode-dgx-001-002-gres-gpu-16-UNLIMITED-EndTime-Unknown-"
    "go-test-string.txt": "scontrol-job",
    "slurm/scontrol-show-job/RUNNING-serial-21.x-TRUNCATED-goose-slurm-32.txt": "scontrol-job",
    "slurm/squeue/custom-o-i-T-V-M-PENDING-stampede3-rsmas-581.txt": "squeue",
    "slurm/squeue/custom-o-i7-P9-j8-u8-t2-M10-D6-C-running-19.05.txt": "squeue",
    "slurm/squeue/default-PD-Priority-stampede3-rsmas-581.txt": "squeue",
    "slurm/squeue/default-grep-filtered-noheader-AssocGrpJobsLimit-klone-robertslab-2024.txt": "squeue",
    "slurm/squeue/gaea-custom-COMPLETING-clipped-merged-with-INVALID-timeleft-from-bash-trace-ufs-2379.txt": (
        "squeue"
    ),
    "slurm/sinfo/N-node-oriented-head10-comp-mix-alloc-qtop-288.txt": "sinfo",
    "slurm/sinfo/Node-long-timestamp-header-mixed-19.05-trailing-pad.txt": "sinfo",
    "slurm/sinfo/custom-o-P-a-F-nodes-AIOT-stampede3-rsmas-581.txt": "sinfo",
    "slurm/sinfo/default-all-drain-citc-11.txt": "sinfo",
    "slurm/sinfo/list-reasons-Format-reason40-nodelist-citc-11.txt": "sinfo",
}
# Real sinfo output that names no node (a partition summary): refused, with this in the reason.
REFUSED = {"slurm/sinfo/custom-o-P-a-F-nodes-AIOT-stampede3-rsmas-581.txt": "no NODELIST column"}


def _read(relative: str) -> str:
    return (FIXTURES / relative).read_text(encoding="utf-8")


def _nodes(relative: str) -> SlurmNodes:
    result = registry()[SAMPLES[relative]].parse(_read(relative))
    assert isinstance(result, SlurmNodes), result
    return result


def _jobs(relative: str) -> SlurmJobs:
    result = registry()[SAMPLES[relative]].parse(_read(relative))
    assert isinstance(result, SlurmJobs), result
    return result


def _by_id(jobs: SlurmJobs) -> dict[str, SlurmJob]:
    return {job.job_id: job for job in jobs.jobs}


def _cut_points(text: str) -> list[int]:
    return sorted({*range(0, len(text), max(1, len(text) // 40)), len(text) - 1})


# --- every real sample ---------------------------------------------------------------------------------


def test_every_sample_in_the_fixture_folders_is_listed() -> None:
    on_disk = {
        str(path.relative_to(FIXTURES))
        for folder in (SLURM, LOOPBACK)
        for path in folder.rglob("*")
        if path.is_file()
    }
    assert on_disk == set(SAMPLES)


@pytest.mark.parametrize("relative", sorted(SAMPLES), ids=lambda r: r.split("/")[-1][:60])
def test_every_real_sample_parses(relative: str) -> None:
    result = registry()[SAMPLES[relative]].parse(_read(relative))
    if relative in REFUSED:
        assert isinstance(result, ParseFailure)
        assert REFUSED[relative] in result.reason
        return
    assert isinstance(result, SlurmNodes | SlurmJobs), result
    listed = result.nodes if isinstance(result, SlurmNodes) else result.jobs
    assert listed


@pytest.mark.parametrize("relative", sorted(SAMPLES), ids=lambda r: r.split("/")[-1][:60])
def test_cut_copies_and_the_wrong_parser_never_raise(relative: str) -> None:
    """Every Slurm parser on every sample, cut anywhere: a value or a ParseFailure, never an exception."""
    text = _read(relative)
    parsers = registry()
    for end in _cut_points(text):
        for kind in KINDS:
            assert isinstance(parsers[kind].parse(text[:end]), SlurmNodes | SlurmJobs | ParseFailure)


@pytest.mark.parametrize("relative", sorted(SAMPLES), ids=lambda r: r.split("/")[-1][:60])
def test_gputop_parse_prints_every_sample_as_json(relative: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = gputop_parse([SAMPLES[relative], str(FIXTURES / relative)])
    out, err = capsys.readouterr()
    if relative in REFUSED:
        assert code == 1 and REFUSED[relative] in err
        return
    assert code == 0, err
    value = json.loads(out)
    listed = value.get("nodes", value.get("jobs"))
    assert listed
    if "nodes" in value:
        assert isinstance(listed[0]["flags"], list) and isinstance(listed[0]["base_state"], str)
    else:
        assert isinstance(listed[0]["gpus_by_node"], dict) and isinstance(listed[0]["state_flags"], list)


def test_gputop_parse_lists_the_slurm_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    assert gputop_parse(["--list"]) == 0
    listed = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    for kind in KINDS:
        assert kind in listed
    assert SQUEUE_FORMAT in listed["squeue"]
    assert "sinfo --json" in listed["sinfo-json"]


# --- nodes: the 22.05 loopback cluster, five outputs of the same moment --------------------------------


def test_sinfo_json_2205_nodes_state_reason_and_gpus() -> None:
    result = _nodes("slurm-22.05-loopback/sinfo.json")
    assert result.slurm_version == "22.05.8"
    nodes = result.by_name()
    assert list(nodes) == ["node01", "node02", "node03", "node04"]
    drained = nodes["node04"]
    assert (drained.base_state, drained.flags) == (IDLE, frozenset({"DRAIN"}))
    assert drained.drained and not drained.draining and drained.label == "drained"
    assert (drained.reason, drained.reason_user, drained.reason_time_s) == ("xid 79", "root", DRAINED_AT)
    assert drained.state_text == "IDLE+DRAIN"
    busy = nodes["node01"]
    assert busy.base_state is MIXED and busy.flags == frozenset() and busy.reason is None
    assert (busy.gpus_configured, busy.gpus_allocated, busy.gpu_indices_in_use) == (8, 4, (0, 1, 2, 3))
    assert busy.partitions == ("gpu",)
    assert (nodes["node03"].gpus_allocated, nodes["node03"].gpu_indices_in_use) == (0, ())


def test_scontrol_show_node_d_reads_gres_used_and_the_reason_stamp() -> None:
    nodes = _nodes("slurm-22.05-loopback/scontrol-show-node-d.txt").by_name()
    assert nodes["node02"].gpu_indices_in_use == (0, 1, 2, 3)
    assert nodes["node02"].gpus_allocated == 4
    assert nodes["node04"].reason == "xid 79"
    assert nodes["node04"].reason_user == "root"
    assert nodes["node04"].reason_time_s == DRAINED_AT
    assert nodes["node04"].partitions == ("gpu",)  # "Partitions=gpu " has a trailing space


def test_scontrol_one_line_nodes_have_no_gres_used() -> None:
    nodes = _nodes("slurm-22.05-loopback/scontrol-o-show-node.txt").by_name()
    assert nodes["node01"].gpus_configured == 8
    # without -d there is no GresUsed, and GPUs are not TRES on this cluster: unknown, not 0
    assert nodes["node01"].gpus_allocated is None and nodes["node01"].gpu_indices_in_use is None
    assert (nodes["node04"].reason, nodes["node04"].reason_time_s) == ("xid 79", DRAINED_AT)


def _slurm_view(node: SlurmNode) -> tuple[object, ...]:
    return (
        node.name,
        node.base_state,
        node.flags,
        node.reason,
        node.reason_user,
        node.reason_time_s,
        node.partitions,
    )


def test_the_loopback_node_outputs_agree() -> None:
    json_nodes = _nodes("slurm-22.05-loopback/sinfo.json").nodes
    detailed = _nodes("slurm-22.05-loopback/scontrol-show-node-d.txt").nodes
    one_line = _nodes("slurm-22.05-loopback/scontrol-o-show-node.txt").nodes
    assert [_slurm_view(n) for n in json_nodes] == [_slurm_view(n) for n in detailed]
    assert [_slurm_view(n) for n in json_nodes] == [_slurm_view(n) for n in one_line]
    gpus = [(n.gpus_configured, n.gpus_allocated, n.gpu_indices_in_use) for n in json_nodes]
    assert gpus == [(n.gpus_configured, n.gpus_allocated, n.gpu_indices_in_use) for n in detailed]


def test_text_sinfo_of_the_loopback_cluster() -> None:
    default = _nodes("slurm-22.05-loopback/sinfo.txt").by_name()
    assert sorted(default) == ["node01", "node02", "node03", "node04"]  # node[01-02] expanded
    assert (default["node04"].base_state, default["node04"].flags) == (IDLE, frozenset({"DRAIN"}))
    assert default["node02"].base_state is MIXED and default["node02"].state_text == "mix"
    assert default["node01"].partitions == ("gpu",)  # "gpu*": the default partition's mark is dropped
    long = _nodes("slurm-22.05-loopback/sinfo-N-l.txt").by_name()
    assert long["node04"].drained and long["node04"].reason == "xid 79"
    assert long["node01"].reason is None  # "none"
    assert long["node03"].base_state is IDLE


# --- nodes: other real samples -------------------------------------------------------------------------


def test_slurmrestd_v0042_node_idle_drain_ecc() -> None:
    result = _nodes("slurm/json/slurmrestd-v0.0.42-node-IDLE+DRAIN-reason-ECC-24.11.5-slurm-web.json")
    assert result.slurm_version == "24.11.5"
    (node,) = result.nodes
    assert node.name == "cn4"
    assert (node.base_state, node.flags) == (IDLE, frozenset({"DRAIN"}))
    assert node.label == "drained"
    assert (node.reason, node.reason_user, node.reason_time_s) == ("ECC memory error", "root", 1762942786.0)
    assert node.partitions == ("standard",)
    assert (node.gpus_configured, node.gpus_allocated) == (0, 0)  # gres "" on this emulated node


def test_scontrol_node_t4_without_gpu_tres() -> None:
    (node,) = _nodes(
        "slurm/scontrol-show-node/tesla-t4x4-MIXED-22.05.2-gres-socket-S0-1-no-gres-in-CfgTRES-zh-doc.txt"
    ).nodes
    assert (node.name, node.base_state, node.partitions) == ("bigMem0", MIXED, ("partition",))
    assert node.gpus_configured == 4  # Gres=gpu:tesla_t4:4(S:0-1)
    assert node.gpus_allocated is None  # no GresUsed and no gres/gpu in AllocTRES
    assert node.reason is None


def test_scontrol_node_a100_vm_gpu_from_alloc_tres() -> None:
    (node,) = _nodes(
        "slurm/scontrol-show-node/a100-80g-vm-MIXED-23.11.5-CoreSpec-OS-field-truncated-trailing-spaces.txt"
    ).nodes
    assert node.name == "erc-hpc-vm013"
    assert (node.gpus_configured, node.gpus_allocated, node.gpu_indices_in_use) == (1, 1, None)
    assert node.partitions == ("gpu",)
    assert node.flags == frozenset()


def test_sinfo_node_oriented_completing_nodes() -> None:
    nodes = _nodes("slurm/sinfo/N-node-oriented-head10-comp-mix-alloc-qtop-288.txt").by_name()
    assert len(nodes) == 9
    assert (nodes["ca002"].base_state, nodes["ca002"].flags) == (ALLOCATED, frozenset({"COMPLETING"}))
    assert nodes["ca007"].base_state is MIXED
    assert nodes["ca000"].base_state is ALLOCATED and nodes["ca000"].partitions == ("compute",)


def test_sinfo_default_all_drained_and_their_reasons() -> None:
    drained = _nodes("slurm/sinfo/default-all-drain-citc-11.txt").nodes
    assert [n.name for n in drained] == ["compute001", "compute002", "compute003"]
    assert all(n.drained and n.label == "drained" for n in drained)
    reasons = _nodes("slurm/sinfo/list-reasons-Format-reason40-nodelist-citc-11.txt")
    assert {n.reason for n in reasons.nodes} == {"Low RealMemory"}  # a reason with a space, padded to 40
    assert all(n.base_state is UNKNOWN for n in reasons.nodes)
    assert any("no STATE column" in note for note in reasons.notes)


def test_sinfo_node_long_1905() -> None:
    (node,) = _nodes("slurm/sinfo/Node-long-timestamp-header-mixed-19.05-trailing-pad.txt").nodes
    assert (node.name, node.base_state, node.partitions, node.reason) == ("life1", MIXED, ("debug",), None)


# --- jobs: the loopback cluster ------------------------------------------------------------------------


def test_squeue_json_2205_jobs() -> None:
    result = _jobs("slurm-22.05-loopback/squeue.json")
    assert result.slurm_version == "22.05.8"
    jobs = _by_id(result)
    train = jobs["2"]
    assert (train.name, train.user, train.partition, train.state) == ("train", "root", "gpu", "RUNNING")
    assert train.gpus_by_node == {"node01": (0, 1, 2, 3), "node02": (0, 1, 2, 3)}  # gres_detail, node order
    assert train.gpu_count == 8 and train.gpus_requested == 8  # tres_per_node gres:gpu:4 x 2 nodes
    assert (train.nodelist, train.nodes) == ("node[01-02]", ("node01", "node02"))
    assert (train.start_time_s, train.submit_time_s) == (1796231200.0, 1796231199.0)
    assert train.time_limit_s is None  # UNLIMITED is null in v0.0.38
    assert train.pending_reason is None and train.elapsed_s is None
    big = jobs["3"]
    assert big.state == "PENDING" and big.start_time_s is None and big.nodes == ()
    assert (
        big.pending_reason
        == "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"
    )
    assert big.gpus_requested == 32  # gres:gpu:8 on each of 4 nodes
    done = jobs["1"]
    assert (done.state, done.elapsed_s, done.gpus_requested, done.user) == ("COMPLETED", 5.0, 1, "gputest")


def _job_view(job: SlurmJob) -> tuple[object, ...]:
    return (
        job.job_id,
        job.name,
        job.user,
        job.partition,
        job.state,
        dict(job.gpus_by_node),
        job.nodes,
        job.pending_reason,
        job.gpus_requested,
        job.start_time_s,
        job.submit_time_s,
        job.time_limit_s,
    )


def test_scontrol_show_job_d_agrees_with_squeue_json() -> None:
    detailed = _jobs("slurm-22.05-loopback/scontrol-show-job-d.txt")
    assert [_job_view(j) for j in detailed.jobs] == [
        _job_view(j) for j in _jobs("slurm-22.05-loopback/squeue.json").jobs
    ]
    jobs = _by_id(detailed)
    assert jobs["2"].gpus_by_node == {"node01": (0, 1, 2, 3), "node02": (0, 1, 2, 3)}  # Nodes=node[01-02] ...
    assert jobs["2"].elapsed_s == 2.0
    assert jobs["1"].gpus_by_node == {}  # "GRES=" empty once the job completed


def test_squeue_default_text_of_the_loopback_cluster() -> None:
    jobs = _by_id(_jobs("slurm-22.05-loopback/squeue.txt"))
    assert sorted(jobs) == ["2", "3"]
    assert jobs["3"].pending_reason == (
        "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions"
    )
    assert jobs["3"].state == "PENDING" and jobs["3"].nodes == ()
    assert (jobs["2"].state, jobs["2"].nodes, jobs["2"].elapsed_s) == ("RUNNING", ("node01", "node02"), 2.0)
    assert jobs["2"].gpus_by_node == {}  # the default format has no GRES indices


# --- jobs: other real samples --------------------------------------------------------------------------


def test_slurmrestd_v0042_job_two_gpu_types_on_one_node() -> None:
    result = _jobs("slurm/json/slurmrestd-v0.0.42-jobs-RUNNING-gres_detail-h100-h200-24.11.5-slurm-web.json")
    assert result.slurm_version == "24.11.5"
    (job,) = result.jobs
    assert (job.job_id, job.user, job.partition, job.state, job.name) == (
        "6374",
        "vhartman",
        "ia",
        "RUNNING",
        "wrap",
    )
    # gres_detail "gpu:h100:2(IDX:0-1),gpu:h200:4(IDX:2-5)" on the one node
    assert job.gpus_by_node == {"ia1": (0, 1, 2, 3, 4, 5)}
    assert job.gpus_requested == 6  # tres_per_job "gres/gpu:6"
    assert job.time_limit_s == 60.0  # {"set": true, "number": 1} minute
    assert job.start_time_s == 1762788927.0 and job.submit_time_s == 1762788927.0


def test_scontrol_job_multinode_dgx_unlimited() -> None:
    (job,) = _jobs(
        "slurm/scontrol-show-job/RUNNING-multinode-dgx-001-002-gres-gpu-16-UNLIMITED-EndTime-Unknown-go-test-string.txt"
    ).jobs
    assert (job.job_id, job.user, job.partition, job.state) == ("8687", "aion", "defq", "RUNNING")
    assert job.nodes == ("dgx001", "dgx002") and job.nodelist == "dgx[001-002]"
    assert job.gpus_requested == 16 and job.gpus_by_node == {}  # no -d: no indices
    assert job.time_limit_s is None
    assert job.elapsed_s == 6 * 3600 + 52 * 60 + 54
    assert job.start_time_s == 1697102450.0  # 2023-10-12T09:20:50, read as UTC


def test_scontrol_job_pending_priority() -> None:
    (job,) = _jobs(
        "slurm/scontrol-show-job/PENDING-Priority-gres-gpu-1-v100-StartTime-Unknown-pitt-crc-USER-MASKED.txt"
    ).jobs
    assert (job.job_id, job.name, job.user, job.state) == ("260056", "gpus-1", "username", "PENDING")
    assert job.pending_reason == "Priority"
    assert job.start_time_s is None and job.nodes == ()
    assert job.gpus_requested == 1 and job.time_limit_s == 86400.0


def test_scontrol_job_truncated_copy() -> None:
    (job,) = _jobs("slurm/scontrol-show-job/RUNNING-serial-21.x-TRUNCATED-goose-slurm-32.txt").jobs
    assert (job.job_id, job.user, job.nodes, job.state) == ("10804568", "tdegeus", ("f006",), "RUNNING")
    assert job.time_limit_s == 2 * 86400 and job.gpus_requested is None
    assert job.start_time_s == 1628519418.0


def test_squeue_gaea_state_clipped_into_the_next_column() -> None:
    result = _jobs(
        "slurm/squeue/gaea-custom-COMPLETING-clipped-merged-with-INVALID-timeleft-from-bash-trace-ufs-2379.txt"
    )
    (job,) = result.jobs
    assert (job.job_id, job.partition, job.user) == ("135087666", "batch", "Dusan.Jovic")
    assert job.state == "COMPLETING" and job.name == "run_cpld_debug_pdlib"
    assert any("COMPLETIN" in note for note in result.notes)


def test_squeue_without_header_is_read_as_the_default_columns() -> None:
    result = _jobs("slurm/squeue/default-grep-filtered-noheader-AssocGrpJobsLimit-klone-robertslab-2024.txt")
    jobs = _by_id(result)
    assert jobs["21865065"].pending_reason == "AssocGrpJobsLimit"
    assert jobs["21839279"].nodes == ("n3439",) and jobs["21839279"].partition == "cpu-g2-me"
    assert jobs["21839279"].elapsed_s == 17 * 3600 + 6 * 60 + 10
    assert result.notes


def test_squeue_custom_tables() -> None:
    (pending,) = _jobs("slurm/squeue/custom-o-i-T-V-M-PENDING-stampede3-rsmas-581.txt").jobs
    assert (pending.job_id, pending.state, pending.submit_time_s) == ("1854938", "PENDING", 1746108595.0)
    (running,) = _jobs("slurm/squeue/custom-o-i7-P9-j8-u8-t2-M10-D6-C-running-19.05.txt").jobs
    assert (running.job_id, running.user, running.name, running.elapsed_s) == (
        "8",
        "jihun",
        "fimo_one",
        1298.0,
    )
    (default,) = _jobs("slurm/squeue/default-PD-Priority-stampede3-rsmas-581.txt").jobs
    assert (default.state, default.pending_reason, default.user) == ("PENDING", "Priority", "tg851601")
