"""Slurm's outputs as gputop's models: one import for the Slurm parsers, their kinds and their commands.

``slurm_json`` reads ``squeue --json`` / ``sinfo --json`` (both schema generations), ``slurm_scontrol``
``scontrol show node|job``, ``slurm_text`` text squeue/sinfo and defines gputop's text formats;
``slurm_common`` holds what they share (states, GRES/TRES, times, result values).
"""

from __future__ import annotations

from gputop.core.parsers import slurm_json, slurm_scontrol, slurm_text
from gputop.core.parsers.common import ParserInfo
from gputop.core.parsers.slurm_common import (
    TEXT_ENV,
    GresItem,
    SlurmJobs,
    SlurmNodes,
    parse_gpu_indices,
    parse_gres,
    parse_job_state,
    parse_node_state,
)
from gputop.core.parsers.slurm_json import (
    SINFO_JSON_ARGV,
    SQUEUE_JSON_ARGV,
    jobs_from_json,
    nodes_from_json,
    parse_sinfo_json,
    parse_squeue_json,
)
from gputop.core.parsers.slurm_scontrol import (
    SCONTROL_JOBS_ARGV,
    SCONTROL_NODES_ARGV,
    parse_scontrol_jobs,
    parse_scontrol_nodes,
)
from gputop.core.parsers.slurm_text import (
    SINFO_ARGV,
    SINFO_FORMAT,
    SQUEUE_ARGV,
    SQUEUE_FORMAT,
    parse_sinfo,
    parse_squeue,
)

__all__ = [
    "PARSERS",
    "SCONTROL_JOBS_ARGV",
    "SCONTROL_NODES_ARGV",
    "SINFO_ARGV",
    "SINFO_FORMAT",
    "SINFO_JSON_ARGV",
    "SQUEUE_ARGV",
    "SQUEUE_FORMAT",
    "SQUEUE_JSON_ARGV",
    "TEXT_ENV",
    "GresItem",
    "SlurmJobs",
    "SlurmNodes",
    "jobs_from_json",
    "nodes_from_json",
    "parse_gpu_indices",
    "parse_gres",
    "parse_job_state",
    "parse_node_state",
    "parse_scontrol_jobs",
    "parse_scontrol_nodes",
    "parse_sinfo",
    "parse_sinfo_json",
    "parse_squeue",
    "parse_squeue_json",
]

PARSERS: dict[str, ParserInfo] = slurm_json.PARSERS | slurm_scontrol.PARSERS | slurm_text.PARSERS
