"""Running a Slurm command where the config says: on this machine, or over SSH on a login node.

Both runners take an argv (never a shell line built from pieces), an environment to add, and a timeout,
and return the exit status and output. What keeps a command from producing an exit status (not
installed, timed out, SSH refused) is raised as `RunFailed` with a reason a person can act on.

- `LocalRunner`: ``asyncio.create_subprocess_exec``; on timeout the process is killed and reaped.
- `SshRunner`: one persistent asyncssh connection to the host, opened with the cluster's SSH settings
  (`gputop.sources.ssh_connect`), re-opened at the next command after it breaks. The remote command line
  is ``shlex.join(argv)``, with the environment as an ``env NAME=value`` prefix so it works whatever the
  server's AcceptEnv says.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from gputop.core.parsers.common import as_text
from gputop.sources.bounded_exec import run_local, run_ssh
from gputop.sources.known_hosts import HostKeys
from gputop.sources.ssh_config_index import SshConfigIndex

if TYPE_CHECKING:
    from gputop.core.config import ClusterConfig, PollConfig
    from gputop.sources.ssh_node import LinkSettings

LOCAL = "local"
# What a Slurm listing (or a MIG step) may print: squeue --json of 100,000 jobs is about 360 MB. Past it
# the command is stopped: one that prints without end must not fill gputop's memory.
RUN_OUTPUT_MAX_BYTES = 512 * 1024 * 1024
RUN_OUTPUT_MAX_MIB = RUN_OUTPUT_MAX_BYTES // (1024 * 1024)
NOT_FOUND_EXIT_STATUS = 127  # the shell's (and env's) "command not found"
CLOSE_TIMEOUT_S = 2.0


@dataclass(frozen=True, slots=True)
class Completed:
    """A command that ran to an exit."""

    argv: tuple[str, ...]
    exit_status: int | None  # None: killed by a signal
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        """stdout then stderr, trimmed, as an action's outcome shows and the audit log keeps them."""
        return "\n".join(part.strip() for part in (self.stdout, self.stderr) if part.strip())


class RunFailed(Exception):
    """The command gave no exit status to read: the message says why. retry False: trying again will
    not help until someone changes something (a host key, a refused key) or asks for a refresh.
    started True: the command may have run (the link dropped or the time ran out after it was sent), so
    what it did is unknown; False: it never started (not found, no connection, refused)."""

    def __init__(self, reason: str, *, retry: bool = True, started: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry
        self.started = started


class Runner(Protocol):
    where: str  # "local", or the host the commands run on

    async def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> Completed: ...

    def refresh(self) -> None: ...

    async def close(self) -> None: ...


SLURM_PROGRAMS = frozenset({"sinfo", "squeue", "scontrol", "sbatch", "sacct", "scancel"})


def not_found_reason(program: str, host: str | None) -> str:
    """Why ``program`` did not run; for Slurm's own commands, where to look (the runners also run
    nvidia-smi and sudo on nodes, for which the Slurm hint would mislead)."""
    name = program.rsplit("/", 1)[-1]
    if name not in SLURM_PROGRAMS:
        return f"{program} not found" + (f" on {host}" if host is not None else "")
    if host is None:
        return f"{program} not found: is this a Slurm login node? set slurm.run_on"
    return f"{program} not found on {host}: is {host} a Slurm login node? check slurm.run_on"


class LocalRunner:
    where = LOCAL

    async def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> Completed:
        program = argv[0]
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**os.environ, **env},
            )
        except FileNotFoundError:
            raise RunFailed(not_found_reason(program, None)) from None
        except OSError as oserr:
            raise RunFailed(f"cannot run {program}: {oserr.strerror or oserr}") from None
        except ValueError as err:  # a NUL in a word: no program can be given it
            raise RunFailed(f"cannot run {program}: {err}") from None
        try:
            printed = await asyncio.wait_for(run_local(process, RUN_OUTPUT_MAX_BYTES), timeout_s)
        except TimeoutError:
            raise RunFailed(
                f"{program} did not finish within {timeout_s:g}s (killed)", started=True
            ) from None
        finally:
            if process.returncode is None:  # timed out or cancelled: it must not outlive the read
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                with contextlib.suppress(Exception):
                    await asyncio.shield(process.wait())
        if printed.cut:
            raise RunFailed(f"{program} printed more than {RUN_OUTPUT_MAX_MIB} MiB (stopped)", started=True)
        status = process.returncode
        return Completed(
            tuple(argv),
            status if status is None or status >= 0 else None,
            as_text(printed.stdout),
            as_text(printed.stderr),
        )

    def refresh(self) -> None:
        return None

    async def close(self) -> None:
        return None


def remote_command_line(argv: Sequence[str], env: Mapping[str, str]) -> str:
    """``env A=1 B=2 prog args...`` quoted for the remote shell; no prefix without an environment."""
    prefix = ["env", *(f"{name}={value}" for name, value in env.items())] if env else []
    return shlex.join([*prefix, *argv])


class SshRunner:
    """Runs commands on ``host`` over one connection, opened at the first command."""

    def __init__(self, host: str, settings: LinkSettings) -> None:
        self.where = host
        self.host = host
        self.settings = settings
        self._conn: Any = None
        self._lock = asyncio.Lock()
        self._refused: str | None = None  # a failure retrying cannot fix, until a refresh
        # Read once for every reconnect, as the node links do (gputop.sources.ssh_connect).
        self._ssh_config = SshConfigIndex(settings.config_file) if settings.config_file else None
        self._host_keys = HostKeys(settings.host_keys, settings.known_hosts)

    def refresh(self) -> None:
        self._refused = None

    async def _connection(self) -> Any:
        from gputop.sources.ssh_connect import connect
        from gputop.sources.ssh_errors import describe

        async with self._lock:
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            self._conn = None
            if self._refused is not None:
                raise RunFailed(self._refused, retry=False)
            try:
                self._conn = await connect(
                    self.host, self.settings, ssh_config=self._ssh_config, host_keys=self._host_keys
                )
            except asyncio.CancelledError:
                raise
            except Exception as err:
                failure = describe(err, self.host, self.settings.connect_timeout_s)
                if not failure.retry:
                    self._refused = failure.reason
                raise RunFailed(failure.reason, retry=failure.retry) from None
            return self._conn

    async def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> Completed:
        import asyncssh

        from gputop.sources.ssh_errors import describe

        conn = await self._connection()
        try:
            result = await asyncio.wait_for(
                run_ssh(conn, remote_command_line(argv, env), RUN_OUTPUT_MAX_BYTES), timeout_s
            )
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            raise RunFailed(
                f"{argv[0]} on {self.host} did not finish within {timeout_s:g}s", started=True
            ) from None
        except asyncssh.ChannelOpenError as err:  # refused before anything ran
            failure = describe(err, self.host)
            raise RunFailed(failure.reason, retry=failure.retry) from None
        except Exception as err:
            self._drop(conn)
            failure = describe(err, self.host)
            raise RunFailed(failure.reason, retry=failure.retry, started=True) from None
        if result.cut:
            raise RunFailed(
                f"{argv[0]} on {self.host} printed more than {RUN_OUTPUT_MAX_MIB} MiB (stopped)", started=True
            )
        if result.exit_status == NOT_FOUND_EXIT_STATUS:
            raise RunFailed(not_found_reason(argv[0], self.host))
        status = result.exit_status
        return Completed(
            tuple(argv),
            status if status is not None and status >= 0 else None,
            as_text(result.stdout),
            as_text(result.stderr),
        )

    def _drop(self, conn: Any) -> None:
        if self._conn is conn:
            self._conn = None
        conn.close()

    async def close(self) -> None:
        if self._ssh_config is not None:
            self._ssh_config.close()
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.wait_closed(), CLOSE_TIMEOUT_S)


def runner_for(cluster: ClusterConfig, poll: PollConfig | None = None) -> Runner:
    """Where ``cluster``'s Slurm commands run: slurm.run_on is "local", or an ssh host reached with the
    cluster's SSH settings (ssh_config, known_hosts, identities, jump host)."""
    run_on = cluster.slurm.run_on
    if run_on == LOCAL:
        return LocalRunner()
    from gputop.core.config import PollConfig
    from gputop.sources.ssh import link_settings

    return SshRunner(run_on, link_settings(cluster, poll or PollConfig()))
