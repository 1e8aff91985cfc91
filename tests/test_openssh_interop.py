"""The SSH source against a real OpenSSH sshd on loopback, configured the way a user configures gputop.

The nodes' tools are gputop's fake ones (gputop.sim.fake_fleet.tool) behind real sshd sessions, so
what is tested is the part the in-process fleet cannot show: OpenSSH's protocol, its host keys and
known_hosts lines, an ssh_config read by asyncssh, and commands run by a real shell.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable, Sequence
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
        name: (n.reachability.value, n.error, len(n.gpus), n.facts.read(), dict(n.facts.errors()))
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
            source, lambda ns: all(ns[n].ib_ports and ns[n].facts.topology.value is not None for n in names)
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


async def test_a_missing_known_hosts_refuses_every_node_even_where_ssh_config_says_none(
    real_sshd: RealSshd,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Host key checking on, its file missing, and an ssh_config that turns checking off: asyncssh alone
    would connect without checking anything (a man in the middle accepted). gputop refuses, and says why."""
    lax = tmp_path / "ssh_config"
    lax.write_text(
        real_sshd.ssh_config.read_text(encoding="utf-8").replace(
            f"UserKnownHostsFile {real_sshd.known_hosts}", "UserKnownHostsFile none"
        )
        + "\nHost *\n  UserKnownHostsFile none\n  StrictHostKeyChecking no\n",
        encoding="utf-8",
    )
    config_path = write_config(tmp_path, real_sshd, tmp_path / "no-such-known_hosts")
    config_path.write_text(
        config_path.read_text(encoding="utf-8").replace(str(real_sshd.ssh_config), str(lax)), encoding="utf-8"
    )
    source = source_for(config_path)
    await source.start()
    try:
        nodes = await wait_for(
            source, lambda ns: all("cannot be verified" in (ns[n].error or "") for n in real_sshd.nodes), 15
        )
        for name in real_sshd.nodes:
            assert nodes[name].gpus == () and nodes[name].reachability is Reachability.DOWN
            assert (nodes[name].error or "").startswith(
                f"host keys cannot be verified: {tmp_path / 'no-such-known_hosts'} does not exist"
            ), nodes[name].error
    finally:
        await source.close()


def jump_ssh_config(sshd: RealSshd, bastion: str, behind: Sequence[str]) -> str:
    """node01 as the bastion; the other nodes reachable only through it, as ssh_config says."""
    common = (
        f"  User {sshd.user}\n  IdentityFile {sshd.client_key}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {sshd.known_hosts}\n  StrictHostKeyChecking yes\n"
    )
    text = f"Host jumpbox\n  HostName 127.0.0.1\n  Port {sshd.ports[bastion]}\n{common}"
    for node in behind:
        text += f"Host {node}\n  HostName 127.0.0.1\n  Port {sshd.ports[node]}\n  ProxyJump jumpbox\n{common}"
    return text


async def test_nodes_behind_a_bastion_are_reached_through_proxyjump(
    real_sshd: RealSshd,  # noqa: F811
    tmp_path: Path,
) -> None:
    bastion, *behind = real_sshd.nodes
    config_path = write_config(tmp_path, real_sshd, real_sshd.known_hosts)
    ssh_config = tmp_path / "ssh_config_jump"
    ssh_config.write_text(jump_ssh_config(real_sshd, bastion, behind))
    text = config_path.read_text()
    text = text.replace(json.dumps(str(real_sshd.ssh_config)), json.dumps(str(ssh_config)))
    text = text.replace(f"nodes: {fold_nodes(real_sshd.nodes)}", f"nodes: {fold_nodes(behind)}")
    config_path.write_text(text)
    source = source_for(config_path)
    await source.start()
    try:
        nodes = await wait_for(source, lambda ns: all(ns[n].gpus for n in behind))
        for name in behind:
            assert {g.uuid for g in nodes[name].gpus} == uuids_on(real_sshd, name)
        # every node's SSH connection runs inside one login to the bastion: one TCP connection to its
        # port (each node's own port has one, which the bastion's sshd opened)
        assert source.jumps is not None and source.jumps.logins == 1
        assert tcp_connections_to(real_sshd.ports[bastion]) == 1
        # the bastion's connection drops: the nodes come back through a new one
        for conn in list(source.jumps._conns.values()):
            conn.close()
        stamps = {n: nodes[n].sampled_at_s or 0 for n in behind}
        await wait_for(source, lambda ns: all((ns[n].sampled_at_s or 0) > stamps[n] + 1 for n in behind), 30)
        assert source.jumps.logins == 2
        assert tcp_connections_to(real_sshd.ports[bastion]) == 1
    finally:
        await source.close()


def tcp_connections_to(port: int) -> int:
    """Established TCP connections from this machine to ``port`` on loopback (from /proc/net/tcp)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text(encoding="ascii").splitlines()[1:]:
        fields = line.split()
        remote_port = int(fields[2].split(":")[1], 16)
        if remote_port == port and fields[3] == "01":
            count += 1
    return count


async def test_an_unreachable_bastion_is_the_nodes_stated_reason(
    real_sshd: RealSshd,  # noqa: F811
    tmp_path: Path,
) -> None:
    _bastion, *behind = real_sshd.nodes
    config_path = write_config(tmp_path, real_sshd, real_sshd.known_hosts)
    text = config_path.read_text()
    text = text.replace(f"nodes: {fold_nodes(real_sshd.nodes)}", f"nodes: {fold_nodes(behind)}")
    # gputop's own jump_host setting, to a port where nothing listens
    closed_port = free_port()
    text = text.replace(
        "      connect_timeout_s: 5\n",
        f"      connect_timeout_s: 5\n      jump_host: 127.0.0.1:{closed_port}\n",
    )
    config_path.write_text(text)
    source = source_for(config_path)
    await source.start()
    try:
        nodes = await wait_for(
            source, lambda ns: all(ns[n].error and ns[n].error != "connecting" for n in behind)
        )
        for name in behind:
            assert "refused" in (nodes[name].error or ""), nodes[name].error
            assert not nodes[name].gpus
    finally:
        await source.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_rounds_of_facts_run_in_the_nodes_real_shell_and_the_command_that_hangs_is_timed_out(
    real_sshd: RealSshd,  # noqa: F811
) -> None:
    from gputop.sources.ssh_fact_shell import FactShell

    node = real_sshd.nodes[0]
    async with asyncssh.connect(
        node, config=[str(real_sshd.ssh_config)], known_hosts=str(real_sshd.known_hosts)
    ) as conn:
        shell = FactShell(conn)
        done = await shell.run([("ibstat",), ("printf", "%s", "a b")], [20.0, 5.0])
        assert done.timed_out is None and not done.refused
        assert [s.status for s in done.steps] == [0, 0]
        assert b"CA 'mlx5_0'" in done.steps[0].stdout and done.steps[1].stdout == b"a b"
        # the next round runs in the same sh: one process, its variables still set
        first_pid = (await shell.run([("sh", "-c", "echo $PPID")], [5.0])).steps[0].stdout
        again = await shell.run([("cat",), ("sh", "-c", "echo $PPID")], [5.0, 5.0])
        assert again.steps[0].stdout == b"", "a command reading stdin reads nothing, not the script"
        assert again.steps[1].stdout == first_pid

        hung = await shell.run([("printf", "first"), ("sleep", "30"), ("printf", "never")], [5.0, 1.0, 5.0])
        assert hung.timed_out == 1
        assert (hung.steps[0].stdout, hung.steps[0].status) == (b"first", 0)
        assert hung.steps[1].started and hung.steps[1].status is None
        assert not hung.steps[2].started
        # the hung shell was let go: the next round gets a new one, and runs
        after = await shell.run([("sh", "-c", "echo $PPID")], [5.0])
        assert after.steps[0].status == 0 and after.steps[0].stdout not in (b"", first_pid)

        # a shell killed in the middle of a round: that round is cut off, and the next one gets a new shell
        killed = await shell.run([("sh", "-c", "kill -9 $PPID"), ("printf", "never")], [5.0, 5.0])
        assert killed.timed_out is None and not killed.refused
        assert killed.steps[0].started and killed.steps[0].status is None and not killed.steps[1].started
        revived = await shell.run([("sh", "-c", "echo $PPID")], [5.0])
        assert revived.steps[0].status == 0 and revived.steps[0].stdout not in (b"", after.steps[0].stdout)
        shell.close()


async def test_a_bastion_is_verified_like_a_node_even_where_its_ssh_config_says_none(
    real_sshd: RealSshd,  # noqa: F811
    tmp_path: Path,
) -> None:
    """asyncssh's own ProxyJump reads a bastion's known_hosts from the ssh_config alone, where
    `UserKnownHostsFile none` turned checking off: the bastion is reached under gputop's rules."""
    bastion, *behind = real_sshd.nodes
    config_path = write_config(tmp_path, real_sshd, real_sshd.known_hosts)
    lax_jumpbox = jump_ssh_config(real_sshd, bastion, behind).replace(
        f"Host jumpbox\n  HostName 127.0.0.1\n  Port {real_sshd.ports[bastion]}\n",
        f"Host jumpbox\n  HostName 127.0.0.1\n  Port {real_sshd.ports[bastion]}\n"
        "  UserKnownHostsFile none\n  GlobalKnownHostsFile none\n",
        1,
    )
    ssh_config = tmp_path / "ssh_config_jump"
    ssh_config.write_text(lax_jumpbox)
    text = config_path.read_text()
    text = text.replace(json.dumps(str(real_sshd.ssh_config)), json.dumps(str(ssh_config)))
    text = text.replace(f"nodes: {fold_nodes(real_sshd.nodes)}", f"nodes: {fold_nodes(behind)}")
    text = "".join(line for line in text.splitlines(keepends=True) if "known_hosts:" not in line)
    config_path.write_text(text)
    source = source_for(config_path)
    await source.start()
    try:
        nodes = await wait_for(source, lambda ns: all("jumpbox" in (ns[n].error or "") for n in behind))
        for name in behind:
            assert "host keys cannot be verified" in (nodes[name].error or ""), nodes[name].error
            assert not nodes[name].gpus
    finally:
        await source.close()
