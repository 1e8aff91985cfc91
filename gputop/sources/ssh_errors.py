"""What went wrong with an SSH connection, in words an on-call engineer acts on.

`describe` turns an exception from connecting or running a command into a short reason and says
whether retrying on its own can help: a refused host key or key is a fact about configuration, not a
hiccup, so it is shown and not retried in a loop.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Failure:
    reason: str
    retry: bool  # False: retrying will not help until someone changes something (or asks)


def describe(error: BaseException, host: str, timeout_s: float | None = None) -> Failure:
    import asyncssh  # the SSH library is only loaded when gputop watches real nodes

    from gputop.sources.known_hosts import HostKeyRefused, KnownHostsMissing
    from gputop.sources.ssh_connect import DnsFailure, NotSsh
    from gputop.sources.ssh_jump import JumpFailed

    if isinstance(error, KnownHostsMissing | HostKeyRefused):
        return Failure(str(error), retry=False)
    if isinstance(error, DnsFailure | NotSsh | JumpFailed):
        return Failure(str(error), retry=True)
    if isinstance(error, asyncssh.HostKeyNotVerifiable):
        return Failure(f"host key not verifiable for {host}: not in known_hosts, or changed", retry=False)
    if isinstance(error, asyncssh.PermissionDenied):
        return Failure(f"authentication failed for {host} (no key was accepted)", retry=False)
    if isinstance(error, asyncssh.ConnectionLost):
        return Failure(f"connection to {host} lost", retry=True)
    if isinstance(error, asyncssh.DisconnectError):
        return Failure(f"{host} closed the connection: {error.reason}", retry=True)
    if isinstance(error, asyncssh.ChannelOpenError):
        return Failure(f"{host} refused a session: {error.reason}", retry=True)
    if isinstance(error, socket.gaierror):
        return Failure(f"DNS: cannot resolve {host}", retry=True)
    if isinstance(error, ConnectionRefusedError):
        return Failure(f"connection refused by {host}", retry=True)
    if isinstance(error, TimeoutError | asyncio.TimeoutError):
        within = f" within {timeout_s:g}s" if timeout_s else ""
        return Failure(f"timeout: {host} did not answer{within}", retry=True)
    if isinstance(error, OSError):
        return Failure(f"cannot reach {host}: {error.strerror or error}", retry=True)
    if isinstance(error, ValueError) and "config" in str(error).lower():
        return Failure(f"ssh config problem for {host}: {error}", retry=False)
    return Failure(f"{host}: {type(error).__name__}: {error}", retry=True)
