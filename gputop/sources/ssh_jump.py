"""One connection to each bastion, shared by every node behind it.

Given a ProxyJump (gputop's ``ssh.jump_host``, or an ssh_config's ``ProxyJump`` for the node), asyncssh
logs in to the bastion once per node: a thousand nodes are a thousand handshakes against the bastion's
MaxStartups, and as many sessions held open there. Here a cluster opens each bastion once and every node's
connection is a channel inside it (direct-tcpip, as ``ssh -J`` does), so the bastion sees one login.

The bastion is reached with the same rules as a node (its ssh_config block, gputop's host key checking,
identities, timeout), where asyncssh's own ProxyJump would read only the ssh_config for it; a bastion
behind another (``a,b``, or a bastion whose own block says ProxyJump) is reached through the pool too.
A bastion that fails is not asked again for RETRY_AFTER_S: the nodes behind it each say why, and retry
on their own backoff. A bastion connection that closes is opened again by the next node that needs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gputop.sources.known_hosts import HostKeys
    from gputop.sources.ssh_config_index import SshConfigIndex
    from gputop.sources.ssh_node import LinkSettings

RETRY_AFTER_S = 2.0
CLOSE_TIMEOUT_S = 2.0
MAX_HOPS = 8  # a longer chain is a ProxyJump loop in the ssh_config


class JumpFailed(Exception):
    """The bastion in front of a node could not be reached; the reason says which bastion and why."""


@dataclasses.dataclass(frozen=True, slots=True)
class Hop:
    user: str | None
    host: str
    port: int | None


def parse_jump(spec: str) -> list[Hop]:
    """A ProxyJump value: ``[user@]host[:port]`` or ``ssh://[user@]host[:port]``, comma-separated;
    "none" is no jump. Raises ValueError for a port that is not a number."""
    hops = []
    for raw in spec.split(","):
        hop = raw.strip()
        if not hop or hop.lower() == "none":
            continue
        hop = hop.split("://", 1)[1] if "://" in hop else hop
        user, _, host = hop.rpartition("@")
        port: int | None = None
        if host.startswith("["):  # [v6addr]:port
            address, _, rest = host[1:].partition("]")
            host, port = address, int(rest[1:]) if rest.startswith(":") else None
        elif host.count(":") == 1:
            host, port_text = host.split(":")
            port = int(port_text)
        hops.append(Hop(user or None, host, port))
    return hops


class JumpPool:
    """The bastion connections of one source (a cluster's node links, or one Slurm runner)."""

    def __init__(
        self, settings: LinkSettings, ssh_config: SshConfigIndex | None, host_keys: HostKeys
    ) -> None:
        self.settings = settings
        self.ssh_config = ssh_config
        self.host_keys = host_keys
        self._conns: dict[str, Any] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._failed: dict[str, tuple[float, str]] = {}
        self._spec_by_host: dict[str, str | None] = {}
        self.logins = 0  # bastion logins made, for those who check that they are shared

    def spec_for(self, host: str, settings: LinkSettings, options: dict[str, Any]) -> str | None:
        """The ProxyJump in front of ``host``: the settings' jump_host, else the ssh_config's for it."""
        if settings.jump_host:
            return settings.jump_host
        if host in self._spec_by_host:  # the ssh_config is read once per host, as the index is
            return self._spec_by_host[host]
        if self.ssh_config is not None and not self.ssh_config.may_set("proxyjump"):
            return None
        from gputop.sources.ssh_connect import config_value

        value = config_value(host, options, "ProxyJump")
        text = str(value).strip() if value else ""
        spec = text if text and text.lower() != "none" else None
        self._spec_by_host[host] = spec
        return spec

    async def tunnel(self, spec: str, chain: tuple[str, ...] = ()) -> Any:
        """The open connection to the last hop of ``spec``, opened (through the earlier hops) if needed.
        chain: the bastions being opened that lead here (one of them again is a ProxyJump loop)."""
        if spec in chain or len(chain) >= MAX_HOPS:
            loop = " -> ".join((*chain, spec))
            raise JumpFailed(f"bastion {chain[0]}: a ProxyJump loop in the ssh_config ({loop})")
        lock = self._locks.setdefault(spec, asyncio.Lock())
        async with lock:
            conn = self._conns.get(spec)
            if conn is not None and not conn.is_closed():
                return conn
            failed = self._failed.get(spec)
            if failed is not None and time.monotonic() - failed[0] < RETRY_AFTER_S:
                raise JumpFailed(failed[1])
            try:
                conn = await self._open(spec, chain)
            except asyncio.CancelledError:
                raise
            except JumpFailed as err:
                self._failed[spec] = (time.monotonic(), str(err))
                raise
            except Exception as err:
                from gputop.sources.ssh_errors import describe

                reason = f"bastion {spec}: {describe(err, spec, self.settings.connect_timeout_s).reason}"
                self._failed[spec] = (time.monotonic(), reason)
                raise JumpFailed(reason) from None
            self._failed.pop(spec, None)
            self._conns[spec] = conn
            return conn

    async def _open(self, spec: str, chain: tuple[str, ...]) -> Any:
        from gputop.sources.ssh_connect import connect

        try:
            hops = parse_jump(spec)
        except ValueError:
            raise JumpFailed(f"bastion {spec}: not [user@]host[:port]") from None
        if not hops:
            raise JumpFailed(f"bastion {spec!r} names no host")
        last, earlier = hops[-1], hops[:-1]
        # the last hop's own settings: its user and port from the spec (else its ssh_config block), the
        # earlier hops as its jump; the cluster's identities, timeout and host key rules
        hop_settings = dataclasses.replace(
            self.settings,
            user=last.user,
            port=last.port,
            jump_host=",".join(_spec_of(hop) for hop in earlier) or None,
        )
        conn = await connect(
            last.host,
            hop_settings,
            ssh_config=self.ssh_config,
            host_keys=self.host_keys,
            jumps=self,
            jump_chain=(*chain, spec),
        )
        self.logins += 1
        return conn

    async def close(self) -> None:
        conns, self._conns = list(self._conns.values()), {}
        for conn in conns:
            conn.close()
        for conn in conns:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), CLOSE_TIMEOUT_S)


def _spec_of(hop: Hop) -> str:
    host = f"[{hop.host}]" if ":" in hop.host else hop.host
    return f"{hop.user + '@' if hop.user else ''}{host}{':' + str(hop.port) if hop.port else ''}"
