"""What a fake node answers to a command line: the exact commands gputop sends, from the shared simulator's
state for that node, bent by the node's faults. No I/O and no timing (the server owns both).

nvidia-smi's MIG command lines, the listings and the changes gputop's planner sends, with or without a
``sudo`` prefix, run on the simulator's MIG state (`SimulatedCluster.nvidia_smi`), so a change shows in the
next listing.
"""

from __future__ import annotations

import random
import shlex
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, NamedTuple

from gputop.core.models import GpuSample, NodeSample, XidEvent
from gputop.core.parsers.nvlink import NvlinkStatus
from gputop.core.parsers.nvlink_errors import NvlinkErrors
from gputop.core.parsers.smi_counters import SmiCounters
from gputop.core.parsers.topo import Topology
from gputop.sim.counters import nvlink_errors_text, smi_counters_text
from gputop.sim.fake_fleet import formats
from gputop.sim.fake_fleet.faults import FLOOD_BYTES, OLD_DRIVER_LACKS, Fault, Faults
from gputop.sim.fake_fleet.topology import topology_text
from gputop.sim.mig_commands import simulates
from gputop.sim.mig_text import format_gpu_list
from gputop.sim.simulator import SimulatedCluster
from gputop.sources.commands import (
    QUERY_GPU_FIELDS,
    default_commands,
    is_nvidia_smi,
    metrics_stream,
    strip_sudo,
)
from gputop.sources.fact_round import SHELL_COMMAND, parse_script_line, step_output

NVIDIA_SMI: Final = "nvidia-smi"
DRIVER_ERROR_EXIT_STATUS: Final = 15
NOT_FOUND_EXIT_STATUS: Final = 127
SUDO_NOT_FOUND_EXIT_STATUS: Final = 1  # sudo's own status when the program it should run is not there
SHELL_SYNTAX_EXIT_STATUS: Final = 2
MIN_STREAM_INTERVAL_S: Final = 0.05  # a guard against -lms 0 spinning the server
JOURNAL_SINCE_S: Final = 3600.0  # the Xid command asks for --since -1h
NO_MATCH_EXIT_STATUS: Final = 1  # journalctl --grep with nothing matched
IBPANIC_EXIT_STATUS: Final = 255  # infiniband-diags' exit(-1)

_IB_GUID_BASE: Final = 0x946DAE0300000000
SERVED_KEPT: Final = 100_000  # the log of what nodes were asked keeps this many entries


class Served(NamedTuple):
    """One thing a node was asked, in order: "connect", "shell", "stream", or a command by its name in
    gputop's command table ("nvidia-smi" for the MIG command lines, "unknown" for anything else), with
    the fact-shell round it came in (None: on its own)."""

    node: str
    what: str
    round: str | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    stdout: bytes = b""
    stderr: bytes = b""
    exit_status: int = 0


@dataclass(frozen=True, slots=True)
class OneShot:
    name: str  # a default_commands() name: processes, gpu_list, topology, ...
    argv: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Stream:
    interval_s: float
    # positions in QUERY_GPU_FIELDS, in the order asked for; None: all of them, in their order
    columns: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class NvidiaSmi:
    """An nvidia-smi MIG command line (listings, changes, ``-L``), perhaps after ``sudo``."""

    argv: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Unknown:
    reply: Reply


@dataclass(frozen=True, slots=True)
class Shell:
    """gputop's fact shell (gputop.sources.fact_round): ``sh`` reading the rounds' scripts from stdin."""


@dataclass(frozen=True, slots=True)
class Script:
    """``sh -c <script>``: the script's lines run in turn, as by the fact shell."""

    text: str


Command = OneShot | Stream | NvidiaSmi | Unknown | Shell | Script


_SHELLS: Final = (tuple(shlex.split(SHELL_COMMAND)), ("sh",))


def _not_found(word: str) -> Reply:
    return Reply(stderr=f"sh: 1: {word}: not found\n".encode(), exit_status=NOT_FOUND_EXIT_STATUS)


def parse_command(command_line: str) -> Command:
    """Which of gputop's commands this is; anything else fails the way a node's /bin/sh would."""
    try:
        argv = tuple(shlex.split(command_line))
    except ValueError:
        message = b"sh: 1: Syntax error: Unterminated quoted string\n"
        return Unknown(Reply(stderr=message, exit_status=SHELL_SYNTAX_EXIT_STATUS))
    if not argv:
        return Unknown(Reply())
    if argv in _SHELLS:
        return Shell()
    if len(argv) == 3 and argv[:2] == ("sh", "-c"):
        return Script(argv[2])
    name = _ONE_SHOT.get(argv)
    if name is not None:
        return OneShot(name, argv)
    if len(argv) == len(_STREAM_PREFIX) + 1 and argv[:-1] == _STREAM_PREFIX and argv[-1].isdigit():
        return Stream(max(MIN_STREAM_INTERVAL_S, int(argv[-1]) / 1000))
    subset = _subset_stream(argv)
    if subset is not None:
        return subset
    program = strip_sudo(argv)
    if is_nvidia_smi(program) and simulates(program[1:]):
        return NvidiaSmi(argv)
    if program != argv and not is_nvidia_smi(program):  # sudo ran, and found no such program
        shown = program[0] if program else "sudo"
        message = f"sudo: {shown}: command not found\n".encode()
        return Unknown(Reply(stderr=message, exit_status=SUDO_NOT_FOUND_EXIT_STATUS))
    return Unknown(_not_found(argv[0]))


def _subset_stream(argv: tuple[str, ...]) -> Stream | None:
    """The metrics stream asking for some of gputop's fields (a site's list, or one cut down for a driver
    that lacks a field): the stream's own command line with another --query-gpu."""
    if len(argv) != len(_STREAM_PREFIX) + 1 or not argv[-1].isdigit():
        return None
    query = argv[1]
    if (
        not query.startswith("--query-gpu=")
        or argv[2:-1] != _STREAM_PREFIX[2:]
        or argv[0] != _STREAM_PREFIX[0]
    ):
        return None
    fields = [f.strip() for f in query.removeprefix("--query-gpu=").split(",")]
    if not all(f in QUERY_GPU_FIELDS for f in fields):
        return None
    columns = tuple(QUERY_GPU_FIELDS.index(f) for f in fields)
    return Stream(max(MIN_STREAM_INTERVAL_S, int(argv[-1]) / 1000), columns)


def select_columns(text: bytes, columns: Sequence[int]) -> bytes:
    """Lines of every gputop field cut down to ``columns`` (values never contain ", ")."""
    if tuple(columns) == ALL_COLUMNS:
        return text
    out = []
    for line in text.splitlines():
        values = line.split(b", ")
        if len(values) != len(QUERY_GPU_FIELDS):
            out.append(line)  # not a row of values (garbage): passed on as it came
        else:
            out.append(b", ".join(values[c] for c in columns))
    return b"".join(line + b"\n" for line in out)


def old_driver_lacks(command_line: str) -> str | None:
    """The first field of a --query-gpu that an old driver does not know (Fault.OLD_DRIVER)."""
    for arg in command_line.split():
        if arg.startswith("--query-gpu="):
            fields = [f.strip() for f in arg.removeprefix("--query-gpu=").split(",")]
            return next((f for f in fields if f in OLD_DRIVER_LACKS), None)
    return None


ALL_COLUMNS: Final = tuple(range(len(QUERY_GPU_FIELDS)))
_ONE_SHOT: Final = {spec.argv: spec.name for spec in default_commands().values() if not spec.stream}
_STREAM_PREFIX: Final = metrics_stream(1.0).argv[:-1]


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node as its tools see it right now: the simulator's sample with the faults applied."""

    name: str
    index: int
    sample: NodeSample
    gpus: tuple[GpuSample, ...]
    xid_events: tuple[XidEvent, ...]


class Responder:
    def __init__(
        self, cluster: SimulatedCluster, faults: Faults, clock: Callable[[], float] = time.time
    ) -> None:
        self.cluster = cluster
        self.faults = faults
        self.clock = clock
        self.node_index = {name: i for i, name in enumerate(cluster.node_names)}
        self.unresponsive = frozenset(i.node for i in cluster.incidents if i.kind == "unresponsive")
        self._query = formats.QueryGpuFormatter()
        self._garbage = random.Random(f"gputop-fake-fleet:{cluster.seed}:garbage")  # noqa: S311 - test noise
        self._views: dict[tuple[str, bool], NodeView] = {}
        self._views_step = -1.0
        # what each node was asked, oldest first: how tests and the tool see what a client did, from the
        # side of the nodes
        self.served: deque[Served] = deque(maxlen=SERVED_KEPT)

    def note(self, node: str, what: str, round_: str | None = None) -> None:
        self.served.append(Served(node, what, round_))

    # ---- state

    def view(self, node: str) -> NodeView:
        """The node as of the simulator's latest whole second (advanced to the wall clock first)."""
        cluster = self.cluster
        cluster.advance_to(self.clock())
        if cluster.now_s != self._views_step:
            self._views.clear()
            self._views_step = cluster.now_s
        fallen = self.faults.has(node, Fault.FALLEN_OFF_BUS)
        cached = self._views.get((node, fallen))
        if cached is not None:
            return cached
        index = self.node_index[node]
        sample = cluster.result().nodes[index]
        gpus = sample.gpus
        xids = sample.xid_events
        if fallen and gpus:
            lost = gpus[-1]
            gpus = gpus[:-1]
            since = self.faults.since_s(node, Fault.FALLEN_OFF_BUS)
            bus = lost.pci_bus_id or "00000000:00:00.0"
            event = XidEvent(
                since if since is not None else cluster.now_s,
                79,
                lost.pci_bus_id,
                lost.index,
                formats.fallen_off_bus_message(bus),
            )
            xids = (*xids, event)
        view = NodeView(node, index, sample, gpus, xids)
        self._views[(node, fallen)] = view
        return view

    # ---- answers

    def failure(self, node: str, argv0: str) -> Reply | None:
        """The reply a faulty node gives instead of running ``argv0``, if it does."""
        faults = self.faults.of(node)
        if argv0 != NVIDIA_SMI:
            return None
        if Fault.NO_NVIDIA_SMI in faults:
            return Reply(stderr=b"bash: nvidia-smi: command not found\n", exit_status=NOT_FOUND_EXIT_STATUS)
        if Fault.DRIVER_ERROR in faults:
            gpus = self.view(node).sample.gpus
            bus = gpus[0].pci_bus_id if gpus and gpus[0].pci_bus_id else "00000000:18:00.0"
            return Reply(formats.device_handle_error(bus).encode(), exit_status=DRIVER_ERROR_EXIT_STATUS)
        return None

    def answer(self, node: str, command: OneShot) -> Reply:
        failed = self.failure(node, command.argv[0])
        if failed is not None:
            return failed
        if self.faults.has(node, Fault.GARBAGE):
            return Reply(self.garbage(8))
        name = command.name
        if name == "ibstat" and self.faults.has(node, Fault.FLOOD):
            return Reply(b"CA 'mlx5_0'\n" + b"\tFirmware version: 28.39.1002\n" * (FLOOD_BYTES // 30))
        view = self.view(node)
        if name == "processes":
            return Reply(formats.compute_apps(view.gpus).encode())
        if name == "gpu_list":
            devices = self.cluster.mig_devices(node)
            listed = [(g.index, g.name, g.uuid) for g in view.gpus]
            return Reply(format_gpu_list(listed, devices).encode())
        if name == "topology":
            topology = view.sample.facts.topology.value
            if not isinstance(topology, Topology):
                return Reply()  # the simulator gives every node one; nothing to print without it
            return Reply(topology_text(topology, {f"GPU{g.index}" for g in view.gpus}).encode())
        if name == "nvlink":
            status = view.sample.facts.nvlink.value
            seen = {g.index for g in view.gpus}
            gpus = status.gpus if isinstance(status, NvlinkStatus) else ()
            return Reply(formats.nvlink_status(g for g in gpus if g.index in seen).encode())
        if name == "counters":
            counters = view.sample.facts.counters.value
            if not isinstance(counters, SmiCounters):
                return Reply()
            buses = {g.pci_bus_id for g in view.gpus}
            shown = SmiCounters(tuple(c for c in counters.gpus if c.pci_bus_id in buses))
            return Reply(smi_counters_text(shown).encode())
        if name == "nvlink_errors":
            errors = view.sample.facts.nvlink_errors.value
            uuids = {g.index: g.uuid for g in view.gpus}
            known = errors.gpus if isinstance(errors, NvlinkErrors) else ()
            model = view.gpus[0].name if view.gpus else "NVIDIA"
            return Reply(nvlink_errors_text((g for g in known if g.index in uuids), model, uuids).encode())
        if name.startswith("mig_"):
            return self._on_simulator(node, command.argv)
        if name == "ibstat":
            guid = _IB_GUID_BASE + view.index * 0x100
            ports = view.sample.ib_ports
            if self.faults.has(node, Fault.IB_ADAPTER_FAILS) and ports:
                # infiniband-diags' IBPANIC on the last adapter: the ones before it printed, exit(-1)
                lost = ports[-1].ca_name
                kept = tuple(p for p in ports if p.ca_name != lost)
                pid = 4000 + view.index
                panic = f"ibpanic: [{pid}] main: stat of IB device '{lost}' failed: No such device\n"
                listing = formats.ibstat(kept, guid, lid_base=view.index * 8 + 1)
                return Reply(listing.encode(), panic.encode(), IBPANIC_EXIT_STATUS)
            return Reply(formats.ibstat(ports, guid, lid_base=view.index * 8 + 1).encode())
        if name == "xid":
            since = self.clock() - JOURNAL_SINCE_S
            recent = [e for e in view.xid_events if e.time_s >= since]
            if not recent:
                return Reply(formats.NO_JOURNAL_ENTRIES.encode(), exit_status=NO_MATCH_EXIT_STATUS)
            return Reply(formats.journal_kernel_lines(node, recent).encode())
        return _not_found(command.argv[0])  # a command gputop gained that this fleet does not play yet

    def shell_line(self, node: str, line: str) -> tuple[bytes, bytes]:
        """(stdout, stderr) that the node's sh prints for one line of its input: a step of gputop's
        round script, its command's answer framed by the step's markers; any other line, its answer."""
        step = parse_script_line(line)
        reply = self.run_once(
            node, parse_command(line if step is None else step[2]), None if step is None else step[0]
        )
        if reply is None:  # a stream or a shell inside the shell: gputop sends neither
            reply = _not_found(shlex.split(line)[0])
        if step is None:
            return reply.stdout, reply.stderr
        return step_output(step[0], step[1], reply.stdout, reply.stderr, reply.exit_status)

    def run_once(self, node: str, command: Command, round_: str | None = None) -> Reply | None:
        """The answer of a command that runs once and exits; None for a stream or a shell, which keep
        running (the server plays those). ``round_``: the fact-shell round it is a step of."""
        if isinstance(command, OneShot):
            self.note(node, command.name, round_)
            return self.answer(node, command)
        if isinstance(command, NvidiaSmi):
            self.note(node, "nvidia-smi", round_)
            return self.nvidia_smi(node, command)
        if isinstance(command, Unknown):
            self.note(node, "unknown", round_)
            return command.reply
        if isinstance(command, Script):
            return self.script(node, command)
        if isinstance(command, Shell) and self.faults.has(node, Fault.NO_SHELL):
            self.note(node, "unknown", round_)
            return _not_found(_SHELLS[0][0])  # "sh: 1: exec: not found", as a forced command might say
        self.note(node, "shell" if isinstance(command, Shell) else "stream", round_)
        return None

    def script(self, node: str, script: Script) -> Reply:
        """What ``sh -c`` prints for a script: each line's answer in turn."""
        stdout, stderr = bytearray(), bytearray()
        for line in script.text.splitlines():
            out, err = self.shell_line(node, line)
            stdout += out
            stderr += err
        return Reply(bytes(stdout), bytes(stderr))

    def nvidia_smi(self, node: str, command: NvidiaSmi) -> Reply:
        """An nvidia-smi command line run on the simulator's state of ``node`` (MIG listings and changes)."""
        failed = self.failure(node, NVIDIA_SMI)
        if failed is not None:
            return failed
        if self.faults.has(node, Fault.GARBAGE):
            return Reply(self.garbage(8))
        self.view(node)  # the simulator at the wall clock, as every other answer sees it
        return self._on_simulator(node, command.argv)

    def _on_simulator(self, node: str, argv: tuple[str, ...]) -> Reply:
        status, out, err = self.cluster.nvidia_smi(node, argv)
        self._views.clear()  # a MIG change shows in the very next answer, not a second later
        return Reply(out.encode(), err.encode(), status)

    def stream_lines(self, node: str) -> bytes:
        """One interval of the metrics stream: a CSV line per GPU the node can see."""
        if self.faults.has(node, Fault.GARBAGE):
            return self.garbage(self.cluster.gpus_per_node)
        return self._query.lines(self.view(node).gpus).encode()

    def garbage(self, lines: int) -> bytes:
        """Output a broken tool or terminal might produce: bytes that are not UTF-8, CSV rows with the
        wrong number of fields, NULs, a line cut short."""
        rng = self._garbage
        out = bytearray()
        for _ in range(lines):
            kind = rng.randrange(4)
            if kind == 0:
                out += bytes(rng.randrange(256) for _ in range(rng.randrange(8, 80))) + b"\n"
            elif kind == 1:
                fields = rng.randrange(1, 30)
                out += b", ".join(str(rng.randrange(-5, 100000)).encode() for _ in range(fields)) + b"\n"
            elif kind == 2:
                out += b"0, GPU-\xff\xfe\xc3\x28, NVIDIA \x00H100, 00000000:18:00.0, 9\xe2\x82, [N/A\n"
            else:
                out += b",,,,\r\n"
        out += b"\xc0\xaf"  # an overlong encoding: never valid UTF-8, whatever the random bytes were
        return bytes(out)
