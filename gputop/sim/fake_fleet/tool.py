"""One command of one fake node, as a program a real sshd can run:

    GPUTOP_NODE=node03 python -m gputop.sim.fake_fleet.tool nvidia-smi -L

Wrapper scripts named ``nvidia-smi``, ``ibstat`` and ``journalctl`` exec this module with their own name
and arguments; it answers for the node named by ``$GPUTOP_NODE`` exactly as the in-process fleet would,
through the same `Responder`, from a `SimulatedCluster` rebuilt from the environment on every run. The
same seed and start give the same cluster, so a stream and a one-shot command run in different processes
agree. ``--query-gpu=... --format=csv,noheader,nounits`` with ``-lms N`` (or ``-l N``) prints an interval
forever, until killed or until its reader goes away, as nvidia-smi does.

Environment:

    GPUTOP_NODE              the node: a name of the simulated cluster (gpu001), or any name whose
                             trailing number N picks the cluster's Nth node (node01 is the first)
    GPUTOP_FAKE_NODES        nodes in the simulated cluster (default 200, as ``gputop fake-fleet``)
    GPUTOP_FAKE_GPUS         GPUs per node (default 8)
    GPUTOP_FAKE_MODEL        GPU model (default H100)
    GPUTOP_FAKE_SEED         simulation seed (default 42)
    GPUTOP_FAKE_START        the cluster's start in Unix seconds, so every process shares one timeline
                             (default: now, to the whole second)
    GPUTOP_FAKE_FAULTS       faults, NODE=FAULT[,FAULT...], several separated by ';'
    GPUTOP_FAKE_FAULTS_FILE  a file of such lines; a stream reads it again whenever it changes

Besides the fleet's exact commands, ``--query-gpu`` takes any of gputop's fields in any order and runs
once without a loop option. Other arguments are refused with exit status 2 rather than answered wrongly.
Faults act as in the fleet for a node chosen by environment: the handshake is sshd's and already over,
so ``stall_handshake`` stalls the command and ``refuse_auth`` exits 255 with OpenSSH's message. The
simulator's silent node is not silent here, for the same reason: it answers with its last values.

Start-up is paid on every command over SSH: this module imports only what answering needs.
"""

from __future__ import annotations

import os
import select
import shlex
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from gputop.sim.fake_fleet.faults import Fault, Faults, parse_fault_spec
from gputop.sim.fake_fleet.responder import (
    ALL_COLUMNS,
    MIN_STREAM_INTERVAL_S,
    NVIDIA_SMI,
    OneShot,
    Reply,
    Responder,
    Stream,
    old_driver_lacks,
    parse_command,
    select_columns,
)
from gputop.sim.simulator import SimulatedCluster
from gputop.sources.commands import QUERY_GPU_FIELDS

NODE_ENV: Final = "GPUTOP_NODE"  # the same variable the in-process fleet reads
NODES_ENV: Final = "GPUTOP_FAKE_NODES"
GPUS_ENV: Final = "GPUTOP_FAKE_GPUS"
MODEL_ENV: Final = "GPUTOP_FAKE_MODEL"
SEED_ENV: Final = "GPUTOP_FAKE_SEED"
START_ENV: Final = "GPUTOP_FAKE_START"
FAULTS_ENV: Final = "GPUTOP_FAKE_FAULTS"
FAULTS_FILE_ENV: Final = "GPUTOP_FAKE_FAULTS_FILE"

TOOLS: Final = ("nvidia-smi", "ibstat", "journalctl")
USAGE_EXIT_STATUS: Final = 2
REFUSED_EXIT_STATUS: Final = 255  # what ssh exits with when the login is refused
PERMISSION_DENIED: Final = b"Permission denied (publickey).\n"
QUERY_FORMAT: Final = frozenset({"csv", "noheader", "nounits"})


@dataclass(frozen=True, slots=True)
class Query:
    """``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits [-lms N | -l N]``."""

    columns: tuple[int, ...]  # positions in QUERY_GPU_FIELDS, in the order asked for
    interval_s: float | None  # None: print once and exit


def sim_node(cluster: SimulatedCluster, host: str) -> str | None:
    """The simulated node a host name plays: the cluster's own name, or its Nth node for a name ending
    in the number N (node01, dgx-7). None when neither fits."""
    names = cluster.node_names
    if host in names:
        return host
    digits = len(host) - len(host.rstrip("0123456789"))
    if digits == 0:
        return None
    number = int(host[-digits:])
    return names[number - 1] if 1 <= number <= len(names) else None


def parse_query(argv: Sequence[str]) -> Query | str:
    """An nvidia-smi ``--query-gpu`` command line, or why this fake does not play it."""
    fields: list[str] | None = None
    formats: frozenset[str] | None = None
    interval_s: float | None = None
    args = iter(argv[1:])
    for arg in args:
        name, sep, value = arg.partition("=")
        if name in ("-lms", "--loop-ms", "-l", "--loop"):
            if not sep:
                value = next(args, "")
            if not value.isdigit():
                return f"{name} needs a whole number"
            scale = 1000 if name in ("-lms", "--loop-ms") else 1
            interval_s = max(MIN_STREAM_INTERVAL_S, int(value) / scale)
        elif name == "--query-gpu" and sep:
            fields = [f.strip() for f in value.split(",")]
        elif name == "--format" and sep:
            formats = frozenset(f.strip() for f in value.split(","))
        else:
            return f"arguments not played: {shlex.join(argv[1:]) or '(none)'}"
    if fields is None:
        return f"arguments not played: {shlex.join(argv[1:]) or '(none)'}"
    for field in fields:
        if field not in QUERY_GPU_FIELDS:
            return f'Field "{field}" is not a valid field to query.'
    if formats != QUERY_FORMAT:
        return "only --format=csv,noheader,nounits is played"
    return Query(tuple(QUERY_GPU_FIELDS.index(f) for f in fields), interval_s)


class FaultSource:
    """The node's faults from the environment and the faults file, re-read when the file changes."""

    def __init__(self, environ: Mapping[str, str], cluster: SimulatedCluster, node: str) -> None:
        self._inline = environ.get(FAULTS_ENV, "")
        self._path = environ.get(FAULTS_FILE_ENV) or None
        self._cluster = cluster
        self._node = node
        self._stamp: tuple[int, int] | None = None
        self.faults = Faults()

    def _file_stamp(self) -> tuple[int, int] | None:
        if self._path is None:
            return None
        try:
            st = os.stat(self._path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def load(self) -> Faults:
        """Reads every spec; ValueError for a line that does not parse (a typo must not pass unnoticed)."""
        stamp = self._file_stamp()
        specs = [s for s in self._inline.split(";") if s.strip()]
        if stamp is not None and self._path is not None:
            with open(self._path, encoding="utf-8") as f:
                specs += [line for line in f.read().splitlines() if line.strip() and not line.startswith("#")]
        wanted: set[Fault] = set()
        for spec in specs:
            host, faults = parse_fault_spec(spec)
            if sim_node(self._cluster, host) == self._node:
                wanted.update(faults)
        since = stamp[0] / 1e9 if stamp is not None else time.time()
        self.faults = Faults({self._node: wanted} if wanted else {}, clock=lambda: since)
        self._stamp = stamp
        return self.faults

    def reload_if_changed(self) -> bool:
        if self._file_stamp() == self._stamp:
            return False
        try:
            self.load()
        except (ValueError, OSError):
            return False  # a half-written or mistyped file: keep the faults there were
        return True


class ReaderGone(Exception):
    """Whoever read our output closed it (the SSH channel went away)."""


def _write(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BrokenPipeError:
            raise ReaderGone from None
        view = view[n:]


def _send(reply: Reply) -> int:
    if reply.stdout:
        _write(1, reply.stdout)
    if reply.stderr:
        _write(2, reply.stderr)
    return reply.exit_status


def _fail(message: str, status: int = USAGE_EXIT_STATUS) -> int:
    _write(2, f"{message}\n".encode())
    return status


def _wait_for_reader_to_go(timeout_s: float | None) -> bool:
    """Sleeps up to ``timeout_s`` (None: for ever); True as soon as stdout's reader has gone, so a stalled
    or streaming command never outlives its SSH channel."""
    poller = select.poll()
    poller.register(1, 0)  # no events asked: only POLLERR/POLLHUP, which poll always reports
    timeout_ms = None if timeout_s is None else max(0, round(timeout_s * 1000))
    return bool(poller.poll(timeout_ms))


def _die_mid_line() -> None:
    _write(1, b"0, GPU-")  # killed mid-line: no newline and no exit status
    os.kill(os.getpid(), signal.SIGKILL)


def _stream(responder: Responder, node: str, faults: FaultSource, query: Query) -> int:
    """Prints an interval of lines, the first at once, until the reader goes away or the driver does."""
    due = time.monotonic()
    dies_in: int | None = None
    while True:
        faults.reload_if_changed()
        responder.faults = faults.faults
        failed = responder.failure(node, NVIDIA_SMI)
        if failed is not None:
            return _send(failed)  # the driver went away under a running stream
        node_faults = faults.faults.of(node)
        if Fault.DIE_MIDSTREAM in node_faults:
            dies_in = faults.faults.die_after_intervals if dies_in is None else dies_in
            if dies_in <= 0:
                _die_mid_line()
            dies_in -= 1
        else:
            dies_in = None
        if Fault.STALL_COMMAND not in node_faults:
            _write(1, select_columns(responder.stream_lines(node), query.columns))
        interval_s = query.interval_s or 1.0
        due += interval_s
        now = time.monotonic()
        if due < now:  # fell behind (a stopped process): skip the missed intervals, keep the phase
            due += (int((now - due) / interval_s) + 1) * interval_s
        if _wait_for_reader_to_go(due - now):
            return 0


def plan(argv: Sequence[str]) -> OneShot | Query | str:
    """What a command line asks for: one of the fleet's commands, a GPU query, or why it is not played."""
    command = parse_command(shlex.join(argv))
    if isinstance(command, OneShot):
        return command
    if isinstance(command, Stream):
        return Query(command.columns or ALL_COLUMNS, command.interval_s)
    if argv[0] == NVIDIA_SMI:
        return parse_query(argv)
    return f"arguments not played: {shlex.join(argv[1:]) or '(none)'}"


def _one_shot(responder: Responder, host: str, node: str, command: OneShot) -> int:
    reply = responder.answer(node, command)
    if command.name == "xid" and host != node:
        # the kernel log names the machine it runs on
        stdout = reply.stdout.replace(f" {node} kernel: ".encode(), f" {host} kernel: ".encode())
        reply = Reply(stdout, reply.stderr, reply.exit_status)
    return _send(reply)


def _run(responder: Responder, host: str, node: str, faults: FaultSource, argv: Sequence[str]) -> int:
    now = faults.faults
    if now.has(node, Fault.STALL_HANDSHAKE) or now.has(node, Fault.STALL_COMMAND):
        _wait_for_reader_to_go(None)
        return 0
    if now.has(node, Fault.REFUSE_AUTH):
        return _send(Reply(stderr=PERMISSION_DENIED, exit_status=REFUSED_EXIT_STATUS))
    if now.has(node, Fault.SLOW) and _wait_for_reader_to_go(now.slow_delay_s):
        return 0
    if now.has(node, Fault.OLD_DRIVER):
        lacking = old_driver_lacks(shlex.join(argv))
        if lacking is not None:
            return _fail(f'Field "{lacking}" is not a valid field to query.')
    what = plan(argv)
    if isinstance(what, str):
        return _fail(f"{argv[0]} (gputop fake node {host}): {what}")
    if isinstance(what, OneShot):
        return _one_shot(responder, host, node, what)
    failed = responder.failure(node, NVIDIA_SMI)
    if failed is not None:
        return _send(failed)
    if what.interval_s is None:
        return _send(Reply(select_columns(responder.stream_lines(node), what.columns)))
    return _stream(responder, node, faults, what)


def _int(environ: Mapping[str, str], name: str, default: int) -> int:
    text = environ.get(name, "").strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected a whole number") from None


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if environ is None else environ
    if not args or args[0] not in TOOLS:
        return _fail(f"usage: python -m gputop.sim.fake_fleet.tool {{{','.join(TOOLS)}}} [ARGS...]")
    host = env.get(NODE_ENV, "")
    try:
        start_s = float(env.get(START_ENV, "") or int(time.time()))
        cluster = SimulatedCluster(
            nodes=_int(env, NODES_ENV, 200),
            gpus_per_node=_int(env, GPUS_ENV, 8),
            gpu_model=env.get(MODEL_ENV, "") or "H100",
            seed=_int(env, SEED_ENV, 42),
            start_time_s=start_s,
        )
    except (ValueError, KeyError) as err:
        return _fail(f"{args[0]} (gputop fake node): {err}", 1)
    node = sim_node(cluster, host)
    if node is None:
        names = cluster.node_names
        return _fail(
            f"{args[0]} (gputop fake node): {NODE_ENV}={host!r} names no node of the simulated cluster "
            f"({names[0]} ... {names[-1]}, or a name ending in 1 ... {len(names)})",
            1,
        )
    faults = FaultSource(env, cluster, node)
    try:
        faults.load()
    except (ValueError, OSError) as err:
        return _fail(f"{args[0]} (gputop fake node {host}): faults: {err}", 1)
    responder = Responder(cluster, faults.faults)
    try:
        return _run(responder, host, node, faults, args)
    except ReaderGone:
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
