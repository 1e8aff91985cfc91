"""The Slurm source: what it reads, from canned real outputs, and what it says when Slurm fails, from
real processes that misbehave; its background task, the node list at launch and run_on over SSH.
Against a real Slurm, locally and over a real sshd: test_slurm_source_real.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

from gputop.clock import FrozenClock
from gputop.cluster_app import LaunchError, sources_for
from gputop.config_file import load_config
from gputop.core.config import ClusterConfig, Config, SlurmConfig, Thresholds
from gputop.core.parsers.slurm import (
    SCONTROL_JOBS_ARGV,
    SCONTROL_NODES_ARGV,
    SINFO_ARGV,
    SINFO_JSON_ARGV,
    SQUEUE_JSON_ARGV,
)
from gputop.core.parsers.slurm_checked import SAFE_SINFO_ARGV, SAFE_SQUEUE_ARGV
from gputop.poller import Poller
from gputop.sim.fake_fleet import run_fleet
from gputop.sources.slurm import (
    PING_ARGV,
    SCONTROL_JSON_NODES_ARGV,
    ReadFailed,
    SlurmSource,
    nodes_from_slurm,
)
from gputop.sources.slurm_runner import Completed, LocalRunner, remote_command_line
from gputop.sources.ssh import SshSource
from tests.infra.slurm import (  # noqa: F401 - fixtures, registered by importing them
    RealSlurm,
    real_slurm,
    slurm_client_conf,
)
from tests.infra.sshd import RealSshd, real_sshd  # noqa: F401 - the fixture, registered by importing it

FIXTURES = Path(__file__).parent / "fixtures"
LOOPBACK = FIXTURES / "slurm-22.05-loopback"  # captured from a real Slurm 22.05.8 (see PROVENANCE.md)
HOSTILE = FIXTURES / "slurm-22.05-hostile"  # the same, with forged records in job names (PROVENANCE.md)
CONTROLLER_DOWN = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
NODE_CONTROLLER_DOWN = "slurm_load_node error: Unable to contact slurm controller (connect failure)\n"


def fixture(name: str) -> str:
    return (LOOPBACK / name).read_text(encoding="utf-8")


def cluster(
    *,
    nodes: Sequence[str] = ("node01", "node02", "node03", "node04"),
    run_on: str = "local",
    timeout_s: float = 10.0,
    interval_s: float = 10.0,
    **changes: object,
) -> ClusterConfig:
    base = ClusterConfig(
        name="loopback",
        nodeset="node[01-04]",
        node_names=tuple(nodes),
        slurm=SlurmConfig(run_on=run_on, poll_interval_s=interval_s, command_timeout_s=timeout_s),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


# --- a runner that answers with canned outputs ---------------------------------------------------------

Answer = Completed | Exception | Callable[[], "Completed | Exception"]


def ok(argv: Sequence[str], stdout: str) -> Completed:
    return Completed(tuple(argv), 0, stdout, "")


def failed(argv: Sequence[str], stderr: str, status: int = 1) -> Completed:
    return Completed(tuple(argv), status, "", stderr)


class FakeRunner:
    """Answers each argv with what a real Slurm printed; records what was asked, with which environment."""

    where = "local"

    def __init__(self, answers: Mapping[tuple[str, ...], Answer]) -> None:
        self.answers: dict[tuple[str, ...], Answer] = dict(answers)
        self.calls: list[tuple[tuple[str, ...], dict[str, str], float]] = []
        self.refreshed = 0
        self.closed = False

    async def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> Completed:
        self.calls.append((tuple(argv), dict(env), timeout_s))
        answer = self.answers.get(tuple(argv))
        if answer is None:
            raise AssertionError(f"unexpected command {argv}")
        if callable(answer):
            answer = answer()
        if isinstance(answer, Exception):
            raise answer
        return answer

    def refresh(self) -> None:
        self.refreshed += 1

    async def close(self) -> None:
        self.closed = True

    def asked(self) -> list[tuple[str, ...]]:
        return [argv for argv, _, _ in self.calls]


SCONTROL_REFUSES_JSON = (
    "scontrol: unrecognized option '--json'\nTry \"scontrol --help\" for more information\n"
)


def loopback_answers() -> dict[tuple[str, ...], Answer]:
    """What Slurm 22.05 answers: no ``scontrol --json``, JSON from sinfo and squeue."""
    return {
        SCONTROL_JSON_NODES_ARGV: failed(SCONTROL_JSON_NODES_ARGV, SCONTROL_REFUSES_JSON),
        SINFO_JSON_ARGV: ok(SINFO_JSON_ARGV, fixture("sinfo.json")),
        SQUEUE_JSON_ARGV: ok(SQUEUE_JSON_ARGV, fixture("squeue.json")),
    }


def hostile_answers(*, json: bool) -> dict[tuple[str, ...], Answer]:
    """The hostile capture (tests/fixtures/slurm-22.05-hostile): with its JSON, or as a Slurm without."""

    def read(name: str) -> str:
        return (HOSTILE / name).read_text(encoding="utf-8")

    answers: dict[tuple[str, ...], Answer] = {
        SCONTROL_JSON_NODES_ARGV: failed(SCONTROL_JSON_NODES_ARGV, read("scontrol-json-show-node.stderr")),
        SCONTROL_NODES_ARGV: ok(SCONTROL_NODES_ARGV, read("scontrol-d-o-show-node.txt")),
        SCONTROL_JOBS_ARGV: ok(SCONTROL_JOBS_ARGV, read("scontrol-d-o-show-job.txt")),
        SAFE_SQUEUE_ARGV: ok(SAFE_SQUEUE_ARGV, read("squeue-safe-fields.txt")),
        SAFE_SINFO_ARGV: ok(SAFE_SINFO_ARGV, read("sinfo-safe-fields.txt")),
        SINFO_ARGV: ok(SINFO_ARGV, read("sinfo-gputop-format.txt")),
    }
    if json:
        answers[SINFO_JSON_ARGV] = ok(SINFO_JSON_ARGV, read("sinfo.json"))
        answers[SQUEUE_JSON_ARGV] = ok(SQUEUE_JSON_ARGV, read("squeue.json"))
    else:
        refused = "{}: unrecognized option '--json'\n"
        answers[SINFO_JSON_ARGV] = failed(SINFO_JSON_ARGV, refused.format("sinfo"))
        answers[SQUEUE_JSON_ARGV] = failed(SQUEUE_JSON_ARGV, refused.format("squeue"))
    return answers


def source_with(runner: FakeRunner, clock: FrozenClock | None = None, **kwargs: object) -> SlurmSource:
    now = clock.now if clock is not None else FrozenClock(1_800_000_000.0).now
    return SlurmSource(cluster(), now, runner=runner, **kwargs)  # type: ignore[arg-type]


# --- reading, from canned real outputs -----------------------------------------------------------------


async def test_reads_nodes_jobs_and_the_gpu_each_job_holds_from_json() -> None:
    runner = FakeRunner(loopback_answers())
    clock = FrozenClock(1_800_000_000.0)
    source = source_with(runner, clock, env={"SLURM_CONF": "/etc/other/slurm.conf"})
    state = await source.read_once()

    assert state.error is None
    assert state.sampled_at_s == 1_800_000_000.0
    assert sorted(state.nodes) == ["node01", "node02", "node03", "node04"]
    assert state.nodes["node04"].drained and state.nodes["node04"].reason == "xid 79"
    assert state.nodes["node04"].reason_user == "root"
    assert state.nodes["node04"].reason_time_s == 1796231199.0
    (train,) = [job for job in state.jobs if job.job_id == "2"]
    assert train.state == "RUNNING"
    assert set(train.gpus_by_node) == {"node01", "node02"}
    for node, indices in train.gpus_by_node.items():
        assert indices
        assert all(state.job_on_gpu(node, i) is train for i in indices)
        assert set(indices) <= set(state.nodes[node].gpu_indices_in_use or ())
    assert state.job_on_gpu("node03", 0) is None
    assert await source.collect(0.0) == type(await source.collect(0.0))(slurm=state)
    # JSON prints epoch seconds: no time format or zone is forced on it; the caller's env comes along
    for _argv, env, timeout_s in runner.calls:
        assert env == {"SLURM_CONF": "/etc/other/slurm.conf"}
        assert timeout_s == 10.0
    assert any("scontrol --json show node refused" in n and "sinfo --json instead" in n for n in source.notes)
    runner.calls.clear()
    await source.read_once()  # the refused form is not asked again at every read
    assert sorted(runner.asked()) == sorted([SINFO_JSON_ARGV, SQUEUE_JSON_ARGV])


async def test_a_forged_job_record_is_neither_shown_nor_offered_for_a_drain() -> None:
    """A job name with a line break and JobId=..., and Key= words in a name and working directory (a real
    capture, tests/fixtures/slurm-22.05-hostile): JSON reads them as names; without JSON, the text is
    checked against squeue's own fields, and the forged job 31337 on node03 appears nowhere."""
    for json_too in (True, False):
        state = await source_with(FakeRunner(hostile_answers(json=json_too))).read_once()
        assert state.error is None, state.error
        jobs = {job.job_id: job for job in state.jobs}
        assert sorted(jobs) == ["3", "4", "5", "6", "7", "8"], json_too
        assert (jobs["6"].user, jobs["6"].state, jobs["6"].nodes) == ("root", "RUNNING", ("node01",))
        assert (jobs["7"].state, jobs["7"].nodes) == ("RUNNING", ("node02",))
        assert state.job_on_gpu("node03", 0) is None, "no job holds node03's GPUs"
        assert dict(jobs["5"].gpus_by_node) == {"node01": (0, 1, 2, 3), "node02": (0, 1, 2, 3)}
        reason = state.nodes["node04"].reason
        assert reason == "xid 79 [bob@2026-01-01T00:00:00] State=IDLE" and state.nodes["node04"].drained
        if json_too:
            assert jobs["6"].name.startswith("x\nJobId=31337") and dict(jobs["6"].gpus_by_node) == {
                "node01": (4,)
            }
            assert jobs["7"].name == "lr=0.1 UserId=root(0) NodeList=node03"
        else:
            assert jobs["6"].name == "" and not jobs["6"].gpus_by_node  # ambiguous: Slurm's fields only
            assert jobs["7"].name == "" and not jobs["7"].gpus_by_node


async def test_without_json_the_text_forms_are_checked_and_that_choice_is_kept() -> None:
    runner = FakeRunner(hostile_answers(json=False))
    source = source_with(runner)
    state = await source.read_once()
    assert state.error is None
    notes = "\n".join(source.notes)
    assert "squeue --json refused (squeue: unrecognized option '--json')" in notes
    assert "jobs 6, 7: their scontrol records are ambiguous" in notes
    assert "scontrol listed jobs squeue does not know (31337): left out" in notes
    text_env = [env for argv, env, _ in runner.calls if argv in (SCONTROL_JOBS_ARGV, SAFE_SQUEUE_ARGV)]
    assert text_env == [{"SLURM_TIME_FORMAT": "standard", "TZ": "UTC"}] * 2

    runner.calls.clear()
    await source.read_once()  # the refused forms are not asked again at every read
    assert sorted(runner.asked()) == sorted(
        [SCONTROL_NODES_ARGV, SAFE_SINFO_ARGV, SCONTROL_JOBS_ARGV, SAFE_SQUEUE_ARGV]
    )

    runner.calls.clear()
    source.refresh()  # ...until someone asks: then the preferred commands first again
    await source.read_once()
    assert runner.refreshed == 1
    assert runner.asked()[0] in (SCONTROL_JSON_NODES_ARGV, SQUEUE_JSON_ARGV)


async def test_last_the_listing_of_slurms_own_fields_alone() -> None:
    answers = hostile_answers(json=False)
    answers[SCONTROL_NODES_ARGV] = failed(SCONTROL_NODES_ARGV, "scontrol: unrecognized option '-d'\n")
    answers[SCONTROL_JOBS_ARGV] = failed(SCONTROL_JOBS_ARGV, "scontrol: unrecognized option '-d'\n")
    source = source_with(FakeRunner(answers))
    state = await source.read_once()
    assert state.error is None
    assert state.nodes["node04"].reason == "xid 79 [bob@2026-01-01T00:00:00] State=IDLE"
    assert {job.job_id: job.state for job in state.jobs}["6"] == "RUNNING"
    assert all(not job.gpus_by_node and not job.name for job in state.jobs)
    assert "reading squeue (text, without job names) instead, which names no GPU indices" in "\n".join(
        source.notes
    )


async def test_controller_down_is_said_and_the_last_state_is_kept() -> None:
    runner = FakeRunner(loopback_answers())
    clock = FrozenClock(1_800_000_000.0)
    source = source_with(runner, clock)
    good = await source.read_once()

    clock.advance(30)
    runner.answers[SINFO_JSON_ARGV] = failed(SINFO_JSON_ARGV, NODE_CONTROLLER_DOWN)
    runner.answers[SQUEUE_JSON_ARGV] = failed(SQUEUE_JSON_ARGV, CONTROLLER_DOWN)
    down = await source.read_once()

    assert down.error is not None
    assert down.error.startswith("Slurm controller not answering: ")
    assert "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" in down.error
    assert down.nodes == good.nodes and down.jobs == good.jobs
    assert down.sampled_at_s == good.sampled_at_s == 1_800_000_000.0  # its age shows how old they are
    assert (await source.collect(clock.now())).slurm is down
    assert runner.asked().count(SCONTROL_JOBS_ARGV) == 0  # a dead controller is not a reason to fall back


async def test_a_failure_before_any_good_read_has_no_nodes_and_no_age() -> None:
    runner = FakeRunner(
        {
            SCONTROL_JSON_NODES_ARGV: failed(SCONTROL_JSON_NODES_ARGV, NODE_CONTROLLER_DOWN),
            SQUEUE_JSON_ARGV: failed(SQUEUE_JSON_ARGV, CONTROLLER_DOWN),
        }
    )
    state = await source_with(runner).read_once()
    assert state.nodes == {} and state.jobs == () and state.sampled_at_s is None
    # one reason per distinct failure: both listings failing alike read as two lines of the same cause
    assert state.error is not None and state.error.count("Slurm controller not answering") == 2


async def test_a_non_zero_exit_shows_what_the_command_printed_verbatim() -> None:
    stderr = (
        "squeue: error: Invalid user for SlurmUser slurm, ignored\n"
        "squeue: fatal: Unable to process configuration file\n"
    )
    answers = loopback_answers()
    answers[SQUEUE_JSON_ARGV] = failed(SQUEUE_JSON_ARGV, stderr, status=1)
    runner = FakeRunner(answers)
    source = source_with(runner)
    state = await source.read_once()
    assert state.error == f"squeue --json exited with status 1: {stderr.strip()}"
    assert state.nodes == {}  # a read counts only when both listings were read


async def test_garbage_is_a_parse_failure_that_keeps_the_last_state() -> None:
    runner = FakeRunner(loopback_answers())
    source = source_with(runner)
    good = await source.read_once()
    runner.answers[SINFO_JSON_ARGV] = ok(SINFO_JSON_ARGV, "<html><body>502 Bad Gateway</body></html>\n")
    state = await source.read_once()
    assert state.error is not None
    assert state.error.startswith("sinfo --json: output not understood: not JSON")
    assert "502 Bad Gateway" in state.error
    assert state.nodes == good.nodes and state.sampled_at_s == good.sampled_at_s
    assert SCONTROL_NODES_ARGV not in runner.asked()  # garbage is an error, not a reason to change commands


async def test_a_json_error_document_is_an_error() -> None:
    answers = loopback_answers()
    error_doc = {
        "meta": {},
        "errors": [{"description": "Failed while looking for jobs", "source": "slurm_load_jobs"}],
        "jobs": [],
    }
    answers[SQUEUE_JSON_ARGV] = ok(SQUEUE_JSON_ARGV, json.dumps(error_doc))
    answers[PING_ARGV] = ok(PING_ARGV, "Slurmctld(primary) at ctl1 is UP\n")
    state = await source_with(FakeRunner(answers)).read_once()
    assert state.error == (
        "squeue --json: Slurm answered with an error: Failed while looking for jobs [slurm_load_jobs]"
    )
    down = "Slurmctld(primary) at ctl1 is DOWN\n*****************************************\n"
    answers[PING_ARGV] = ok(PING_ARGV, down)
    state = await source_with(FakeRunner(answers)).read_once()
    assert state.error is not None
    assert state.error.startswith(
        "Slurm controller not answering: Slurmctld(primary) at ctl1 is DOWN (squeue"
    )


async def test_a_bug_in_reading_becomes_an_error_not_a_dead_loop() -> None:
    calls = {"n": 0}

    def explode() -> Completed:
        calls["n"] += 1
        raise KeyError("boom")

    answers = loopback_answers()
    answers[SINFO_JSON_ARGV] = explode
    runner = FakeRunner(answers)
    source = SlurmSource(cluster(interval_s=0.05), time.time, runner=runner)
    await source.start()
    try:
        state = await source.wait_for_read(0, 5)
        assert state is not None and state.error is not None and "KeyError" in state.error
        await source.wait_for_read(2, 5)  # and the loop keeps reading
        assert calls["n"] >= 3
    finally:
        await source.close()
    assert runner.closed


# --- the background task -----------------------------------------------------------------------------


async def test_collect_never_waits_for_a_hanging_slurm_and_close_ends_it() -> None:
    never = asyncio.Event()
    started = asyncio.Event()

    class Hanging(FakeRunner):
        async def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> Completed:
            started.set()
            await never.wait()
            raise AssertionError("unreachable")

    runner = Hanging({})
    source = SlurmSource(cluster(), time.time, runner=runner)
    await source.start()
    await asyncio.wait_for(started.wait(), 5)
    result = await asyncio.wait_for(source.collect(time.time()), 0.1)
    assert result.slurm is None  # nothing read yet: the poller shows no Slurm rather than stale zeros
    await asyncio.wait_for(source.close(), 5)
    assert runner.closed


async def test_reads_every_interval_and_at_once_on_refresh() -> None:
    runner = FakeRunner(loopback_answers())
    source = SlurmSource(cluster(interval_s=3600), time.time, runner=runner)
    await source.start()
    try:
        await source.wait_for_read(0, 5)
        assert source.reads == 1
        await asyncio.sleep(0.2)
        assert source.reads == 1  # an hour until the next one...
        source.refresh()
        await source.wait_for_read(1, 5)  # ...unless someone presses r
        assert source.reads == 2
    finally:
        await source.close()

    quick = SlurmSource(cluster(interval_s=0.05), time.time, runner=FakeRunner(loopback_answers()))
    await quick.start()
    try:
        await quick.wait_for_read(3, 5)
    finally:
        await quick.close()


async def test_the_poller_puts_the_slurm_state_into_its_snapshot() -> None:
    runner = FakeRunner(loopback_answers())
    clock = FrozenClock(1_800_000_000.0)
    source = SlurmSource(cluster(), clock.now, runner=runner)
    views = []
    poller = Poller(
        cluster="loopback",
        sources=[source],
        clock=clock,
        poll=Config().poll,
        thresholds=Thresholds(),
        on_view=lambda view: views.append(view),
    )
    await source.start()
    try:
        await source.wait_for_read(0, 5)
        view = await poller.tick()
    finally:
        await source.close()
    assert view.snapshot.slurm is source.state
    assert view.snapshot.slurm is not None and view.snapshot.slurm.nodes["node04"].drained


# --- running commands here -----------------------------------------------------------------------------


def tool_dir(tmp_path: Path, **scripts: str) -> Path:
    """A directory of shell scripts named after Slurm commands, to put alone on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir


async def test_a_command_that_is_not_installed_says_where_to_run_slurm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tool_dir(tmp_path)))
    state = await SlurmSource(cluster(), time.time).read_once()
    assert state.error == "scontrol and squeue not found: is this a Slurm login node? set slurm.run_on"


async def test_a_command_past_its_timeout_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sleep = shutil.which("sleep")
    assert sleep is not None
    pids = tmp_path / "pids"
    body = f'echo $$ >> "{pids}"\nexec {sleep} 60\n'
    monkeypatch.setenv("PATH", str(tool_dir(tmp_path, scontrol=body, squeue=body)))
    source = SlurmSource(cluster(timeout_s=0.5), time.time)
    started = time.monotonic()
    state = await source.read_once()
    assert time.monotonic() - started < 5
    assert state.error == (
        "scontrol did not finish within 0.5s (killed); squeue did not finish within 0.5s (killed)"
    )
    for pid in map(int, pids.read_text().split()):
        with pytest.raises(ProcessLookupError):  # killed and reaped, not left sleeping
            os.kill(pid, 0)


async def test_the_local_runner_passes_argv_without_a_shell_and_adds_env(tmp_path: Path) -> None:
    printer = tool_dir(tmp_path, printargs='for a in "$@"; do echo "[$a]"; done; echo "[$GPUTOP_X]"\n')
    done = await LocalRunner().run(
        [str(printer / "printargs"), "a b", "$(touch x)", "'q'"], {"GPUTOP_X": "y z"}, 5
    )
    assert done.exit_status == 0
    assert done.stdout.splitlines() == ["[a b]", "[$(touch x)]", "['q']", "[y z]"]


def test_the_remote_command_line_quotes_every_word_and_carries_env() -> None:
    line = remote_command_line(["scontrol", "-d", "-o", "show", "node"], {"SLURM_TIME_FORMAT": "standard"})
    assert line == "env SLURM_TIME_FORMAT=standard scontrol -d -o show node"
    odd = remote_command_line(["sinfo", "-p", "a b;rm -rf /"], {"SLURM_CONF": "/my dir/slurm.conf"})
    assert odd == "env 'SLURM_CONF=/my dir/slurm.conf' sinfo -p 'a b;rm -rf /'"
    assert remote_command_line(["sinfo"], {}) == "sinfo"


# --- the node list at launch -------------------------------------------------------------------------------


async def test_nodes_from_slurm_lists_a_partition_once_each_in_natural_order() -> None:
    argv = ("sinfo", "-h", "-N", "-o", "%N", "-p", "gpu")
    runner = FakeRunner({argv: ok(argv, "gpu10\ngpu2\ngpu1\ngpu2\n\n")})
    names = await nodes_from_slurm(cluster(nodes_from_slurm="gpu"), runner=runner)
    assert names == ("gpu1", "gpu2", "gpu10")
    every = ("sinfo", "-h", "-N", "-o", "%N")
    runner = FakeRunner({every: ok(every, "a1\n")})
    assert await nodes_from_slurm(cluster(nodes_from_slurm="all"), runner=runner) == ("a1",)


@pytest.mark.parametrize(
    ("stdout", "stderr", "status", "expected"),
    [
        ("", "", 0, "sinfo lists no nodes in partition 'gpu' (is the name right?"),
        ("node01\nsinfo: error: x\n", "", 0, "sinfo printed 'sinfo: error: x', which is not a node's host"),
        ("", "slurm_load_partitions: Unable to contact slurm controller (connect failure)\n", 1,
         "Slurm controller not answering: slurm_load_partitions: Unable to contact slurm controller"),
        ("", "sinfo: error: something else\n", 1, "sinfo exited with status 1: sinfo: error: something else"),
    ],
)  # fmt: skip
async def test_nodes_from_slurm_says_why_it_has_no_list(
    stdout: str, stderr: str, status: int, expected: str
) -> None:
    argv = ("sinfo", "-h", "-N", "-o", "%N", "-p", "gpu")
    runner = FakeRunner({argv: Completed(argv, status, stdout, stderr)})
    with pytest.raises(ReadFailed) as caught:
        await nodes_from_slurm(cluster(nodes_from_slurm="gpu"), runner=runner)
    assert str(caught.value).startswith(expected)


def test_sources_for_takes_the_nodes_from_sinfo_and_adds_slurm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = tmp_path / "asked"
    body = f'echo "$@" > "{asked}"\nprintf "gpu02\\ngpu10\\ngpu01\\ngpu02\\n"\n'
    monkeypatch.setenv("PATH", str(tool_dir(tmp_path, sinfo=body)))
    ampere = ClusterConfig(name="ampere", nodes_from_slurm="gpu")
    sources = sources_for(ampere, Config(clusters=(ampere,)), FrozenClock(0.0))

    assert asked.read_text().split() == ["-h", "-N", "-o", "%N", "-p", "gpu"]
    ssh, slurm = sources
    assert isinstance(ssh, SshSource) and isinstance(slurm, SlurmSource)
    assert ssh.cluster.node_names == ("gpu01", "gpu02", "gpu10")
    assert ssh.cluster.nodeset == "gpu[01-02,10]"

    quiet = ClusterConfig(name="q", nodeset="n1", node_names=("n1",), slurm=SlurmConfig(enabled=False))
    assert [type(s) for s in sources_for(quiet, Config(clusters=(quiet,)), FrozenClock(0.0))] == [SshSource]


async def test_sources_for_inside_a_running_loop_still_reads_sinfo(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tool_dir(tmp_path, sinfo='echo "n1"\n')))
    ampere = ClusterConfig(name="ampere", nodes_from_slurm="all")
    ssh = sources_for(ampere, Config(clusters=(ampere,)), FrozenClock(0.0))[0]
    assert isinstance(ssh, SshSource) and ssh.cluster.node_names == ("n1",)


def test_a_slurm_that_cannot_list_nodes_stops_the_launch_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = (
        'echo "sinfo: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host" >&2\n'
        'echo "sinfo: fatal: Could not establish a configuration source" >&2\nexit 1\n'
    )
    monkeypatch.setenv("PATH", str(tool_dir(tmp_path, sinfo=body)))
    ampere = ClusterConfig(name="ampere", nodes_from_slurm="gpu")
    with pytest.raises(LaunchError) as caught:
        sources_for(ampere, Config(clusters=(ampere,)), FrozenClock(0.0))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("cluster 'ampere': cannot list the nodes of partition 'gpu' from Slurm")
    assert "no Slurm configuration" in message and "set slurm.run_on" in message
    assert "Could not establish a configuration source" in message
    assert message.endswith("list the nodes with `nodes:`")

    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(LaunchError, match="sinfo not found: is this a Slurm login node"):
        sources_for(ampere, Config(clusters=(ampere,)), FrozenClock(0.0))


# --- run_on over SSH, against the in-process SSH fleet (real asyncssh, no Slurm there) -----------------


async def test_run_on_a_host_without_slurm_says_so(tmp_path: Path) -> None:
    async with run_fleet(nodes=2, port=0, state_dir=tmp_path / "fleet") as fleet:
        config = load_config(fleet.config_path)
        host = fleet.node_names[0]
        base = config.clusters[0]
        login = dataclasses.replace(base, slurm=SlurmConfig(run_on=host, command_timeout_s=5))
        source = SlurmSource(login, time.time)
        try:
            state = await source.read_once()
            assert state.error == (
                f"scontrol and squeue not found on {host}: is {host} a Slurm login node? check slurm.run_on"
            )
            assert state.sampled_at_s is None
        finally:
            await source.close()

        untrusted = tmp_path / "empty_known_hosts"
        untrusted.write_text("", encoding="utf-8")
        strange = dataclasses.replace(login, ssh=dataclasses.replace(login.ssh, known_hosts=str(untrusted)))
        source = SlurmSource(strange, time.time)
        try:
            state = await source.read_once()
            assert state.error == f"host key not verifiable for {host}: not in {untrusted}, or changed"
            with pytest.raises(ReadFailed, match="host key not verifiable"):
                await nodes_from_slurm(dataclasses.replace(strange, nodes_from_slurm="all"))
        finally:
            await source.close()
