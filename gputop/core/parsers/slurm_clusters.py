"""Outputs of several Slurm clusters at once (``squeue -M all``, ``sinfo -M a,b``, or SLURM_CLUSTERS in the
environment): each cluster's part starts with a ``CLUSTER: name`` line, then its own header and rows.

Read as one table, the second cluster's ``CLUSTER:`` and header lines became jobs. Each part is read on its
own and its jobs are told their cluster. Job ids are each cluster's own (alpha's job 1 and beta's job 1 are
different jobs): when a listing spans several clusters, each id is written ``cluster:id`` so that one job
cannot stand for another.

A ``CLUSTER:`` line counts only at the start of a line and followed by a header line (squeue and sinfo print
a header after it unless told --noheader, and with --noheader they print no ``CLUSTER:`` line at all), so a
job name holding a line break cannot open a cluster of its own with one line.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from gputop.core.models import SlurmJob
from gputop.core.parsers.common import ParseFailure

_NAME = r"[A-Za-z0-9_.-]{1,64}"  # Slurm cluster names are short words; anything else is not a cluster name
CLUSTER_LINE = re.compile(rf"^CLUSTER: (?P<name>{_NAME})\s*$")
_CLUSTER_NAME = re.compile(rf"{_NAME}")
_HEADER_WORDS = re.compile(r"^\s*(JOBID|JOB_ID|PARTITION|NODELIST|HOSTNAMES|NODE)\b")


def cluster_parts(text: str) -> list[tuple[str | None, str]]:
    """(cluster, its text) in order; one part (None, text) when the output names no cluster."""
    lines = text.replace("\r", "").split("\n")
    starts: list[tuple[int, str]] = []
    for i, line in enumerate(lines):
        match = CLUSTER_LINE.match(line)
        if match and _next_is_header(lines, i):
            starts.append((i, match["name"]))
    if not starts:
        return [(None, text)]
    parts: list[tuple[str | None, str]] = []
    if "".join(lines[: starts[0][0]]).strip():
        parts.append((None, "\n".join(lines[: starts[0][0]])))
    for n, (i, name) in enumerate(starts):
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        parts.append((name, "\n".join(lines[i + 1 : end])))
    return parts


def _next_is_header(lines: Sequence[str], i: int) -> bool:
    following = next((line for line in lines[i + 1 :] if line.strip()), "")
    return bool(_HEADER_WORDS.match(following))


class _Read(Protocol):
    @property
    def notes(self) -> tuple[str, ...]: ...


ReadT = TypeVar("ReadT", bound=_Read)


def read_each(
    parts: Sequence[tuple[str | None, str]], read: Callable[[str], ReadT | ParseFailure]
) -> tuple[list[tuple[str | None, ReadT]], list[str]] | ParseFailure:
    """Each cluster's part read on its own: what was read, with the notes (each saying its cluster); a
    part that fails is a note, and only when every part fails is the whole a failure."""
    found: list[tuple[str | None, ReadT]] = []
    notes: list[str] = []
    failures: list[ParseFailure] = []
    for cluster, part in parts:
        result = read(part)
        where = f"cluster {cluster}" if cluster else "before the first CLUSTER line"
        if isinstance(result, ParseFailure):
            failures.append(result)
            notes.append(f"{where}: {result.reason}")
            continue
        found.append((cluster, result))
        notes.extend(f"{where}: {note}" for note in result.notes)
    if failures and not found:
        return failures[0]
    return found, notes


def with_cluster(jobs: Sequence[SlurmJob], cluster: str | None, qualify: bool) -> list[SlurmJob]:
    if cluster is None:
        return list(jobs)
    return [
        dataclasses.replace(job, cluster=cluster, job_id=f"{cluster}:{job.job_id}" if qualify else job.job_id)
        for job in jobs
    ]


def cluster_name(value: object) -> str | None:
    """A cluster name from JSON, or None when it is missing or not a plain name."""
    return value if isinstance(value, str) and _CLUSTER_NAME.fullmatch(value) else None


def qualified(jobs: Sequence[SlurmJob]) -> list[SlurmJob]:
    """Jobs that know their cluster (JSON's "cluster"), their ids made ``cluster:id`` when they span
    several clusters."""
    clusters = {job.cluster for job in jobs if job.cluster}
    if len(clusters) < 2:
        return list(jobs)
    return [
        dataclasses.replace(job, job_id=f"{job.cluster}:{job.job_id}") if job.cluster else job for job in jobs
    ]
