"""What the test daemons need to know about this machine's sockets and processes, read from /proc.

Shared by the real sshd and the real Slurm fixtures: free loopback ports, which sockets a set of processes
holds, and every listening TCP socket (to check a daemon listens where it should, and only there).
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Sequence
from pathlib import Path


def free_ports(count: int) -> list[int]:
    """Ports free on 127.0.0.1 now, all held at once while choosing so none is handed out twice."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def read_text(path: Path) -> str:
    """A file's text, or "" when it cannot be read (a log not written yet, a process gone)."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def socket_inodes(pids: Sequence[int]) -> set[int]:
    """The socket inodes the processes hold open."""
    inodes = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                    if target.startswith("socket:["):
                        inodes.add(int(target[8:-1]))
    return inodes


def listen_table() -> list[tuple[str, int, int]] | None:
    """(address, port, socket inode) of every listening TCP socket, IPv4 and IPv6; None without /proc."""
    if not Path("/proc/net/tcp").exists():
        return None
    found = []
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in read_text(Path(f"/proc/net/{table}")).splitlines()[1:]:
            fields = line.split()
            if len(fields) <= 9 or fields[3] != "0A":  # TCP_LISTEN
                continue
            hex_addr, _, hex_port = fields[1].partition(":")
            if len(hex_addr) != width:
                continue
            # the kernel prints each 32-bit word in host (little-endian) order
            raw = b"".join(bytes.fromhex(hex_addr[i : i + 8])[::-1] for i in range(0, width, 8))
            family = socket.AF_INET if width == 8 else socket.AF_INET6
            found.append((socket.inet_ntop(family, raw), int(hex_port, 16), int(fields[9])))
    return found


def listening_ports() -> dict[int, int] | None:
    """Listening TCP port -> socket inode; None without /proc."""
    table = listen_table()
    return None if table is None else {port: inode for _, port, inode in table}


def listeners_of(inodes: set[int]) -> list[str]:
    return [
        f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"
        for addr, port, inode in (listen_table() or [])
        if inode in inodes
    ]


def is_loopback(listener: str) -> bool:
    addr = listener.rpartition(":")[0].strip("[]")
    return addr.startswith("127.") or addr in ("::1", "::ffff:127.0.0.1") or addr.startswith("::ffff:127.")
