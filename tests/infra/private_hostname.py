"""A host name of the daemons' own: what a name resolves to, and a UTS namespace whose host name is
PRIVATE_HOSTNAME (loopback everywhere), for machines whose own name does not resolve to 127.0.0.1."""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess

PRIVATE_HOSTNAME = "localhost"
CLONE_NEWUTS = 0x04000000  # linux/sched.h


def ipv4(host: str) -> str:
    try:
        return socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
    except (OSError, IndexError):
        return ""


def enter_private_hostname() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUTS) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    socket.sethostname(PRIVATE_HOSTNAME)


def can_have_private_hostname() -> bool:
    try:
        probe = subprocess.run(
            ["true"], preexec_fn=enter_private_hostname, capture_output=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0
