"""The auto-drain policy in the dashboard: P switches it on (the demo's, in dry-run) and off, the header
says its state, each decision is a notice and a record in the audit log, B resets its breaker."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from gputop.cli import build_demo_app
from gputop.clock import FrozenClock
from gputop.core.config import Config, PolicyConfig
from gputop.tui.app import GputopApp
from gputop.tui.widgets.status_header import StatusHeader
from tests.tui_helpers import FROZEN_EPOCH_S, wait_for_data


def app_with_policy(tmp_path: Path, policy: PolicyConfig, read_only: bool = False) -> GputopApp:
    base = Config.default()
    config = dataclasses.replace(
        base,
        demo=dataclasses.replace(base.demo, nodes=32, seed=42),
        audit_log=str(tmp_path / "audit.jsonl"),
        policy=policy,
    )
    app = build_demo_app(config, clock=FrozenClock(FROZEN_EPOCH_S), read_only=read_only)
    app.settings.freeze_gc = False
    return app


def decisions(tmp_path: Path) -> list[dict[str, object]]:
    lines = (tmp_path / "demo-audit.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["phase"] == "decision"]


def header_text(app: GputopApp) -> str:
    return str(app.screen.query_one(StatusHeader).render())


async def test_p_switches_the_policy_on_in_dry_run_and_off(tmp_path: Path) -> None:
    app = app_with_policy(tmp_path, PolicyConfig(max_drains_per_hour=10, max_partition_pct=50.0))
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for_data(pilot)
        assert "POLICY" not in header_text(app)
        await pilot.press("P")
        # the decisions are on disk before their notices are shown: wait for both (a loaded machine)
        for _ in range(200):
            await pilot.pause(0.05)
            noticed = any("would drain gpu007" in n.message for n in app._notifications)
            if noticed and any(r.get("decision") == "drain" for r in decisions(tmp_path)):
                break
        assert "POLICY DRY-RUN" in header_text(app)
        made = decisions(tmp_path)
        assert made[0]["decision"] == "started"
        drains = {r["node"] for r in made if r.get("decision") == "drain"}
        # the demo's reset, reboot and support incidents: an Xid 119, an Xid 79, an Xid 95 three times
        assert {"gpu006", "gpu007", "gpu010"} <= drains
        assert all(r["dry_run"] for r in made if "node" in r)
        assert any("would drain gpu007" in n.message for n in app._notifications)
        slurm = app.view.snapshot.slurm if app.view else None
        assert slurm is not None and "DRAIN" not in slurm.nodes["gpu007"].flags  # dry-run: nothing done
        await pilot.press("P")
        await pilot.pause(0.2)
        assert "POLICY" not in header_text(app)
        assert decisions(tmp_path)[-1]["decision"] == "stopped"


async def test_b_resets_the_breaker_and_says_so(tmp_path: Path) -> None:
    app = app_with_policy(tmp_path, PolicyConfig(enabled=True, max_drains_per_hour=1))
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for_data(pilot)
        for _ in range(100):
            await pilot.pause(0.05)
            if "BREAKER OPEN" in header_text(app):
                break
        assert "POLICY DRY-RUN: BREAKER OPEN" in header_text(app)
        await pilot.press("B")
        await pilot.pause(0.1)
        resets = [r for r in decisions(tmp_path) if r.get("decision") == "breaker-reset"]
        assert len(resets) == 1 and "1 drain in the last hour" in str(resets[0]["was"])


async def test_read_only_has_no_policy_keys(tmp_path: Path) -> None:
    app = app_with_policy(tmp_path, PolicyConfig(enabled=True), read_only=True)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for_data(pilot)
        await pilot.press("P")
        await pilot.pause(0.2)
        assert "POLICY" not in header_text(app)
        assert not (tmp_path / "demo-audit.jsonl").exists()
