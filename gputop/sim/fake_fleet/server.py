"""One asyncssh server on one port playing every node of a simulated cluster.

The login name picks the node (user ``gpu007`` is node gpu007); a client logging in under another name
picks it with the ``GPUTOP_NODE`` environment variable instead. Public keys only, checked against the
fleet's authorized keys. Built for a thousand concurrent connections on two cores: a stream costs one
timer callback and one channel write per interval, and its lines come from pre-formatted templates.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import shutil
import tempfile
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import asyncssh

from gputop.sim.fake_fleet.faults import Fault, Faults
from gputop.sim.fake_fleet.responder import (
    NVIDIA_SMI,
    Reply,
    Responder,
    Served,
    Shell,
    Stream,
    old_driver_lacks,
    parse_command,
    select_columns,
)
from gputop.sim.fake_fleet.slurm_login import LOGIN_USER, SlurmLogin, gres_type
from gputop.sim.fake_fleet.state_dir import (
    StateFiles,
    load_or_create_keys,
    write_authorized_keys,
    write_client_files,
)
from gputop.sim.simulator import SimulatedCluster

# nvidia-smi's exit status for a query it refuses (an unknown field)
QUERY_REFUSED_EXIT_STATUS: Final = 2

NODE_ENV: Final = "GPUTOP_NODE"
# At least the number of handshakes in flight when a thousand clients connect at once (the kernel caps it
# at net.core.somaxconn).
LISTEN_BACKLOG: Final = 4096
# A reader that stops reading gets no more lines once this much is queued, as nvidia-smi would block on
# a full pipe; without the cap one stuck client would grow the fleet's memory without bound.
MAX_QUEUED_BYTES: Final = 256 * 1024
SESSION_EXIT_NO_NODE: Final = 1
SESSION_EXIT_REFUSED: Final = 255
# SSH_MSG_IGNORE (RFC 4253) with an empty string as its payload: asyncssh's padding packet
_MSG_IGNORE: Final = 2
_EMPTY_STRING: Final = (b"\x00\x00\x00\x00",)


def raise_open_file_limit() -> int:
    """Soft RLIMIT_NOFILE up to the hard limit: each connection holds a socket. Returns the new limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return soft
    # An unlimited hard limit still meets the kernel's fs.nr_open (1,048,576 by default) on the way.
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class _Core:
    """What every connection shares."""

    def __init__(
        self, responder: Responder, authorized_keys: asyncssh.SSHAuthorizedKeys, slurm: SlurmLogin
    ) -> None:
        self.responder = responder
        self.slurm = slurm
        self.authorized_keys = authorized_keys
        self.faults = responder.faults
        self.closing = asyncio.Event()
        self.connections: set[asyncssh.SSHServerConnection] = set()
        self.sessions: set[_NodeSession] = set()

    def is_node(self, name: str) -> bool:
        return name in self.responder.node_index

    def stalls_handshake(self, node: str) -> bool:
        return node in self.responder.unresponsive or self.faults.has(node, Fault.STALL_HANDSHAKE)

    async def never(self, conn: asyncssh.SSHServerConnection) -> bool:
        """An answer that does not come: the connection waits until the fleet shuts down and drops it."""
        await self.closing.wait()
        conn.close()
        return True


def _send_like_openssh(conn: asyncssh.SSHServerConnection) -> None:
    """asyncssh puts an empty SSH_MSG_IGNORE before every packet it encrypts (a defence for CBC ciphers);
    OpenSSH's sshd sends none. Without them a fleet node costs its client what a real node costs: one
    packet per write, not two."""
    send = conn.send_packet

    def send_packet(pkttype: int, *args: bytes, handler: Any = None) -> None:
        if pkttype == _MSG_IGNORE and args == _EMPTY_STRING:
            return
        send(pkttype, *args, handler=handler)

    conn.send_packet = send_packet  # type: ignore[method-assign]


class _NodeServer(asyncssh.SSHServer):
    def __init__(self, core: _Core) -> None:
        self._core = core
        self._conn: asyncssh.SSHServerConnection | None = None
        self._login_node: str | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        self._core.connections.add(conn)
        _send_like_openssh(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._core.connections.discard(self._conn)

    def begin_auth(self, username: str) -> bool | Awaitable[bool]:
        core = self._core
        conn = self._conn
        node = self._login_node = username if core.is_node(username) or username == LOGIN_USER else None
        if conn is None:
            return True
        if node is not None:
            core.responder.note(node, "connect")
        if node is not None and core.stalls_handshake(node):
            # Key exchange is done but authentication never answers: to the client, the handshake hangs.
            return core.never(conn)
        if node is None or not core.faults.has(node, Fault.REFUSE_AUTH):
            # Keys per connection rather than per server, so a refusing node can be left with none: with no
            # method left to try, the client gets "Permission denied".
            conn.set_authorized_keys(core.authorized_keys)
        return True

    def public_key_auth_supported(self) -> bool:
        return False  # only through the keys begin_auth set

    def session_requested(self) -> asyncssh.SSHServerSession[bytes]:
        return _NodeSession(self._core, self._login_node)


class _NodeSession(asyncssh.SSHServerSession[bytes]):
    """One channel: a command run once, or the metrics stream until the client closes it."""

    def __init__(self, core: _Core, login_node: str | None) -> None:
        self._core = core
        self._login_node = login_node
        self._node = ""
        self._chan: asyncssh.SSHServerChannel[bytes] | None = None
        self._command: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._interval_s = 1.0
        self._due = 0.0
        self._dies_in: int | None = None
        self._columns: tuple[int, ...] | None = None
        self._closed = False
        # gputop's fact shell: what it was sent and has not answered yet, and the task answering it
        self._shell_started = False
        self._shell_input = bytearray()
        self._shell_eof = False
        self._answering: asyncio.Task[None] | None = None

    # ---- asyncssh callbacks

    def connection_made(self, chan: asyncssh.SSHServerChannel[bytes]) -> None:
        self._chan = chan
        self._core.sessions.add(self)

    def shell_requested(self) -> bool:
        return True

    def exec_requested(self, command: str) -> bool:
        self._command = command
        return True

    def session_started(self) -> None:
        self._task = asyncio.ensure_future(self._start())

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        # Kept for a shell (which may not have started yet); the other commands leave stdin unread.
        self._shell_input += data
        if len(self._shell_input) > MAX_QUEUED_BYTES:
            del self._shell_input[:-MAX_QUEUED_BYTES]
        self._answer_shell_lines()

    def eof_received(self) -> bool:
        self._shell_eof = True  # a shell exits once it has run what it read
        self._answer_shell_lines()
        return True  # stdin closed: like nvidia-smi, keep printing

    def signal_received(self, signal: str) -> None:
        if self._chan is not None and not self._closed:
            self._stop()
            self._chan.exit_with_signal(signal)

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._stop()
        for task in (self._task, self._answering):
            if task is not None:
                task.cancel()
        self._core.sessions.discard(self)

    # ---- running a command

    def _stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _send(self, reply: Reply) -> None:
        chan = self._chan
        if chan is None or self._closed:
            return
        if reply.stdout:
            chan.write(reply.stdout)
        if reply.stderr:
            chan.write_stderr(reply.stderr)
        chan.exit(reply.exit_status)

    def _pick_node(self) -> str | None:
        if self._login_node is not None:
            return self._login_node
        if self._chan is None:
            return None
        wanted = self._chan.get_environment().get(NODE_ENV)
        return wanted if wanted is not None and self._core.is_node(wanted) else None

    async def _start(self) -> None:
        core = self._core
        node = self._pick_node()
        if node is None:
            nodes = core.responder.cluster.node_names
            message = (
                f"gputop fake fleet: no node to play; log in as one ({nodes[0]} ... {nodes[-1]}) "
                f"or send {NODE_ENV}=<node>\n"
            )
            self._send(Reply(stderr=message.encode(), exit_status=SESSION_EXIT_NO_NODE))
            return
        self._node = node
        if node == LOGIN_USER:
            self._send(self._slurm_reply())
            return
        faults = core.faults
        if self._login_node is None:
            # Chosen by environment, the node is known only now, after login: its handshake faults act here.
            if core.stalls_handshake(node):
                return
            if faults.has(node, Fault.REFUSE_AUTH):
                denied = b"Permission denied (publickey).\n"
                self._send(Reply(stderr=denied, exit_status=SESSION_EXIT_REFUSED))
                return
        if faults.has(node, Fault.STALL_COMMAND):
            return  # started and silent until the client gives up
        if faults.has(node, Fault.SLOW):
            await asyncio.sleep(faults.slow_delay_s)
        if self._command is None:
            text = f"{node}: this fake node runs gputop's commands only (nvidia-smi, ibstat, journalctl)\n"
            self._send(Reply(stderr=text.encode(), exit_status=1))
            return
        lacking = old_driver_lacks(self._command) if faults.has(node, Fault.OLD_DRIVER) else None
        if lacking is not None:
            refusal = f'Field "{lacking}" is not a valid field to query.\n'.encode()
            self._send(Reply(stdout=refusal, exit_status=QUERY_REFUSED_EXIT_STATUS))
            return
        command = parse_command(self._command)
        reply = core.responder.run_once(node, command)
        if reply is not None:
            self._send(reply)
        elif isinstance(command, Shell):
            self._shell_started = True
            self._answer_shell_lines()
        elif isinstance(command, Stream):
            self._start_stream(command)

    def _slurm_reply(self) -> Reply:
        if self._command is None:
            text = (
                f"{LOGIN_USER}: this fake login node runs Slurm's commands only (squeue, sinfo, scontrol)\n"
            )
            return Reply(stderr=text.encode(), exit_status=1)
        status, out, err = self._core.slurm.run(self._command)
        return Reply(out.encode(), err.encode(), status)

    def _answer_shell_lines(self) -> None:
        if self._shell_started and (self._answering is None or self._answering.done()):
            self._answering = asyncio.ensure_future(self._run_shell_lines())

    async def _run_shell_lines(self) -> None:
        """Runs each complete line of the shell's input in turn, as sh does, the node's faults read
        afresh at every line."""
        core = self._core
        while (end := self._shell_input.find(b"\n")) >= 0:
            if self._closed or self._chan is None or core.faults.has(self._node, Fault.STALL_COMMAND):
                return  # hangs: the client times the line out and closes the channel
            if core.faults.has(self._node, Fault.SLOW):
                await asyncio.sleep(core.faults.slow_delay_s)
            line = self._shell_input[:end].decode(errors="replace")
            del self._shell_input[: end + 1]
            stdout, stderr = core.responder.shell_line(self._node, line)
            if self._closed or self._chan is None:
                return
            if stdout:
                self._chan.write(stdout)
            if stderr:
                self._chan.write_stderr(stderr)
        if self._shell_eof and self._chan is not None and not self._closed:
            self._chan.exit(0)

    def _start_stream(self, stream: Stream) -> None:
        failed = self._core.responder.failure(self._node, NVIDIA_SMI)
        if failed is not None:
            self._send(failed)
            return
        self._interval_s = stream.interval_s
        self._columns = stream.columns
        # nvidia-smi prints its first sample at once, then one every interval.
        self._due = asyncio.get_running_loop().time()
        self._tick()

    def _tick(self) -> None:
        self._timer = None
        chan = self._chan
        if self._closed or chan is None:
            return
        node = self._node
        core = self._core
        faults = core.faults
        failed = core.responder.failure(node, NVIDIA_SMI)
        if failed is not None:
            self._send(failed)  # the driver went away under a running stream
            return
        node_faults = faults.of(node)
        if Fault.DIE_MIDSTREAM in node_faults:
            if self._dies_in is None:
                self._dies_in = faults.die_after_intervals
            if self._dies_in <= 0:
                chan.write(b"0, GPU-")  # killed mid-line: no newline, no exit status
                chan.close()
                return
            self._dies_in -= 1
        else:
            self._dies_in = None
        if Fault.STALL_COMMAND not in node_faults and chan.get_write_buffer_size() < MAX_QUEUED_BYTES:
            lines = core.responder.stream_lines(node)
            chan.write(lines if self._columns is None else select_columns(lines, self._columns))
        loop = asyncio.get_running_loop()
        now = loop.time()
        self._due += self._interval_s
        if self._due < now:  # fell behind (a paused process): skip the missed intervals, keep the phase
            missed = int((now - self._due) / self._interval_s) + 1
            self._due += missed * self._interval_s
        self._timer = loop.call_at(self._due, self._tick)


@dataclass
class Fleet:
    """A running fleet, and where a client finds everything it needs to reach it."""

    host: str
    port: int
    state_dir: Path
    ssh_config_path: Path
    known_hosts_path: Path
    client_key_path: Path
    config_path: Path
    faults: Faults
    cluster: SimulatedCluster
    _server: asyncssh.SSHAcceptor = field(repr=False)
    _core: _Core = field(repr=False)
    _owned_dir: bool = field(default=False, repr=False)

    @property
    def node_names(self) -> tuple[str, ...]:
        return self.cluster.node_names

    @property
    def served(self) -> deque[Served]:
        """What the nodes were asked, oldest first (the last SERVED_KEPT): connections, shells, streams
        and commands, each command with the fact-shell round it came in."""
        return self._core.responder.served

    @property
    def unresponsive_nodes(self) -> frozenset[str]:
        """Nodes whose handshake never completes, whatever the faults say (the simulator's silent node)."""
        return self._core.responder.unresponsive

    @property
    def open_sessions(self) -> int:
        return len(self._core.sessions)

    def drop_connections(self) -> int:
        """Drops every client connection at once, as a network that fails would (no SSH goodbye);
        returns how many there were."""
        connections = list(self._core.connections)
        for conn in connections:
            conn.abort()
        return len(connections)

    async def close(self) -> None:
        core = self._core
        core.closing.set()
        self._server.close()
        connections = list(core.connections)
        for conn in connections:
            conn.close()
        # Since Python 3.12 the listener's wait_closed waits for its connections: close them first.
        await asyncio.gather(*(conn.wait_closed() for conn in connections), return_exceptions=True)
        await self._server.wait_closed()
        if self._owned_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)


def _faults_from(
    faults: Faults | Mapping[str, Iterable[Fault | str]] | None,
    node_names: Sequence[str],
    clock: Callable[[], float],
) -> Faults:
    result = faults if isinstance(faults, Faults) else Faults(faults or {}, clock=clock)
    unknown = sorted(node for node, _ in result.items() if node not in set(node_names))
    if unknown:
        raise ValueError(f"faults name nodes the fleet does not have: {', '.join(unknown)}")
    return result


async def start_fleet(
    *,
    nodes: int = 200,
    gpus_per_node: int = 8,
    gpu_model: str = "H100",
    seed: int = 42,
    host: str = "127.0.0.1",
    port: int = 2222,
    state_dir: str | Path | None = None,
    faults: Faults | Mapping[str, Iterable[Fault | str]] | None = None,
    authorized_keys: Sequence[str] = (),
    clock: Callable[[], float] = time.time,
) -> Fleet:
    """Starts a fleet; `Fleet.close` stops it. ``port=0`` takes any free port. Without ``state_dir`` a
    temporary directory is used and removed on close. ``authorized_keys`` are extra OpenSSH public key
    lines to accept besides the fleet's own client key."""
    raise_open_file_limit()
    owned = state_dir is None
    directory = Path(tempfile.mkdtemp(prefix="gputop-fake-fleet-")) if state_dir is None else Path(state_dir)
    files = StateFiles(directory.resolve())
    try:
        cluster = SimulatedCluster(
            nodes=nodes, gpus_per_node=gpus_per_node, gpu_model=gpu_model, seed=seed, start_time_s=clock()
        )
        fleet_faults = _faults_from(faults, cluster.node_names, clock)
        host_key, client_key = load_or_create_keys(files)
        accepted = write_authorized_keys(files, client_key, authorized_keys)
        slurm = SlurmLogin(cluster, gres_type(gpu_model), clock, user=LOGIN_USER)
        core = _Core(
            Responder(cluster, fleet_faults, clock), asyncssh.import_authorized_keys(accepted), slurm
        )
        server = await asyncssh.create_server(
            lambda: _NodeServer(core),
            host,
            port,
            server_host_keys=[host_key],
            public_key_auth=True,  # with the keys begin_auth sets per connection
            backlog=LISTEN_BACKLOG,
            reuse_address=True,
            encoding=None,  # bytes: the garbage fault writes what is not UTF-8
            login_timeout=0,  # a stalled handshake stalls for as long as the client waits
            allow_scp=False,
            agent_forwarding=False,
            x11_forwarding=False,
        )
    except BaseException:
        if owned:
            shutil.rmtree(directory, ignore_errors=True)
        raise
    bound = server.sockets[0].getsockname()[1]
    client_host = "127.0.0.1" if host in ("", "0.0.0.0") else host  # noqa: S104 - naming what clients dial
    write_client_files(
        files,
        host=client_host,
        port=bound,
        host_key=host_key,
        node_names=cluster.node_names,
        gpus_per_node=gpus_per_node,
    )
    return Fleet(
        host=client_host,
        port=bound,
        state_dir=files.state_dir,
        ssh_config_path=files.ssh_config,
        known_hosts_path=files.known_hosts,
        client_key_path=files.client_key,
        config_path=files.gputop_config,
        faults=fleet_faults,
        cluster=cluster,
        _server=server,
        _core=core,
        _owned_dir=owned,
    )


@contextlib.asynccontextmanager
async def run_fleet(
    *,
    nodes: int = 200,
    gpus_per_node: int = 8,
    gpu_model: str = "H100",
    seed: int = 42,
    host: str = "127.0.0.1",
    port: int = 2222,
    state_dir: str | Path | None = None,
    faults: Faults | Mapping[str, Iterable[Fault | str]] | None = None,
    authorized_keys: Sequence[str] = (),
    clock: Callable[[], float] = time.time,
) -> AsyncIterator[Fleet]:
    """``async with run_fleet(nodes=8, port=0, state_dir=tmp_path) as fleet:`` -- see `start_fleet`."""
    fleet = await start_fleet(
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        gpu_model=gpu_model,
        seed=seed,
        host=host,
        port=port,
        state_dir=state_dir,
        faults=faults,
        authorized_keys=authorized_keys,
        clock=clock,
    )
    try:
        yield fleet
    finally:
        await fleet.close()
