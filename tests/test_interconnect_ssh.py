"""Interconnect faults end to end: the fake fleet prints the simulator's topology, NVLink and IB facts in the
real tools' formats, the SSH source collects and parses them, and comparing peers finds the faulty nodes."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from gputop.config_file import load_config
from gputop.core.interconnect_deviations import fleet_interconnect
from gputop.core.models import NodeSample
from gputop.core.parsers.nvlink import NvlinkStatus
from gputop.core.parsers.topo import Topology
from gputop.sim.fake_fleet import Fleet, run_fleet
from gputop.sources.ssh import SshSource

NODES = 16  # the fewest that hold the interconnect incidents besides the others


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    async with run_fleet(nodes=NODES, port=0, state_dir=tmp_path / "fleet") as running:
        yield running


def incident(fleet: Fleet, kind: str) -> str:
    return next(i.node for i in fleet.cluster.incidents if i.kind == kind)


def has_facts(node: NodeSample) -> bool:
    return bool(
        node.gpus
        and node.ib_ports
        and node.facts.topology.value is not None
        and node.facts.nvlink.value is not None
    )


async def collect_facts(fleet: Fleet, timeout_s: float = 20.0) -> dict[str, NodeSample]:
    """Every answering node once its topology, NVLink and IB facts are in."""
    config = load_config(fleet.config_path)
    # Slow facts every 2 s, so `topo -m` (five times that) first runs within the first 5 s.
    poll = dataclasses.replace(config.poll, interval_s=0.2, slow_facts_interval_s=2.0)
    source = SshSource(config.clusters[0], poll, time.time)
    answering = [n for n in fleet.node_names if n not in fleet.unresponsive_nodes]
    await source.start()
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            nodes = {n.name: n for n in (await source.collect(time.time())).nodes}
            if all(has_facts(nodes[name]) for name in answering):
                return nodes
            assert time.monotonic() < deadline, {n: has_facts(nodes[n]) for n in answering}
            await asyncio.sleep(0.1)
    finally:
        await source.close()


async def test_faulty_interconnect_shows_as_deviations_over_ssh(fleet: Fleet) -> None:
    nodes = await collect_facts(fleet)
    found = fleet_interconnect(nodes.values())
    nvlink, slow, down = (incident(fleet, k) for k in ("nvlink_degraded", "ib_slow", "ib_down"))
    assert {name: [d.message for d in devs] for name, devs in found.deviations.items()} == {
        nvlink: ["GPU5 has 12 of 18 NVLinks active"],
        slow: ["mlx5_3 at 200 Gb/s, peers at 400"],
        down: ["mlx5_3 port 1 Down"],
    }
    assert found.of(nvlink)[0].gpu_index == 5 and found.of(slow)[0].device == "mlx5_3"

    # What the SSH source parsed is what the simulator holds, value for value.
    truth = {n.name: n for n in fleet.cluster.result().nodes}
    for name in (nvlink, incident(fleet, "missing_gpu"), "gpu001"):
        for fact, kind in (("topology", Topology), ("nvlink", NvlinkStatus)):
            parsed = getattr(nodes[name].facts, fact).value
            assert isinstance(parsed, kind) and parsed == getattr(truth[name].facts, fact).value, (name, fact)
