"""Interconnect deviations benchmark: the tracker on every tick, and comparing a whole fleet from scratch.

    python bench/bench_interconnect.py [--nodes 1000] [--runs 15]

A synthetic fleet shaped as the SSH source hands it over (no simulator or SSH, so only the code under test
is timed): 1,000 DGX H100-like nodes, 8 GPUs each, one topology object shared by all (the parse cache
shares equal outputs), an NVLink status and an IB port tuple of its own per node (their outputs name the
node's UUIDs and GUIDs), a few nodes with a degraded NVLink, a slow port or a port down. Each tick brings
new GPU samples and the same fact objects. Every figure is the median (and the slowest) of ``--runs``
runs from this one process.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_report import Row, cpu_model, print_table

from gputop.core.facts import NodeFacts, Reading
from gputop.core.interconnect_deviations import InterconnectTracker, fleet_interconnect
from gputop.core.models import GpuSample, IbPort, NodeSample, Reachability
from gputop.core.parsers.nvlink import NvlinkStatus
from gputop.core.parsers.topo import Topology, parse_topo
from gputop.sim.fake_fleet.topology import topology_text
from gputop.sim.hgx_board import board_nvlinks, board_topology

GPUS_PER_NODE = 8
NICS = tuple(f"mlx5_{k}" for k in range(8))
MODEL = "NVIDIA H100 80GB HBM3"
TICK_TARGET_MS = 5.0
FULL_TARGET_MS = 300.0
FAULTY_EVERY = 97  # one node in about a hundred has a fault

_D = TypeVar("_D")


@dataclasses.dataclass
class Fleet:
    names: tuple[str, ...]
    facts: list[NodeFacts]
    ports: list[tuple[IbPort, ...]]
    parsed_topologies: list[Topology]  # equal values, an object each, as parsed without a parse cache

    def tick(self, n: int, *, own_topologies: bool = False) -> list[NodeSample]:
        """Node samples of tick ``n``: new GPU samples and the fleet's fact objects; with
        ``own_topologies``, each node's topology is its own parsed object."""
        nodes = []
        for i, name in enumerate(self.names):
            gpus = tuple(_gpu(k, float(n % 100)) for k in range(GPUS_PER_NODE))
            facts = self.facts[i]
            if own_topologies:
                facts = dataclasses.replace(facts, topology=Reading(self.parsed_topologies[i], 0.0))
            nodes.append(
                NodeSample(
                    name, Reachability.OK, float(n), gpus, GPUS_PER_NODE, ib_ports=self.ports[i], facts=facts
                )
            )
        return nodes


def _gpu(index: int, util: float) -> GpuSample:
    return GpuSample(index, f"GPU-{index}", MODEL, None, util, None, 1000.0, 81559.0, 50.0, 300.0, 700.0,
                     None, None, 0, False)  # fmt: skip


def build_fleet(nodes: int) -> Fleet:
    topology = board_topology(range(GPUS_PER_NODE), GPUS_PER_NODE, NICS, 18)
    names = tuple(f"gpu{i + 1:04d}" for i in range(nodes))
    facts: list[NodeFacts] = []
    ports: list[tuple[IbPort, ...]] = []
    for i in range(nodes):
        fault = (i // FAULTY_EVERY) % 3 if i % FAULTY_EVERY == FAULTY_EVERY - 1 else None
        gpus = [(k, MODEL, f"GPU-{i:04d}-{k}") for k in range(GPUS_PER_NODE)]
        inactive = [(5, k) for k in range(6)] if fault == 0 else []
        nvlink = board_nvlinks(gpus, 18, 26.562, inactive)
        facts.append(NodeFacts(topology=Reading(topology, 0.0), nvlink=Reading(nvlink, 0.0)))
        node_ports = [IbPort(nic, 1, "Active", "LinkUp", 400.0) for nic in NICS]
        if fault == 1:
            node_ports[3] = IbPort("mlx5_3", 1, "Active", "LinkUp", 200.0)
        elif fault == 2:
            node_ports[1] = IbPort("mlx5_1", 1, "Down", "Disabled", None)
        ports.append(tuple(node_ports))
    text = topology_text(topology)
    parsed = [parse_topo(text) for _ in range(nodes)]
    return Fleet(names, facts, ports, [t for t in parsed if isinstance(t, Topology)])


def _reparsed(values: tuple[_D, ...]) -> tuple[_D, ...]:
    """Equal values in new objects, as parsing the same text again gives."""
    return tuple(dataclasses.replace(value) for value in values)  # type: ignore[type-var]


def _nvlink_reparsed(node: NodeSample) -> NodeSample:
    status = node.facts.nvlink.value
    assert isinstance(status, NvlinkStatus)
    return dataclasses.replace(
        node,
        facts=dataclasses.replace(
            node.facts, nvlink=Reading(dataclasses.replace(status, gpus=_reparsed(status.gpus)), 0.0)
        ),
    )


def _timed(fn: Callable[[list[NodeSample]], object], nodes: list[NodeSample]) -> float:
    started = time.perf_counter()
    fn(nodes)
    return (time.perf_counter() - started) * 1000.0


def measure(fleet: Fleet, runs: int) -> tuple[dict[str, list[float]], int]:
    samples: dict[str, list[float]] = {}

    def note(name: str, fn: Callable[[list[NodeSample]], object], nodes: list[NodeSample]) -> None:
        samples.setdefault(name, []).append(_timed(fn, nodes))

    tracker = InterconnectTracker()
    deviations = len(tracker.update(fleet.tick(0)).deviations)
    gc.collect()
    gc.disable()
    try:
        for run in range(1, runs + 1):
            settle, same, reread, down = (fleet.tick(run * 10 + k) for k in range(4))
            own = fleet.tick(run, own_topologies=True)
            tracker.update(settle)  # undoes the last run's port down and NVLink re-read, untimed
            note("tick, facts unchanged", tracker.update, same)
            # One node's ibstat parsed again: equal ports, new objects.
            reread[7] = dataclasses.replace(reread[7], ib_ports=_reparsed(reread[7].ib_ports))
            note("tick, one node's ports re-read, equal", tracker.update, reread)
            # One node's port goes down: its peer group is counted again.
            ports = (IbPort("mlx5_0", 1, "Down", "Disabled", None), *down[11].ib_ports[1:])
            down[11] = dataclasses.replace(down[11], ib_ports=ports)
            note("tick, one node's port goes down", tracker.update, down)
            # Every node's nvlink -s parsed again at once: the worst case (slow facts spread over a minute).
            note(
                "tick, every node's NVLink re-read, equal",
                tracker.update,
                [_nvlink_reparsed(n) for n in down],
            )
            note("full recompute, shared topology", fleet_interconnect, same)
            note("full recompute, a topology object per node", fleet_interconnect, own)
            gc.enable()
            gc.collect()
            gc.disable()
    finally:
        gc.enable()
    return samples, deviations


def rows(samples: dict[str, list[float]]) -> Sequence[Row]:
    targets = {
        "tick, facts unchanged": TICK_TARGET_MS,
        "full recompute, a topology object per node": FULL_TARGET_MS,
    }
    return [
        Row(name, statistics.median(values), "ms", targets.get(name), note=f"max {max(values):.2f} ms")
        for name, values in samples.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print(f"CPU: {cpu_model()}; Python {platform.python_version()}")
    fleet = build_fleet(args.nodes)
    samples, deviations = measure(fleet, args.runs)
    print(
        f"{args.nodes} nodes x {GPUS_PER_NODE} GPUs, 8 NICs, {deviations} nodes deviating, "
        f"median of {args.runs} runs (max in the note)\n"
    )
    print_table(list(rows(samples)), {"ms": "{:.2f} ms"})


if __name__ == "__main__":
    main()
