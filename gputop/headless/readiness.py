"""What a started source still owes a headless round, and what to say about it when the deadline comes.

The dashboard can wait for a node: its next tick shows it. A round has one tick, so it waits until every
source has answered once: each SSH node with its metrics and every slow fact (the Xid log and the IB
ports carry problems of their own), or with a failure; Slurm with its first read; a store with its first
refresh. The simulator and NVML answer inside `collect` itself and owe nothing beforehand.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from gputop.core.models import SourceResult
from gputop.sources.base import Source
from gputop.sources.slurm import SlurmSource
from gputop.sources.ssh import SshSource
from gputop.sources.ssh_node import NodeLink


def owes(source: Source) -> bool:
    """Whether ``source`` has not yet answered everything the round waits for."""
    if isinstance(source, SshSource):
        facts = _fact_names(source)
        return any(not _answered(link, facts) for link in source.links.values())
    if isinstance(source, SlurmSource):
        return source.state is None
    # a store's first refresh (gputop.sources.prometheus), under way since the source started
    return bool(getattr(source, "awaiting_first_answer", False))


def read_facts_now(source: Source, asked: set[str]) -> None:
    """Has each newly connected SSH node run its slow facts at once rather than at their spread-out first
    turns (up to 5 s apart): the round waits for them. ``asked``: nodes already asked, kept by the caller."""
    if not isinstance(source, SshSource):
        return
    for name, link in source.links.items():
        if link.connected and name not in asked:
            asked.add(name)
            link.refresh()


def silent_nodes(source: Source, waited_s: float) -> dict[str, str]:
    """The SSH nodes that neither sent metrics nor failed by the deadline, with why in words."""
    if not isinstance(source, SshSource):
        return {}
    silent: dict[str, str] = {}
    for name, link in source.links.items():
        if link.sampled_at_s is not None or link.error is not None:
            continue
        if link.connected:
            silent[name] = f"connected, but no metrics within {waited_s:g}s"
        else:
            silent[name] = f"no answer within {waited_s:g}s (SSH connection not established)"
    return silent


def unread_facts(source: Source) -> dict[str, tuple[str, ...]]:
    """For SSH nodes that sent metrics: the slow facts (xid, ibstat, ...) not read by the deadline."""
    if not isinstance(source, SshSource):
        return {}
    facts = _fact_names(source)
    unread: dict[str, tuple[str, ...]] = {}
    for name, link in source.links.items():
        if link.sampled_at_s is None or link.error is not None:
            continue
        missing = tuple(f for f in facts if f not in link.facts and f not in link.fact_errors)
        if missing:
            unread[name] = missing
    return unread


def slurm_unread(source: Source) -> bool:
    return isinstance(source, SlurmSource) and source.state is None


class WithSilentNodes:
    """A source whose nodes that never answered carry the reason the deadline found (rather than the
    "connecting" a dashboard shows while it waits on)."""

    def __init__(self, source: Source, reasons: Mapping[str, str]) -> None:
        self.source = source
        self.name = source.name
        self.reasons = dict(reasons)

    async def start(self) -> None:
        await self.source.start()

    async def collect(self, now_s: float) -> SourceResult:
        result = await self.source.collect(now_s)
        if not self.reasons:
            return result
        nodes = tuple(
            dataclasses.replace(node, error=self.reasons[node.name])
            if node.name in self.reasons and node.sampled_at_s is None
            else node
            for node in result.nodes
        )
        return dataclasses.replace(result, nodes=nodes)

    async def close(self) -> None:
        await self.source.close()


def _fact_names(source: SshSource) -> tuple[str, ...]:
    return tuple(name for name, spec in source.commands.items() if not spec.stream)


def _answered(link: NodeLink, facts: tuple[str, ...]) -> bool:
    if link.error is not None:
        return True  # it failed, and said why: that is its answer
    if link.sampled_at_s is None:
        return False
    return all(f in link.facts or f in link.fact_errors for f in facts)
