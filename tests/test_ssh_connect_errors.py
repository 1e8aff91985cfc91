"""What a connection that fails says: the name that did not resolve (the ssh_config's HostName, not the
alias), and a port that answers in another protocol instead of "did not answer"."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from gputop.sources.slurm_runner import RunFailed, SshRunner
from tests.test_ssh_config_index import settings_with


async def why_not(runner: SshRunner) -> str:
    """Why ``runner`` could not run a command (it must not have)."""
    try:
        await runner.run(["sinfo"], {}, 5)
    except RunFailed as failed:
        return failed.reason
    finally:
        await runner.close()
    raise AssertionError(f"connected to {runner.host}")


async def test_a_dns_failure_names_the_hostname_that_did_not_resolve(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host login1\n  HostName login1.cluster.invalid\n")
    known = tmp_path / "known_hosts"
    known.write_text("")
    reason = await why_not(SshRunner("login1", settings_with(config, known)))
    assert reason.startswith(
        "DNS: cannot resolve login1.cluster.invalid (the HostName of login1 in the ssh_config): "
    ), reason


async def test_a_port_that_answers_in_another_protocol_says_what_it_said(tmp_path: Path) -> None:
    async def smtp(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"220 mail.example.com ESMTP Postfix\r\n")
        await writer.drain()
        await asyncio.sleep(30)

    server = await asyncio.start_server(smtp, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    config = tmp_path / "ssh_config"
    config.write_text(f"Host mailhost\n  HostName 127.0.0.1\n  Port {port}\n")
    known = tmp_path / "known_hosts"
    known.write_text("")
    settings = dataclasses.replace(settings_with(config, known), connect_timeout_s=1.0)
    try:
        reason = await why_not(SshRunner("mailhost", settings))
    finally:
        server.close()
    assert reason == (
        "mailhost answered, but not as an SSH server (it said '220 mail.example.com ESMTP Postfix'): "
        "a wrong port or host?"
    ), reason
