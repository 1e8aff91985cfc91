"""The SSH source: watches a cluster's nodes agentlessly, one persistent connection per node.

Each node runs as its own `NodeLink` task; `collect` only reads what the links hold, so a slow or dead
node never delays the others, and builds a new NodeSample only for nodes whose data changed.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import resource
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from gputop.core.config import ClusterConfig, PollConfig
from gputop.core.fact_table import node_facts
from gputop.core.facts import NodeFacts
from gputop.core.models import (
    GpuProcess,
    GpuSample,
    IbFailure,
    IbPort,
    NodeSample,
    Reachability,
    SourceResult,
    XidEvent,
    gpu_with_processes,
)
from gputop.core.parsers.ib import IbStat
from gputop.core.parsers.xid import XidLog
from gputop.sources.commands import CommandSpec, apply_overrides, default_commands
from gputop.sources.known_hosts import HostKeys, policy_of
from gputop.sources.parse_cache import ParseCache
from gputop.sources.ssh_config_index import SshConfigIndex
from gputop.sources.ssh_jump import JumpPool
from gputop.sources.ssh_node import LinkSettings, NodeLink

_V = TypeVar("_V")

# After this many poll intervals without a line on an open connection, the node says why it has no data.
SILENT_INTERVALS = 3
SILENT_STREAM = "nvidia-smi's metrics stream has printed nothing since {since} (the SSH connection is open)"


def raise_open_file_limit() -> int:
    """Each connection costs a few file descriptors: lift the soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            return target
    return soft


def link_settings(cluster: ClusterConfig, poll: PollConfig) -> LinkSettings:
    ssh = cluster.ssh
    config_file = os.path.expanduser(ssh.config_file)
    return LinkSettings(
        user=ssh.user,
        port=ssh.port,
        config_file=config_file if os.path.exists(config_file) else None,
        known_hosts=os.path.expanduser(ssh.known_hosts) if ssh.known_hosts else None,
        identity_files=tuple(os.path.expanduser(p) for p in ssh.identity_files),
        jump_host=ssh.jump_host,
        connect_timeout_s=ssh.connect_timeout_s,
        backoff_initial_s=poll.backoff_initial_s,
        backoff_max_s=poll.backoff_max_s,
        expected_gpus=cluster.gpus_per_node,
        host_keys=policy_of(ssh.verify_host_keys),
    )


class SshSource:
    def __init__(
        self,
        cluster: ClusterConfig,
        poll: PollConfig,
        now: Callable[[], float],
        commands: Mapping[str, CommandSpec] | None = None,
    ) -> None:
        self.name = f"ssh:{cluster.name}"
        self.cluster = cluster
        self.commands = apply_overrides(
            dict(commands or default_commands(poll.interval_s, poll.slow_facts_interval_s)), cluster.commands
        )
        self.settings = link_settings(cluster, poll)
        self.now = now
        self.links: dict[str, NodeLink] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._samples: dict[str, tuple[tuple[int, bool], NodeSample]] = {}
        self.settings_interval_s = poll.interval_s
        self.ssh_config: SshConfigIndex | None = None
        self.parse_cache = ParseCache()
        self.jumps: JumpPool | None = None

    async def start(self) -> None:
        raise_open_file_limit()
        handshakes = asyncio.Semaphore(self.cluster.ssh.max_concurrent_handshakes)
        if self.settings.config_file is not None:
            jumps = (self.settings.jump_host,) if self.settings.jump_host else ()
            self.ssh_config = SshConfigIndex(self.settings.config_file, jumps)
        host_keys = HostKeys(self.settings.host_keys, self.settings.known_hosts)
        self.jumps = JumpPool(self.settings, self.ssh_config, host_keys)
        for name in self.cluster.node_names:
            link = NodeLink(
                name,
                self.settings,
                self.commands,
                self.now,
                handshakes,
                self.ssh_config,
                host_keys,
                self.jumps,
                self.parse_cache,
            )
            self.links[name] = link
            self._tasks.append(asyncio.create_task(link.run(), name=f"ssh:{name}"))

    async def collect(self, now_s: float) -> SourceResult:
        silent_after_s = SILENT_INTERVALS * self.settings_interval_s
        return SourceResult(
            nodes=tuple(self._sample(link, now_s, silent_after_s) for link in self.links.values())
        )

    def refresh(self) -> None:
        for link in self.links.values():
            link.refresh()

    async def close(self) -> None:
        # On Python 3.11 asyncio.wait_for can swallow a cancel that lands as its read completes, so a
        # task may need asking more than once; never wait forever on one.
        pending = {t for t in self._tasks if not t.done()}
        for _ in range(5):
            if not pending:
                break
            for task in pending:
                task.cancel()
            _done, pending = await asyncio.wait(pending, timeout=1.0)
        self._tasks.clear()
        if self.jumps is not None:
            await self.jumps.close()
        if self.ssh_config is not None:
            self.ssh_config.close()

    # -- building samples -----------------------------------------------------------------------------
    def _sample(self, link: NodeLink, now_s: float, silent_after_s: float) -> NodeSample:
        # A stream that fell silent on an open connection is said at once, not only when the stream's
        # own timeout ends the connection seconds after the node turned stale.
        silent = (
            link.connected
            and link.error is None
            and link.sampled_at_s is not None
            and now_s - link.sampled_at_s > silent_after_s
        )
        cached = self._samples.get(link.name)
        if cached is not None and cached[0] == (link.version, silent):
            return cached[1]
        sample = node_sample(link, self.cluster.gpus_per_node)
        if silent and link.sampled_at_s is not None:
            since = time.strftime("%H:%M:%S UTC", time.gmtime(link.sampled_at_s))
            sample = dataclasses.replace(sample, error=SILENT_STREAM.format(since=since))
        self._samples[link.name] = ((link.version, silent), sample)
        return sample


def node_sample(link: NodeLink, expected_gpus: int | None) -> NodeSample:
    facts, (ib_ports, ib_failures), xid = _fact_parts(link)
    # The stream's lines were read with the processes joined in, unless the processes changed since
    by_uuid = link.processes_by_uuid
    gpus = link.gpus if link.gpus_processes is by_uuid else _with_processes(link.gpus, by_uuid)
    if expected_gpus is None:
        expected_gpus = max((g.index for g in gpus), default=-1) + 1 or None
    # Never having heard from a node is DOWN; a node that did answer keeps its last values and ages.
    reachability = Reachability.OK if link.sampled_at_s is not None else Reachability.DOWN
    return NodeSample(
        name=link.name,
        reachability=reachability,
        sampled_at_s=link.sampled_at_s,
        gpus=gpus,
        expected_gpu_count=expected_gpus,
        error=link.error or _waiting(link),
        ib_ports=ib_ports,
        ib_failures=ib_failures,
        xid_events=(
            _derived(link, "xid", (xid, _bus_ids(gpus)), lambda key: _xid_events(key[0], gpus))
            if xid is not None and xid.events
            else ()
        ),
        facts=facts,
    )


_FactParts = tuple[NodeFacts, tuple[tuple[IbPort, ...], tuple[IbFailure, ...]], XidLog | None]


def _fact_parts(link: NodeLink) -> _FactParts:
    """(the node's facts, the IB ports, the Xid log): made again only when a fact, its read time or its
    error changed, not at every tick the metrics move. Samples share them (a snapshot is never changed)."""
    hit = link.derived.get("facts")
    if hit is not None and hit[0] == link.facts_version:
        parts: _FactParts = hit[1]
        return parts
    facts = node_facts(link.facts, link.fact_read_at_s, link.fact_errors)
    parts = (facts, _derived(link, "ibstat", facts.ibstat.value, _ib_ports), facts.xid.value)
    link.derived["facts"] = (link.facts_version, parts)
    return parts


def _waiting(link: NodeLink) -> str | None:
    """What a node that has not sent its first sample is waiting on (None once it has)."""
    if link.sampled_at_s is not None:
        return None
    return "connected, waiting for nvidia-smi's first output" if link.connected else "connecting"


def _derived(link: NodeLink, key: str, source: Any, make: Callable[[Any], _V]) -> _V:
    """``make(source)``, made again only when the source changed: every tick rebuilds the sample of a
    node whose metrics moved, but its slow facts change once a minute."""
    hit = link.derived.get(key)
    if hit is not None and (hit[0] is source or (type(source) is tuple and hit[0] == source)):
        value: _V = hit[1]
        return value
    made = make(source)
    link.derived[key] = (source, made)
    return made


def _bus_ids(gpus: tuple[GpuSample, ...]) -> tuple[str | None, ...]:
    return tuple(g.pci_bus_id for g in gpus)


def _with_processes(
    gpus: tuple[GpuSample, ...], by_uuid: Mapping[str, tuple[GpuProcess, ...]]
) -> tuple[GpuSample, ...]:
    """The samples with the processes of ``by_uuid``, where they were read with others."""
    return tuple(
        g if (found := by_uuid.get(g.uuid, ())) == g.processes else gpu_with_processes(g, found) for g in gpus
    )


def _ib_ports(ibstat: object) -> tuple[tuple[IbPort, ...], tuple[IbFailure, ...]]:
    """The ports ibstat listed, and the adapters it could not read."""
    if not isinstance(ibstat, IbStat):
        return (), ()
    return ibstat.to_ports(), ibstat.failed


def _xid_events(xid: object, gpus: tuple[GpuSample, ...]) -> tuple[XidEvent, ...]:
    if not isinstance(xid, XidLog) or not xid.events:
        return ()
    # the kernel names a GPU by its PCI address; the stream says which index lives there
    return xid.with_gpu_indices({g.pci_bus_id: g.index for g in gpus if g.pci_bus_id}).events
