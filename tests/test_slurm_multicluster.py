"""Several Slurm clusters in one output (``-M all``): real captures of two clusters under one slurmdbd."""

from __future__ import annotations

from pathlib import Path

from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.slurm_clusters import cluster_name, cluster_parts
from gputop.core.parsers.slurm_common import SlurmJobs, SlurmNodes
from gputop.core.parsers.slurm_json import parse_squeue_json
from gputop.core.parsers.slurm_text import SQUEUE_FIELDS, parse_sinfo, parse_squeue, parse_squeue_fields

FIXTURES = Path(__file__).parent / "fixtures" / "slurm-22.05-multicluster"


def _read(name: str) -> str:
    return (FIXTURES / name).read_text()


def _jobs(text: str) -> SlurmJobs:
    read = parse_squeue(text)
    assert not isinstance(read, ParseFailure), read
    return read


def test_default_table_of_two_clusters_gives_their_jobs_and_no_more() -> None:
    jobs = _jobs(_read("squeue-M-all.txt")).jobs
    assert [job.job_id for job in jobs] == ["alpha:3", "alpha:1", "alpha:2", "beta:1", "beta:2"]
    assert {job.cluster for job in jobs} == {"alpha", "beta"}
    assert all("CLUSTER" not in job.job_id and job.name != "NAME" for job in jobs)
    by_id = {job.job_id: job for job in jobs}
    assert by_id["beta:2"].nodes == ("bnode02",)
    assert by_id["alpha:2"].nodes == ("node02",)
    assert by_id["alpha:3"].state == "PENDING"


def test_gputop_format_with_titles_skips_them_and_keeps_the_pipe_in_a_name() -> None:
    read = _jobs(_read("squeue-M-all-gputop-format.txt"))
    by_id = {job.job_id: job for job in read.jobs}
    assert sorted(by_id) == ["alpha:1", "alpha:2", "alpha:3", "beta:1", "beta:2"]
    assert by_id["beta:1"].name == "bench|pipe"
    assert by_id["alpha:1"].gpus_requested == 4
    assert any("cluster:id" in note for note in read.notes)


def test_without_cluster_lines_repeated_ids_are_said() -> None:
    text = _read("squeue-M-all-noheader-gputop-format.txt")
    for read in (parse_squeue(text), parse_squeue_fields(text, SQUEUE_FIELDS)):
        assert not isinstance(read, ParseFailure), read
        assert len(read.jobs) == 5
        assert any("job ids listed twice (1, 2)" in note for note in read.notes), read.notes


def test_one_cluster_keeps_plain_ids() -> None:
    one = _read("squeue-M-all.txt").split("\n\n")[0]
    jobs = _jobs(one).jobs
    assert [job.job_id for job in jobs] == ["3", "1", "2"]
    assert {job.cluster for job in jobs} == {"alpha"}


def test_json_jobs_know_their_cluster() -> None:
    read = parse_squeue_json(_read("squeue-M-all.json"))
    assert not isinstance(read, ParseFailure), read
    assert [job.job_id for job in read.jobs] == ["1", "2", "3"]  # one cluster listed: ids stay plain
    assert {job.cluster for job in read.jobs} == {"alpha"}


def test_sinfo_of_two_clusters_lists_all_nodes() -> None:
    read = parse_sinfo(_read("sinfo-M-all.txt"))
    assert isinstance(read, SlurmNodes), read
    assert sorted(node.name for node in read.nodes) == ["bnode01", "bnode02", "node01", "node02"]
    assert {node.partitions for node in read.nodes} == {("gpu",), ("batch",)}


def test_a_cluster_line_without_a_header_after_it_is_not_a_cluster() -> None:
    # what a job name with a line break can print in gputop's format: one line, then the next job
    text = (
        "1|gpu|root|RUNNING|None|1|node01|gres:gpu:h100:4|2026-12-04T20:19:09|2026-12-04T20:19:10|UNLIMITED|0:47|x\n"
        "CLUSTER: evil\n"
        "2|gpu|root|RUNNING|None|1|node02|gres:gpu:h100:8|2026-12-04T20:19:09|2026-12-04T20:19:10|UNLIMITED|0:47|y\n"
    )
    assert cluster_parts(text) == [(None, text)]
    read = parse_squeue(text)
    assert not isinstance(read, ParseFailure)
    assert [job.job_id for job in read.jobs] == ["1", "2"]
    assert all(job.cluster is None for job in read.jobs)


def test_cluster_names_from_json_are_plain_words() -> None:
    assert cluster_name("alpha") == "alpha"
    assert cluster_name("a\x1b]2;x") is None
    assert cluster_name("x" * 65) is None
    assert cluster_name(7) is None


def test_scontrol_refuses_several_clusters() -> None:
    # gputop never passes -M to scontrol: this is what it would get
    assert "Only one cluster" in _read("scontrol-M-all-show-job.stderr")
