"""Opening one asyncssh connection the way gputop opens every connection: the cluster's ssh_config,
known_hosts verification (on unless the config turns it off), identity files, jump host, connect timeout,
keepalives and a cipher order that is cheap on CPU.

Shared by the per-node links (`gputop.sources.ssh_node`) and the Slurm source's connection to a login
node (`gputop.sources.slurm_runner`), so both reach a host with the same options.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import TYPE_CHECKING, Any

from gputop.core.safe_text import safe_line
from gputop.sources.known_hosts import HostKeyRefused, HostKeys
from gputop.sources.ssh_config_index import SshConfigIndex
from gputop.sources.ssh_jump import JumpPool

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
# After a handshake timed out: how long a look at what the port says, and how much of it.
PROBE_TIMEOUT_S = 2.0
PROBE_BYTES = 120


def connect_options(
    host: str,
    settings: LinkSettings,
    ssh_config: SshConfigIndex | None = None,
    host_keys: HostKeys | None = None,
    *,
    keepalive: bool = True,
) -> dict[str, Any]:
    """asyncssh.connect's keyword arguments for ``host``.

    ssh_config, host_keys: the fleet's, read once and shared; else read for this connection.
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
    keys = host_keys or HostKeys(s.host_keys, s.known_hosts)
    # the ssh_config is asked for known_hosts files only where it may name some (else OpenSSH's defaults)
    names_files = ssh_config is None or ssh_config.may_set("userknownhostsfile", "globalknownhostsfile")
    options.update(keys.connect_options(host, options.get("config") if names_files else None))
    if s.user is not None:
        options["username"] = s.user
    if s.port is not None:
        options["port"] = s.port
    if s.identity_files:
        options["client_keys"] = list(s.identity_files)
    return options


class DnsFailure(Exception):
    """The name to connect to did not resolve: the ssh_config's HostName for the host, or the host."""

    def __init__(self, host: str, hostname: str, error: socket.gaierror) -> None:
        said = error.strerror or str(error)
        where = f"{hostname} (the HostName of {host} in the ssh_config)" if hostname != host else host
        super().__init__(f"DNS: cannot resolve {where}: {said}")


class NotSsh(Exception):
    """Something answered on the port, but not an SSH server."""

    def __init__(self, host: str, why: str) -> None:
        super().__init__(f"{host} answered, but not as an SSH server ({why}): a wrong port or host?")


def config_value(host: str, options: dict[str, Any], key: str) -> object:
    paths = options.get("config")
    if not paths:
        return None
    try:
        from asyncssh.config import SSHClientConfig

        return SSHClientConfig.load(None, paths, False, False, False, "", (), host, ()).get(key)
    except Exception:  # the value is for a message: a config asyncssh refused says so elsewhere
        return None


def config_hostname(host: str, options: dict[str, Any]) -> str:
    """The HostName the ssh_config gives ``host`` (as asyncssh resolves it), else ``host``."""
    return str(config_value(host, options, "Hostname") or host)


async def first_words(host: str, options: dict[str, Any]) -> str | None:
    """The first line a server sends on the SSH port when it is not an SSH banner; None when it sends
    nothing (or SSH's own) within PROBE_TIMEOUT_S."""
    hostname = config_hostname(host, options)
    port = int(str(options.get("port") or config_value(host, options, "Port") or 22))
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(hostname, port), PROBE_TIMEOUT_S)
    except (OSError, TimeoutError):
        return None
    try:
        data = await asyncio.wait_for(reader.read(PROBE_BYTES), PROBE_TIMEOUT_S)
    except (OSError, TimeoutError):
        return None
    finally:
        writer.close()
    if not data or data.startswith(b"SSH-"):
        return None
    line = data.splitlines()[0] if data.splitlines() else data
    return safe_line(line.decode("utf-8", errors="replace").strip(), PROBE_BYTES)


async def connect(
    host: str,
    settings: LinkSettings,
    *,
    ssh_config: SshConfigIndex | None = None,
    host_keys: HostKeys | None = None,
    handshakes: asyncio.Semaphore | None = None,
    keepalive: bool = True,
    jumps: JumpPool | None = None,
    jump_chain: tuple[str, ...] = (),
) -> Any:
    """An open asyncssh connection to ``host`` (raises what asyncssh raises; see ssh_errors.describe).
    handshakes: a semaphore that bounds how many handshakes are in flight at once; keepalive as in
    connect_options; jumps: the source's bastion connections (else a bastion of this connection's own).
    jump_chain: the bastions whose connection this is, outermost first (a ProxyJump loop stops)."""
    keys = host_keys or HostKeys(settings.host_keys, settings.known_hosts)
    options = connect_options(host, settings, ssh_config, keys, keepalive=keepalive)
    own_jumps = jumps is None
    pool = jumps if jumps is not None else JumpPool(settings, ssh_config, keys)
    spec = pool.spec_for(host, settings, options)
    # The bastion before the handshake gate: a node holding a slot while its bastion waits for one could
    # leave every slot waiting.
    bastion = await pool.tunnel(spec, jump_chain) if spec is not None else None
    if bastion is not None:
        options["tunnel"] = bastion
    try:
        conn = await _handshake(host, settings, options, keys, handshakes)
    except BaseException:
        if own_jumps and bastion is not None:
            bastion.close()
        raise
    if own_jumps and bastion is not None:
        conn.set_tunnel(bastion)  # a bastion of this connection alone closes with it
    return conn


async def _handshake(
    host: str,
    settings: LinkSettings,
    options: dict[str, Any],
    keys: HostKeys,
    handshakes: asyncio.Semaphore | None,
) -> Any:
    import asyncssh

    gate: contextlib.AbstractAsyncContextManager[Any] = (
        handshakes if handshakes is not None else contextlib.nullcontext()
    )
    async with gate:
        try:
            return await asyncio.wait_for(
                asyncssh.connect(host, **options), settings.connect_timeout_s + CONNECT_GRACE_S
            )
        except socket.gaierror as err:
            raise DnsFailure(host, config_hostname(host, options), err) from None
        except asyncssh.ProtocolError as err:
            raise NotSsh(host, str(err.reason)) from None
        except asyncssh.HostKeyNotVerifiable:
            refusal = keys.refusal(host)
            if refusal is None:
                user, global_ = keys.files_for(host, options.get("config"))
                listed = ", ".join(user + global_)
                refusal = f"host key not verifiable for {host}: not in {listed}, or changed"
            raise HostKeyRefused(refusal) from None
        except TimeoutError:
            # Something may have answered in another protocol (a web server, SMTP on a wrong port):
            # asyncssh waits for an SSH banner that never comes, and only a look at what was said tells.
            said = None if options.get("tunnel") else await first_words(host, options)
            if said is not None:
                raise NotSsh(host, f"it said {said!r}") from None
            raise
