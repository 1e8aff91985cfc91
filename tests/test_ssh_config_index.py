"""The per-host ssh_config copies mean to asyncssh exactly what the whole file means."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from asyncssh.config import SSHClientConfig

from gputop.sources.known_hosts import KnownHostsMissing
from gputop.sources.ssh_config_index import SMALL_FILE_LINES, SshConfigIndex
from gputop.sources.ssh_connect import PREFERRED_CIPHERS, connect_options
from gputop.sources.ssh_node import LinkSettings

NODES = 400


def fleet_config(nodes: int = NODES) -> str:
    """A generated site config: global lines, a block per node, wildcards, a Match and a bastion."""
    lines = ["# generated", "ServerAliveInterval 30"]
    lines += ["Host bastion", "  HostName 10.0.0.1", "  User jump", ""]
    for i in range(1, nodes + 1):
        lines += [f"Host gpu{i:04d}", "  HostName 127.0.0.1", f"  Port {20000 + i}", f"  User node{i}", ""]
    lines += [
        "Host gpu00*,!gpu0001",
        "  ProxyJump admin@bastion:2200",
        "  IdentityFile ~/.ssh/id_gpu",
        "Host=special",
        "  HostName 127.0.0.9",
        "Match host 127.0.0.1 user node7",
        "  Port 2222",
        "Host *",
        "  User fallback",
        "  ConnectTimeout 7",
    ]
    return "\n".join(lines) + "\n"


def options(path: str, host: str) -> dict[str, object]:
    config = SSHClientConfig.load(None, [path], False, False, False, "me", (), host, ())
    return dict(config._options)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "ssh_config"
    path.write_text(fleet_config())
    return path


@pytest.mark.parametrize("host", ["gpu0001", "gpu0007", "gpu0042", "gpu0400", "bastion", "special", "other"])
def test_a_reduced_copy_means_what_the_whole_file_means(config_file: Path, host: str) -> None:
    index = SshConfigIndex(str(config_file))
    try:
        reduced = index.path_for(host)
        assert reduced != str(config_file)
        assert options(reduced, host) == options(str(config_file), host)
        assert len(Path(reduced).read_text().splitlines()) < 40  # not the 2,000-line original
    finally:
        index.close()


def test_jump_hosts_keep_their_blocks_in_every_copy(config_file: Path) -> None:
    index = SshConfigIndex(str(config_file), extra_jump_hosts=("ops@gpu0300:22",))
    try:
        reduced = index.path_for("gpu0042")
        # asyncssh connects to the jump host with the node's copy, so the bastion must resolve there too
        assert options(reduced, "bastion") == options(str(config_file), "bastion")
        assert options(reduced, "gpu0300") == options(str(config_file), "gpu0300")
        assert options(reduced, "bastion")["Hostname"] == "10.0.0.1"
    finally:
        index.close()


def test_hosts_with_the_same_blocks_share_a_copy(config_file: Path) -> None:
    index = SshConfigIndex(str(config_file))
    try:
        assert index.path_for("nowhere-a") == index.path_for("nowhere-b")
        assert index.path_for("gpu0002") != index.path_for("gpu0003")
    finally:
        index.close()


def test_small_files_and_risky_ones_are_handed_out_unchanged(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.write_text("Host *\n  User me\n")
    canonical = tmp_path / "canonical"
    canonical.write_text("CanonicalizeHostname yes\n" + fleet_config())
    broken = tmp_path / "broken"
    broken.write_text(fleet_config() + 'Host "unbalanced\n')
    missing = tmp_path / "missing"
    for path in (small, canonical, broken, missing):
        assert SshConfigIndex(str(path)).path_for("gpu0001") == str(path)
    assert SMALL_FILE_LINES > 2


def test_an_edited_file_is_read_again(config_file: Path) -> None:
    index = SshConfigIndex(str(config_file))
    try:
        assert options(index.path_for("gpu0005"), "gpu0005")["Port"] == 20005
        config_file.write_text(fleet_config().replace("Port 20005", "Port 30005"))
        later = time.time() + 5
        os.utime(config_file, (later, later))  # a different mtime even on a coarse-clock filesystem
        assert options(index.path_for("gpu0005"), "gpu0005")["Port"] == 30005
    finally:
        index.close()


def test_close_removes_the_copies(config_file: Path) -> None:
    index = SshConfigIndex(str(config_file))
    copy = Path(index.path_for("gpu0001"))
    assert copy.exists()
    assert (copy.parent.stat().st_mode & 0o777) == 0o700
    index.close()
    assert not copy.parent.exists()


def test_a_thousand_hosts_resolve_quickly(tmp_path: Path) -> None:
    path = tmp_path / "big"
    path.write_text(fleet_config(1000))
    index = SshConfigIndex(str(path))
    try:
        started = time.process_time()
        for i in range(1, 1001):
            index.path_for(f"gpu{i:04d}")
        spent_s = time.process_time() - started
        # asyncssh parsing the whole file once costs about as much as all 1,000 lookups together
        started = time.process_time()
        options(str(path), "gpu0500")
        full_parse_s = time.process_time() - started
        assert spent_s < 20 * full_parse_s, (spent_s, full_parse_s)
    finally:
        index.close()


def settings_with(config_file: Path | None, known_hosts: Path | None) -> LinkSettings:
    """Verified against ``known_hosts``; without one, not verified."""
    return LinkSettings(
        user=None,
        port=None,
        config_file=str(config_file) if config_file else None,
        known_hosts=str(known_hosts) if known_hosts else None,
        identity_files=(),
        jump_host=None,
        connect_timeout_s=5.0,
        backoff_initial_s=1.0,
        backoff_max_s=5.0,
        expected_gpus=None,
        host_keys="yes" if known_hosts else "no",
    )


def test_connect_options_follow_the_ssh_config_ciphers_and_refuse_without_known_hosts(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "plain"
    plain.write_text("Host *\n  User me\n")
    chosen = tmp_path / "chosen"
    chosen.write_text("Host *\n  Ciphers aes256-ctr\n")
    known = tmp_path / "known_hosts"
    known.write_text("")
    options = connect_options("gpu001", settings_with(plain, known))
    assert options["encryption_algs"] == list(PREFERRED_CIPHERS)
    assert options["config"] == [str(plain)]
    assert options["known_hosts"] is not None and options["known_hosts"] != ()  # parsed, trusts no key
    assert "encryption_algs" not in connect_options("gpu001", settings_with(chosen, known))
    assert connect_options("gpu001", settings_with(None, None))["known_hosts"] is None  # not verified
    # () would mean "whatever ssh_config says", and UserKnownHostsFile none there turns checking off
    with pytest.raises(KnownHostsMissing, match=r"host keys cannot be verified: .* does not exist"):
        connect_options("gpu001", settings_with(plain, tmp_path / "no_known_hosts"))


def test_keepalives_are_sent_on_idle_connections_and_left_to_the_stream_on_a_nodes() -> None:
    idle = connect_options("login01", settings_with(None, None))
    assert (idle["keepalive_interval"], idle["keepalive_count_max"]) == (15, 3)
    streaming = connect_options("gpu001", settings_with(None, None), keepalive=False)
    assert "keepalive_interval" not in streaming and "keepalive_count_max" not in streaming


async def test_a_node_link_connects_without_keepalives(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    import gputop.sources.ssh_node as ssh_node
    from gputop.sources.commands import default_commands

    asked: dict[str, object] = {}

    async def connect(host: str, settings: object, **options: object) -> object:
        asked.update(options)
        raise OSError("not dialled in this test")

    monkeypatch.setattr(ssh_node, "connect", connect)
    link = ssh_node.NodeLink(
        "gpu001", settings_with(None, None), default_commands(), lambda: 0.0, asyncio.Semaphore(1)
    )
    with pytest.raises(OSError):
        await link._connect()
    assert asked["keepalive"] is False
