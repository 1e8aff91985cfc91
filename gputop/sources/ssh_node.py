"""One node over SSH: a persistent connection, the metrics stream, and the slow facts on their cadences.

A `NodeLink` runs as one task for as long as gputop watches the node. It connects (through a shared
semaphore, so a thousand handshakes do not start at once), keeps one streaming nvidia-smi open, runs each
slow command on its own cadence with a timeout (in rounds, through one long-lived shell on the node:
gputop.sources.ssh_fact_shell), and when anything breaks records why, waits with
exponential backoff and jitter, and connects again. A failure that retrying cannot fix (a host key or a
refused key) is shown and left alone until someone asks for a refresh.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

from gputop.core.models import GpuProcess, GpuSample
from gputop.core.parsers.common import OUTPUT_MAX_BYTES, ParseFailure, as_text
from gputop.core.parsers.driver_errors import detect_driver_error
from gputop.core.parsers.ib import with_failures
from gputop.sources.bounded_exec import run_ssh
from gputop.sources.commands import QUERY_GPU_FIELDS, CommandSpec, is_nvidia_smi, strip_sudo
from gputop.sources.known_hosts import HostKeyPolicy, HostKeys
from gputop.sources.memory_watch import MemoryWatches
from gputop.sources.metrics_stream import MetricsAssembler, ProcessesByUuid
from gputop.sources.parse_cache import ParseCache
from gputop.sources.ssh_config_index import SshConfigIndex
from gputop.sources.ssh_connect import connect
from gputop.sources.ssh_errors import Failure, describe
from gputop.sources.ssh_jump import JumpPool

if TYPE_CHECKING:
    from gputop.sources.ssh_fact_shell import FactShell  # imports asyncssh, which loads only when used

OUTPUT_MAX_MIB = OUTPUT_MAX_BYTES // (1024 * 1024)


@dataclass(frozen=True, slots=True)
class LinkSettings:
    """How to reach a node, from the cluster's ssh settings."""

    user: str | None
    port: int | None
    config_file: str | None  # an ssh_config to honour (Host aliases, User, Port, IdentityFile, ProxyJump)
    known_hosts: str | None  # the config's file of host keys; None: the ssh_config's, as ssh reads them
    identity_files: tuple[str, ...]
    jump_host: str | None
    connect_timeout_s: float
    backoff_initial_s: float
    backoff_max_s: float
    expected_gpus: int | None
    host_keys: HostKeyPolicy = "yes"  # "no": not verified (an explicit config choice, flagged everywhere)


# How long nvidia-smi may take to print its first line: initialising every GPU takes it seconds on a
# node without the persistence daemon, and longer on NVSwitch systems. After that, the stream's own
# timeout applies between lines.
FIRST_OUTPUT_TIMEOUT_S = 20.0

# A node's first round of slow facts starts this long after it connects at most (spread at random, and
# within the shortest cadence), so a thousand nodes connecting at once do not run every fact in the same
# second.
FIRST_ROUND_SPREAD_S = 5.0
# A fact due this soon after a round starts runs in that round: cadences that drifted apart a little
# (a refresh, a slow round) join up again instead of costing a round each.
ROUND_SLACK_S = 2.0

# Without these a row cannot be placed or named: a driver that rejects one is not worked around.
_ESSENTIAL_FIELDS = frozenset({"index", "uuid"})


class StreamEnded(Exception):
    """The metrics stream stopped; the message says why."""


class StreamSilentEnded(StreamEnded):
    """The metrics stream stopped printing: the node, or the connection itself, may be gone."""


class FieldRejected(Exception):
    """nvidia-smi refused one of the stream's fields."""

    def __init__(self, field: str) -> None:
        super().__init__(field)
        self.field = field


class NodeLink:
    def __init__(
        self,
        name: str,
        settings: LinkSettings,
        commands: Mapping[str, CommandSpec],
        now: Callable[[], float],
        handshakes: asyncio.Semaphore,
        ssh_config: SshConfigIndex | None = None,
        host_keys: HostKeys | None = None,
        jumps: JumpPool | None = None,
        parse_cache: ParseCache | None = None,
    ) -> None:
        self.name = name
        self.ssh_config = ssh_config  # the fleet's ssh_config, read once (else asyncssh reads it per connect)
        self.host_keys = host_keys  # likewise the fleet's host keys
        self.jumps = jumps  # the fleet's bastion connections, one per bastion
        self.parse_cache = parse_cache or ParseCache()  # shared by the fleet: one parse per distinct output
        self.settings = settings
        self.commands = dict(commands)
        self.now = now
        self.handshakes = handshakes
        self.stream_spec = next(c for c in commands.values() if c.stream)
        self.gpus: tuple[GpuSample, ...] = ()
        # The processes fact by GPU UUID, and the mapping `gpus` was read with (None: a mix of two). The
        # assembler reads with the same mapping from the start: a node whose processes fact never runs
        # (switched off, failing) would otherwise have its samples joined again at every tick.
        self.processes_by_uuid: ProcessesByUuid = {}
        self.gpus_processes: ProcessesByUuid | None = self.processes_by_uuid
        fields = _stream_fields(self.stream_spec)
        self.assembler = MetricsAssembler(fields, settings.expected_gpus, processes=self.processes_by_uuid)
        self.sampled_at_s: float | None = None
        self.facts: dict[str, Any] = {}  # parsed slow facts by command name
        self.fact_errors: dict[str, str] = {}
        self.fact_read_at_s: dict[str, float] = {}  # when each fact's value was last read
        self.derived: dict[str, tuple[Any, Any]] = {}  # values made from facts, with what they came from
        self._fact_texts: dict[str, tuple[str, str]] = {}  # by fact: the output self.facts was parsed from
        self.error: str | None = None
        self.connected = False
        self._scripts = True  # rounds run in the node's fact shell, until the node shows it cannot
        self.version = 0  # bumps whenever what the node shows changes
        self.facts_version = 0  # bumps whenever a fact or a fact error changes
        self._wake_pending = False  # a refresh that no sleep has taken yet
        # Quiet facts (the processes) waiting for GPU memory to move, looked at as the stream publishes.
        self._memory = MemoryWatches()
        self._sleep = Sleeper()  # the fact loop's, and between connections
        self._stream_sleep = Sleeper()  # before a stream starts again (while the fact loop sleeps too)
        self._conn: Any = None

    # -- control --------------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Retry a failed node now, and rerun the slow commands, instead of waiting for their timers."""
        # taken by the next sleep, so one that lands while nothing sleeps is not lost
        self._wake_pending = True
        self._sleep.wake()
        self._stream_sleep.wake()

    async def run(self) -> None:
        backoff_s = self.settings.backoff_initial_s
        while True:
            failure: Failure | None = None
            try:
                conn = await self._connect()
            except asyncio.CancelledError:
                raise
            except Exception as err:
                failure = describe(err, self.name, self.settings.connect_timeout_s)
            else:
                backoff_s = self.settings.backoff_initial_s
                failure = await self._serve(conn)
            self.connected = False
            self._set_error(failure.reason)
            if not failure.retry:
                await self._sleep_or_wake(None)  # only a refresh retries: no hammering a host that refuses us
                continue
            jittered_s = backoff_s * random.uniform(0.8, 1.2)  # noqa: S311 - spreading retries, not secrets
            await self._sleep_or_wake(jittered_s)
            backoff_s = min(self.settings.backoff_max_s, backoff_s * 2)

    # -- connection -----------------------------------------------------------------------------------
    async def _connect(self) -> Any:
        return await connect(
            self.name,
            self.settings,
            ssh_config=self.ssh_config,
            host_keys=self.host_keys,
            jumps=self.jumps,
            handshakes=self.handshakes,
            keepalive=False,  # the metrics stream is this connection's keepalive
        )

    async def _serve(self, conn: Any) -> Failure:
        """Stream metrics and run the slow facts until the connection breaks; say what broke.

        A stream that ends while the connection still answers (nvidia-smi missing, a driver error, the
        stream cut off with the channel closed) is started again on the same connection after a backoff,
        and the slow facts keep running meanwhile: the Xid log and the IB ports are what say why a node's
        GPUs went away. A stream that falls silent ends the connection."""
        self._conn = conn
        self.connected = True
        self.version += 1
        facts = asyncio.create_task(self._facts(conn), name=f"{self.name}:facts")
        backoff_s = self.settings.backoff_initial_s
        try:
            while True:
                sampled_before = self.sampled_at_s
                try:
                    await self._stream(conn)
                except FieldRejected as rejected:
                    if self._drop_field(rejected.field):
                        continue  # the same connection, the stream without that field
                    ended = f'nvidia-smi does not know the field "{rejected.field}"'
                except StreamSilentEnded as silent:
                    # Silence can be a connection that died without a word (no keepalives: the stream
                    # is this connection's): connect again rather than open a channel on it.
                    return Failure(str(silent), retry=True)
                except StreamEnded as stream_ended:
                    ended = str(stream_ended)
                if self.sampled_at_s != sampled_before:
                    backoff_s = self.settings.backoff_initial_s  # it streamed: a new failure
                self._set_error(ended)
                await self._stream_sleep.sleep(backoff_s * random.uniform(0.8, 1.2))  # noqa: S311
                backoff_s = min(self.settings.backoff_max_s, backoff_s * 2)
        except asyncio.CancelledError:
            raise
        except Exception as err:
            return describe(err, self.name, self.stream_spec.timeout_s)
        finally:
            facts.cancel()
            await asyncio.gather(facts, return_exceptions=True)
            conn.close()
            self._conn = None

    async def _stream(self, conn: Any) -> NoReturn:
        # asyncssh loads only when SSH is used
        from gputop.sources.ssh_stream import StreamSilent, run_line_stream

        spec = self.stream_spec
        self.assembler.rejected_field = None
        first_timeout_s = max(spec.timeout_s, FIRST_OUTPUT_TIMEOUT_S)
        try:
            exit_status = await run_line_stream(
                conn, spec.command_line, self._feed, spec.timeout_s, first_timeout_s
            )
        except StreamSilent as silent:
            if self.assembler.flush():
                self._publish()
            if not silent.printed:
                raise StreamSilentEnded(
                    f"nvidia-smi printed nothing in the {silent.silent_s:g}s after it started"
                ) from None
            raise StreamSilentEnded(f"no metrics from nvidia-smi for {silent.silent_s:g}s") from None
        if self.assembler.flush():
            self._publish()
        if self.assembler.rejected_field is not None:
            raise FieldRejected(self.assembler.rejected_field)
        raise StreamEnded(self._ended_reason(exit_status))

    def _feed(self, lines: list[bytes], burst_ended: bool) -> None:
        published = self.assembler.feed_lines(lines)
        # A burst that ended on a line boundary with a full set of GPUs is that interval's set: publish
        # it now rather than when the next interval's first line shows the set was over.
        if burst_ended and self.assembler.burst_complete():
            published = self.assembler.flush() or published
        if published:
            self._publish()
        elif self.assembler.error is not None and self.assembler.error != self.error:
            self._set_error(self.assembler.error)

    def _drop_field(self, field: str) -> bool:
        """Takes ``field`` out of the stream's query (its GPU sample value stays unknown); False when it
        cannot: not one of the asked fields, or one the rows cannot do without."""
        fields = self.assembler.fields
        if field not in fields or field in _ESSENTIAL_FIELDS:
            return False
        kept = tuple(f for f in fields if f != field)
        query = f"--query-gpu={','.join(kept)}"
        argv = tuple(query if arg.startswith("--query-gpu=") else arg for arg in self.stream_spec.argv)
        self.stream_spec = dataclasses.replace(self.stream_spec, argv=argv)
        self.assembler = MetricsAssembler(kept, self.settings.expected_gpus, processes=self.processes_by_uuid)
        return True

    def _ended_reason(self, exit_status: int | None) -> str:
        if self.assembler.error is not None:
            return self.assembler.error
        if exit_status == 127:
            return "nvidia-smi not installed (command not found)"
        if exit_status is None:
            return "metrics stream cut off: nvidia-smi stopped without an exit status (killed?)"
        return f"metrics stream ended (nvidia-smi exit status {exit_status})"

    def _publish(self) -> None:
        self.gpus = self.assembler.complete or ()
        self.gpus_processes = self.assembler.complete_processes
        self.sampled_at_s = now_s = self.now()
        self.error = None
        self.version += 1
        if now_s >= self._memory.next_look_s and self._memory.look(now_s, self._memory_by_gpu):
            self._sleep.wake()  # a quiet fact is due: its memory moved

    def _set_error(self, reason: str) -> None:
        if reason != self.error:
            self.error = reason
            self.version += 1

    # -- slow facts -----------------------------------------------------------------------------------
    async def _facts(self, conn: Any) -> None:
        """Runs the slow facts in rounds: every fact due (or due within ROUND_SLACK_S) runs in one
        script, one after another, in the connection's fact shell (gputop.sources.fact_round). Facts that
        start together stay together, since their cadences are multiples of each other."""
        from gputop.sources.ssh_fact_shell import FactShell  # asyncssh loads only when SSH is used

        shell = FactShell(conn)
        try:
            await self._fact_rounds(conn, shell)
        finally:
            shell.close()

    async def _fact_rounds(self, conn: Any, shell: FactShell) -> None:
        loop = asyncio.get_running_loop()
        # nvidia-smi last in every round: a wedged driver hangs every nvidia-smi, and the IB ports and
        # the Xid log, which tell what went wrong, must not wait behind it
        specs = sorted(
            (spec for spec in self.commands.values() if not spec.stream),
            key=lambda spec: is_nvidia_smi(strip_sudo(spec.argv)),
        )
        if not specs:
            return  # a site switched every slow fact off
        # Spread the first rounds so a thousand nodes do not all run topo -m in the same second; never
        # over more than the shortest cadence, which would otherwise start late.
        spread_s = min(FIRST_ROUND_SPREAD_S, *(spec.interval_s for spec in specs))
        first_s = loop.time() + random.uniform(0, spread_s)  # noqa: S311
        due_at = {s.name: first_s for s in specs}
        self._memory.clear()
        while True:
            next_due_s = 0.0 if self._memory.moved else min(due_at.values()) - loop.time()
            woken = await self._sleep_or_wake(max(0.0, next_due_s))
            now = loop.time()
            moved = self._memory.take_moved()
            round_specs = []
            for spec in specs:
                if due_at[spec.name] > now + ROUND_SLACK_S and not woken and spec.name not in moved:
                    continue
                if spec.quiet_every_s is None:
                    due_at[spec.name] = now + spec.interval_s
                else:
                    # again after quiet_every_s at the latest; sooner once the stream sees memory move
                    due_at[spec.name] = now + spec.quiet_every_s
                    self._memory.watch(spec.name, self._memory_by_gpu(), self.now(), spec.interval_s)
                round_specs.append(spec)
            if round_specs:
                await self._run_round(conn, shell, round_specs)

    def _memory_by_gpu(self) -> dict[int, float]:
        return {g.index: g.mem_used_mib or 0.0 for g in self.gpus}

    async def _sleep_or_wake(self, seconds: float | None) -> bool:
        """Sleeps (None: until a refresh); True when a refresh cut the sleep short, or was pending when
        it began. The refresh is taken: the next sleep runs its full time."""
        if not self._wake_pending:
            await self._sleep.sleep(seconds)
            if not self._wake_pending:
                return False
        self._wake_pending = False
        return True

    async def _run_round(self, conn: Any, shell: FactShell, specs: list[CommandSpec]) -> None:
        if not self._scripts:
            await asyncio.gather(*(self._run_fact(conn, spec) for spec in specs))
            return
        try:
            result = await shell.run([s.argv for s in specs], [s.timeout_s for s in specs])
        except asyncio.CancelledError:
            raise
        except Exception as err:
            reason = describe(err, self.name).reason
            for spec in specs:
                self._fact_failed(spec, reason)
            return
        if result.refused:
            # The node did not run the script (a restricted shell, a forced command): its facts go one
            # exec each from now on.
            self._scripts = False
            await self._run_round(conn, shell, specs)
            return
        for i, (spec, step) in enumerate(zip(specs, result.steps, strict=True)):
            if step.status is not None:
                self._take_fact(spec, step.stdout, step.stderr, step.status)
            elif i == result.timed_out and result.overflowed:
                self._fact_failed(spec, f"{spec.argv[0]} printed more than {OUTPUT_MAX_MIB} MiB: cut off")
            elif i == result.timed_out:
                self._fact_failed(spec, f"{spec.argv[0]} did not finish within {spec.timeout_s:g}s")
            elif result.timed_out is not None and i > result.timed_out:
                hung = specs[result.timed_out]
                reason = f"not run: {hung.name} ran before it in the same round and did not finish"
                self._fact_failed(spec, reason)
            else:
                self._fact_failed(spec, f"{spec.argv[0]} was cut off (its shell ended while it ran)")

    async def _run_fact(self, conn: Any, spec: CommandSpec) -> None:

        try:
            result = await asyncio.wait_for(
                run_ssh(conn, spec.command_line, OUTPUT_MAX_BYTES), spec.timeout_s
            )
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            self._fact_failed(spec, f"{spec.argv[0]} did not finish within {spec.timeout_s:g}s")
            return
        except Exception as err:
            self._fact_failed(spec, describe(err, self.name).reason)
            return
        if result.cut:
            self._fact_failed(spec, f"{spec.argv[0]} printed more than {OUTPUT_MAX_MIB} MiB: cut off")
            return
        self._take_fact(spec, result.stdout, result.stderr, result.exit_status)

    def _take_fact(
        self,
        spec: CommandSpec,
        stdout: bytes | str | None,
        stderr: bytes | str | None,
        exit_status: int | None,
    ) -> None:
        """What one run of a slow fact printed, made the node's value of that fact (or its error)."""
        out = as_text(stdout)
        err_text = as_text(stderr)
        if exit_status == 127 or "command not found" in err_text:
            self._fact_failed(spec, f"{spec.argv[0]} not installed")
            return
        if self._fact_texts.get(spec.name) == (out, err_text):
            # What this node printed last time: its own last value. Outputs that differ from node to node
            # (ibstat's GUIDs) would otherwise miss the shared cache and be parsed again at every run.
            value = self.facts[spec.name]
        else:
            driver = detect_driver_error(out + "\n" + err_text)
            if driver is not None:
                self._fact_failed(spec, driver)
                return
            try:
                value = self.parse_cache.parse(spec.parser, out)
            except KeyError:
                self._fact_failed(spec, f"no parser for {spec.parser}")
                return
            if spec.parser == "ibstat":
                # it prints the adapters it read, then fails on one (exit 255): that one is an error
                value = with_failures(value, err_text, exit_status)
            if isinstance(value, ParseFailure):
                self._fact_failed(spec, f"{spec.name}: {value.reason}")
                return
            self._fact_texts[spec.name] = (out, err_text)
        self.fact_read_at_s[spec.name] = self.now()
        if self.facts.get(spec.name) is value and spec.name not in self.fact_errors:
            # The same output as last time: only its read time moved, which the next sample carries
            # (the metrics move it at every line); no sample is made for it alone.
            self.facts_version += 1
            return
        self.facts[spec.name] = value
        if spec.name == "processes":
            self.processes_by_uuid = self.assembler.processes = processes_by_uuid(value)
        self.fact_errors.pop(spec.name, None)
        self.facts_version += 1
        self.version += 1

    def _fact_failed(self, spec: CommandSpec, reason: str) -> None:
        if self.fact_errors.get(spec.name) != reason:
            self.fact_errors[spec.name] = reason
            self.facts_version += 1
            self.version += 1


class Sleeper:
    """A sleep that wake() cuts short. A future and a timer, not asyncio.wait_for: a thousand nodes
    sleep between their rounds of facts, and wait_for paid each time for a task, a cancellation and an
    exception."""

    __slots__ = ("waiter",)

    def __init__(self) -> None:
        self.waiter: asyncio.Future[None] | None = None  # while it sleeps

    async def sleep(self, seconds: float | None) -> None:
        """Until ``seconds`` have passed (None: until woken) or wake() is called."""
        loop = asyncio.get_running_loop()
        woken = self.waiter = loop.create_future()
        timer = None if seconds is None else loop.call_later(seconds, _settle, woken)
        try:
            await woken
        finally:
            self.waiter = None
            if timer is not None:
                timer.cancel()

    def wake(self) -> None:
        if self.waiter is not None:
            _settle(self.waiter)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def processes_by_uuid(fact: object) -> dict[str, tuple[GpuProcess, ...]]:
    """The compute-apps fact's processes by the UUID of their GPU."""
    by_uuid: dict[str, list[GpuProcess]] = {}
    for uuid, process in getattr(fact, "processes", ()):
        by_uuid.setdefault(uuid, []).append(process)
    return {uuid: tuple(found) for uuid, found in by_uuid.items()}


def _stream_fields(spec: CommandSpec) -> tuple[str, ...]:
    """The fields a stream command asks for, read from its --query-gpu= argument."""
    for arg in spec.argv:
        if arg.startswith("--query-gpu="):
            return tuple(f.strip() for f in arg.removeprefix("--query-gpu=").split(","))
    return QUERY_GPU_FIELDS
