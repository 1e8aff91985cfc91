"""`gputop watch` on the project's real Slurm: the nodes are played by fake-fleet nodes over SSH (host keys
checked), GPUs fall off the bus there, and the policy drains and resumes real Slurm nodes, trips its
circuit breaker at its limits, leaves someone else's drain alone, posts every decision to a webhook
receiver on 127.0.0.1, and stopped by SIGTERM in the middle of a drain leaves the audit log, its state
file and Slurm consistent."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from gputop.sim.fake_fleet import Fault, Fleet, run_fleet
from tests.infra.slurm import RealSlurm, real_slurm  # noqa: F401 - the fixture, registered by importing it

pytestmark = pytest.mark.slurm

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def slurm(real_slurm: RealSlurm) -> RealSlurm:  # noqa: F811
    real_slurm.reset()
    return real_slurm


class Receiver:
    """A webhook receiver on 127.0.0.1: keeps every JSON body posted to /hook."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.json())
        return web.Response(text="ok")


@asynccontextmanager
async def receiver() -> AsyncIterator[Receiver]:
    got = Receiver()
    app = web.Application()
    app.router.add_post("/hook", got.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    got.url = f"http://127.0.0.1:{port}/hook"
    try:
        yield got
    finally:
        await runner.cleanup()


# The fleet nodes that play the real Slurm's: of the simulator's 8-node incidents, none that would drain
# on its own (gpu002's Xid 48) or never answers (gpu003); the tests add the faults.
PLAYERS = ("gpu001", "gpu004", "gpu006", "gpu007")
FLEET_NODES = 8


def write_config(tmp_path: Path, fleet: Fleet, slurm: RealSlurm, policy: str) -> Path:
    """The real Slurm's nodes, each played by a fleet node over SSH, its host key checked."""
    blocks = [
        f"Host {slurm_name}\n    HostName {fleet.host}\n    Port {fleet.port}\n    User {player}\n"
        f"    IdentityFile {fleet.client_key_path}\n    IdentitiesOnly yes\n"
        f"    UserKnownHostsFile {fleet.known_hosts_path}\n    StrictHostKeyChecking yes\n"
        for slurm_name, player in zip(slurm.nodes, PLAYERS, strict=True)
    ]
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text("\n".join(blocks), encoding="utf-8")
    config = tmp_path / "gputop.yaml"
    config.write_text(
        f"audit_log: {json.dumps(str(tmp_path / 'audit.jsonl'))}\n"
        "poll:\n  interval_s: 0.5\n  slow_facts_interval_s: 1\n"
        "clusters:\n"
        "  - name: real\n"
        f"    nodes: {json.dumps(','.join(slurm.nodes))}\n"
        "    gpus_per_node: 8\n"
        "    ssh:\n"
        f"      config_file: {json.dumps(str(ssh_config))}\n"
        f"      known_hosts: {json.dumps(str(fleet.known_hosts_path))}\n"
        "      connect_timeout_s: 5\n"
        "    slurm:\n      poll_interval_s: 0.5\n"
        "    commands:\n      - name: xid\n        interval_s: 1\n"  # a mended node's log is read soon
        f"policy:\n  state_file: {json.dumps(str(tmp_path / 'policy.json'))}\n{policy}",
        encoding="utf-8",
    )
    return config


class Watch:
    """`gputop watch` as a user runs it, its output collected line by line."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        self._reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        assert self.process.stdout is not None
        async for line in self.process.stdout:
            self.lines.append(line.decode(errors="replace").rstrip("\n"))

    async def stop(self, signum: int = signal.SIGTERM) -> int:
        if self.process.returncode is None:
            self.process.send_signal(signum)
        status = await asyncio.wait_for(self.process.wait(), 20)
        await asyncio.wait_for(self._reader, 5)
        return status

    def said(self, words: str) -> bool:
        return any(words in line for line in self.lines)


async def start_watch(
    config: Path, tmp_path: Path, slurm: RealSlurm, *extra: str, path_first: Path | None = None
) -> Watch:
    env = {**os.environ, **slurm.env, "XDG_STATE_HOME": str(tmp_path / "state")}
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env.get('PATH', '')}"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gputop",
        "watch",
        "--config",
        str(config),
        *extra,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=REPO_ROOT,
        env=env,
    )
    return Watch(process)


async def until(
    check: Callable[[], bool], what: str, watch: Watch | None = None, timeout_s: float = 40.0
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        if loop.time() > deadline:
            said = "\n".join(watch.lines[-30:]) if watch is not None else ""
            raise AssertionError(f"waited {timeout_s:g}s for {what}\n{said}")
        await asyncio.sleep(0.2)


def reason_of(slurm: RealSlurm, node: str) -> str:
    return slurm.run(["sinfo", "-h", "-N", "-n", node, "-o", "%E"]).stdout.strip()


def records(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]


def decisions(tmp_path: Path) -> list[tuple[str, str]]:
    return [(r["decision"], r.get("node", "")) for r in records(tmp_path) if r["phase"] == "decision"]


def every_intent_has_an_outcome(tmp_path: Path) -> None:
    found = records(tmp_path)
    intents = {r["id"] for r in found if r["phase"] == "intent"}
    outcomes = {r["id"] for r in found if r["phase"] == "outcome"}
    assert intents == outcomes


@pytest.mark.parametrize(
    ("limits", "tripped"),
    [
        ("  max_partition_pct: 50\n  max_drains_per_hour: 10\n", "would make 3 of partition"),
        ("  max_partition_pct: 100\n  max_drains_per_hour: 2\n", "2 drains in the last hour, the limit is 2"),
    ],
    ids=["partition-limit", "hourly-limit"],
)
async def test_the_policy_drains_within_its_limits_and_leaves_other_drains_alone(
    slurm: RealSlurm, tmp_path: Path, limits: str, tripped: str
) -> None:
    nodes = slurm.nodes
    async with (
        receiver() as hook,
        run_fleet(nodes=FLEET_NODES, port=0, state_dir=tmp_path / "fleet") as fleet,
    ):
        for player in PLAYERS:
            fleet.faults.set(player, Fault.FALLEN_OFF_BUS)
        # someone's drain, before gputop: its node has the fault too
        slurm.run(["scontrol", "update", f"NodeName={nodes[3]}", "State=DRAIN", "Reason=fan swap, ticket 88"])
        policy = f"  dry_run: false\n{limits}  webhook_url: {hook.url}\n"
        config = write_config(tmp_path, fleet, slurm, policy)
        watch = await start_watch(config, tmp_path, slurm)
        try:
            await until(lambda: watch.said(" breaker node"), "the breaker to open", watch)
            await until(lambda: len(hook.bodies) >= 4, "four webhook posts", watch)
        finally:
            status = await watch.stop()
    assert status == 128 + signal.SIGTERM
    assert watch.lines[-1].endswith("stopped by SIGTERM")
    # which two of the three are drained depends on whose data came first; the third opened the breaker
    states = slurm.node_states()
    drained = [n for n in nodes[:3] if states[n] == "drained"]
    (spared,) = [n for n in nodes[:3] if n not in drained]
    assert (len(drained), states[spared], states[nodes[3]]) == (2, "idle", "drained")
    for node in drained:
        # the evidence seen first: GPU7 gone from the metrics, or its Xid 79 in the kernel log
        reason = reason_of(slurm, node)
        assert reason.startswith(("gputop: GPU7 missing: ", "gputop: Xid 79: GPU has fallen off the bus at "))
        assert f"reboot {node}" in reason
    assert reason_of(slurm, nodes[3]) == "fan swap, ticket 88"
    made = [d for d in decisions(tmp_path) if d[1]]
    expected = {("drain", drained[0]), ("drain", drained[1]), ("breaker", spared), ("skip", nodes[3])}
    assert len(made) == 4 and set(made) == expected
    every_intent_has_an_outcome(tmp_path)
    assert [r["result"] for r in records(tmp_path) if r["phase"] == "outcome"] == ["done", "done"]
    posted = {(b["decision"]["decision"], b["decision"]["node"]) for b in hook.bodies}
    assert posted == expected
    skip = next(b for b in hook.bodies if b["decision"]["node"] == nodes[3])
    assert (
        skip["decision"]["why"]
        == "already drained by root: fan swap, ticket 88; not the policy's: left alone"
    )
    drain = next(b for b in hook.bodies if b["decision"]["node"] == drained[0])
    assert drain["outcome"]["result"] == "done" and drain["cluster"] == "real"
    state = json.loads((tmp_path / "policy.json").read_text())
    assert sorted(d["node"] for d in state["own_drains"]) == drained
    assert tripped in state["breaker"]["why"]

    # a person resets the breaker; no policy runs, so it is reset in the file, and recorded
    reset = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gputop", "watch", "--config", str(config), "--reset-breaker",
        stdout=asyncio.subprocess.PIPE, cwd=REPO_ROOT,
        env={**os.environ, **slurm.env, "XDG_STATE_HOME": str(tmp_path / "state")},
    )  # fmt: skip
    out, _ = await reset.communicate()
    assert reset.returncode == 0, out
    assert out.decode().startswith("circuit breaker reset by ")
    assert json.loads((tmp_path / "policy.json").read_text())["breaker"] is None
    assert records(tmp_path)[-1]["decision"] == "breaker-reset"


async def test_its_drain_is_resumed_once_the_node_is_clear_and_alertmanager_hears_both(
    slurm: RealSlurm, tmp_path: Path
) -> None:
    node = slurm.nodes[0]
    async with (
        receiver() as hook,
        run_fleet(nodes=FLEET_NODES, port=0, state_dir=tmp_path / "fleet") as fleet,
    ):
        fleet.faults.set(PLAYERS[0], Fault.FALLEN_OFF_BUS)
        policy = (
            "  dry_run: false\n  max_partition_pct: 50\n  resume_after_clear_min: 0.05\n"
            f"  webhook_url: {hook.url}\n  webhook_format: alertmanager\n"
        )
        watch = await start_watch(write_config(tmp_path, fleet, slurm, policy), tmp_path, slurm)
        try:
            await until(lambda: slurm.node_state(node) == "drained", "the drain", watch)
            fleet.faults.clear(PLAYERS[0])  # the node is mended: the GPU is back, its log clean
            await until(lambda: watch.said(f"resume {node}"), "the resume", watch)
            await until(lambda: slurm.node_state(node) == "idle", "the node idle again", watch)
            await until(lambda: len(hook.bodies) >= 2, "two webhook posts", watch)
        finally:
            await watch.stop()
    firing, resolved = hook.bodies[0], hook.bodies[1]
    assert (firing["version"], firing["status"], resolved["status"]) == ("4", "firing", "resolved")
    (alert,) = firing["alerts"]
    assert alert["labels"] | {"alertname": "", "cause": ""} == {
        "alertname": "",
        "cluster": "real",
        "node": node,
        "decision": "drain",
        "cause": "",
        "dry_run": "false",
        "severity": "crit",
    }
    assert alert["annotations"]["reason"].startswith("gputop: ")
    assert resolved["alerts"][0]["labels"]["decision"] == "resume"
    assert decisions(tmp_path)[1:3] == [("drain", node), ("resume", node)]
    every_intent_has_an_outcome(tmp_path)


async def test_sigterm_in_the_middle_of_a_drain_leaves_the_records_and_slurm_consistent(
    slurm: RealSlurm, tmp_path: Path
) -> None:
    node = slurm.nodes[0]
    # an scontrol that takes its time over an update, and says when it started
    slow = tmp_path / "slow-bin"
    slow.mkdir()
    started = tmp_path / "update-started"
    real = slurm.run(["sh", "-c", "command -v scontrol"]).stdout.strip()
    (slow / "scontrol").write_text(
        f'#!/bin/sh\nif [ "$1" = update ]; then touch {started}; sleep 10; fi\nexec {real} "$@"\n'
    )
    (slow / "scontrol").chmod(0o755)
    async with run_fleet(nodes=FLEET_NODES, port=0, state_dir=tmp_path / "fleet") as fleet:
        fleet.faults.set(PLAYERS[0], Fault.FALLEN_OFF_BUS)
        config = write_config(tmp_path, fleet, slurm, "  dry_run: false\n  max_partition_pct: 50\n")
        watch = await start_watch(config, tmp_path, slurm, path_first=slow)
        try:
            await until(started.exists, "scontrol update to start", watch)
        finally:
            status = await watch.stop()
        assert status == 128 + signal.SIGTERM
        # the drain's intent has its outcome: unknown, because gputop stopped while scontrol ran
        (outcome,) = [r for r in records(tmp_path) if r["phase"] == "outcome"]
        assert (outcome["result"], outcome["why"]) == ("unknown", "gputop was stopped while the command ran")
        every_intent_has_an_outcome(tmp_path)
        (own,) = json.loads((tmp_path / "policy.json").read_text())["own_drains"]
        assert (own["node"], own["confirmed"]) == (node, False)
        assert slurm.node_state(node) == "idle"  # scontrol was killed before it acted

        # started again (without the slow scontrol): the unconfirmed drain is settled by what Slurm shows
        again = await start_watch(config, tmp_path, slurm)
        try:
            await until(lambda: slurm.node_state(node) == "drained", "the drain, made this time", again)
            await until(lambda: again.said(f"drain {node}"), "the drain said", again)
        finally:
            await again.stop()
    assert again.said(f"release {node}: the drain whose outcome was never recorded was not made")
    every_intent_has_an_outcome(tmp_path)
    (own,) = json.loads((tmp_path / "policy.json").read_text())["own_drains"]
    assert (own["node"], own["confirmed"]) == (node, True)
    assert reason_of(slurm, node).startswith("gputop: ")
