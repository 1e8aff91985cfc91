"""Slurm parsers on input written here rather than captured: gputop's own text formats (built from
the same constants the source uses), shapes no real sample covers (written to the documented schemas),
the helpers for states, GRES, numbers and times, and bad and empty input.
"""

from __future__ import annotations

import math

import pytest

from gputop.core.models import SlurmBaseState
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

# node04 of the loopback cluster was drained at 2026-12-02T17:06:39 (the capture host ran in UTC)
# Every real sample and the kind that reads it.
# Real sinfo output that names no node (a partition summary): refused, with this in the reason.
from tests.test_parsers_slurm import (  # the helpers both files use
    ALLOCATED,
    DOWN,
    DRAINED_AT,
    IDLE,
    KINDS,
    MIXED,
    UNKNOWN,
    _by_id,
)

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
