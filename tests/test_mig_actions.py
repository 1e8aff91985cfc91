"""The MIG step runner with a scripted Runner: order, stop at the first failure, audit before the outcome is
reported, timeouts, and which runner a node's commands go through."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from gputop.actions.audit import AuditLog
from gputop.actions.mig import StepOutcome, node_runner_for, run_steps
from gputop.core.config import ClusterConfig, PollConfig
from gputop.core.mig_plan import ModeStep
from gputop.sources.nvml import NvmlSource
from gputop.sources.slurm_runner import Completed, LocalRunner, RunFailed, SshRunner
from gputop.sources.ssh import SshSource


@dataclass
class Scripted:
    """Answers each argv from a script: an exit status, RunFailed, or a hang."""

    answers: list[int | str | None]  # int: exit status; str: RunFailed reason; None: never answers
    where: str = "gpu042"

    def __post_init__(self) -> None:
        self.ran: list[tuple[str, ...]] = []
        self.timeouts_s: list[float] = []

    async def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> Completed:
        self.ran.append(tuple(argv))
        self.timeouts_s.append(timeout_s)
        answer = self.answers[len(self.ran) - 1]
        if answer is None:
            await asyncio.sleep(3600)
        if isinstance(answer, str):
            raise RunFailed(answer)
        assert isinstance(answer, int)
        return Completed(tuple(argv), answer, f"out {len(self.ran)}\n", "" if answer == 0 else "it broke\n")

    def refresh(self) -> None:
        return None

    async def close(self) -> None:
        return None


def steps(n: int) -> list[ModeStep]:
    return [
        ModeStep(i, ("sudo", "-n", "nvidia-smi", "-i", str(i), "-mig", "1"), f"step {i}") for i in range(n)
    ]


def audit(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def log_at(path: Path) -> AuditLog:
    return AuditLog(path, cluster="c")


async def test_steps_run_in_order_each_recorded_before_it_starts_and_after_it_ends(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    lines_when_started: list[int] = []

    class Watching(Scripted):
        async def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> Completed:
            lines_when_started.append(len(audit(log)))
            return await super().run(argv, env, timeout_s)

    runner = Watching([0, 0, 0])
    lines_when_reported: list[int] = []

    def heard(outcome: StepOutcome) -> None:
        lines_when_reported.append(len(audit(log)))

    run = await run_steps(steps(3), runner, log_at(log), node="gpu042", timeout_s=30, on_step=heard)
    assert run.ok and [o.step.gpu_index for o in run.outcomes] == [0, 1, 2]
    assert runner.ran == [s.argv for s in steps(3)] and runner.timeouts_s == [30, 30, 30]
    assert lines_when_started == [1, 3, 5], "each step's intent is on disk before it starts"
    assert lines_when_reported == [2, 4, 6], "and its outcome before it is shown"
    records = audit(log)
    assert [r["phase"] for r in records] == ["intent", "outcome"] * 3
    assert [r["action"] for r in records] == ["mig"] * 6
    assert [r["targets"] for r in records[::2]] == [["gpu042:GPU0"], ["gpu042:GPU1"], ["gpu042:GPU2"]]
    assert records[0]["argv"] == list(steps(1)[0].argv) and records[0]["where"] == "gpu042"
    assert records[1]["id"] == records[0]["id"] and records[1]["result"] == "done"
    assert records[1]["exit_status"] == 0 and records[1]["output"] == "out 1"


async def test_the_first_failure_stops_the_run_and_nothing_is_retried(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    runner = Scripted([0, 3, 0, 0])
    run = await run_steps(steps(4), runner, log_at(log), node="gpu042", timeout_s=30)
    assert not run.ok
    assert [o.exit_status for o in run.outcomes] == [0, 3]
    assert run.outcomes[1].output == "out 2\nit broke"
    assert [s.gpu_index for s in run.not_run] == [2, 3]
    assert len(runner.ran) == 2
    outcomes = [r for r in audit(log) if r["phase"] == "outcome"]
    assert [(r["exit_status"], r["result"]) for r in outcomes] == [(0, "done"), (3, "failed")]


async def test_a_step_that_gives_no_exit_status_stops_the_run_with_the_reason(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    runner = Scripted(["nvidia-smi on gpu042 did not finish within 30s", 0])
    run = await run_steps(steps(2), runner, log_at(log), node="gpu042", timeout_s=30)
    assert [(o.exit_status, o.output) for o in run.outcomes] == [
        (None, "nvidia-smi on gpu042 did not finish within 30s")
    ]
    assert len(run.not_run) == 1
    _intent, record = audit(log)
    assert record["exit_status"] is None and "did not finish" in str(record["output"])


async def test_a_runner_that_ignores_its_timeout_is_abandoned_and_its_outcome_is_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gputop.actions.mig as mig

    monkeypatch.setattr(mig, "RUNNER_GRACE_S", 0.0)
    log = tmp_path / "audit.jsonl"
    runner = Scripted([None, 0])
    run = await run_steps(steps(2), runner, log_at(log), node="gpu042", timeout_s=0.05)
    assert [(o.exit_status, o.result) for o in run.outcomes] == [(None, "unknown")]
    assert run.outcomes[0].output == "sudo did not finish within 0.05s (abandoned)"
    assert len(run.not_run) == 1 and [r["result"] for r in audit(log)[1:]] == ["unknown"]


async def test_an_audit_log_that_cannot_be_written_runs_no_step(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    runner = Scripted([0, 0])
    run = await run_steps(steps(2), runner, log_at(blocker / "a.jsonl"), node="gpu042", timeout_s=5)
    (outcome,) = run.outcomes
    assert not outcome.ok and outcome.result is None and runner.ran == []
    assert outcome.output.startswith(f"not run: the audit log {blocker / 'a.jsonl'} cannot be written")
    assert len(run.not_run) == 1


async def test_a_step_cancelled_while_it_runs_is_recorded_as_unknown(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    task = asyncio.create_task(
        run_steps(steps(2), Scripted([None, 0]), log_at(log), node="gpu042", timeout_s=60)
    )
    while not log.exists() or len(audit(log)) < 1:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    intent, outcome = audit(log)
    assert (intent["phase"], outcome["phase"], outcome["id"]) == ("intent", "outcome", intent["id"])
    assert outcome["result"] == "unknown" and "stopped" in str(outcome["why"])


def test_a_node_of_an_ssh_cluster_runs_over_ssh_and_a_local_one_here() -> None:
    cluster = ClusterConfig("c", nodeset="gpu[1-2]", node_names=("gpu1", "gpu2"))
    ssh = SshSource(cluster, PollConfig(), lambda: 0.0)
    runner = node_runner_for([ssh], "gpu2")
    assert isinstance(runner, SshRunner) and runner.where == "gpu2"
    assert runner.settings == ssh.settings, "the cluster's own SSH settings, host key checking included"
    assert node_runner_for([ssh], "gpu9") is None
    assert isinstance(node_runner_for([NvmlSource("ws1", nvml_module=object())], "ws1"), LocalRunner)
