"""The audit log: an intent on disk before the command starts, its outcome after (done, failed, unknown),
nothing run when the intent cannot be written, never half a line; and a drain through `execute`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from gputop.actions.audit import AuditError, AuditLog, unfinished
from gputop.actions.execute import execute
from gputop.core.node_actions import NodeActionPlan, plan_node_action
from gputop.sources.slurm_runner import Completed, RunFailed

NODES = ("gpu001", "gpu002")


def records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def drain_plan() -> NodeActionPlan:
    plan = plan_node_action("drain", ["gpu001"], NODES, "Xid 79 on GPU4", None)
    assert isinstance(plan, NodeActionPlan)
    return plan


class Runner:
    """A runner that notes how many audit lines were on disk when it was asked to run, then answers."""

    where = "login1"

    def __init__(self, log: Path, answer: int | RunFailed | None) -> None:
        self.log = log
        self.answer = answer  # exit status, RunFailed to raise, None: never answers
        self.lines_at_start: list[int] = []

    async def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> Completed:
        self.lines_at_start.append(len(records(self.log)) if self.log.exists() else 0)
        if self.answer is None:
            await asyncio.sleep(3600)
        if isinstance(self.answer, RunFailed):
            raise self.answer
        assert isinstance(self.answer, int)
        return Completed(tuple(argv), self.answer, "", "" if self.answer == 0 else "Invalid node name\n")

    def refresh(self) -> None:
        return None

    async def close(self) -> None:
        return None


async def test_the_intent_is_on_disk_before_scontrol_starts_and_the_outcome_after(tmp_path: Path) -> None:
    log = tmp_path / "state" / "audit.jsonl"
    runner = Runner(log, 0)
    outcome = await execute(drain_plan(), runner, AuditLog(log, cluster="c"))
    assert outcome.ok and runner.lines_at_start == [1]
    intent, done = records(log)
    assert intent["phase"] == "intent" and intent["argv"] == list(drain_plan().argv)
    assert intent["targets"] == ["gpu001"] and intent["where"] == "login1" and intent["user"]
    assert done["phase"] == "outcome" and done["id"] == intent["id"]
    assert (done["result"], done["exit_status"]) == ("done", 0)
    assert (os.stat(log).st_mode & 0o777) == 0o600
    assert unfinished(log) == []


async def test_a_failed_scontrol_is_failed_with_its_words(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    outcome = await execute(drain_plan(), Runner(log, 1), AuditLog(log, cluster="c"))
    assert (outcome.result, outcome.exit_status, outcome.output) == ("failed", 1, "Invalid node name")
    assert records(log)[1]["result"] == "failed"


async def test_a_link_lost_after_the_command_was_sent_is_unknown_and_the_nodes_are_read_again(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.jsonl"
    lost = RunFailed("connection to login1 lost", started=True)
    asked: list[tuple[str, ...]] = []

    async def reread(nodes: tuple[str, ...]) -> Mapping[str, str]:
        asked.append(nodes)
        return {"gpu001": "drained (reason: Xid 79 on GPU4)"}

    outcome = await execute(drain_plan(), Runner(log, lost), AuditLog(log, cluster="c"), reread=reread)
    assert outcome.result == "unknown" and not outcome.ok and outcome.output == "connection to login1 lost"
    assert asked == [("gpu001",)] and outcome.states_now == {"gpu001": "drained (reason: Xid 79 on GPU4)"}
    intent, unknown, reread_record = records(log)
    assert unknown["result"] == "unknown" and unknown["exit_status"] is None
    assert reread_record["phase"] == "reread" and reread_record["id"] == intent["id"]
    assert reread_record["states"] == {"gpu001": "drained (reason: Xid 79 on GPU4)"}


async def test_a_command_that_never_started_is_failed_not_unknown(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    refused = RunFailed("host key not verifiable for login1", retry=False)
    outcome = await execute(drain_plan(), Runner(log, refused), AuditLog(log, cluster="c"))
    assert outcome.result == "failed" and outcome.exit_status is None


@pytest.mark.parametrize("where", ["directory", "read-only", "missing-parent-file"])
async def test_an_audit_log_that_cannot_be_written_refuses_the_action(
    tmp_path: Path, where: str, request: pytest.FixtureRequest
) -> None:
    if where == "directory":
        log = tmp_path / "audit.jsonl"
        log.mkdir()
    elif where == "read-only":
        folder = tmp_path / "ro"
        folder.mkdir()
        if os.geteuid() == 0:  # root writes to a 0555 directory all the same: mount a read-only one
            mounted = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)],
                capture_output=True,
                check=False,
            )
            if mounted.returncode != 0:
                pytest.skip(f"cannot mount a read-only tmpfs as root here: {mounted.stderr.decode().strip()}")
            request.addfinalizer(lambda: subprocess.run(["umount", str(folder)], check=False))
        else:
            folder.chmod(0o555)
        log = folder / "audit.jsonl"
    else:
        blocker = tmp_path / "file"
        blocker.write_text("")
        log = blocker / "audit.jsonl"
    audit = AuditLog(log, cluster="c")
    assert audit.problem() is not None
    runner = Runner(tmp_path / "none.jsonl", 0)
    outcome = await execute(drain_plan(), runner, audit)
    assert outcome.refused and runner.lines_at_start == [], "nothing ran"
    assert outcome.output.startswith(f"not run: the audit log {log} cannot be written")


async def test_a_full_disk_refuses_the_action_and_writes_nothing(tmp_path: Path) -> None:
    full = Path("/dev/full")
    if not full.exists():
        pytest.skip("/dev/full is missing (not Linux?)")
    runner = Runner(tmp_path / "none.jsonl", 0)
    outcome = await execute(drain_plan(), runner, AuditLog(full, cluster="c"))
    assert outcome.refused and runner.lines_at_start == []
    assert "No space left on device" in outcome.output


FILL_DISK = """
import os, resource, signal, sys
from gputop.actions.audit import AuditLog, AuditError
path = sys.argv[1]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
size = os.path.getsize(path)
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, size + 100))  # room for 100 bytes: half a record
try:
    AuditLog(path, cluster="c").intent("drain", ["scontrol", "update", "NodeName=gpu001"], ["gpu001"], "x")
except AuditError as err:
    print("refused:", err)
"""


def test_a_record_cut_short_by_a_full_disk_is_taken_back_whole(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    AuditLog(log, cluster="c").intent("resume", ["scontrol"], ["gpu002"], "x")
    before = log.read_bytes()
    done = subprocess.run(
        [sys.executable, "-c", FILL_DISK, str(log)], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.stdout.startswith("refused: the audit log"), done.stdout + done.stderr
    assert "File too large" in done.stdout
    assert log.read_bytes() == before, "no half line left behind"


def test_records_from_many_writers_never_interleave(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    audit = AuditLog(log, cluster="c")

    def another(i: int) -> None:
        intent = audit.intent("resume", ["x"] * 50, [f"n{i}"], "local")
        assert audit.outcome(intent, "failed", 1, "e" * 500) is None

    threads = [threading.Thread(target=another, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    found = records(log)
    assert len(found) == 40
    assert sorted(r["targets"][0] for r in found if r["phase"] == "intent") == sorted(
        f"n{i}" for i in range(20)
    )


def test_an_intent_without_an_outcome_is_listed_as_unfinished(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    audit = AuditLog(log, cluster="c")
    finished = audit.intent("drain", ["scontrol", "a"], ["gpu001"], "x")
    audit.outcome(finished, "done", 0, "")
    audit.intent("drain", ["scontrol", "b"], ["gpu002"], "x")
    with log.open("a") as file:
        file.write('{"phase": "intent", "id": "half')  # a line cut by another writer's crash
    (left,) = unfinished(log)
    assert left["argv"] == ["scontrol", "b"] and left["pid"] == os.getpid()


def test_the_intent_write_is_the_check_that_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk that fills between the dialog's check and the run still stops the action."""
    log = tmp_path / "audit.jsonl"
    audit = AuditLog(log, cluster="c")
    assert audit.problem() is None

    def no_room(fd: int, data: bytes) -> int:
        raise OSError(28, os.strerror(28))

    monkeypatch.setattr(os, "write", no_room)
    with pytest.raises(AuditError, match="No space left on device"):
        audit.intent("drain", ["scontrol"], ["gpu001"], "x")
    assert not log.exists() or log.read_bytes() == b""


def test_the_audit_log_follows_xdg_state_home_and_the_demo_keeps_its_own() -> None:
    from gputop.actions.audit import audit_log_path

    assert audit_log_path(None, {"XDG_STATE_HOME": "/srv/state"}) == "/srv/state/gputop/audit.jsonl"
    assert audit_log_path(None, {}) == "~/.local/state/gputop/audit.jsonl"
    assert audit_log_path(None, {"XDG_STATE_HOME": "relative"}) == "~/.local/state/gputop/audit.jsonl"
    assert audit_log_path("/var/log/g.jsonl", {"XDG_STATE_HOME": "/srv/state"}) == "/var/log/g.jsonl"
    assert audit_log_path(None, {"XDG_STATE_HOME": "/s"}, demo=True) == "/s/gputop/demo-audit.jsonl"
    assert audit_log_path("/var/log/g.jsonl", {}, demo=True) == "/var/log/demo-g.jsonl"
