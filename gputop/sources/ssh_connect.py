"""Opening one asyncssh connection the way gputop opens every connection: the cluster's ssh_config,
known_hosts verification (on unless the config turns it off), identity files, jump host, connect timeout,
keepalives and a cipher order that is cheap on CPU.

Shared by the per-node links (`gputop.sources.ssh_node`) and the Slurm source's connection to a login
node (`gputop.sources.slurm_runner`), so both reach a host with the same options.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from gputop.sources.known_hosts import SharedKnownHosts
from gputop.sources.ssh_config_index import SshConfigIndex

if TYPE_CHECKING:
    from gputop.sources.ssh_node import LinkSettings

# asyncssh's own order with AES-GCM first: its ChaCha20-Poly1305 builds new cipher objects for every
# packet and costs more CPU per node than everything else gputop does with a line. Every algorithm stays
# on offer, so any server still finds one; an ssh_config that names Ciphers is followed instead.
PREFERRED_CIPHERS = (
    "aes128-gcm@openssh.com",
    "aes256-gcm@openssh.com",
    "chacha20-poly1305@openssh.com",
    "aes256-ctr",
    "aes192-ctr",
    "aes128-ctr",
)

# For connections that sit idle between commands (the Slurm login node). A node's connection carries its
# metrics stream, a line every interval whose silence drops the connection within seconds: keepalives
# there would find nothing new, and asyncssh re-arms their timer on every packet received.
KEEPALIVE_INTERVAL_S = 15
KEEPALIVE_COUNT_MAX = 3
# asyncssh's connect_timeout covers TCP and the handshake; this bounds a jump host's hop on top of it.
CONNECT_GRACE_S = 5.0


def connect_options(
    host: str,
    settings: LinkSettings,
    ssh_config: SshConfigIndex | None = None,
    known_hosts: SharedKnownHosts | None = None,
    *,
    keepalive: bool = True,
) -> dict[str, Any]:
    """asyncssh.connect's keyword arguments for ``host``.

    ssh_config, known_hosts: the fleet's, read once and shared; else read for this connection.
    keepalive: send keepalives (without, an ssh_config's ServerAliveInterval still applies)."""
    s = settings
    options: dict[str, Any] = {"connect_timeout": s.connect_timeout_s}
    if keepalive:
        options["keepalive_interval"] = KEEPALIVE_INTERVAL_S
        options["keepalive_count_max"] = KEEPALIVE_COUNT_MAX
    # Without shared copies, read them for this connection alone: the same rules either way (its Ciphers
    # respected, a missing known_hosts trusting nothing). Callers that connect again and again (the node
    # links, the Slurm runner) pass their own, read once and closed when they are done.
    if ssh_config is None and s.config_file is not None:
        ssh_config = SshConfigIndex(s.config_file)
    if ssh_config is not None:
        options["config"] = [ssh_config.path_for(host)]
    if ssh_config is None or not ssh_config.sets_ciphers:
        options["encryption_algs"] = list(PREFERRED_CIPHERS)
    if s.known_hosts is None:
        options["known_hosts"] = None  # not verified: an explicit config choice the UI flags
    else:
        options["known_hosts"] = (known_hosts or SharedKnownHosts(s.known_hosts)).option()
    if s.user is not None:
        options["username"] = s.user
    if s.port is not None:
        options["port"] = s.port
    if s.identity_files:
        options["client_keys"] = list(s.identity_files)
    if s.jump_host is not None:
        options["tunnel"] = s.jump_host
    return options


async def connect(
    host: str,
    settings: LinkSettings,
    *,
    ssh_config: SshConfigIndex | None = None,
    known_hosts: SharedKnownHosts | None = None,
    handshakes: asyncio.Semaphore | None = None,
    keepalive: bool = True,
) -> Any:
    """An open asyncssh connection to ``host`` (raises what asyncssh raises; see ssh_errors.describe).
    handshakes: a semaphore that bounds how many handshakes are in flight at once; keepalive as in
    connect_options."""
    import asyncssh

    options = connect_options(host, settings, ssh_config, known_hosts, keepalive=keepalive)
    gate: contextlib.AbstractAsyncContextManager[Any] = (
        handshakes if handshakes is not None else contextlib.nullcontext()
    )
    async with gate:
        return await asyncio.wait_for(
            asyncssh.connect(host, **options), settings.connect_timeout_s + CONNECT_GRACE_S
        )
