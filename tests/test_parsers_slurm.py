"""Slurm parsers against real captured outputs (see fixtures/PROVENANCE.md) and against odd input.

Inputs written in this file (not captures) are labelled as such: they exercise gputop's own text formats
(built from the same constants the source uses) and shapes no real sample covers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from gputop.core.models import SlurmBaseState, SlurmJob, SlurmNode
from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.registry import registry
from gputop.core.parsers.slurm import (
    SINFO_ARGV,
    SINFO_FORMAT,
    SQUEUE_ARGV,
    SQUEUE_FORMAT,
    TEXT_ENV,
    SlurmJobs,
    SlurmNodes,
    jobs_from_json,
    nodes_from_json,
    parse_gpu_indices,
    parse_job_state,
    parse_node_state,
    parse_scontrol_jobs,
    parse_scontrol_nodes,
    parse_sinfo,
    parse_sinfo_json,
    parse_squeue,
    parse_squeue_json,
)
from gputop.core.parsers.slurm_common import (
    job_gpu_request,
    json_count,
    json_minutes,
    json_number,
    json_time,
    parse_duration,
    parse_gres,
    parse_slurm_time,
)
from gputop.core.parsers.slurm_text import SINFO_FIELDS, SQUEUE_FIELDS
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


# --- gputop's own text formats (lines written here from the shared constants) ---------------------------


def test_the_format_constants_match_their_fields() -> None:
    assert SQUEUE_FORMAT.split("|") == [code for code, _ in SQUEUE_FIELDS]
    assert SINFO_FORMAT.split("|") == [code for code, _ in SINFO_FIELDS]
    assert SQUEUE_ARGV[-1] == SQUEUE_FORMAT and SINFO_ARGV[-1] == SINFO_FORMAT
    assert SQUEUE_FIELDS[-1][1] == "name" and SINFO_FIELDS[-1][1] == "reason"  # free text last
    assert TEXT_ENV == {"SLURM_TIME_FORMAT": "standard"}


def _line(fields: tuple[tuple[str, str], ...], **cells: str) -> str:
    assert set(cells) == {name for _, name in fields}
    return "|".join(cells[name] for _, name in fields)


def test_gputop_squeue_format() -> None:
    running = _line(
        SQUEUE_FIELDS,
        job_id="1230_4",
        partition="gpu",
        user="alice",
        state="RUNNING",
        reason="None",
        node_count="2",
        nodelist="gpu[001-002]",
        tres_per_node="gres/gpu:4",
        submit_time="2026-12-02T17:00:00",
        start_time="2026-12-02T17:01:00",
        time_limit="1-00:00:00",
        elapsed="5:00",
        name="train|v2 final",
    )
    pending = _line(
        SQUEUE_FIELDS,
        job_id="1231_[5-9%2]",
        partition="gpu",
        user="bob",
        state="PENDING",
        reason="QOSMaxGpuPerUser",
        node_count="1",
        nodelist="",
        tres_per_node="gres:gpu:8",
        submit_time="2026-12-02T16:00:00",
        start_time="2026-12-03T00:00:00",
        time_limit="UNLIMITED",
        elapsed="0:00",
        name="sweep",
    )
    het = _line(
        SQUEUE_FIELDS,
        job_id="100+1",
        partition="cpu",
        user="carol",
        state="COMPLETING",
        reason="None",
        node_count="1",
        nodelist="cpu07",
        tres_per_node="N/A",
        submit_time="N/A",
        start_time="2026-12-02T15:00:00",
        time_limit="30:00",
        elapsed="29:59",
        name="het",
    )
    result = parse_squeue(f"{running}\n{pending}\n{het}\n")
    assert isinstance(result, SlurmJobs) and result.notes == ()
    jobs = _by_id(result)
    first = jobs["1230_4"]
    assert first.name == "train|v2 final"  # the name is last, so a '|' in it is kept
    assert first.nodes == ("gpu001", "gpu002") and first.gpus_requested == 8
    assert (first.start_time_s, first.time_limit_s, first.elapsed_s) == (DRAINED_AT - 339, 86400.0, 300.0)
    assert first.pending_reason is None
    second = jobs["1231_[5-9%2]"]
    assert second.pending_reason == "QOSMaxGpuPerUser" and second.start_time_s is None  # an estimate only
    assert second.time_limit_s is None and second.gpus_requested == 8
    third = jobs["100+1"]
    assert (third.state, third.state_flags, third.gpus_requested) == (
        "COMPLETING",
        frozenset({"COMPLETING"}),
        None,
    )
    shifted = parse_squeue(running, utc_offset_s=3600)  # the command ran at UTC+1
    assert isinstance(shifted, SlurmJobs) and shifted.jobs[0].start_time_s == DRAINED_AT - 339 - 3600


def test_gputop_sinfo_format() -> None:
    lines = [
        _line(
            SINFO_FIELDS,
            node="gpu001",
            state="mixed",
            partition="gpu*",
            reason_user="Unknown",
            reason_time="Unknown",
            gres="gpu:h100:8(S:0-1)",
            reason="none",
        ),
        _line(
            SINFO_FIELDS,
            node="gpu002",
            state="draining*",
            partition="gpu*",
            reason_user="root",
            reason_time="2026-12-02T17:06:39",
            gres="gpu:h100:8(S:0-1)",
            reason="Xid 79 | ECC (GPU 3)",
        ),
        _line(
            SINFO_FIELDS,
            node="gpu002",
            state="draining*",
            partition="debug",
            reason_user="root",
            reason_time="2026-12-02T17:06:39",
            gres="gpu:h100:8(S:0-1)",
            reason="Xid 79 | ECC (GPU 3)",
        ),
        _line(
            SINFO_FIELDS,
            node="gpu003",
            state="idle~",
            partition="gpu*",
            reason_user="Unknown",
            reason_time="Unknown",
            gres="(null)",
            reason="none",
        ),
    ]
    result = parse_sinfo("\n".join(lines))
    assert isinstance(result, SlurmNodes) and result.notes == ()
    nodes = result.by_name()
    assert list(nodes) == ["gpu001", "gpu002", "gpu003"]
    sick = nodes["gpu002"]
    assert sick.partitions == ("gpu", "debug")  # one line per partition, merged
    assert sick.draining and sick.label == "draining*"
    assert (sick.reason, sick.reason_user, sick.reason_time_s) == ("Xid 79 | ECC (GPU 3)", "root", DRAINED_AT)
    assert nodes["gpu001"].reason is None and nodes["gpu001"].reason_user is None
    assert nodes["gpu001"].gpus_configured == 8 and nodes["gpu001"].gpus_allocated is None
    assert (nodes["gpu003"].base_state, nodes["gpu003"].flags) == (IDLE, frozenset({"POWERED_DOWN"}))
    assert nodes["gpu003"].gpus_configured == 0


# --- shapes no real sample covers (written here to the documented schemas) -----------------------------


def _set(number: int) -> dict[str, object]:
    return {"set": True, "infinite": False, "number": number}


UNSET = {"set": False, "infinite": False, "number": 0}
INFINITE = {"set": False, "infinite": True, "number": 0}


def test_sinfo_json_entries_of_slurm_23_and_later() -> None:
    doc = {
        "sinfo": [
            {
                "nodes": {"nodes": ["gpu[001-002]"]},
                "node": {"state": ["MIXED", "DRAIN"]},
                "partition": {"name": "gpu"},
                "reason": {"description": "Xid 79", "user": "root", "time": _set(int(DRAINED_AT))},
                "gres": {"total": "gpu:h100:8(S:0-1)", "used": "gpu:h100:4(IDX:0-3)"},
            },
            {
                "nodes": {"nodes": ["gpu001"]},
                "node": {"state": ["MIXED", "DRAIN"]},
                "partition": {"name": "debug"},
                "reason": "",
                "gres": {"total": "gpu:h100:8", "used": "gpu:h100:4(IDX:0-3)"},
            },
            {
                "nodes": {"nodes": ["gpu003"]},
                "node": {"state": ["IDLE", "NOT_RESPONDING", "FROBNICATED"]},
                "partition": {"name": "gpu"},
                "gres": {"total": "gpu:h100:8", "used": "gpu:h100:2(IDX:5,7)"},
            },
        ],
        "errors": [],
        "warnings": [],
    }
    result = nodes_from_json(doc)
    assert isinstance(result, SlurmNodes)
    nodes = result.by_name()
    assert list(nodes) == ["gpu001", "gpu002", "gpu003"]
    first = nodes["gpu001"]
    assert first.draining and first.partitions == ("gpu", "debug")
    assert (first.reason, first.reason_user, first.reason_time_s) == ("Xid 79", "root", DRAINED_AT)
    assert first.gpus_configured == 8
    assert first.gpu_indices_in_use is None  # a group of two nodes: its "used" is no single node's
    silent = nodes["gpu003"]
    assert silent.flags == frozenset({"NOT_RESPONDING", "FROBNICATED"}) and silent.label == "idle*"
    assert (silent.gpus_allocated, silent.gpu_indices_in_use) == (2, (5, 7))
    assert any("FROBNICATED" in note for note in result.notes)


def test_json_jobs_array_het_and_infinite_limit_in_both_generations() -> None:
    new = {
        "job_id": 1235,
        "array_job_id": _set(1230),
        "array_task_id": _set(5),
        "name": "sweep",
        "user_name": "alice",
        "partition": "gpu",
        "job_state": ["PENDING", "REQUEUED"],
        "state_reason": "BeginTime",
        "state_description": "",
        "time_limit": INFINITE,
        "start_time": _set(1796240000),
        "submit_time": _set(1796231199),
        "tres_per_node": "gres/gpu:h100:2",
        "node_count": _set(3),
        "nodes": "",
        "gres_detail": [],
    }
    old = {
        "job_id": 101,
        "het_job_id": 100,
        "het_job_offset": 1,
        "array_job_id": 0,
        "array_task_id": None,
        "name": "het",
        "user_name": "bob",
        "partition": "cpu",
        "job_state": "RUNNING",
        "state_reason": "None",
        "time_limit": 30,
        "start_time": 1796231100,
        "submit_time": 1796231000,
        "tres_alloc_str": "cpu=4,gres/gpu=2,gres/gpu:a100=2",
        "nodes": "cpu[07,09]",
        "gres_detail": ["gpu:a100:1(IDX:3)", "gpu:a100:1(IDX:0)"],
    }
    result = jobs_from_json({"jobs": [new, old, "junk"]})
    assert isinstance(result, SlurmJobs)
    jobs = _by_id(result)
    array = jobs["1230_5"]
    assert (array.state, array.state_flags) == ("REQUEUED", frozenset({"REQUEUED"}))
    assert array.start_time_s is None  # still pending: the start time is an estimate
    assert array.time_limit_s is None and array.gpus_requested == 6 and array.pending_reason == "BeginTime"
    het = jobs["100+1"]
    assert het.gpus_by_node == {"cpu07": (3,), "cpu09": (0,)}
    assert het.gpus_requested == 2  # gres/gpu, not also the typed gres/gpu:a100
    assert het.time_limit_s == 1800.0 and het.pending_reason is None
    assert any("not an object" in note for note in result.notes)


def test_scontrol_one_line_job_with_inline_details_and_old_gres_idx() -> None:
    text = (
        "JobId=1235 ArrayJobId=1230 ArrayTaskId=5 JobName=my job UserId=alice(1001) JobState=RUNNING "
        "Reason=None Partition=gpu NodeList=gpu[001-002] NumNodes=2 TimeLimit=02:00:00 RunTime=00:10:00 "
        "StartTime=2026-12-02T17:00:00 SubmitTime=2026-12-02T16:59:00 JOB_GRES=gpu:h100:6 "
        "Nodes=gpu001 CPU_IDs=0-3 Mem=0 GRES=gpu:h100:4(IDX:0-3) Nodes=gpu002 CPU_IDs=0 Mem=0 "
        "GRES_IDX=gpu(IDX:6-7) TresPerNode=gres:gpu:4\n"
    )
    result = parse_scontrol_jobs(text)
    assert isinstance(result, SlurmJobs)
    (job,) = result.jobs
    assert (job.job_id, job.name, job.user) == ("1230_5", "my job", "alice")
    assert job.gpus_by_node == {"gpu001": (0, 1, 2, 3), "gpu002": (6, 7)}
    assert job.gpus_requested == 6 and job.time_limit_s == 7200.0 and job.elapsed_s == 600.0


def test_scontrol_node_reasons_and_odd_states() -> None:
    text = (
        "NodeName=gpu001 State=DOWN*+DRAIN Gres=gpu:a100:4,gpu:v100:2 "
        "Reason=health check: gpu=3 [failed] [slurm@2026-12-02T17:06:39]\n"
        "NodeName=gpu002 State=MIXED+FROBNICATED Reason=Kill task failed Partitions=a,b\n"
        "NodeName=gpu003 State=INVAL Gres=gpu:2(S:0) GresUsed=gpu:2(IDX:0-1)\n"
        "NodeName=gpu004 State=IDLE+REBOOT_REQUESTED\n"
    )
    result = parse_scontrol_nodes(text)
    assert isinstance(result, SlurmNodes)
    nodes = result.by_name()
    down = nodes["gpu001"]
    assert (down.base_state, down.flags) == (DOWN, frozenset({"NOT_RESPONDING", "DRAIN"}))
    assert (down.reason, down.reason_user, down.reason_time_s) == (
        "health check: gpu=3 [failed]",
        "slurm",
        DRAINED_AT,
    )
    assert down.gpus_configured == 6
    odd = nodes["gpu002"]
    assert odd.base_state is MIXED and "FROBNICATED" in odd.flags and odd.reason == "Kill task failed"
    assert odd.partitions == ("a", "b")
    assert any("FROBNICATED" in note for note in result.notes)
    assert (nodes["gpu003"].base_state, nodes["gpu003"].flags) == (UNKNOWN, frozenset({"INVALID_REG"}))
    assert nodes["gpu003"].gpu_indices_in_use == (0, 1)
    assert nodes["gpu004"].flags == frozenset({"REBOOT_REQUESTED"}) and nodes["gpu004"].base_state is IDLE


# --- helpers: states, GRES, numbers, times -------------------------------------------------------------

NODE_STATES = [
    ("MIXED+DRAIN", MIXED, {"DRAIN"}),
    ("IDLE*", IDLE, {"NOT_RESPONDING"}),
    ("DOWN+NOT_RESPONDING", DOWN, {"NOT_RESPONDING"}),
    ("ALLOCATED+MAINT", ALLOCATED, {"MAINT"}),
    ("IDLE+CLOUD+POWERED_DOWN", IDLE, {"CLOUD", "POWERED_DOWN"}),
    ("MIXED+PLANNED", MIXED, {"PLANNED"}),
    ("INVAL", UNKNOWN, {"INVALID_REG"}),
    ("REBOOT_REQUESTED", UNKNOWN, {"REBOOT_REQUESTED"}),
    ("FUTURE", SlurmBaseState.FUTURE, set()),
    ("idle", IDLE, set()),
    ("mix", MIXED, set()),
    ("alloc", ALLOCATED, set()),
    ("drain", IDLE, {"DRAIN"}),
    ("drng", ALLOCATED, {"DRAIN"}),
    ("drained*", IDLE, {"DRAIN", "NOT_RESPONDING"}),
    ("down*", DOWN, {"NOT_RESPONDING"}),
    ("idle~", IDLE, {"POWERED_DOWN"}),
    ("idle#", IDLE, {"POWERING_UP"}),
    ("mix-", MIXED, {"PLANNED"}),
    ("alloc$", ALLOCATED, {"MAINT"}),
    ("maint", IDLE, {"MAINT"}),
    ("resv", IDLE, {"RESERVED"}),
    ("comp", ALLOCATED, {"COMPLETING"}),
    ("fail", IDLE, {"FAIL"}),
    ("failg", ALLOCATED, {"FAIL"}),
    ("plnd", IDLE, {"PLANNED"}),
    ("inval", UNKNOWN, {"INVALID_REG"}),
    ("unk*", UNKNOWN, {"NOT_RESPONDING"}),
    ("", UNKNOWN, set()),
]


@pytest.mark.parametrize(("text", "base", "flags"), NODE_STATES, ids=lambda v: str(v))
def test_node_states_in_every_spelling(text: str, base: SlurmBaseState, flags: set[str]) -> None:
    state = parse_node_state(text)
    assert (state.base, state.flags, state.not_understood) == (base, frozenset(flags), ())


def test_node_states_from_both_json_generations_and_unknown_words() -> None:
    assert parse_node_state(["mixed", "DRAIN"]).flags == frozenset({"DRAIN"})  # v0.0.38 state + state_flags
    assert parse_node_state(["IDLE", "DRAIN"]).base is IDLE  # v0.0.40+ list
    odd = parse_node_state("SPARKLING+IDLE")
    assert (odd.base, odd.flags, odd.not_understood) == (IDLE, frozenset({"SPARKLING"}), ("SPARKLING",))
    assert parse_node_state("SPARKLING").base is UNKNOWN


def test_job_states() -> None:
    assert parse_job_state("PD").state == "PENDING"
    assert parse_job_state(["RUNNING", "COMPLETING"]).state == "COMPLETING"
    assert parse_job_state(["RUNNING"]).flags == frozenset()
    clipped = parse_job_state("COMPLETIN")
    assert clipped.state == "COMPLETING" and clipped.note
    odd = parse_job_state("WIBBLE")
    assert odd.state == "WIBBLE" and odd.note and "not understood" in odd.note


@pytest.mark.parametrize(
    ("text", "indices"),
    [
        ("IDX:0-3,5", (0, 1, 2, 3, 5)),
        ("IDX:N/A", ()),
        ("0-1", (0, 1)),
        ("gpu:h100:2(IDX:0,2)", (0, 2)),
        ("gpu:2(IDX:0-1),gpu:a100:1(IDX:3)", (0, 1, 3)),
        ("gpu:h100:4(IDX:0-3),shard:h100:0(0/8,0/8)", (0, 1, 2, 3)),
        ("gpu:h100:0(IDX:N/A)", ()),
        ("gpu(IDX:6-7)", (6, 7)),
        ("gpu:h100:8(S:0-1)", None),
        ("IDX:3-1", None),
        ("IDX:0-99999999", None),
        ("garbage(IDX:", None),
        ("", None),
    ],
)
def test_gpu_index_strings(text: str, indices: tuple[int, ...] | None) -> None:
    assert parse_gpu_indices(text) == indices


def test_gres_items() -> None:
    items = parse_gres("gpu:a100_3g.20gb:2,gpu:no_consume:4,nic:1,shard:1K")
    assert [(i.name, i.type, i.count) for i in items] == [
        ("gpu", "a100_3g.20gb", 2),
        ("gpu", None, 4),
        ("nic", None, 1),
        ("shard", None, 1024),
    ]
    assert parse_gres("(null)") == () and parse_gres("N/A") == ()


def test_job_gpu_request_spellings() -> None:
    assert job_gpu_request(per_node="gres:gpu:4", node_count=2) == 8
    assert job_gpu_request(per_node="gres/gpu:h100:2", node_count=3) == 6
    assert job_gpu_request(per_node="gpu:1") == 1
    assert job_gpu_request(per_job="gres/gpu:6", per_node="gres:gpu:1", node_count=4) == 6
    assert job_gpu_request(per_task="gres/gpu:1", task_count=4) == 4
    assert job_gpu_request(alloc_tres="cpu=4,gres/gpu=2,gres/gpu:h100=2") == 2
    assert job_gpu_request(req_tres="cpu=4,gres/gpu:a100=3") == 3
    assert job_gpu_request(per_node="gres:nic:1", req_tres="cpu=1,mem=4G") is None


def test_json_numbers_of_both_generations() -> None:
    assert json_number(5) == 5.0 and json_number(_set(5)) == 5.0
    assert json_number(UNSET) is None and json_number(None) is None and json_number(True) is None
    assert json_number(INFINITE) == math.inf
    assert json_count(4294967294) is None  # NO_VAL printed as a number by 22.05
    assert json_minutes(INFINITE) is None and json_minutes(_set(30)) == 1800.0
    assert json_time(0) is None and json_time(_set(0)) is None and json_time(_set(1796231199)) == DRAINED_AT


def test_text_times_and_durations() -> None:
    assert parse_slurm_time("2026-12-02T17:06:39") == DRAINED_AT
    assert parse_slurm_time("2026-12-02T17:06:39", utc_offset_s=3600.0) == DRAINED_AT - 3600
    assert parse_slurm_time("Unknown") is None and parse_slurm_time("2026-13-45T99:00:00") is None
    assert parse_duration("1-00:00:00") == 86400.0
    assert (
        parse_duration("30:00") == 1800.0
        and parse_duration("0:02") == 2.0
        and parse_duration("2:03:04") == 7384
    )
    assert parse_duration("UNLIMITED") is None and parse_duration("INVALID") is None


# --- bad and empty input -------------------------------------------------------------------------------

NODES_DOC = '{"nodes": [{"name": "n1", "state": ["IDLE"]}]}'
ERROR_DOC = (
    '{"jobs": [], "errors": [{"error": "Unable to contact slurm controller (connect failure)", '
    '"error_number": 1007}]}'
)


@pytest.mark.parametrize(
    ("kind", "text", "reason"),
    [
        ("squeue-json", "", "empty output"),
        ("squeue-json", "hello world", "not JSON; the command printed: hello world"),
        ("squeue-json", '{"jobs": [', "not valid JSON"),
        ("squeue-json", "[1, 2]", "expected a JSON object"),
        ("squeue-json", "squeue: unrecognized option '--json'", "has no --json"),
        ("squeue-json", ERROR_DOC, "Unable to contact slurm controller (connect failure) (error 1007)"),
        ("squeue-json", NODES_DOC, "read it as sinfo-json"),
        ("squeue-json", '{"foo": 1}', "no 'jobs' list"),
        ("sinfo-json", '{"jobs": []}', "read it as squeue-json"),
        ("sinfo-json", '{"foo": 1}', "no 'nodes' or 'sinfo' list"),
        ("scontrol-node", "Node gpu999 not found", "the command printed: Node gpu999 not found"),
        ("scontrol-job", "slurm_load_jobs error: Invalid job id specified", "Invalid job id specified"),
        ("squeue", "hello world", "no JOBID header"),
        (
            "squeue",
            "slurm_load_jobs error: Unable to contact slurm controller",
            "squeue failed: slurm_load_jobs",
        ),
        ("sinfo", "garbage\nmore garbage", "no header line"),
        ("sinfo", "sinfo: error: Invalid node state specified", "sinfo failed"),
    ],
)
def test_garbage_gives_a_reason(kind: str, text: str, reason: str) -> None:
    result = registry()[kind].parse(text)
    assert isinstance(result, ParseFailure), result
    assert result.kind == kind
    assert reason in result.reason


def test_an_error_next_to_real_jobs_is_a_note() -> None:
    doc = '{"jobs": [{"job_id": 7, "job_state": "RUNNING"}], "errors": ["partial"], "warnings": ["slow"]}'
    result = parse_squeue_json(doc)
    assert isinstance(result, SlurmJobs) and [j.job_id for j in result.jobs] == ["7"]
    assert result.notes == ("Slurm warned: slow", "Slurm error: partial")


def test_empty_outputs() -> None:
    no_jobs = parse_squeue("")
    assert isinstance(no_jobs, SlurmJobs) and no_jobs.jobs == ()
    header_only = parse_squeue("JOBID PARTITION NAME USER ST TIME NODES NODELIST(REASON)\n")
    assert isinstance(header_only, SlurmJobs) and header_only.jobs == () and header_only.notes == ()
    no_nodes = parse_sinfo("   \n")
    assert isinstance(no_nodes, SlurmNodes) and no_nodes.nodes == ()
    nothing = parse_scontrol_jobs("No jobs in the system\n")
    assert isinstance(nothing, SlurmJobs) and nothing.jobs == () and nothing.notes == ()
    blank = parse_scontrol_nodes("")
    assert isinstance(blank, SlurmNodes) and blank.nodes == () and blank.notes
    empty_list = parse_sinfo_json('{"nodes": [], "errors": []}')
    assert isinstance(empty_list, SlurmNodes) and empty_list.nodes == ()


def test_binary_junk_never_raises() -> None:
    junk = bytes(range(256)).decode("latin-1")
    for text in (junk, junk * 3, "{" + junk, "NodeName=" + junk, "JobId=" + junk, "|" * 20 + junk):
        for kind in KINDS:
            assert isinstance(registry()[kind].parse(text), SlurmNodes | SlurmJobs | ParseFailure)


def test_wrongly_typed_json_fields_never_raise() -> None:
    odd_job = {
        "job_id": {"set": True, "number": "x"},
        "job_state": 5,
        "nodes": ["a"],
        "gres_detail": "gpu:1",
        "time_limit": "soon",
    }
    good_job = {"job_id": "12", "job_state": None, "nodes": "bad[", "gres_detail": [1, "gpu:1(IDX:0)"]}
    result = jobs_from_json({"jobs": [odd_job, good_job]})
    assert isinstance(result, SlurmJobs)
    assert [j.job_id for j in result.jobs] == ["12"]
    assert result.jobs[0].nodelist == "bad[" and result.jobs[0].nodes == ()
    assert any("job_id" in note for note in result.notes) and any("bad[" in note for note in result.notes)
    odd_nodes = nodes_from_json(
        {"nodes": [{"name": 3}, {"name": "n1", "state": {"x": 1}, "partitions": "p"}]}
    )
    assert isinstance(odd_nodes, SlurmNodes)
    assert [(n.name, n.base_state) for n in odd_nodes.nodes] == [("n1", UNKNOWN)]
