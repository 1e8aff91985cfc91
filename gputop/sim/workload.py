"""What the simulated users ask of Slurm: partitions, users, job names and sizes, durations and
limits, the random streams, and the job record the scheduler tracks.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING, Final

from gputop.core.models import (
    SlurmJob,
)

if TYPE_CHECKING:
    pass


STEP_S: Final = 1.0  # the simulation advances in whole steps of this length
# Catching up after a long pause runs at most this many steps; older time is skipped, not simulated.
MAX_CATCH_UP_STEPS: Final = 120
SLURM_NOT_RESPONDING_AFTER_S: Final = 30.0
CONTEXT_POWER: Final = 0.55  # a held CUDA context lifts power by this share of idle power
CONTEXT_MIB: Final = 480.0  # what a fresh CUDA context takes before the job allocates anything
IDLE_JOB_MEM_MIB: Final = 30720

PARTITIONS: Final = ("train", "infer", "debug")


TRAIN, INFER, DEBUG = 0, 1, 2


USERS: Final = (
    "alice",
    "bob",
    "chen",
    "dmitri",
    "eva",
    "farah",
    "gwen",
    "hiro",
    "ines",
    "jonas",
    "kenji",
    "lena",
)


# hiro submits more than anyone and runs into the per-user GPU limit, so QOS pending reasons show up.
USER_WEIGHTS: Final = (3, 2, 2, 1, 2, 1, 1, 4, 1, 1, 1, 1)


QOS_USER: Final = "hiro"


OTHER_USERS: Final = tuple(user for user in USERS if user != QOS_USER)


IDLE_JOB_USER: Final = "dmitri"


MIG_JOB_USER: Final = "farah"


XID_JOB_USER: Final = "gwen"  # whose job's two GPUs both log Xid 13


# What a job does to its GPUs.
P_TRAIN, P_INFER, P_LOADER, P_IDLE = 0, 1, 2, 3


NAMES: Final = {
    (TRAIN, P_TRAIN): (
        "llama3-8b-sft",
        "vit-h14-finetune",
        "dpo-13b",
        "sdxl-train",
        "whisper-ft",
        "ppo-7b",
    ),
    (TRAIN, P_LOADER): ("tokenize-shards", "webdataset-prep", "clip-embed-extract", "dedup-minhash"),
    (INFER, P_INFER): ("vllm-llama3-70b", "triton-embed", "tgi-mixtral", "eval-harness", "batch-infer-7b"),
    (INFER, P_LOADER): ("feature-extract", "rerank-precompute"),
    (DEBUG, P_TRAIN): ("nccl-tests", "ddp-smoke", "repro-nan"),
    (DEBUG, P_INFER): ("bench-latency", "profile-nsys"),
    (DEBUG, P_LOADER): ("dataloader-bench", "pytest-gpu"),
}


MULTI_NODE_NAMES: Final = ("llama3-70b-pretrain", "moe-16x7b", "gpt-neox-20b", "mixtral-8x22b-cpt")


# How often each job size (GPUs on one node) is asked for, per partition; whole-node sizes use the 8 entry.
REQUEST_WEIGHTS: Final = ({8: 6, 4: 3, 2: 2, 1: 1}, {8: 2, 4: 3, 2: 3, 1: 3}, {8: 1, 4: 2, 2: 4, 1: 4})


FILL_WEIGHTS: Final = {8: 3, 4: 2, 2: 2, 1: 1}


# Share of a partition's GPUs the arrival rate aims to keep busy.
TARGET_LOAD: Final = (0.95, 0.8, 0.45)


# Initial fill per partition: chance a node is full, chance it is empty (otherwise partly used).
FILL_FULL: Final = (0.8, 0.5, 0.15)


FILL_EMPTY: Final = (0.0, 0.1, 0.5)


# Job lengths, log-uniform between these bounds (seconds).
DURATION_S: Final = ((900.0, 28800.0), (1200.0, 36000.0), (120.0, 1200.0))


MULTI_NODE_DURATION_S: Final = (3600.0, 43200.0)


TIME_LIMITS_S: Final = (1800.0, 3600.0, 7200.0, 14400.0, 28800.0, 43200.0, 86400.0, 172800.0)


PINNED_LIMIT_S: Final = 259200.0  # 3 days: incident jobs outlive any demo


# Slurm backfills a lower-priority job past a blocked one only when its time limit is this short.
BACKFILL_LIMIT_S: Final = 3600.0


JOB_ID_BASE: Final = 4812000


def random_stream(seed: int, name: str) -> random.Random:
    """A named random stream: string seeds hash the same in every process, unlike hash()."""
    return random.Random(f"gputop-sim:{seed}:{name}")  # noqa: S311 - a simulation, not a secret


class SimJob:
    """A Slurm job as the simulator tracks it: request, placement and how it loads its GPUs."""

    __slots__ = (
        "amp",
        "base_level",
        "dip_level",
        "dip_s",
        "duration_s",
        "gpus",
        "has_context",
        "job_id",
        "level",
        "limit_s",
        "mem_mib",
        "mem_ratio",
        "name",
        "next_change_s",
        "nodes",
        "noise_amp",
        "partition",
        "per_node",
        "period_s",
        "phase_s",
        "pid_base",
        "pinned",
        "power_factor",
        "profile",
        "reason",
        "slurm",
        "spread",
        "start_s",
        "user",
        "warm_until_s",
    )

    def __init__(
        self, *, partition: int, profile: int, nodes: int, per_node: int, user: str, name: str
    ) -> None:
        self.job_id = ""
        self.partition = partition
        self.profile = profile
        self.nodes = nodes
        self.per_node = per_node
        self.user = user
        self.name = name
        self.gpus: dict[int, tuple[int, ...]] = {}
        self.start_s: float | None = None
        self.duration_s = 0.0
        self.limit_s = 0.0
        self.pinned = False
        self.warm_until_s = -math.inf
        self.has_context = True
        self.level = 0.0
        self.base_level = 0.0
        self.dip_level = 0.0
        self.amp = 0.0
        self.period_s = 1.0
        self.dip_s = 0.0
        self.phase_s = 0.0
        self.next_change_s = -math.inf
        self.noise_amp = 0.0
        self.spread = 0.0
        self.power_factor = 1.0
        self.mem_mib = 0
        self.mem_ratio = 0.0
        self.pid_base = 0
        self.reason: str | None = None
        self.slurm: SlurmJob | None = None

    @property
    def gpu_count(self) -> int:
        return self.nodes * self.per_node


def idle_sentinel() -> SimJob:
    """Stands in for "no job" on a GPU so the hot loop reads the same fields for every GPU."""
    job = SimJob(partition=TRAIN, profile=P_IDLE, nodes=0, per_node=0, user="", name="")
    job.has_context = False
    return job
