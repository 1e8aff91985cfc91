"""ProxyJump values and loops, without a network (the shared bastion itself: test_openssh_interop)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gputop.sources.known_hosts import HostKeys
from gputop.sources.ssh_config_index import SshConfigIndex
from gputop.sources.ssh_connect import connect
from gputop.sources.ssh_jump import Hop, JumpFailed, JumpPool, parse_jump
from tests.test_ssh_config_index import settings_with


def test_proxyjump_values_read_as_openssh_writes_them() -> None:
    assert parse_jump("bastion") == [Hop(None, "bastion", None)]
    assert parse_jump("alice@bastion:2222") == [Hop("alice", "bastion", 2222)]
    assert parse_jump("ssh://bob@[fd00::1]:22,gw") == [Hop("bob", "fd00::1", 22), Hop(None, "gw", None)]
    assert parse_jump("none") == []
    with pytest.raises(ValueError):
        parse_jump("bastion:ssh")


async def test_a_proxyjump_loop_is_a_reason_not_a_hang(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  ProxyJump jumpbox\n  HostName 127.0.0.1\n", encoding="ascii")
    settings = settings_with(config, None)  # host keys not verified: nothing is dialled here anyway
    index = SshConfigIndex(str(config))
    pool = JumpPool(settings, index, HostKeys("no", None))
    try:
        with pytest.raises(JumpFailed, match=r"a ProxyJump loop in the ssh_config \(jumpbox -> jumpbox\)"):
            await connect("gpu001", settings, ssh_config=index, jumps=pool)
    finally:
        index.close()


async def test_a_bastion_that_failed_is_not_asked_again_at_once(tmp_path: Path) -> None:
    settings = dataclasses.replace(settings_with(None, None), jump_host="127.0.0.1:1", connect_timeout_s=2.0)
    pool = JumpPool(settings, None, HostKeys("no", None))
    with pytest.raises(JumpFailed, match=r"bastion 127\.0\.0\.1:1: ") as first:
        await connect("gpu001", settings, jumps=pool)
    with pytest.raises(JumpFailed) as second:
        await connect("gpu002", settings, jumps=pool)
    assert str(second.value) == str(first.value) and pool.logins == 0
