"""The Slurm source: node states, drain reasons and jobs, read every ``slurm.poll_interval_s`` on this
machine or on a login node over SSH (`gputop.sources.slurm_runner`), and handed to the poller as a
`SlurmState` next to the GPUs.

Which commands. JSON first, because it is the only form in which a field cannot pose as another: any
Slurm user writes job names and working directories, and in text a name holding a line break and
``JobId=...`` reads as a job of its own (see `gputop.core.parsers.slurm_checked`).

- Jobs: ``squeue --json`` (21.08 and later, with Slurm's JSON plugins). Its ``gres_detail`` gives each
  job's GPU indices per node, in the order of the job's allocated nodes.
- Nodes: ``scontrol --json show node`` (23.02 and later), one entry per node with its GPUs in use
  (``gres_used`` with IDX) and its drain reason, who set it and when; then ``sinfo --json`` (21.08 to
  22.05 list nodes one by one; from 23.02 it groups them, and per-node GPU indices are lost).
- Without JSON: ``scontrol -d -o show job|node``, which name per-node GPU indices in text, each checked
  against a listing of Slurm's own fields only (``squeue``/``sinfo`` with no free-text field), which
  decides which jobs and nodes exist and their users, states and nodes. Last, that listing alone.

The text commands run with ``SLURM_TIME_FORMAT=standard`` and ``TZ=UTC``, so the zone-less times they
print are in UTC wherever the command runs, and are read exactly.

Where a form is refused (an option the installed Slurm does not know, a missing JSON plugin), the next is
tried and kept; each such step is said in `notes`. A refresh starts from the first again. Outputs are
parsed in a worker thread, element by element for JSON, so a queue of 50,000 jobs does not hold up the
keys.

Failures never block the poller and never lose what was read: every failure becomes
``SlurmState(error=<reason>)`` with the last good nodes and jobs, whose ``sampled_at_s`` says how old they
are. A read counts only when both listings were read, so nodes and jobs always share that one age.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from gputop.core.models import SlurmJob, SlurmNode, SlurmState, SourceResult
from gputop.core.nodeset import fold_nodes, natural_key
from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.slurm import (
    SCONTROL_JOBS_ARGV,
    SCONTROL_NODES_ARGV,
    SINFO_ARGV,
    SINFO_JSON_ARGV,
    SQUEUE_JSON_ARGV,
    TEXT_ENV,
    SlurmJobs,
    SlurmNodes,
    parse_scontrol_jobs,
    parse_scontrol_nodes,
    parse_sinfo,
    parse_sinfo_json,
    parse_squeue_json,
)
from gputop.core.parsers.slurm_checked import (
    SAFE_SINFO_ARGV,
    SAFE_SQUEUE_ARGV,
    checked_jobs,
    checked_nodes,
    parse_safe_sinfo,
    parse_safe_squeue,
)
from gputop.sources.slurm_runner import Completed, RunFailed, Runner, runner_for

if TYPE_CHECKING:
    from gputop.core.config import ClusterConfig, PollConfig

log = logging.getLogger(__name__)

# Text commands print times in this zone and format, which the parsers read with utc_offset_s=0.
TEXT_COMMAND_ENV: Mapping[str, str] = MappingProxyType({**TEXT_ENV, "TZ": "UTC"})

# What a Slurm client prints when it does not know an option; --json also needs a plugin to be installed
# (openapi/* in 21.08-22.05, serializer/json and data_parser/* later).
_REFUSED_WORDS = ("unrecognized option", "invalid option", "unknown option", "illegal option")
_JSON_REFUSED_WORDS = (*_REFUSED_WORDS, "plugin")
_CONTROLLER_DOWN = "unable to contact slurm controller"
_CONTROLLER_SLOW = "socket timed out on send/recv"
_NO_CONFIG = "could not establish a configuration source"


Listing = SlurmNodes | SlurmJobs


@dataclass(frozen=True, slots=True)
class Form:
    """One way to read a listing: the command, whether it is a text form, and its parser; a text form
    with free-text fields also has the listing of Slurm's own fields it is checked against."""

    label: str  # how messages name it
    argv: tuple[str, ...]
    text: bool  # run with TEXT_COMMAND_ENV
    gpu_indices: bool  # whether it names the GPU indices of jobs and nodes
    parse: Callable[[str], Listing | ParseFailure]
    check: tuple[str, ...] | None = None  # runs beside argv; its output goes to `merge`
    merge: Callable[[Listing, str], Listing | ParseFailure] | None = None


def _checked_jobs(details: Listing, safe_text: str) -> Listing | ParseFailure:
    safe = parse_safe_squeue(safe_text)
    if isinstance(safe, ParseFailure) or not isinstance(details, SlurmJobs):
        return safe
    return checked_jobs(details, safe)


def _checked_nodes(details: Listing, safe_text: str) -> Listing | ParseFailure:
    safe = parse_safe_sinfo(safe_text)
    if isinstance(safe, ParseFailure) or not isinstance(details, SlurmNodes):
        return safe
    return checked_nodes(details, safe)


SCONTROL_JSON_NODES_ARGV = ("scontrol", "--json", "show", "node")

NODE_FORMS: tuple[Form, ...] = (
    Form("scontrol --json show node", SCONTROL_JSON_NODES_ARGV, False, True, parse_sinfo_json),
    Form("sinfo --json", SINFO_JSON_ARGV, False, True, parse_sinfo_json),
    Form(
        "scontrol -d -o show node",
        SCONTROL_NODES_ARGV,
        True,
        True,
        parse_scontrol_nodes,
        SAFE_SINFO_ARGV,
        _checked_nodes,
    ),
    Form("sinfo (text)", SINFO_ARGV, True, False, parse_sinfo, SAFE_SINFO_ARGV, _checked_nodes),
)
JOB_FORMS: tuple[Form, ...] = (
    Form("squeue --json", SQUEUE_JSON_ARGV, False, True, parse_squeue_json),
    Form(
        "scontrol -d -o show job",
        SCONTROL_JOBS_ARGV,
        True,
        True,
        parse_scontrol_jobs,
        SAFE_SQUEUE_ARGV,
        _checked_jobs,
    ),
    Form("squeue (text, without job names)", SAFE_SQUEUE_ARGV, True, False, parse_safe_squeue),
)
FORMS: Mapping[str, tuple[Form, ...]] = MappingProxyType({"nodes": NODE_FORMS, "jobs": JOB_FORMS})


PING_ARGV = ("scontrol", "ping")
ANSWERED_WITH_AN_ERROR = "Slurm answered with an error"


def fold_not_found(errors: list[str]) -> list[str]:
    """ "scontrol not found on X: hint" and "squeue not found on X: hint" as one line."""
    folded: list[str] = []
    programs: dict[str, list[str]] = {}
    for error in errors:
        program, _, rest = error.partition(" ")
        if rest.startswith("not found"):
            if rest not in programs:
                programs[rest] = []
                folded.append(rest)
            programs[rest].append(program)
        else:
            folded.append(error)
    return [f"{' and '.join(programs[line])} {line}" if line in programs else line for line in folded]


class ReadFailed(Exception):
    """A listing could not be read; the message says why, in words."""


class _Refused(Exception):
    """This form is not available on this Slurm; the next one should be tried."""


def _first_lines(text: str, lines: int = 4) -> str:
    # the head alone: a listing can be 100 MB, and splitting it all would hold up every other thread
    head = text.lstrip()[: 200 * lines]
    return "\n".join(line.rstrip() for line in head.splitlines()[:lines]).strip()


def _where(runner: Runner) -> str:
    return "" if runner.where == "local" else f" on {runner.where}"


def failure_reason(label: str, done: Completed, where: str = "") -> str:
    """Why a command that exited non-zero failed, in words, with what it printed."""
    said = _first_lines(done.stderr) or _first_lines(done.stdout)
    lowered = said.lower()
    if _CONTROLLER_DOWN in lowered or _CONTROLLER_SLOW in lowered:
        return f"Slurm controller not answering{where}: {said}"
    if _NO_CONFIG in lowered:
        return (
            f"no Slurm configuration{where} (no SLURM_CONF, no /etc/slurm/slurm.conf, no DNS SRV record); "
            f"set slurm.run_on to a login node. {done.argv[0]} said: {said}"
        )
    status = "was killed" if done.exit_status is None else f"exited with status {done.exit_status}"
    return f"{label}{where} {status}: {said or '(no output)'}"


def judge(form: Form, done: Completed, where: str = "", checked: Completed | None = None) -> Listing:
    """The parsed listing, or why not: `ReadFailed` for a failure, `_Refused` where the next form may
    do. ``where``: " on HOST" for commands run over SSH, "" here. ``checked``: the output of the form's
    check listing, which the parsed listing is checked against."""
    said = _first_lines(done.stderr) or _first_lines(done.stdout)
    if done.exit_status != 0:
        lowered = said.lower()
        refused = any(word in lowered for word in (_REFUSED_WORDS if form.text else _JSON_REFUSED_WORDS))
        if refused and _CONTROLLER_DOWN not in lowered and _NO_CONFIG not in lowered:
            raise _Refused(said)
        raise ReadFailed(failure_reason(form.label, done, where))
    value = form.parse(done.stdout)
    if isinstance(value, ParseFailure):
        if not form.text and "has no --json" in value.reason:
            raise _Refused(value.reason)
        stderr = _first_lines(done.stderr)
        if "answered with an error" in value.reason and stderr:
            raise ReadFailed(f"{form.label}{where}: {value.reason} ({stderr})")
        if "answered with an error" in value.reason:
            raise ReadFailed(f"{form.label}{where}: {value.reason}")
        raise ReadFailed(f"{form.label}{where}: output not understood: {value.reason}")
    if form.merge is not None and checked is not None:
        label = " ".join(form.check or ())
        if checked.exit_status != 0:
            raise ReadFailed(failure_reason(label, checked, where))
        merged = form.merge(value, checked.stdout)
        if isinstance(merged, ParseFailure):
            raise ReadFailed(f"{label}{where}: output not understood: {merged.reason}")
        return merged
    return value


class SlurmSource:
    """Slurm's view of a cluster, read in the background; `collect` returns the last state at once."""

    def __init__(
        self,
        cluster: ClusterConfig,
        now: Callable[[], float],
        *,
        runner: Runner | None = None,
        env: Mapping[str, str] | None = None,
        poll: PollConfig | None = None,
    ) -> None:
        """runner: where the commands run (default: slurm.run_on). env: variables every Slurm command
        gets (default: slurm.env), e.g. SLURM_CONF for a client configuration outside /etc/slurm (passed
        as an ``env`` prefix over SSH). poll: the app's poll settings (SSH backoff), when it has them."""
        self.name = f"slurm:{cluster.name}"
        self.cluster = cluster
        self.now = now
        self.config = cluster.slurm
        self.runner: Runner = runner if runner is not None else runner_for(cluster, poll)
        self.env: dict[str, str] = dict(env if env is not None else cluster.slurm.env_vars)
        self.state: SlurmState | None = None  # None until the first read has finished, well or not
        self.notes: tuple[str, ...] = ()  # what the last read found odd, and which forms stood in
        self.reads = 0  # reads finished, well or not
        self._form_index: dict[str, int] = dict.fromkeys(FORMS, 0)
        self._fallbacks: dict[str, str] = {}
        self._nodes: Mapping[str, SlurmNode] = MappingProxyType({})
        self._jobs: tuple[SlurmJob, ...] = ()
        self._sampled_at_s: float | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._read_done = asyncio.Condition()

    # -- the Source protocol --------------------------------------------------------------------------
    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._loop(), name=self.name)

    async def collect(self, now_s: float) -> SourceResult:
        return SourceResult(slurm=self.state)

    def refresh(self) -> None:
        """Read now; start again from the preferred commands, and retry a host that refused us."""
        self._form_index = dict.fromkeys(FORMS, 0)
        self._fallbacks.clear()
        self.runner.refresh()
        self._wake.set()

    async def close(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            for _ in range(5):  # see SshSource.close: a cancel can be swallowed by wait_for on 3.11
                if task.done():
                    break
                task.cancel()
                await asyncio.wait({task}, timeout=1.0)
        await self.runner.close()

    # -- reading --------------------------------------------------------------------------------------
    async def _loop(self) -> None:
        while True:
            try:
                await self.read_once()
            except asyncio.CancelledError:
                raise
            except Exception:  # a bug must not end the loop; the state says so and the next read retries
                log.exception("%s: reading Slurm failed", self.name)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.config.poll_interval_s)
            self._wake.clear()

    async def wait_for_read(self, after: int, timeout_s: float) -> SlurmState | None:
        """Waits until more than ``after`` reads have finished (for tests)."""
        async with asyncio.timeout(timeout_s), self._read_done:
            await self._read_done.wait_for(lambda: self.reads > after)
        return self.state

    async def read_once(self) -> SlurmState:
        """Reads both listings now and returns the new state (also kept for `collect`)."""
        results = await asyncio.gather(self._read("nodes"), self._read("jobs"), return_exceptions=True)
        errors: list[str] = []
        for result in results:
            if isinstance(result, ReadFailed | RunFailed):
                reason = str(result)
            elif isinstance(result, BaseException):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                log.error("%s: unexpected failure", self.name, exc_info=result)
                reason = f"reading Slurm failed: {type(result).__name__}: {result}"
            else:
                continue
            if reason not in errors:
                errors.append(reason)
        nodes_read, jobs_read = results
        if any(ANSWERED_WITH_AN_ERROR in error for error in errors):
            errors = await self._diagnose(errors)
        if errors:
            state = SlurmState(
                self._nodes, self._jobs, self._sampled_at_s, error="; ".join(fold_not_found(errors))
            )
        elif isinstance(nodes_read, SlurmNodes) and isinstance(jobs_read, SlurmJobs):
            self._nodes = MappingProxyType(nodes_read.by_name())
            self._jobs = jobs_read.jobs
            self._sampled_at_s = self.now()
            state = SlurmState(self._nodes, self._jobs, self._sampled_at_s)
            self.notes = (*self._fallbacks.values(), *nodes_read.notes, *jobs_read.notes)
        else:  # each listing came back as the other kind: a mix-up in FORMS
            raise TypeError(f"read {type(nodes_read).__name__} and {type(jobs_read).__name__}")
        self.state = state
        async with self._read_done:
            self.reads += 1
            self._read_done.notify_all()
        return state

    async def _diagnose(self, errors: list[str]) -> list[str]:
        """Slurm's JSON says only "Unspecified error" when the controller is down (22.05): ask
        ``scontrol ping``, which says whether it is."""
        try:
            done = await self.runner.run(
                PING_ARGV, {**TEXT_COMMAND_ENV, **self.env}, self.config.command_timeout_s
            )
        except asyncio.CancelledError:
            raise
        except Exception:  # a diagnosis must never spoil the read it explains
            return errors
        said = next((line.strip() for line in done.stdout.splitlines() if "DOWN" in line), None)
        if said is not None:
            return [f"Slurm controller not answering{_where(self.runner)}: {said} ({'; '.join(errors)})"]
        return errors

    async def _read(self, kind: str) -> SlurmNodes | SlurmJobs:
        forms = FORMS[kind]
        index = self._form_index[kind]
        while True:
            form = forms[index]
            env = {**TEXT_COMMAND_ENV, **self.env} if form.text else dict(self.env)
            timeout_s = self.config.command_timeout_s
            if form.check is None:
                done = await self.runner.run(form.argv, env, timeout_s)
                checked = None
            else:
                check_env = {**TEXT_COMMAND_ENV, **self.env}
                done, checked = await asyncio.gather(
                    self.runner.run(form.argv, env, timeout_s),
                    self.runner.run(form.check, check_env, timeout_s),
                )
            try:
                # Off the event loop: a large queue takes seconds to read, and keys must not wait for it.
                value = await asyncio.to_thread(judge, form, done, _where(self.runner), checked)
            except _Refused as refused:
                if index + 1 >= len(forms):
                    raise ReadFailed(f"{form.label}{_where(self.runner)}: {refused}") from None
                index += 1
                note = (
                    f"{form.label} refused ({_first_lines(str(refused), 1)}); "
                    f"reading {forms[index].label} instead"
                )
                if not forms[index].gpu_indices:
                    note += ", which names no GPU indices"
                self._fallbacks[kind] = note
                self._form_index[kind] = index
                log.warning("%s: %s", self.name, note)
                continue
            return value


async def nodes_from_slurm(
    cluster: ClusterConfig, *, runner: Runner | None = None, env: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """The names of the nodes in ``cluster.nodes_from_slurm`` (a partition, or "all"), in natural order,
    from ``sinfo -h -N -o %N [-p PARTITION]`` run where slurm.run_on says. Raises `ReadFailed` with a
    reason when Slurm cannot be asked or lists no node."""
    partition = cluster.nodes_from_slurm or "all"
    argv = ["sinfo", "-h", "-N", "-o", "%N"]
    if partition != "all":
        argv += ["-p", partition]
    own = runner is None
    used = runner if runner is not None else runner_for(cluster)
    try:
        done = await used.run(
            argv, dict(env if env is not None else cluster.slurm.env_vars), cluster.slurm.command_timeout_s
        )
    except RunFailed as err:
        raise ReadFailed(err.reason) from None
    finally:
        if own:
            await used.close()
    where = _where(used)
    if done.exit_status != 0:
        raise ReadFailed(failure_reason("sinfo", done, where))
    names = _node_names(done.stdout.splitlines())
    if isinstance(names, str):
        raise ReadFailed(names)
    if not names:
        what = "no nodes at all" if partition == "all" else f"no nodes in partition {partition!r}"
        hint = "" if partition == "all" else " (is the name right? `sinfo -s` lists the partitions)"
        raise ReadFailed(f"sinfo{where} lists {what}{hint}")
    return names


def _node_names(lines: Sequence[str]) -> tuple[str, ...] | str:
    """One name per line, each once, in natural order; a reason (str) when a line is not a host name."""
    names = {line.strip() for line in lines if line.strip()}
    for name in names:
        try:
            fold_nodes([name])
        except ValueError:
            return f"sinfo printed {name[:80]!r}, which is not a node's host name"
    return tuple(sorted(names, key=natural_key))
