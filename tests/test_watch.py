"""`gputop watch` on the demo, as a user runs it (no Slurm needed): dry-run lines, SIGTERM, one policy
per cluster, and an audit log that cannot be written stops it before it decides anything."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def start(tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    return subprocess.Popen(
        [sys.executable, "-m", "gputop", "watch", "--demo", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env=env,
    )


def audit(tmp_path: Path) -> list[dict[str, object]]:
    path = tmp_path / "state" / "gputop" / "demo-audit.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def wait_for(check: object, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_the_demo_runs_in_dry_run_and_sigterm_stops_it(tmp_path: Path) -> None:
    watch = start(tmp_path)
    try:
        wait_for(lambda: (tmp_path / "state" / "gputop" / "demo-audit.jsonl").exists()
                 and any(r.get("decision") == "drain" for r in audit(tmp_path)))  # fmt: skip
        second = start(tmp_path)
        _, err = second.communicate(timeout=30)
        assert second.returncode == 2
        assert "the policy already runs for this cluster (pid " in err
    finally:
        watch.send_signal(signal.SIGTERM)
        out, _ = watch.communicate(timeout=30)
    assert watch.returncode == 128 + signal.SIGTERM
    lines = out.splitlines()
    assert "gputop watch on demo: dry run: deciding and recording, not acting" in lines[1]
    assert any(" would drain gpu007: CRIT GPU4 Xid 79: GPU has fallen off the bus" in line for line in lines)
    assert lines[-1].endswith("stopped by SIGTERM")
    records = audit(tmp_path)
    assert (records[0]["decision"], records[-1]["decision"]) == ("started", "stopped")
    assert not [r for r in records if r["phase"] in ("intent", "outcome")]  # dry-run: nothing run


def test_an_audit_log_that_cannot_be_written_stops_it_before_anything(tmp_path: Path) -> None:
    (tmp_path / "state" / "gputop").mkdir(parents=True)
    (tmp_path / "state" / "gputop" / "demo-audit.jsonl").mkdir()  # a directory in the way
    watch = start(tmp_path)
    out, err = watch.communicate(timeout=30)
    assert watch.returncode == 2
    assert "every decision is recorded, and the audit log" in err and "it is a directory" in err
    assert "would drain" not in out
