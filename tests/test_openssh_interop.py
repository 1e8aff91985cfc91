"""The SSH source against a real OpenSSH sshd on loopback, configured the way a user configures gputop.

The nodes' tools are gputop's fake ones (gputop.sources.fake_fleet.tool) behind real sshd sessions, so
what is tested is the part the in-process fleet cannot show: OpenSSH's protocol, its host keys and
known_hosts lines, an ssh_config read by asyncssh, and commands run by a real shell.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

import asyncssh

from gputop.config_file import load_config
from gputop.core.models import NodeSample, Reachability
from gputop.core.nodeset import fold_nodes
from gputop.sources.ssh import SshSource
from tests.infra.sshd import RealSshd, real_sshd  # noqa: F401 - the fixture, registered by importing it

UUID_QUERY = ("nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader,nounits")


def write_config(directory: Path, sshd: RealSshd, known_hosts: Path) -> Path:
    """A gputop config file for the loopback nodes, as a user would write one."""

    def q(path: Path) -> str:
        return json.dumps(str(path))  # a JSON string is a valid double-quoted YAML scalar

    path = directory / "gputop.yaml"
    path.write_text(
        "poll:\n"
        "  interval_s: 0.2\n"
        "  slow_facts_interval_s: 2\n"
        "  backoff_initial_s: 0.2\n"
        "  backoff_max_s: 1\n"
        "clusters:\n"
        "  - name: loopback\n"
        f"    nodes: {fold_nodes(sshd.nodes)}\n"
        "    gpus_per_node: 8\n"
        "    ssh:\n"
        f"      config_file: {q(sshd.ssh_config)}\n"
        f"      known_hosts: {q(known_hosts)}\n"
        "      verify_host_keys: true\n"
        "      connect_timeout_s: 5\n"
        "    slurm:\n"
        "      enabled: false\n",
        encoding="utf-8",
    )
    return path


def source_for(config_path: Path) -> SshSource:
    config = load_config(config_path)
    return SshSource(config.clusters[0], config.poll, time.time)


async def wait_for(
    source: SshSource, check: Callable[[dict[str, NodeSample]], bool], timeout_s: float = 20.0
) -> dict[str, NodeSample]:
    deadline = time.monotonic() + timeout_s
    nodes: dict[str, NodeSample] = {}
    while time.monotonic() < deadline:
        nodes = {n.name: n for n in (await source.collect(time.time())).nodes}
        if check(nodes):
            return nodes
        await asyncio.sleep(0.05)
    details = {
        name: (n.reachability.value, n.error, len(n.gpus), sorted(n.facts), n.fact_errors)
        for name, n in nodes.items()
    }
    raise AssertionError(f"condition not met in {timeout_s}s: {details}")


def uuids_on(sshd: RealSshd, node: str) -> set[str]:
    result = sshd.tool(node, *UUID_QUERY)
    assert result.returncode == 0, result.stderr
    return set(result.stdout.split())


def test_the_tool_is_deterministic_for_a_seed(real_sshd: RealSshd) -> None:  # noqa: F811
    first = real_sshd.tool("node01", "nvidia-smi", "topo", "-m")
    again = real_sshd.tool("node01", "nvidia-smi", "topo", "-m")
    assert first.returncode == 0 and first.stdout == again.stdout and "GPU0" in first.stdout
    assert uuids_on(real_sshd, "node01") == uuids_on(real_sshd, "node01")
    assert uuids_on(real_sshd, "node01") != uuids_on(real_sshd, "node02")


async def test_every_node_streams_its_gpus_and_slow_facts_over_openssh(
    real_sshd: RealSshd,  # noqa: F811
    tmp_path: Path,
) -> None:
    source = source_for(write_config(tmp_path, real_sshd, real_sshd.known_hosts))
    assert source.settings.known_hosts == str(real_sshd.known_hosts)
    await source.start()
    try:
        names = real_sshd.nodes
        await wait_for(source, lambda ns: all(ns[n].gpus for n in names))
        source.refresh()  # the slow facts now, instead of after their spread-out first delay
        nodes = await wait_for(
            source, lambda ns: all(ns[n].ib_ports and "topology" in ns[n].facts for n in names)
        )
        for name in names:
            node = nodes[name]
            assert node.reachability is Reachability.OK, (name, node.error)
            assert node.error is None, (name, node.error)
            assert {g.uuid for g in node.gpus} == uuids_on(real_sshd, name)
            assert len(node.gpus) == 8 and node.expected_gpu_count == 8
            assert all(p.is_up for p in node.ib_ports)
        # fresh samples keep coming on the one stream per node
        stamps = {n: nodes[n].sampled_at_s or 0.0 for n in names}
        await wait_for(source, lambda ns: all((ns[n].sampled_at_s or 0) > stamps[n] for n in names), 5)
    finally:
        await source.close()


async def test_a_wrong_host_key_and_a_broken_driver_are_named_while_the_others_stream(
    real_sshd: RealSshd,  # noqa: F811
    tmp_path: Path,
) -> None:
    impostor, broken = real_sshd.nodes[1], real_sshd.nodes[2]
    healthy = [n for n in real_sshd.nodes if n not in (impostor, broken)]
    other_key = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text(
        "".join(real_sshd.known_hosts_line(n, other_key if n == impostor else None) for n in real_sshd.nodes),
        encoding="utf-8",
    )
    real_sshd.set_faults(broken, "driver_error")
    try:
        on_node = real_sshd.tool(broken, "nvidia-smi", "-L")
        assert on_node.returncode == 15
        assert on_node.stdout.startswith("Unable to determine the device handle for GPU")

        source = source_for(write_config(tmp_path, real_sshd, known_hosts))
        await source.start()
        try:
            nodes = await wait_for(
                source,
                lambda ns: (
                    all(ns[n].gpus for n in healthy)
                    and "host key not verifiable" in (ns[impostor].error or "")
                    and "lost" in (ns[broken].error or "")
                ),
            )
            assert nodes[impostor].reachability is Reachability.DOWN
            assert nodes[impostor].gpus == ()
            assert nodes[broken].gpus == ()
            assert "unable to determine the device handle" in (nodes[broken].error or "")
            for name in healthy:
                assert nodes[name].error is None and {g.uuid for g in nodes[name].gpus} == uuids_on(
                    real_sshd, name
                )
            # the healthy nodes keep updating meanwhile
            stamps = {n: nodes[n].sampled_at_s or 0.0 for n in healthy}
            await wait_for(source, lambda ns: all((ns[n].sampled_at_s or 0) > stamps[n] for n in healthy), 5)
        finally:
            await source.close()
    finally:
        real_sshd.clear_faults()
