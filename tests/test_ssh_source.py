"""The SSH source against the fake node fleet: real SSH, real host-key checks, real faults."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from gputop.config_file import load_config
from gputop.core.config import ClusterConfig, Config, PollConfig
from gputop.core.models import NodeSample, Reachability
from gputop.core.parsers.compute_apps import ComputeAppsResult, parse_compute_apps
from gputop.sim.fake_fleet import Fault, Fleet, run_fleet
from gputop.sources.commands import default_commands
from gputop.sources.parse_cache import ParseCache
from gputop.sources.ssh import SshSource, link_settings
from gputop.sources.ssh_node import NodeLink

NODES = 8  # one node per simulator incident


def fast(config: Config) -> Config:
    poll = dataclasses.replace(
        config.poll, interval_s=0.2, backoff_initial_s=0.2, backoff_max_s=1.0, slow_facts_interval_s=2.0
    )
    return dataclasses.replace(config, poll=poll)


def cluster_of(config: Config, **ssh_changes: object) -> ClusterConfig:
    cluster = config.clusters[0]
    if ssh_changes:
        cluster = dataclasses.replace(cluster, ssh=dataclasses.replace(cluster.ssh, **ssh_changes))
    return cluster


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    async with run_fleet(nodes=NODES, port=0, state_dir=tmp_path / "fleet") as running:
        yield running


async def wait_for(
    source: SshSource, check: Callable[[dict[str, NodeSample]], bool], timeout_s: float = 15.0
) -> dict[str, NodeSample]:
    deadline = time.monotonic() + timeout_s
    nodes: dict[str, NodeSample] = {}
    while time.monotonic() < deadline:
        result = await source.collect(time.time())
        nodes = {n.name: n for n in result.nodes}
        if check(nodes):
            return nodes
        await asyncio.sleep(0.05)
    details = {name: (n.reachability.value, n.error, len(n.gpus)) for name, n in nodes.items()}
    raise AssertionError(f"condition not met in {timeout_s}s: {details}")


@contextlib.asynccontextmanager
async def started(source: SshSource) -> AsyncIterator[SshSource]:
    """``source`` started, and closed however the test ends."""
    await source.start()
    try:
        yield source
    finally:
        await source.close()


def offline_link() -> NodeLink:
    """A link that is never started: for what it makes of the outputs and samples it is handed."""
    cluster = ClusterConfig(name="c", node_names=("n1",))
    settings = link_settings(cluster, PollConfig())
    return NodeLink("n1", settings, default_commands(), time.time, asyncio.Semaphore(1))


SLOW_FACTS = frozenset(name for name, spec in default_commands().items() if not spec.stream)


class FactRuns(Mapping[str, int]):
    """Slow-fact runs by node from now on, as the fleet's nodes saw them."""

    def __init__(self, fleet: Fleet) -> None:
        self._served = fleet.served
        self._start = len(fleet.served)

    def _counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for served in list(self._served)[self._start :]:
            if served.what in SLOW_FACTS:
                counts[served.node] = counts.get(served.node, 0) + 1
        return counts

    def __getitem__(self, node: str) -> int:
        return self._counts()[node]

    def __iter__(self) -> Iterator[str]:
        return iter(self._counts())

    def __len__(self) -> int:
        return len(self._counts())


def count_fact_runs(fleet: Fleet) -> FactRuns:
    return FactRuns(fleet)


def answering(fleet: Fleet) -> list[str]:
    return [n for n in fleet.node_names if n not in fleet.unresponsive_nodes]


def incident(fleet: Fleet, kind: str) -> str:
    return next(i.node for i in fleet.cluster.incidents if i.kind == kind)


async def test_every_answering_node_streams_its_gpus_and_slow_facts(fleet: Fleet) -> None:
    config = fast(load_config(fleet.config_path))
    source = SshSource(cluster_of(config), config.poll, time.time)
    async with started(source):
        silent = fleet.unresponsive_nodes
        up = answering(fleet)
        nodes = await wait_for(
            source,
            lambda ns: all(
                ns[n].gpus and ns[n].ib_ports and ns[n].facts.topology.value is not None for n in up
            ),
        )
        truth = {n.name: n for n in fleet.cluster.result().nodes}
        for name in up:
            node = nodes[name]
            assert node.error is None, (name, node.error)
            assert {g.uuid for g in node.gpus} == {g.uuid for g in truth[name].gpus}
            assert len(node.ib_ports) == len(truth[name].ib_ports)
            assert node.expected_gpu_count == 8
        missing = incident(fleet, "missing_gpu")
        assert missing in up
        if missing in up:
            assert len(nodes[missing].gpus) == 7 and nodes[missing].missing_gpu_count == 1
        for name in silent:
            assert nodes[name].reachability is Reachability.DOWN
            assert nodes[name].gpus == ()


async def test_refused_key_and_unknown_host_key_are_named_and_not_retried_in_a_loop(
    fleet: Fleet, tmp_path: Path
) -> None:
    config = fast(load_config(fleet.config_path))
    victim = answering(fleet)[0]
    fleet.faults.set(victim, Fault.REFUSE_AUTH)
    source = SshSource(cluster_of(config), config.poll, time.time)
    async with started(source):
        nodes = await wait_for(
            source, lambda ns: bool(ns[victim].error and "authentication" in ns[victim].error)
        )
        assert nodes[victim].reachability is Reachability.DOWN
        link = source.links[victim]
        version = link.version
        await asyncio.sleep(1.0)  # several backoff periods: a refused key must not be retried meanwhile
        assert link.version == version
        # a refresh does retry, and once the key is accepted the node comes up
        fleet.faults.clear(victim)
        source.refresh()
        await wait_for(source, lambda ns: bool(ns[victim].gpus))

    # Straight to the fleet's address with a known_hosts that does not know it: refused, and said so.
    empty_known_hosts = tmp_path / "empty_known_hosts"
    empty_known_hosts.write_text("")
    strict = dataclasses.replace(
        cluster_of(
            config,
            user=victim,
            port=fleet.port,
            identity_files=(str(fleet.client_key_path),),
            config_file=str(tmp_path / "no_ssh_config"),
            known_hosts=str(empty_known_hosts),
        ),
        node_names=("127.0.0.1",),
    )
    source = SshSource(strict, config.poll, time.time)
    async with started(source):
        nodes = await wait_for(source, lambda ns: "host key" in (ns["127.0.0.1"].error or ""))
        assert "host key not verifiable" in (nodes["127.0.0.1"].error or "")
        assert nodes["127.0.0.1"].reachability is Reachability.DOWN


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        (Fault.DRIVER_ERROR, "lost"),
        (Fault.NO_NVIDIA_SMI, "not installed"),
        (Fault.GARBAGE, "unreadable"),
        (Fault.STALL_HANDSHAKE, "timeout"),
    ],
)
async def test_a_failing_node_says_why_while_the_others_keep_updating(
    fleet: Fleet, fault: Fault, words: str
) -> None:
    config = fast(load_config(fleet.config_path))
    cluster = cluster_of(config, connect_timeout_s=1.0)
    victim = answering(fleet)[1]
    healthy = [n for n in fleet.node_names if n != victim and n not in fleet.unresponsive_nodes]
    fleet.faults.set(victim, fault)
    source = SshSource(cluster, config.poll, time.time)
    async with started(source):
        await wait_for(source, lambda ns: all(ns[n].gpus for n in healthy))
        nodes = await wait_for(source, lambda ns: words in (ns[victim].error or ""))
        assert nodes[victim].gpus == () or nodes[victim].reachability is Reachability.OK
        # the others keep producing fresh samples meanwhile
        before = {n: nodes[n].sampled_at_s for n in healthy}
        later = await wait_for(
            source, lambda ns: all((ns[n].sampled_at_s or 0) > (before[n] or 0) for n in healthy), timeout_s=5
        )
        assert all(later[n].error is None for n in healthy)


async def test_a_stream_that_dies_reconnects_with_backoff(fleet: Fleet) -> None:
    config = fast(load_config(fleet.config_path))
    victim = answering(fleet)[2]
    source = SshSource(cluster_of(config), config.poll, time.time)
    async with started(source):
        await wait_for(source, lambda ns: bool(ns[victim].gpus))
        fleet.faults.set(victim, Fault.DIE_MIDSTREAM)
        cut = await wait_for(source, lambda ns: ns[victim].error not in (None, "connecting"))
        assert "metrics stream cut off" in (cut[victim].error or ""), cut[victim].error
        fleet.faults.clear(victim)
        first = (await source.collect(time.time())).nodes
        stamp = next(n for n in first if n.name == victim).sampled_at_s or 0
        nodes = await wait_for(
            source, lambda ns: (ns[victim].sampled_at_s or 0) > stamp and not ns[victim].error
        )
        assert nodes[victim].gpus


async def test_unchanged_nodes_keep_their_sample_object(fleet: Fleet) -> None:
    config = fast(load_config(fleet.config_path))
    source = SshSource(cluster_of(config), config.poll, time.time)
    async with started(source):
        await wait_for(source, lambda ns: any(n.gpus for n in ns.values()))
        first = await source.collect(time.time())
        second = await source.collect(time.time())
        assert all(a is b for a, b in zip(first.nodes, second.nodes, strict=True))


async def test_processes_are_not_asked_again_while_gpu_memory_stays_put(fleet: Fleet) -> None:
    config = fast(load_config(fleet.config_path))
    source = SshSource(cluster_of(config), config.poll, time.time)
    spec = source.commands["processes"]
    assert spec.quiet_every_s is not None and spec.quiet_every_s > spec.interval_s
    # Every 0.1 s, skipped unless memory moved, at least every 10 s.
    source.commands["processes"] = dataclasses.replace(spec, interval_s=0.1, quiet_every_s=10.0)
    for name in list(source.commands):
        if name not in ("metrics", "processes"):
            del source.commands[name]
    async with started(source):
        runs = count_fact_runs(fleet)
        await wait_for(source, lambda nodes: all(nodes[n].gpus for n in answering(fleet)))
        await asyncio.sleep(2.0)
        # 2 s at 0.1 s would be 20 runs per node if each one ran; memory moves now and then in the
        # simulator, so some run again, but most ticks are skipped.
        assert runs, "the processes fact never ran"
        assert max(runs.values()) < 12, runs
        link = source.links[answering(fleet)[0]]
        before = runs.get(link.name, 0)
        link.refresh()  # a refresh asks again at once, whatever memory did
        for _ in range(30):  # at once, but a loaded test machine may take a moment to schedule it
            await asyncio.sleep(0.1)
            if runs.get(link.name, 0) > before:
                break
        assert runs.get(link.name, 0) > before


def test_the_stream_makes_the_processes_fact_due_once_gpu_memory_moves() -> None:
    from tests.test_parsers_metrics import stream_line

    link = offline_link()

    def publish(memory_used_mib: int) -> None:
        link.assembler.feed(f"{stream_line(memory__used=str(memory_used_mib))}\n".encode())
        assert link.assembler.flush()
        link._publish()

    publish(1000)
    watches = link._memory
    watches.watch("processes", link._memory_by_gpu(), link.now() - 10.0, 10.0)  # as after a run; look now
    publish(1000 + 64)  # moved less than MEM_MOVE_MIB: not due, and looked at again in 10 s
    assert not watches.moved
    memory_then, next_s, every_s = watches.watches["processes"]
    assert next_s > link.now() + 9 and every_s == 10.0 and watches.next_look_s == next_s
    publish(5000)  # moved, but not time to look yet
    assert not watches.moved
    watches.watch("processes", memory_then, link.now() - 10.0, 10.0)
    publish(5000)
    assert watches.moved == {"processes"} and "processes" not in watches.watches
    assert watches.take_moved() == {"processes"} and not watches.moved
    assert watches.next_look_s == float("inf")  # nothing left to look at: a publish compares one float


async def test_a_node_with_every_slow_fact_switched_off_still_streams(fleet: Fleet) -> None:
    config = fast(load_config(fleet.config_path))
    source = SshSource(cluster_of(config), config.poll, time.time)
    for name in [n for n, spec in source.commands.items() if not spec.stream]:
        del source.commands[name]
    async with started(source):
        names = answering(fleet)
        nodes = await wait_for(source, lambda ns: all(ns[n].gpus for n in names))
        assert all(not nodes[n].facts.heard for n in names)
        stamps = {n: nodes[n].sampled_at_s or 0.0 for n in names}
        await wait_for(source, lambda ns: all((ns[n].sampled_at_s or 0) > stamps[n] for n in names), 5)


async def test_a_node_that_prints_the_same_slow_fact_again_is_not_parsed_again(fleet: Fleet) -> None:
    """ibstat differs from node to node (GUIDs), so the shared cache cannot hold a large fleet's outputs:
    each node keeps its own last output and value."""
    config = fast(load_config(fleet.config_path))
    source = SshSource(cluster_of(config), config.poll, time.time)
    source.parse_cache = ParseCache(max_entries_per_kind=1)  # holds no fleet: every node's text misses it
    spec = source.commands["ibstat"]
    source.commands = {
        "metrics": source.commands["metrics"],
        "ibstat": dataclasses.replace(spec, interval_s=0.1),
    }
    async with started(source):
        runs_by_node = count_fact_runs(fleet)
        names = answering(fleet)
        first = await wait_for(source, lambda ns: all(ns[n].ib_ports for n in names))
        await asyncio.sleep(1.5)
        last = await wait_for(source, lambda ns: True)
        runs = sum(runs_by_node.values())
        assert runs >= 4 * len(names), runs
        assert source.parse_cache.misses <= len(names) + 2, (source.parse_cache.misses, runs)
        # the same parsed value, so the ports derived from it are not made again either
        assert all(last[n].ib_ports is first[n].ib_ports for n in names)


async def test_a_node_whose_nvidia_smi_has_not_printed_yet_says_it_is_connected_and_waiting(
    fleet: Fleet,
) -> None:
    config = fast(load_config(fleet.config_path))
    victim = answering(fleet)[3]
    fleet.faults.set(victim, Fault.STALL_COMMAND)  # connects, then nvidia-smi never prints
    source = SshSource(cluster_of(config), config.poll, time.time)
    async with started(source):
        nodes = await wait_for(source, lambda ns: ns[victim].error != "connecting")
        assert nodes[victim].error == "connected, waiting for nvidia-smi's first output"
        assert nodes[victim].reachability is Reachability.DOWN and not nodes[victim].gpus


async def test_each_gpu_sample_carries_the_processes_nvidia_smi_lists_for_its_uuid(fleet: Fleet) -> None:
    config = fast(load_config(fleet.config_path))
    source = SshSource(cluster_of(config), config.poll, time.time)
    async with started(source):
        nodes = await wait_for(source, lambda ns: any(g.processes for n in ns.values() for g in n.gpus))
        name = next(n for n, node in nodes.items() if any(g.processes for g in node.gpus))
        spec = source.commands["processes"]
        async with asyncssh.connect(
            name, config=[str(fleet.ssh_config_path)], known_hosts=str(fleet.known_hosts_path)
        ) as conn:
            listed = parse_compute_apps((await conn.run(spec.command_line, check=True)).stdout)
        assert isinstance(listed, ComputeAppsResult)
        expected: dict[str, set[int]] = {}
        for uuid, process in listed.processes:
            expected.setdefault(uuid, set()).add(process.pid)

        def shown(ns: dict[str, NodeSample]) -> dict[str, set[int]]:
            return {g.uuid: {p.pid for p in g.processes} for g in ns[name].gpus if g.processes}

        source.refresh()  # the processes fact runs again now: the samples catch up with the listing
        await wait_for(source, lambda ns: shown(ns) == expected, timeout_s=10)


async def test_a_refresh_that_lands_while_the_node_is_busy_is_taken_by_its_next_sleep(fleet: Fleet) -> None:
    """A refresh used to last one loop turn: a node whose slow facts were running at that moment never
    saw it. It now waits for the next sleep, which it cuts short, and only that one."""
    config = fast(load_config(fleet.config_path))
    source = SshSource(cluster_of(config), config.poll, time.time)
    settings = link_settings(cluster_of(config), config.poll)
    link = NodeLink(fleet.node_names[0], settings, source.commands, time.time, asyncio.Semaphore(1))
    link.refresh()
    await asyncio.sleep(0.05)  # busy elsewhere: a fact running, a connect
    assert await asyncio.wait_for(link._sleep_or_wake(30.0), 1.0) is True
    assert await link._sleep_or_wake(0.05) is False


def test_a_node_whose_processes_changed_after_its_gpus_were_read_shows_the_new_ones_at_once() -> None:
    from gputop.core.models import GpuProcess
    from gputop.sources.ssh import node_sample
    from tests.test_metrics_stream import line

    link = offline_link()
    gpu0, gpu1 = "GPU-00000000-0000-0000-0000-000000000000", "GPU-00000001-0000-0000-0000-000000000000"
    old = (GpuProcess(1, "old", 100.0),)
    link.processes_by_uuid = link.assembler.processes = {gpu0: old}
    link.assembler.feed(line(0))
    link.assembler.feed(line(1))
    assert link.assembler.flush()
    link._publish()
    read = node_sample(link, 2).gpus
    assert [g.processes for g in read] == [old, ()]
    assert read is link.gpus, "read with the node's processes: nothing to rebuild"

    new = (GpuProcess(2, "new", 200.0),)
    link.processes_by_uuid = {gpu1: new}  # the next processes fact, before the next interval's lines
    assert [g.processes for g in node_sample(link, 2).gpus] == [(), new]


def test_a_node_whose_processes_fact_never_ran_has_its_samples_used_as_read() -> None:
    from gputop.sources.ssh import node_sample
    from tests.test_metrics_stream import line

    link = offline_link()  # no processes fact has run (switched off, or failing)
    link.assembler.feed(line(0))
    link.assembler.feed(line(1))
    assert link.assembler.flush()
    link._publish()
    assert node_sample(link, 2).gpus is link.gpus, "read with the node's (empty) processes: no rebuild"


def test_samples_share_their_facts_until_a_fact_or_a_fact_error_changes() -> None:
    from gputop.sources.ssh import node_sample
    from tests.test_metrics_stream import line

    link = offline_link()
    commands = link.commands
    link._take_fact(commands["gpu_list"], b"GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n", b"", 0)
    first = node_sample(link, 1)
    link.assembler.feed(line(0))
    link.assembler.flush()
    link._publish()  # the metrics moved, the facts did not
    second = node_sample(link, 1)
    assert second.gpus != first.gpus
    assert second.facts is first.facts
    assert second.facts.gpu_list.value is not None
    link._fact_failed(commands["topology"], "nvidia-smi did not finish within 20s")
    third = node_sample(link, 1)
    assert third.facts.errors() == (("topology", "nvidia-smi did not finish within 20s"),)
    assert third.facts.gpu_list == first.facts.gpu_list and third.facts is not first.facts


class Rounds(Sequence[tuple[str, tuple[str, ...]]]):
    """(node, the facts in it, in order) for each round of slow facts from now on, as the fleet's nodes
    saw them (a round is the commands that came with one nonce in a node's fact shell)."""

    def __init__(self, fleet: Fleet) -> None:
        self._served = fleet.served
        self._start = len(fleet.served)

    def _rounds(self) -> list[tuple[str, tuple[str, ...]]]:
        by_round: dict[tuple[str, str], list[str]] = {}
        for served in list(self._served)[self._start :]:
            if served.round is not None:
                by_round.setdefault((served.node, served.round), []).append(served.what)
        return [(node, tuple(names)) for (node, _), names in by_round.items()]

    def __getitem__(self, index: Any) -> Any:
        return self._rounds()[index]

    def __len__(self) -> int:
        return len(self._rounds())


def count_rounds(fleet: Fleet) -> Rounds:
    return Rounds(fleet)


def served(fleet: Fleet, what: str, node: str | None = None) -> int:
    """How many times the fleet's nodes (or ``node``) were asked ``what`` so far."""
    return sum(1 for s in list(fleet.served) if s.what == what and node in (None, s.node))


async def test_a_nodes_slow_facts_due_together_run_in_one_round_of_its_fact_shell(fleet: Fleet) -> None:
    shells_before = served(fleet, "shell")
    config = fast(load_config(fleet.config_path))
    source = SshSource(cluster_of(config), config.poll, time.time)
    async with started(source):
        rounds = count_rounds(fleet)
        up = answering(fleet)
        await wait_for(source, lambda ns: all(ns[n].gpus for n in up))
        source.refresh()  # every fact is due at once
        nodes = await wait_for(
            source,
            lambda ns: all(
                ns[n].ib_ports
                and ns[n].facts.topology.value is not None
                and ns[n].facts.nvlink.value is not None
                for n in up
            ),
        )
        slow = {s.name for s in source.commands.values() if not s.stream}
        whole = [names for node, names in rounds if node == up[0] and set(names) == slow]
        assert whole, rounds[:5]
        # the commands that do not need nvidia-smi first: a wedged driver must not hold up the IB ports
        assert set(whole[0][:2]) == {"ibstat", "xid"}, whole[0]
        assert all(source.links[n]._scripts for n in up)
        assert not any(nodes[n].facts.errors() for n in up), {n: nodes[n].facts.errors() for n in up}
        # a connection's rounds all run in its one shell
        source.refresh()
        deadline = time.monotonic() + 10.0
        while any(sum(node == n for node, _ in rounds) < 2 for n in up) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert all(sum(node == n for node, _ in rounds) >= 2 for n in up), rounds
        assert served(fleet, "shell") - shells_before == len(up), "one fact shell per connection"


async def test_a_node_whose_shell_does_not_run_the_script_gets_its_facts_one_exec_each(fleet: Fleet) -> None:
    name = answering(fleet)[0]
    fleet.faults.set(name, Fault.NO_SHELL)  # "sh: 1: exec: not found", as a forced command might say
    config = fast(load_config(fleet.config_path))
    source = SshSource(cluster_of(config), config.poll, time.time)
    async with started(source):
        await wait_for(source, lambda ns: bool(ns[name].gpus))
        source.refresh()
        nodes = await wait_for(
            source, lambda ns: bool(ns[name].ib_ports) and ns[name].facts.topology.value is not None
        )
        assert not source.links[name]._scripts
        assert not nodes[name].facts.errors(), nodes[name].facts.errors()


async def test_a_sleep_without_a_refresh_runs_its_time_and_a_refresh_ends_one_that_waits_for_it() -> None:

    link = offline_link()
    slept_from = time.monotonic()
    assert await link._sleep_or_wake(0.2) is False
    assert time.monotonic() - slept_from >= 0.19
    forever = asyncio.create_task(link._sleep_or_wake(None))
    await asyncio.sleep(0.05)
    assert not forever.done()
    link.refresh()
    assert await asyncio.wait_for(forever, 1.0) is True
    assert link._sleep.waiter is None, "a sleep leaves nothing behind"


@pytest.mark.parametrize("fault", [Fault.NO_NVIDIA_SMI, Fault.DRIVER_ERROR])
async def test_a_node_whose_nvidia_smi_fails_keeps_its_connection_and_still_shows_its_ib_ports_and_xid_log(
    fleet: Fleet, fault: Fault
) -> None:
    """The IB ports and the Xid log are what say why a node's GPUs went away: they must not wait for a
    stream that cannot start."""
    config = fast(load_config(fleet.config_path))
    victim = answering(fleet)[1]
    fleet.faults.set(victim, fault)
    source = SshSource(cluster_of(config), config.poll, time.time)
    async with started(source):
        link = source.links[victim]
        await wait_for(source, lambda ns: link.connected)
        connects_before = served(fleet, "connect", victim)
        await wait_for(source, lambda ns: ns[victim].error not in (None, "connecting") and link.connected)
        source.refresh()  # the facts now, not after their spread-out first delay
        nodes = await wait_for(
            source, lambda ns: bool(ns[victim].ib_ports) and ns[victim].facts.xid.error is None
        )
        node = nodes[victim]
        assert node.reachability is Reachability.DOWN and node.gpus == ()
        assert ("not installed" if fault is Fault.NO_NVIDIA_SMI else "lost") in (node.error or ""), node.error
        connects = served(fleet, "connect", victim) - connects_before
        assert link.connected and connects == 0, "the stream restarts on the same connection"


async def test_the_first_round_of_facts_comes_within_the_shortest_cadence(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gputop.sources.ssh_node as ssh_node

    monkeypatch.setattr(ssh_node.random, "uniform", lambda low, high: high)  # the latest start it allows
    config = fast(load_config(fleet.config_path))
    source = SshSource(cluster_of(config), config.poll, time.time)
    for name, spec in list(source.commands.items()):
        if not spec.stream:
            source.commands[name] = dataclasses.replace(spec, interval_s=0.3)
    async with started(source):
        rounds = count_rounds(fleet)
        node = answering(fleet)[0]
        await wait_for(source, lambda ns: source.links[node].connected)
        connected_at = time.monotonic()
        while not any(n == node for n, _ in rounds) and time.monotonic() - connected_at < 4.0:
            await asyncio.sleep(0.02)
        assert any(n == node for n, _ in rounds), "no round within 4 s"
        assert time.monotonic() - connected_at < 2.0


@pytest.mark.parametrize("in_the_shell", [True, False], ids=["fact shell", "one exec each"])
async def test_a_fact_that_prints_without_end_is_cut_off_and_said(fleet: Fleet, in_the_shell: bool) -> None:
    """A node whose ibstat prints 17 MiB: gputop keeps at most 16 MiB of a command's output, stops it and
    says so, and the node's other facts and its stream go on."""
    config = fast(load_config(fleet.config_path))
    source = SshSource(cluster_of(config), config.poll, time.time)
    name = answering(fleet)[0]
    fleet.faults.set(name, Fault.FLOOD, *(() if in_the_shell else (Fault.NO_SHELL,)))
    async with started(source):
        nodes = await wait_for(source, lambda ns: ns[name].facts.ibstat.error is not None, 20)
        assert nodes[name].facts.ibstat.error == "ibstat printed more than 16 MiB: cut off"
        assert nodes[name].gpus and nodes[name].reachability is Reachability.OK
        fleet.faults.set(name, *(() if in_the_shell else (Fault.NO_SHELL,)))
        source.refresh()  # ibstat runs every 30 s: ask for it now
        await wait_for(source, lambda ns: bool(ns[name].ib_ports) and not ns[name].facts.errors(), 20)


async def test_a_stream_that_falls_silent_says_so_before_the_node_turns_stale(fleet: Fleet) -> None:
    config = fast(load_config(fleet.config_path))  # a line every 0.2 s: silent after 0.6 s
    source = SshSource(cluster_of(config), config.poll, time.time)
    name = answering(fleet)[0]
    async with started(source):
        await wait_for(source, lambda ns: bool(ns[name].gpus))
        fleet.faults.set(name, Fault.STALL_COMMAND)  # the stream stops printing; the connection stays
        nodes = await wait_for(source, lambda ns: "printed nothing since" in (ns[name].error or ""), 5)
        assert (nodes[name].error or "").endswith("UTC (the SSH connection is open)")
        assert nodes[name].reachability is Reachability.OK, "said before the node turns stale"


async def test_what_the_first_slow_facts_report_is_not_news_but_what_comes_later_is(fleet: Fleet) -> None:
    """The Xid log and IB ports are read seconds after a node's first metrics: the CRITs they bring were
    there before gputop started, and were announced as a burst of new CRITs at every start."""
    from gputop.clock import SystemClock
    from gputop.poller import Poller

    config = fast(load_config(fleet.config_path))
    source = SshSource(cluster_of(config), config.poll, time.time)
    poller = Poller(
        cluster="fleet",
        sources=[source],
        clock=SystemClock(),
        poll=config.poll,
        thresholds=config.thresholds,
        on_view=lambda view: None,
    )
    xid_node = incident(fleet, "ecc_xid")
    news: list[str] = []
    async with started(source):
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            view = await poller.tick()
            assert view.alerts is not None
            news += [f"{a.node}: {a.message}" for a in view.alerts.new_crit]
            if any(p.kind == "xid" for p in view.rows[xid_node].problems):
                break
            await asyncio.sleep(0.2)
        else:
            raise AssertionError("the Xid node's Xid never showed")
        assert not [n for n in news if "Xid" in n], news
        healthy = next(n for n in answering(fleet) if n != xid_node)
        # the fault must come after gputop has heard the node in full (its first facts read): on a
        # loaded machine those can take longer than the Xid node's did
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            view = await poller.tick()
            news += [f"{a.node}: {a.message}" for a in view.alerts.new_crit] if view.alerts else []
            sample = next(n for n in (await source.collect(time.time())).nodes if n.name == healthy)
            if sample.facts.heard:
                break
            await asyncio.sleep(0.2)
        fleet.faults.set(healthy, Fault.FALLEN_OFF_BUS)
        source.refresh()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            view = await poller.tick()
            assert view.alerts is not None
            news += [f"{a.node}: {a.message}" for a in view.alerts.new_crit]
            if any(n.startswith(f"{healthy}: ") for n in news):
                break
            await asyncio.sleep(0.2)
        assert any(n.startswith(f"{healthy}: ") for n in news), f"what happens later is news: {news}"
