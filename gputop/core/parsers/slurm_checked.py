"""Slurm's text listings checked against listings that hold no free text.

Where Slurm has no ``--json`` (before 21.08, or built without its JSON plugins), gputop reads the text of
``scontrol -d -o show job|node`` for what only they give (the GPU indices a job holds on each node, a
node's reason and GPUs in use). But text cannot say where a free-text field ends: any Slurm user can name
a job ``x\\nJobId=31337 ... NodeList=gpu002`` or put ``UserId=root(0)`` in its working directory, and the
listing then shows a job that does not exist, hides the real one, or names the wrong user, nodes and
GPUs; a drain reason with a line break can do the same to a node.

So each text listing comes with a second one whose every field is Slurm's own, one record a line, no field
able to hold a ``|`` or a line break (`SAFE_SQUEUE_ARGV`: id, partition, user, state, pending reason, node
list, GRES asked, times; `SAFE_SINFO_ARGV`: node, state, partition). That listing decides which jobs and
nodes exist, who runs a job, its state and its nodes. A text record adds its details (a job's name and
GPU indices, a node's reason and GPUs) only when it is the one record of that id, its parser found nothing
odd in it (`doubtful`), and it agrees on user, state and nodes; otherwise its details are left out and a
note says why. A drain target therefore always comes from Slurm's own node list for the job.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from gputop.core.models import SlurmJob, SlurmNode
from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.slurm_common import SlurmJobs, SlurmNodes
from gputop.core.parsers.slurm_text import SQUEUE_FIELDS, parse_sinfo_fields, parse_squeue_fields

SAFE_SQUEUE_FIELDS = tuple(field for field in SQUEUE_FIELDS if field[0] != "%j")
SAFE_SQUEUE_FORMAT = "|".join(code for code, _ in SAFE_SQUEUE_FIELDS)
# --states=all: every job slurmctld still holds, finished ones too, as scontrol and squeue --json list them
SAFE_SQUEUE_ARGV = ("squeue", "--all", "--states=all", "--noheader", "--format", SAFE_SQUEUE_FORMAT)
SAFE_SINFO_FIELDS = (("%N", "node"), ("%T", "state"), ("%P", "partition"))
SAFE_SINFO_FORMAT = "|".join(code for code, _ in SAFE_SINFO_FIELDS)
SAFE_SINFO_ARGV = ("sinfo", "--all", "--Node", "--noheader", "--format", SAFE_SINFO_FORMAT)


def parse_safe_squeue(text: str) -> SlurmJobs | ParseFailure:
    """The jobs as `SAFE_SQUEUE_ARGV` lists them: no names (a name can hold a line break), no GPU
    indices."""
    return parse_squeue_fields(text, SAFE_SQUEUE_FIELDS)


def parse_safe_sinfo(text: str) -> SlurmNodes | ParseFailure:
    return parse_sinfo_fields(text, SAFE_SINFO_FIELDS)


def _shown(names: Iterable[str]) -> str:
    listed = sorted(names)
    return ", ".join(listed[:5]) + (f" and {len(listed) - 5} more" if len(listed) > 5 else "")


def checked_jobs(details: SlurmJobs, safe: SlurmJobs) -> SlurmJobs:
    """The jobs of ``safe``, each with the name, GPU indices and GPU count of its record in ``details``
    where that record can be trusted."""
    records: dict[str, list[SlurmJob]] = {}
    for job in details.jobs:
        records.setdefault(job.job_id, []).append(job)
    jobs: list[SlurmJob] = []
    distrusted: list[str] = []
    for job in safe.jobs:
        found = records.get(job.job_id, [])
        if len(found) != 1 or job.job_id in details.doubtful:
            if found:
                distrusted.append(job.job_id)
            jobs.append(job)
            continue
        record = found[0]
        if (record.user, record.state, record.nodes) != (job.user, job.state, job.nodes):
            jobs.append(replace(job, name=record.name))  # it changed between the two reads: no GPUs yet
            continue
        held = {node: gpus for node, gpus in record.gpus_by_node.items() if node in job.nodes}
        jobs.append(
            replace(
                job,
                name=record.name,
                gpus_by_node=held,
                gpus_requested=record.gpus_requested or job.gpus_requested,
                state_flags=record.state_flags or job.state_flags,
            )
        )
    listed = {job.job_id for job in safe.jobs}
    invented = sorted({job.job_id for job in details.jobs} - listed)
    left_out = {f"job {job_id}:" for job_id in (*distrusted, *invented)}
    notes = [
        note
        for note in details.notes
        if "ambiguous" not in note and not any(note.startswith(prefix) for prefix in left_out)
    ]
    notes += safe.notes
    if distrusted:
        notes.append(
            f"jobs {_shown(distrusted)}: their scontrol records are ambiguous (a job name or path holds a "
            "line break or Slurm's key words); shown from squeue's own fields, without names or GPU indices"
        )
    if invented and details.doubtful:
        notes.append(f"scontrol listed jobs squeue does not know ({_shown(invented)}): left out")
    return SlurmJobs(tuple(jobs), tuple(notes), details.slurm_version, frozenset(distrusted))


def checked_nodes(details: SlurmNodes, safe: SlurmNodes) -> SlurmNodes:
    """The nodes of ``safe``, each as its record in ``details`` says where that record can be trusted,
    else with only its state and partitions."""
    records = {node.name: node for node in details.nodes}
    nodes: list[SlurmNode] = []
    distrusted: list[str] = []
    for node in safe.nodes:
        record = records.get(node.name)
        if record is None or node.name in details.doubtful:
            if record is not None:
                distrusted.append(node.name)
            nodes.append(node)
            continue
        nodes.append(record)
    notes = [note for note in details.notes if "ambiguous" not in note] + list(safe.notes)
    if distrusted:
        notes.append(
            f"nodes {_shown(distrusted)}: their records are ambiguous (a drain reason holds a line break or "
            "Slurm's key words); shown with sinfo's state and partitions only"
        )
    invented = sorted(set(records) - {node.name for node in safe.nodes})
    if invented:
        notes.append(f"scontrol listed nodes sinfo does not know ({_shown(invented)}): left out")
    return SlurmNodes(tuple(nodes), tuple(notes), details.slurm_version, frozenset(distrusted))
