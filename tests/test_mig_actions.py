"""The MIG step runner with a scripted Runner: order, stop at the first failure, audit before the outcome is
reported, timeouts, and which runner a node's commands go through."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

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


async def test_steps_run_in_order_and_each_is_audited_before_it_is_reported(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    runner = Scripted([0, 0, 0])
    lines_when_reported: list[int] = []

    def heard(outcome: StepOutcome) -> None:
        lines_when_reported.append(len(audit(log)))

    run = await run_steps(
        steps(3), runner, node="gpu042", cluster="c", audit_log=str(log), timeout_s=30, on_step=heard
    )
    assert run.ok and [o.step.gpu_index for o in run.outcomes] == [0, 1, 2]
    assert runner.ran == [s.argv for s in steps(3)] and runner.timeouts_s == [30, 30, 30]
    assert lines_when_reported == [1, 2, 3], "each step is on disk before it is shown"
    records = audit(log)
    assert [r["action"] for r in records] == ["mig"] * 3
    assert [r["targets"] for r in records] == [["gpu042:GPU0"], ["gpu042:GPU1"], ["gpu042:GPU2"]]
    assert records[0]["argv"] == list(steps(1)[0].argv) and records[0]["where"] == "gpu042"
    assert records[0]["exit_status"] == 0 and records[0]["output"] == "out 1"


async def test_the_first_failure_stops_the_run_and_nothing_is_retried(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    runner = Scripted([0, 3, 0, 0])
    run = await run_steps(steps(4), runner, node="gpu042", cluster="c", audit_log=str(log), timeout_s=30)
    assert not run.ok
    assert [o.exit_status for o in run.outcomes] == [0, 3]
    assert run.outcomes[1].output == "out 2\nit broke"
    assert [s.gpu_index for s in run.not_run] == [2, 3]
    assert len(runner.ran) == 2
    assert [r["exit_status"] for r in audit(log)] == [0, 3]


async def test_a_step_that_gives_no_exit_status_stops_the_run_with_the_reason(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    runner = Scripted(["nvidia-smi on gpu042 did not finish within 30s", 0])
    run = await run_steps(steps(2), runner, node="gpu042", cluster="c", audit_log=str(log), timeout_s=30)
    assert [(o.exit_status, o.output) for o in run.outcomes] == [
        (None, "nvidia-smi on gpu042 did not finish within 30s")
    ]
    assert len(run.not_run) == 1
    (record,) = audit(log)
    assert record["exit_status"] is None and "did not finish" in str(record["output"])


async def test_a_runner_that_ignores_its_timeout_is_abandoned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gputop.actions.mig as mig

    monkeypatch.setattr(mig, "RUNNER_GRACE_S", 0.0)
    log = tmp_path / "audit.jsonl"
    runner = Scripted([None, 0])
    run = await run_steps(steps(2), runner, node="gpu042", cluster="c", audit_log=str(log), timeout_s=0.05)
    assert [o.exit_status for o in run.outcomes] == [None]
    assert run.outcomes[0].output == "sudo did not finish within 0.05s (abandoned)"
    assert len(run.not_run) == 1 and len(audit(log)) == 1


async def test_an_audit_log_that_cannot_be_written_is_reported_with_each_step(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    run = await run_steps(
        steps(1), Scripted([0]), node="gpu042", cluster="c", audit_log=str(blocker / "a.jsonl"), timeout_s=5
    )
    (outcome,) = run.outcomes
    assert outcome.ok and outcome.audit_error is not None
    assert outcome.audit_error.startswith(f"could not write the audit log {blocker / 'a.jsonl'}")


def test_a_node_of_an_ssh_cluster_runs_over_ssh_and_a_local_one_here() -> None:
    cluster = ClusterConfig("c", nodeset="gpu[1-2]", node_names=("gpu1", "gpu2"))
    ssh = SshSource(cluster, PollConfig(), lambda: 0.0)
    runner = node_runner_for([ssh], "gpu2")
    assert isinstance(runner, SshRunner) and runner.where == "gpu2"
    assert runner.settings == ssh.settings, "the cluster's own SSH settings, host key checking included"
    assert node_runner_for([ssh], "gpu9") is None
    assert isinstance(node_runner_for([NvmlSource("ws1", nvml_module=object())], "ws1"), LocalRunner)
