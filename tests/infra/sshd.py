"""A real OpenSSH sshd on 127.0.0.1 playing N GPU nodes, one port per node.

    sshd = start_sshd(nodes=4)          # or the session fixture `real_sshd`
    ssh -F {sshd.ssh_config} node01 nvidia-smi -L
    stop_sshd(sshd)

Every session is forced through ``node-shell``: it names the node after the port that was dialled (or
``$GPUTOP_NODE`` when the port is not a node's), puts wrapper scripts ``nvidia-smi``, ``ibstat`` and
``journalctl`` first on PATH and runs the command with /bin/sh. Each wrapper execs this interpreter on
``gputop.sim.fake_fleet.tool``, which answers as the in-process fake fleet does, from a simulated
cluster every session shares (same node count, seed and start). A node is broken by a line in the faults
file (`RealSshd.set_faults`), read by the tool at each command and while it streams.

What OpenSSH insists on, learnt the hard way:

- sshd must be started by absolute path with absolute ``-f`` and ``-E``, and as root needs /run/sshd.
- One sshd process listens on at most 16 sockets (MAX_LISTEN_SOCKS): 50 nodes take 4 processes.
- The defaults (MaxStartups 10:30:100, MaxSessions 10) drop parallel connects and channels.
- useradd makes a locked account ('!'), and with UsePAM no sshd refuses even a key for it: ``-p '*'``.
- sshd runs ForceCommand through the login shell, and Debian's bash then reads ~/.bashrc (a pyenv init
  there costs 200 ms per command). The test user's shell is /bin/sh, and ``SetEnv SHLVL=1`` makes bash
  skip its rc files where the login has to be root (see below).
- Files the login user reads (authorized_keys, node-shell, the wrappers, the faults file) must be
  reachable by that user: pytest's own temporary directory (0700, root's) is not, so they go to a
  directory of their own.

As root, logins are made as a system user ``gputop-test`` (shell /bin/sh), created when missing. When that
user cannot run this interpreter (a Python under /root, which is 0700), logins are made as root instead.
Not root, sshd runs unprivileged and only the invoking user can log in.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh
import pytest

import gputop
from tests.infra.procnet import free_ports, listening_ports, read_text, socket_inodes

SSHD = "/usr/sbin/sshd"  # sshd re-executes itself, so it must be started by absolute path
TEST_USER = "gputop-test"
MAX_LISTEN_SOCKS = 16  # OpenSSH's compile-time limit of listen sockets per sshd process
TOOLS = ("nvidia-smi", "ibstat", "journalctl")
TOOL_MODULE = "gputop.sim.fake_fleet.tool"
INSTALL_HINT = "apt-get install openssh-server"
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 5.0
PR_SET_PDEATHSIG = 1  # linux/prctl.h
REPO_ROOT = Path(gputop.__file__).resolve().parents[1]


class SshdUnavailable(Exception):
    """This machine cannot run the test sshd; the message names what is missing."""


@dataclass
class RealSshd:
    """A running sshd and everything a client needs to reach its nodes."""

    base_dir: Path  # keys, configs, logs, the client files
    node_dir: Path  # what the login user reads: authorized_keys, bin/, the faults file
    ssh_config: Path
    known_hosts: Path
    client_key: Path
    host_public_key: str  # "ssh-ed25519 AAAA..."
    user: str
    nodes: tuple[str, ...]
    ports: dict[str, int]
    env: dict[str, str]  # what every session exports for the tool (GPUTOP_NODE aside)
    faults_file: Path
    logs: tuple[Path, ...]
    processes: list[subprocess.Popen[bytes]] = field(repr=False)
    owned_dirs: tuple[Path, ...] = field(default=(), repr=False)

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(p.pid for p in self.processes)

    def known_hosts_line(self, node: str, public_key: str | None = None) -> str:
        return f"[127.0.0.1]:{self.ports[node]} {public_key or self.host_public_key}\n"

    def set_faults(self, node: str, *faults: str) -> None:
        """Replaces ``node``'s faults (gputop.sim.fake_fleet.Fault values); none heals it."""
        lines = [
            line
            for line in read_text(self.faults_file).splitlines()
            if line.strip() and line.partition("=")[0] != node
        ]
        if faults:
            lines.append(f"{node}={','.join(faults)}")
        _write(self.faults_file, "".join(f"{line}\n" for line in lines), 0o644)

    def clear_faults(self) -> None:
        _write(self.faults_file, "", 0o644)

    def tool(self, node: str, *argv: str, timeout_s: float = 30.0) -> subprocess.CompletedProcess[str]:
        """What ``argv`` prints on ``node``, run here with the sessions' environment, without SSH."""
        env = {**os.environ, **self.env, "GPUTOP_NODE": node}
        return subprocess.run(
            [sys.executable, "-m", TOOL_MODULE, *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )

    def log_text(self) -> str:
        return "".join(f"--- {path}\n{read_text(path)}" for path in self.logs)


# ---- starting and stopping ------------------------------------------------------------------------------


def start_sshd(
    base_dir: Path | None = None,
    *,
    nodes: int = 4,
    gpus_per_node: int = 8,
    seed: int = 42,
    node_prefix: str = "node",
    login_user: str | None = None,
) -> RealSshd:
    """Starts sshd for ``nodes`` nodes (node01, ...) and returns once every port accepts connections.
    SshdUnavailable when this machine cannot run it; RuntimeError when sshd fails for another reason.
    ``login_user``: who the sessions run as (default: see _login_user); "root" needs a root sshd."""
    if not os.access(SSHD, os.X_OK):
        raise SshdUnavailable(f"OpenSSH sshd not installed ({INSTALL_HINT}): {SSHD} missing")
    owned: list[Path] = []
    if base_dir is None:
        base_dir = Path(tempfile.mkdtemp(prefix="gputop-sshd-"))
        owned.append(base_dir)
    base_dir = base_dir.resolve()
    base_dir.mkdir(parents=True, exist_ok=True)
    try:
        if login_user is not None and login_user != _current_user() and os.geteuid() != 0:
            raise SshdUnavailable(f"logging in as {login_user} needs an sshd started by root")
        user = login_user if login_user is not None else _login_user()
        if user == _current_user():
            node_dir = base_dir
        else:
            node_dir = Path(tempfile.mkdtemp(prefix="gputop-sshd-node-"))
            owned.append(node_dir)
            node_dir.chmod(0o755)  # the login user reads the scripts and keys here
        width = max(2, len(str(nodes)))
        names = tuple(f"{node_prefix}{i:0{width}d}" for i in range(1, nodes + 1))
        sshd = _start(base_dir, node_dir, user, names, gpus_per_node, seed, owned)
    except BaseException:
        for directory in owned:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    return sshd


def stop_sshd(sshd: RealSshd) -> None:
    """Stops the sshd processes this module started (and the connection handlers they forked)."""
    children = [child for p in sshd.processes for child in _children(p.pid)]
    for process in sshd.processes:
        if process.poll() is None:
            process.terminate()
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for process in sshd.processes:
        try:
            process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    sshd.processes.clear()
    for directory in sshd.owned_dirs:
        shutil.rmtree(directory, ignore_errors=True)


def _running_sshd(base_dir: Path, nodes: int, login_user: str | None = None) -> Iterator[RealSshd]:
    """start_sshd for a fixture: skipped (with the reason) where it cannot run, stopped afterwards."""
    try:
        sshd = start_sshd(base_dir, nodes=nodes, login_user=login_user)
    except SshdUnavailable as err:
        pytest.skip(str(err))
    try:
        yield sshd
    finally:
        stop_sshd(sshd)


@pytest.fixture(scope="session")
def real_sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealSshd]:
    """A real sshd on 127.0.0.1 playing node01..node04; skips where OpenSSH's server is not installed."""
    yield from _running_sshd(tmp_path_factory.mktemp("sshd"), nodes=4)


@pytest.fixture(scope="session")
def real_sshd_as_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealSshd]:
    """Like real_sshd, but the sessions run as root: an administrator's login to a Slurm controller."""
    yield from _running_sshd(tmp_path_factory.mktemp("sshd-root"), nodes=2, login_user="root")


@pytest.fixture(scope="session")
def real_sshd_unprivileged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealSshd]:
    """Sessions as the unprivileged test user, even where it cannot run this Python (so the nodes' fake
    nvidia-smi does not work there): for what a plain login can do, such as run Slurm's own commands."""
    if os.geteuid() != 0 or not _ensure_test_user():
        pytest.skip(f"needs root to create and log in as the unprivileged user {TEST_USER}")
    yield from _running_sshd(tmp_path_factory.mktemp("sshd-user"), nodes=2, login_user=TEST_USER)


# ---- the pieces -------------------------------------------------------------------------------------------


def _current_user() -> str:
    return pwd.getpwuid(os.geteuid()).pw_name


def _login_user() -> str:
    """Who the nodes' sessions run as: the test user where it can run this Python, else root; not root,
    the invoking user (an unprivileged sshd can only log in its own user)."""
    if os.geteuid() != 0:
        return _current_user()
    Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)  # privilege separation directory
    if _ensure_test_user() and _can_run_tool(TEST_USER):
        return TEST_USER
    return "root"


def _ensure_test_user() -> bool:
    """Creates the test user if missing (shell /bin/sh: no rc files; '*': no password, yet not locked);
    False when this system cannot (no useradd)."""
    try:
        entry = pwd.getpwnam(TEST_USER)
    except KeyError:
        if shutil.which("useradd") is None:
            return False
        command = ["useradd", "--system", "-M", "-d", "/", "-s", "/bin/sh", "-p", "*", TEST_USER]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        return result.returncode == 0
    if not os.path.isdir(entry.pw_dir):
        # sshd prints "Could not chdir to home directory" into every session's output otherwise
        subprocess.run(["usermod", "-d", "/", TEST_USER], capture_output=True, check=False)
    with contextlib.suppress(OSError):
        for line in Path("/etc/shadow").read_text(encoding="utf-8").splitlines():
            name, _, rest = line.partition(":")
            if name == TEST_USER and rest.startswith("!"):
                subprocess.run(["usermod", "-p", "*", TEST_USER], capture_output=True, check=False)
    return True


def _can_run_tool(user: str) -> bool:
    entry = pwd.getpwnam(user)
    try:
        result = subprocess.run(
            [sys.executable, "-c", f"import {TOOL_MODULE}"],
            user=entry.pw_uid,
            group=entry.pw_gid,
            extra_groups=[],
            cwd="/",
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)},
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0


def _write(path: Path, text: str, mode: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, mode)  # whatever the umask
    tmp.replace(path)  # a tool reading it sees the old file or the new one


def _key(path: Path) -> str:
    """A new ed25519 key at ``path`` (0600, as sshd and ssh demand); returns its public line."""
    key = asyncssh.generate_private_key("ssh-ed25519", comment=f"gputop test {path.name}")
    _write(path, key.export_private_key().decode(), 0o600)
    public = key.export_public_key().decode().strip()
    _write(path.with_name(path.name + ".pub"), public + "\n", 0o644)
    return " ".join(public.split()[:2])


def _sshd_config(base_dir: Path, node_dir: Path, user: str, ports: Sequence[int], index: int) -> str:
    listen = "".join(f"ListenAddress 127.0.0.1:{port}\n" for port in ports)
    return f"""# sshd {index} of the gputop loopback nodes
{listen}HostKey {base_dir}/ssh_host_ed25519_key
PidFile none
AuthorizedKeysFile {node_dir}/authorized_keys
AllowUsers {user}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
# the keys sit under /tmp (1777): StrictModes would refuse them
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
# the defaults (10:30:100 and 10) drop parallel connects and channels
MaxStartups 2000
MaxSessions 1000
LoginGraceTime 30
X11Forwarding no
# any node can be the bastion of the others (ProxyJump tests), and only towards loopback
AllowTcpForwarding local
PermitOpen 127.0.0.1:*
AcceptEnv GPUTOP_*
# bash, as root's login shell, skips ~/.bashrc when it thinks it is not the top-level shell
SetEnv SHLVL=1
ForceCommand {node_dir}/bin/node-shell
LogLevel INFO
"""


def _node_shell(node_dir: Path, ports: Mapping[str, int], env: Mapping[str, str]) -> str:
    cases = "".join(f"  {port}) GPUTOP_NODE={node} ;;\n" for node, port in ports.items())
    exports = " ".join(f"{name}={shlex.quote(value)}" for name, value in env.items())
    return f"""#!/bin/sh
# A session on a fake GPU node: the node is the port dialled (else $GPUTOP_NODE), its tools come first.
case ${{SSH_CONNECTION##* }} in
{cases}esac
export GPUTOP_NODE {exports}
PATH={shlex.quote(str(node_dir / "bin"))}:$PATH
export PATH
if [ -z "${{SSH_ORIGINAL_COMMAND:-}}" ]; then exec /bin/sh -i; fi
exec /bin/sh -c "$SSH_ORIGINAL_COMMAND"
"""


def _wrapper(tool: str) -> str:
    return f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m {TOOL_MODULE} {tool} "$@"\n'


def _ssh_config(sshd_user: str, ports: Mapping[str, int], client_key: Path, known_hosts: Path) -> str:
    blocks = [
        f"Host {node}\n"
        "  HostName 127.0.0.1\n"
        f"  Port {port}\n"
        f"  User {sshd_user}\n"
        f"  IdentityFile {client_key}\n"
        "  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {known_hosts}\n"
        "  GlobalKnownHostsFile /dev/null\n"
        "  StrictHostKeyChecking yes\n"
        "  BatchMode yes\n"
        "  LogLevel ERROR\n"
        f"  SetEnv GPUTOP_NODE={node}\n"
        for node, port in ports.items()
    ]
    return "# gputop's loopback nodes, one sshd port each\n" + "".join(blocks)


def _ports_ready(ports: Sequence[int], pids: Sequence[int]) -> tuple[bool, list[int]]:
    """(every port listens, the ports some other process holds): a port chosen free can be taken by
    someone else before sshd binds it, and sshd then serves the others and only logs the failure."""
    listeners = listening_ports()
    if listeners is None:  # no /proc: all that can be known is that something answers
        answering = set()
        for port in ports:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                answering.add(port)
        return answering == set(ports), []
    if not all(port in listeners for port in ports):
        return False, []
    ours = socket_inodes(pids)
    return True, [port for port in ports if listeners[port] not in ours]


def _children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text(encoding="ascii")
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the process that started sshd dies, so a test run that is
    killed (and never reaches its teardown) leaves no sshd behind. Linux only; elsewhere a no-op."""
    with contextlib.suppress(Exception):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _start(
    base_dir: Path,
    node_dir: Path,
    user: str,
    names: tuple[str, ...],
    gpus_per_node: int,
    seed: int,
    owned: list[Path],
) -> RealSshd:
    host_public = _key(base_dir / "ssh_host_ed25519_key")
    client_key = base_dir / "id_ed25519"
    _write(node_dir / "authorized_keys", _key(client_key) + "\n", 0o644)
    faults_file = node_dir / "faults"
    _write(faults_file, "", 0o644)
    env = {
        "GPUTOP_FAKE_NODES": str(len(names)),
        "GPUTOP_FAKE_GPUS": str(gpus_per_node),
        "GPUTOP_FAKE_SEED": str(seed),
        "GPUTOP_FAKE_START": str(int(time.time())),
        "GPUTOP_FAKE_FAULTS_FILE": str(faults_file),
        # the gputop these tests import, whether installed or not
        "PYTHONPATH": str(REPO_ROOT),
    }
    bin_dir = node_dir / "bin"
    bin_dir.mkdir(exist_ok=True)
    bin_dir.chmod(0o755)
    for tool in TOOLS:
        _write(bin_dir / tool, _wrapper(tool), 0o755)
    known_hosts = base_dir / "known_hosts"
    ssh_config = base_dir / "ssh_config"
    last_error = ""
    for _attempt in range(3):  # a port taken between choosing it and sshd binding it: choose again
        ports = dict(zip(names, free_ports(len(names)), strict=True))
        _write(bin_dir / "node-shell", _node_shell(node_dir, ports, env), 0o755)
        _write(known_hosts, "".join(f"[127.0.0.1]:{p} {host_public}\n" for p in ports.values()), 0o644)
        _write(ssh_config, _ssh_config(user, ports, client_key, known_hosts), 0o644)
        processes, logs, last_error = _launch(base_dir, node_dir, user, list(ports.values()))
        if processes:
            return RealSshd(
                base_dir=base_dir,
                node_dir=node_dir,
                ssh_config=ssh_config,
                known_hosts=known_hosts,
                client_key=client_key,
                host_public_key=host_public,
                user=user,
                nodes=names,
                ports=ports,
                env=env,
                faults_file=faults_file,
                logs=logs,
                processes=processes,
                owned_dirs=tuple(owned),
            )
        if "Address already in use" not in last_error:
            break
    raise RuntimeError(f"sshd did not start:\n{last_error}")


def _launch(
    base_dir: Path, node_dir: Path, user: str, ports: list[int]
) -> tuple[list[subprocess.Popen[bytes]], tuple[Path, ...], str]:
    """Starts one sshd per 16 ports and waits for every port; ([], logs, why) when that fails."""
    chunks = [ports[i : i + MAX_LISTEN_SOCKS] for i in range(0, len(ports), MAX_LISTEN_SOCKS)]
    configs = []
    logs = []
    for k, chunk in enumerate(chunks):
        config = base_dir / f"sshd_config.{k}"
        _write(config, _sshd_config(base_dir, node_dir, user, chunk, k), 0o644)
        configs.append(config)
        logs.append(base_dir / f"sshd.{k}.log")
    check = subprocess.run([SSHD, "-t", "-f", str(configs[0])], capture_output=True, text=True, check=False)
    if check.returncode != 0:
        message = (check.stderr or check.stdout).strip()
        if os.geteuid() != 0:
            raise SshdUnavailable(f"sshd cannot run as this (non-root) user: {message}")
        raise RuntimeError(f"sshd -t rejected {configs[0]}: {message}")
    processes = []
    for config, log in zip(configs, logs, strict=True):
        log.unlink(missing_ok=True)
        processes.append(
            subprocess.Popen(
                [SSHD, "-D", "-f", str(config), "-E", str(log)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C in the terminal is for pytest, not for sshd
                preexec_fn=_die_with_parent,
            )
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    why = ""
    while True:
        ready, taken = _ports_ready(ports, [p.pid for p in processes])
        if ready and not taken:
            return processes, tuple(logs), ""
        exited = [p for p in processes if p.poll() is not None]
        if taken:
            why = f"Address already in use: ports {taken} are held by another process"
        elif exited:
            why = "sshd exited"
        elif time.monotonic() > deadline:
            why = f"sshd not listening after {START_TIMEOUT_S:g}s"
        if why:
            for p in processes:
                if p.poll() is None:
                    p.kill()
                p.wait()
            return [], tuple(logs), f"{why}:\n" + "".join(read_text(log) for log in logs)
        time.sleep(0.02)
