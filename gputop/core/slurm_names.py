"""Slurm's node names matched with the names gputop watches, by short name and without regard to case.

A store's series name hosts as their exporters saw them (``GPU001.cluster.example``, lower-cased by the
join), a config names them as its writer did, and Slurm as slurm.conf does (``GPU001``). Every rule, the
table and the actions look a node's Slurm state up by the watched name, so Slurm's view is re-keyed by
that name once per Slurm refresh. Each ``SlurmNode`` keeps Slurm's own spelling in ``name``: that is the
name an action hands to scontrol.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence

from gputop.core.models import SlurmJob, SlurmNode, SlurmState


def match_key(name: str) -> str:
    """What two spellings of one host share: the short name, lower case."""
    return name.split(".", 1)[0].lower()


def slurm_renames(slurm_names: Collection[str], watched: Collection[str]) -> dict[str, str]:
    """Slurm name -> watched name, for the Slurm names that are not watched names themselves but match
    exactly one watched name that Slurm does not list under its own spelling. Two watched names with one
    key, or two Slurm names after one watched name, are left alone: a guess could act on the wrong node."""
    listed = set(slurm_names)
    by_key: dict[str, str | None] = {}
    for name in watched:
        if name in listed:
            continue
        key = match_key(name)
        by_key[key] = None if key in by_key else name
    renames: dict[str, str] = {}
    taken: dict[str, int] = {}
    watched_set = watched if isinstance(watched, (set, frozenset)) else set(watched)
    for name in listed:
        if name in watched_set:
            continue
        target = by_key.get(match_key(name))
        if target is not None:
            renames[name] = target
            taken[target] = taken.get(target, 0) + 1
    return {slurm: target for slurm, target in renames.items() if taken[target] == 1}


def align_slurm_names(slurm: SlurmState, watched: Collection[str]) -> SlurmState:
    """``slurm`` keyed by the watched names where its own differ only in case or domain; the same object
    when nothing needs renaming."""
    renames = slurm_renames(slurm.nodes.keys(), watched)
    if not renames:
        return slurm
    nodes: dict[str, SlurmNode] = {renames.get(name, name): node for name, node in slurm.nodes.items()}
    jobs = tuple(_renamed_job(job, renames) for job in slurm.jobs)
    return dataclasses.replace(slurm, nodes=nodes, jobs=jobs)


def _renamed_job(job: SlurmJob, renames: Mapping[str, str]) -> SlurmJob:
    if not any(name in renames for name in (*job.nodes, *job.gpus_by_node)):
        return job
    return dataclasses.replace(
        job,
        nodes=tuple(renames.get(name, name) for name in job.nodes),
        gpus_by_node={renames.get(name, name): held for name, held in job.gpus_by_node.items()},
    )


class SlurmNameAligner:
    """`align_slurm_names`, worked out again only when Slurm's state or the watched names change (Slurm
    is read every few ticks; the names almost never change)."""

    def __init__(self) -> None:
        self._slurm: SlurmState | None = None
        self._names: Sequence[str] = ()
        self._aligned: SlurmState | None = None

    def align(self, slurm: SlurmState | None, names: Sequence[str]) -> SlurmState | None:
        if slurm is None:
            return None
        if slurm is not self._slurm or names != self._names:
            self._slurm, self._names = slurm, names
            self._aligned = align_slurm_names(slurm, frozenset(names))
        return self._aligned


def slurm_spelling(slurm: SlurmState | None, names: Sequence[str]) -> list[str]:
    """Each watched name as Slurm spells it, for a command Slurm runs."""
    if slurm is None:
        return list(names)
    spelled = []
    for name in names:
        node = slurm.nodes.get(name)
        spelled.append(node.name if node is not None and node.name else name)
    return spelled
