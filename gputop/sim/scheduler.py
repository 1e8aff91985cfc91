"""The simulated Slurm scheduler: partitions, job arrivals, placement and backfill, the initial fill,
the incident jobs, and what a job does to its GPUs. Functions of the `SimulatedCluster` whose state
they share (declared on the class).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from typing import TYPE_CHECKING

from gputop.core.models import (
    GpuProcess,
)
from gputop.sim.incidents import DRAIN_REASON, incident_gpu
from gputop.sim.workload import (
    BACKFILL_LIMIT_S,
    CONTEXT_MIB,
    CONTEXT_POWER,
    DEBUG,
    DURATION_S,
    FILL_EMPTY,
    FILL_FULL,
    FILL_WEIGHTS,
    IDLE_JOB_MEM_MIB,
    IDLE_JOB_USER,
    INFER,
    JOB_ID_BASE,
    MAX_CATCH_UP_STEPS,
    MIG_JOB_USER,
    MULTI_NODE_DURATION_S,
    MULTI_NODE_NAMES,
    NAMES,
    OTHER_USERS,
    P_IDLE,
    P_INFER,
    P_LOADER,
    P_TRAIN,
    PARTITIONS,
    PINNED_LIMIT_S,
    QOS_USER,
    REQUEST_WEIGHTS,
    SLURM_NOT_RESPONDING_AFTER_S,
    STEP_S,
    TARGET_LOAD,
    TIME_LIMITS_S,
    TRAIN,
    USER_WEIGHTS,
    USERS,
    XID_JOB_USER,
    SimJob,
    random_stream,
)

if TYPE_CHECKING:
    from gputop.sim.simulator import SimulatedCluster


def setup_partitions(sim: SimulatedCluster) -> None:
    n = sim._n
    if n >= 3:
        debug = max(1, round(n * 0.06))
        infer = max(1, round(n * 0.14))
    else:
        debug = infer = 0
    train = n - debug - infer
    sim._node_part = [TRAIN] * train + [INFER] * infer + [DEBUG] * debug
    mig = sim._incident_at.get("mig")
    if mig is not None:
        sim._node_part[mig] = INFER  # MIG slices serve inference


def setup_scheduler(sim: SimulatedCluster) -> None:
    g_per = sim.gpus_per_node
    at = sim._incident_at
    sim._node_free = [list(range(g_per)) for _ in range(sim._n)]
    sim._node_alloc = [0] * sim._n
    # Free GPUs Slurm may hand out: the broken, missing and MIG GPUs are not among them.
    for kind in ("ecc_xid", "missing_gpu", "mig"):
        node = at.get(kind)
        if node is not None:
            sim._node_free[node].remove(incident_gpu(sim, kind))
    # Slurm's DRAIN flag and each node's reason (text, user, time); drain() and resume() change them.
    sim._drain = set()
    sim._reasons = {}
    t0 = sim.origin_s
    if "drained" in at:
        sim._drain.add(at["drained"])
        sim._reasons[at["drained"]] = (DRAIN_REASON, "root", t0 - 2 * 86400.0)
    sim._unresponsive = at.get("unresponsive", -1)
    if "unresponsive" in at:
        # Silent since 45 s before the first sample, so already past Slurm's 30 s: flagged from the start.
        sim._reasons[at["unresponsive"]] = (
            "Not responding",
            "slurm",
            sim.silent_at_s + SLURM_NOT_RESPONDING_AFTER_S,
        )
    sim._resumed = False  # a node came back: the scheduler looks at the queue at the next step
    unschedulable = {*sim._drain, sim._unresponsive}
    # Per partition, per number of free GPUs: the nodes with that many free (dicts as ordered sets).
    sim._buckets = [[{} for _ in range(g_per + 1)] for _ in PARTITIONS]
    sim._schedulable = [i not in unschedulable for i in range(sim._n)]
    sim._train_nodes = sum(1 for i in range(sim._n) if sim._node_part[i] == TRAIN and sim._schedulable[i])
    for i in range(sim._n):
        if sim._schedulable[i]:
            sim._buckets[sim._node_part[i]][len(sim._node_free[i])][i] = None
    sim._running = {}
    sim._pending = []
    sim._ends = []
    sim._end_seq = itertools.count()
    sim._next_job_id = JOB_ID_BASE
    sim._user_gpus = dict.fromkeys(USERS, 0)
    sim._qos_cap = 2 * g_per
    sim._fill_qos_gpus = 0
    sim._pending_cap = max(6, sim._n // 4)
    sim._jobs_changed = True
    sim._dirty_nodes = set(range(sim._n))
    sim._arrival_rate = [arrival_rate_for(sim, p) for p in range(len(PARTITIONS))]
    sim._next_arrival_s = [
        sim.start_time_s + sim._sched_rng.expovariate(rate) if rate > 0 else math.inf
        for rate in sim._arrival_rate
    ]


def arrival_rate_for(sim: SimulatedCluster, partition: int) -> float:
    """Jobs per second that keep the partition near its target load, from the mean GPU-seconds of the
    jobs it gets (estimated on a private stream so the main ones are not disturbed)."""
    gpus = sum(len(sim._node_free[i]) for i in range(sim._n) if sim._node_part[i] == partition)
    if gpus == 0:
        return 0.0
    rng = random_stream(sim.seed, f"rate:{partition}")
    samples = [draw_request(sim, partition, rng) for _ in range(200)]
    mean_gpu_s = sum(nodes * per * dur for nodes, per, dur in samples) / len(samples)
    return TARGET_LOAD[partition] * gpus / mean_gpu_s


def draw_request(sim: SimulatedCluster, partition: int, rng: random.Random) -> tuple[int, int, float]:
    """Nodes, GPUs per node and run time of a job someone submits to ``partition``."""
    g_per = sim.gpus_per_node
    if partition == TRAIN and sim._train_nodes >= 4 and rng.random() < 0.2:
        lo, hi = MULTI_NODE_DURATION_S
        return rng.choice((2, 2, 3, 4)), g_per, math.exp(rng.uniform(math.log(lo), math.log(hi)))
    sizes = [s for s in (8, 4, 2, 1) if s <= g_per] + ([g_per] if g_per > 8 else [])
    weights = REQUEST_WEIGHTS[partition]
    size = rng.choices(sizes, weights=[weights.get(s, weights[8]) for s in sizes])[0]
    lo, hi = DURATION_S[partition]
    return 1, size, math.exp(rng.uniform(math.log(lo), math.log(hi)))


def pick_user(sim: SimulatedCluster, rng: random.Random) -> str:
    return rng.choices(USERS, weights=USER_WEIGHTS)[0]


def make_job(
    sim: SimulatedCluster,
    partition: int,
    nodes: int,
    per_node: int,
    duration_s: float,
    rng: random.Random,
    *,
    user: str | None = None,
    profile: int | None = None,
) -> SimJob:
    if profile is None:
        if nodes > 1:
            profile = P_TRAIN
        elif partition == TRAIN:
            profile = P_TRAIN if rng.random() < 0.78 else P_LOADER
        elif partition == INFER:
            profile = P_INFER if rng.random() < 0.8 else P_LOADER
        else:
            profile = rng.choice((P_TRAIN, P_TRAIN, P_INFER, P_LOADER))
    if nodes > 1:
        name = rng.choice(MULTI_NODE_NAMES)
    elif profile == P_IDLE:
        name = "jupyter"
    else:
        name = rng.choice(NAMES.get((partition, profile), NAMES[(TRAIN, P_TRAIN)]))
    job = SimJob(
        partition=partition,
        profile=profile,
        nodes=nodes,
        per_node=per_node,
        user=user if user is not None else pick_user(sim, rng),
        name=name,
    )
    job.duration_s = duration_s
    limit_floor = duration_s * 1.15
    job.limit_s = next((lim for lim in TIME_LIMITS_S if lim >= limit_floor), TIME_LIMITS_S[-1])
    job.warm_until_s = -math.inf
    job.pid_base = rng.randrange(12000, 3_900_000)
    mem_frac: float
    if profile == P_TRAIN:
        job.base_level = rng.uniform(90.0, 97.0)
        job.dip_level = job.base_level - rng.uniform(12.0, 25.0)  # all-reduce stalls, eval, checkpoints
        job.period_s = rng.uniform(60.0, 300.0)
        job.dip_s = rng.uniform(2.0, 6.0)
        job.phase_s = rng.uniform(0.0, job.period_s)
        job.noise_amp, job.spread = 3.5, 1.5
        job.power_factor = rng.uniform(0.86, 1.0)
        mem_frac = rng.uniform(0.72, 0.94)
        job.mem_ratio = rng.uniform(0.35, 0.55)
    elif profile == P_INFER:
        job.base_level = rng.uniform(20.0, 70.0)
        job.noise_amp, job.spread = 8.0, 5.0
        job.power_factor = rng.uniform(0.72, 0.86)
        mem_frac = 0.9 if rng.random() < 0.5 else rng.uniform(0.35, 0.6)  # vLLM reserves 90%
        job.mem_ratio = rng.uniform(0.55, 0.85)  # decoding is memory bound
    elif profile == P_LOADER:
        job.base_level = rng.uniform(35.0, 45.0)
        job.amp = rng.uniform(5.0, 9.0)
        job.period_s = rng.uniform(20.0, 60.0)
        job.phase_s = rng.uniform(0.0, job.period_s)
        job.noise_amp, job.spread = 6.0, 3.0
        job.power_factor = rng.uniform(0.62, 0.75)
        mem_frac = rng.uniform(0.1, 0.35)
        job.mem_ratio = rng.uniform(0.2, 0.35)
    else:
        # Whatever the model, a notebook that loaded a model and stopped holds about the same.
        mem_frac = min(0.9, IDLE_JOB_MEM_MIB / sim.model.mem_total_mib)
    job.level = job.base_level
    job.mem_mib = int(sim.model.mem_total_mib * mem_frac)
    return job


def assign_id(sim: SimulatedCluster, job: SimJob) -> None:
    job.job_id = str(sim._next_job_id)
    sim._next_job_id += 1


def allocate(
    sim: SimulatedCluster, job: SimJob, node: int, count: int, rng: random.Random, *, ramp: bool
) -> None:
    free = sim._node_free[node]
    idxs = tuple(free[:count])
    del free[:count]
    rebucket(sim, node, len(free) + count)
    job.gpus[node] = idxs
    sim._node_alloc[node] += count
    sim._dirty_nodes.add(node)
    g_per = sim.gpus_per_node
    model = sim.model
    rank0 = len(job.gpus) == 1
    for local_rank, k in enumerate(idxs):
        g = node * g_per + k
        sim._gjob[g] = job
        sim._noise_amp[g] = job.noise_amp
        sim._goff[g] = rng.uniform(-job.spread, job.spread)
        sim._noise[g] = 0.0
        ctx_w = sim._idle_w[g] * CONTEXT_POWER
        sim._pbase[g] = sim._idle_w[g] + ctx_w
        sim._pcoef[g] = (sim._span_w[g] - ctx_w) * job.power_factor / 100.0
        sim._pjit[g] = sim._busy_jit_w
        # Rank 0 keeps a little more (optimizer bookkeeping, logging buffers).
        extra = 600 if rank0 and local_rank == 0 and job.profile != P_IDLE else 0
        target = min(
            model.mem_total_mib - 200.0,
            job.mem_mib + extra + rng.randrange(-256, 257) + sim._idle_mem[g],
        )
        sim._mem_target[g] = target
        if ramp:
            sim._ramping[g] = None
            sim._mem[g] = sim._idle_mem[g] + CONTEXT_MIB  # the process exists from its first second
        else:
            sim._mem[g] = target
        sim._pid[g] = job.pid_base + 97 * (node % 7) + local_rank
        set_procs(sim, g, job)


def set_procs(sim: SimulatedCluster, g: int, job: SimJob) -> None:
    used = sim._mem[g] - sim._idle_mem[g]
    sim._procs[g] = (GpuProcess(sim._pid[g], "python", used, job.user),) if used > 0 else ()


def release_job(sim: SimulatedCluster, job: SimJob) -> None:
    g_per = sim.gpus_per_node
    for node, idxs in job.gpus.items():
        free = sim._node_free[node]
        before = len(free)
        free.extend(idxs)
        free.sort()
        rebucket(sim, node, before)
        sim._node_alloc[node] -= len(idxs)
        sim._dirty_nodes.add(node)
        for k in idxs:
            g = node * g_per + k
            sim._gjob[g] = sim._idle_job
            sim._noise_amp[g] = 0.0
            sim._goff[g] = 0.0
            sim._noise[g] = 0.0
            sim._pbase[g] = sim._idle_w[g]
            sim._pcoef[g] = sim._span_w[g] / 100.0
            sim._pjit[g] = sim._idle_jit_w
            sim._mem[g] = sim._mem_target[g] = sim._idle_mem[g]  # the process exits, memory is freed
            sim._procs[g] = ()
            sim._ramping.pop(g, None)
    sim._user_gpus[job.user] -= job.gpu_count


def set_schedulable(sim: SimulatedCluster, node: int, schedulable: bool) -> None:
    """Let the scheduler place jobs on ``node`` or not; what already runs there keeps running."""
    if sim._schedulable[node] == schedulable:
        return
    bucket = sim._buckets[sim._node_part[node]][len(sim._node_free[node])]
    if schedulable:
        bucket[node] = None
    else:
        del bucket[node]
    sim._schedulable[node] = schedulable


def rebucket(sim: SimulatedCluster, node: int, old_free: int) -> None:
    if not sim._schedulable[node]:
        return
    buckets = sim._buckets[sim._node_part[node]]
    del buckets[old_free][node]
    buckets[len(sim._node_free[node])][node] = None


def try_place(sim: SimulatedCluster, job: SimJob, rng: random.Random) -> bool:
    buckets = sim._buckets[job.partition]
    g_per = sim.gpus_per_node
    if job.nodes == 1:
        # Best fit: the node with the fewest free GPUs that still fits, to keep whole nodes free.
        for k in range(job.per_node, g_per + 1):
            if buckets[k]:
                allocate(sim, job, next(iter(buckets[k])), job.per_node, rng, ramp=True)
                return True
        return False
    if len(buckets[g_per]) < job.nodes:
        return False
    for node in list(itertools.islice(buckets[g_per], job.nodes)):
        allocate(sim, job, node, g_per, rng, ramp=True)
    return True


def start_job(sim: SimulatedCluster, job: SimJob, start_s: float, end_s: float) -> None:
    job.start_s = start_s
    job.reason = None
    job.slurm = None
    sim._running[job.job_id] = job
    sim._user_gpus[job.user] += job.gpu_count
    if not job.pinned:
        heapq.heappush(sim._ends, (end_s, next(sim._end_seq), job))
    sim._jobs_changed = True


def setup_incident_jobs(sim: SimulatedCluster) -> None:
    """The jobs the incidents need, pinned: they do not end while the simulation runs."""
    rng = sim._setup_rng
    at = sim._incident_at
    g_per = sim.gpus_per_node
    t0 = sim.origin_s
    pinned: list[tuple[int, SimJob, float, tuple[int, ...] | None]] = []  # None: the whole node
    for kind, started_ago_s, user in (("hot_gpu", 19800.0, "chen"), ("unresponsive", 33120.0, "alice")):
        node = at.get(kind)
        if node is not None:
            job = make_job(sim, TRAIN, 1, g_per, PINNED_LIMIT_S, rng, user=user, profile=P_TRAIN)
            if kind == "hot_gpu":
                # Flat out, so the badly cooled GPU sits in thermal slowdown at 88-92 C whatever the seed.
                job.base_level, job.dip_level, job.power_factor = 96.0, 88.0, 0.97
            pinned.append((node, job, started_ago_s, None))
    node = at.get("idle_job")
    if node is not None:
        job = make_job(sim, TRAIN, 1, g_per, PINNED_LIMIT_S, rng, user=IDLE_JOB_USER, profile=P_IDLE)
        job.name = "jupyter"
        pinned.append((node, job, 3 * 3600.0, None))
    node = at.get("xid_job")
    if node is not None:
        # One job holds the node since before its Xid 13s (a little before the origin), so both GPUs'
        # faults are that job's however long a past the demo replays.
        job = make_job(sim, TRAIN, 1, g_per, PINNED_LIMIT_S, rng, user=XID_JOB_USER, profile=P_TRAIN)
        pinned.append((node, job, 2 * 3600.0, None))
    node = at.get("mig")
    if node is not None:
        job = make_job(sim, INFER, 1, 1, PINNED_LIMIT_S, rng, user=MIG_JOB_USER, profile=P_INFER)
        job.name = "mig-embed-serve"
        pinned.append((node, job, 26 * 3600.0, (incident_gpu(sim, "mig"),)))
    sim._pinned_jobs = []
    for node, job, started_ago_s, idxs in pinned:
        job.pinned = True
        job.limit_s = PINNED_LIMIT_S
        if idxs is None:
            allocate(sim, job, node, g_per, rng, ramp=False)
        else:
            take_specific(sim, job, node, idxs, rng)
        job.start_s = t0 - started_ago_s
        sim._pinned_jobs.append(job)


def take_specific(
    sim: SimulatedCluster, job: SimJob, node: int, idxs: tuple[int, ...], rng: random.Random
) -> None:
    """Hold GPUs Slurm does not otherwise hand out (the MIG GPU)."""
    saved_free, saved_schedulable = sim._node_free[node], sim._schedulable[node]
    sim._node_free[node] = list(idxs)
    sim._schedulable[node] = False  # keeps the buckets out of this temporary free list
    allocate(sim, job, node, len(idxs), rng, ramp=False)
    sim._node_free[node], sim._schedulable[node] = saved_free, saved_schedulable


def initial_fill(sim: SimulatedCluster) -> None:
    """Jobs already running at the start, started at random times in the past."""
    rng = sim._sched_rng
    g_per = sim.gpus_per_node
    t0 = sim.start_time_s
    started: list[SimJob] = [job for job in sim._pinned_jobs]
    by_part: list[list[int]] = [[] for _ in PARTITIONS]
    for i in range(sim._n):
        if sim._schedulable[i]:
            by_part[sim._node_part[i]].append(i)
    for part, nodes in enumerate(by_part):
        cursor = 0
        while cursor < len(nodes):
            node = nodes[cursor]
            if part == TRAIN and len(nodes) >= 4 and rng.random() < 0.3:
                width = rng.choice((2, 2, 3, 4))
                block = nodes[cursor : cursor + width]
                if len(block) == width and all(len(sim._node_free[i]) == g_per for i in block):
                    lo, hi = MULTI_NODE_DURATION_S
                    duration = math.exp(rng.uniform(math.log(lo), math.log(hi)))
                    user = fill_user(sim, rng, width * g_per)
                    job = make_job(sim, part, width, g_per, duration, rng, user=user)
                    for i in block:
                        allocate(sim, job, i, g_per, rng, ramp=False)
                    started.append(job)
                    cursor += width
                    continue
            fill_node(sim, node, part, rng, started)
            cursor += 1
    for job in started:
        if job.pinned:
            continue
        elapsed = rng.uniform(0.02, 0.98) * job.duration_s
        job.start_s = float(math.floor(t0 - elapsed))  # Slurm keeps whole seconds
    # Older jobs got lower ids, as Slurm hands them out in submission order.
    started.sort(key=lambda job: job.start_s if job.start_s is not None else t0)
    for job in started:
        assign_id(sim, job)
        start_s = job.start_s if job.start_s is not None else t0
        end_s = math.inf if job.pinned else start_s + job.duration_s
        start_job(sim, job, start_s, end_s)


def fill_user(sim: SimulatedCluster, rng: random.Random, gpus: int) -> str:
    # Running jobs respect the per-user limit, as Slurm enforced it when they started.
    user = pick_user(sim, rng)
    if user == QOS_USER:
        if sim._fill_qos_gpus + gpus > sim._qos_cap:
            return rng.choice(OTHER_USERS)
        sim._fill_qos_gpus += gpus
    return user


def fill_node(sim: SimulatedCluster, node: int, part: int, rng: random.Random, started: list[SimJob]) -> None:
    free = len(sim._node_free[node])
    if free == 0:
        return
    r = rng.random()
    if r < FILL_FULL[part]:
        target = free
    elif r < FILL_FULL[part] + FILL_EMPTY[part] or free == 1:
        target = 0
    else:
        target = rng.randint(1, free - 1)
    while target > 0:
        sizes = [s for s in (8, 4, 2, 1) if s <= target] + ([target] if target > 8 else [])
        size = rng.choices(sizes, weights=[FILL_WEIGHTS.get(s, 3) for s in sizes])[0]
        lo, hi = DURATION_S[part]
        duration = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        job = make_job(sim, part, 1, size, duration, rng, user=fill_user(sim, rng, size))
        allocate(sim, job, node, size, rng, ramp=False)
        started.append(job)
        target -= size


def initial_pending(sim: SimulatedCluster) -> None:
    """A queue that shows the usual reasons from the first sample: a big job waiting for whole
    nodes (Resources), jobs queued behind it (Priority) and one over the per-user limit (QOS)."""
    rng = sim._sched_rng
    g_per = sim.gpus_per_node
    train_nodes = sim._train_nodes
    wanted: list[tuple[int, int, int, float, str | None]] = []
    if train_nodes >= 2:
        wanted.append((TRAIN, min(4, train_nodes), g_per, 10 * 3600.0, "gwen"))
    wanted.append((TRAIN, 1, g_per, 6 * 3600.0, QOS_USER))
    wanted.append((TRAIN, 1, g_per, 8 * 3600.0, "eva"))
    wanted.append((TRAIN, 1, min(4, g_per), 5 * 3600.0, "bob"))
    wanted.append((INFER, 1, min(2, g_per), 4 * 3600.0, None))
    for _ in range(sim._n // 32):
        part = rng.choice((TRAIN, TRAIN, INFER))
        nodes, per, duration = draw_request(sim, part, rng)
        wanted.append((part, nodes, per, max(duration, 2 * BACKFILL_LIMIT_S), None))
    for part, nodes, per, duration, user in wanted:
        if not any(sim._node_part[i] == part and sim._schedulable[i] for i in range(sim._n)):
            continue
        job = make_job(sim, part, nodes, per, duration, rng, user=user)
        assign_id(sim, job)
        sim._pending.append(job)
    sim._jobs_changed = True


def schedule(sim: SimulatedCluster, t: float, *, force: bool = False) -> None:
    changed = force or sim._resumed
    sim._resumed = False
    while sim._ends and sim._ends[0][0] <= t:
        _, _, job = heapq.heappop(sim._ends)
        release_job(sim, job)
        del sim._running[job.job_id]
        sim._jobs_changed = changed = True
    rng = sim._sched_rng
    for part, rate in enumerate(sim._arrival_rate):
        if sim._next_arrival_s[part] < t - MAX_CATCH_UP_STEPS * STEP_S:
            sim._next_arrival_s[part] = t  # after a skip, resume arrivals instead of replaying them
        while sim._next_arrival_s[part] <= t:
            sim._next_arrival_s[part] += rng.expovariate(rate)
            if len(sim._pending) < sim._pending_cap:
                nodes, per, duration = draw_request(sim, part, rng)
                user = pick_user(sim, rng)
                if user == QOS_USER and sum(1 for j in sim._pending if j.user == user) >= 2:
                    # Someone at the limit stops submitting; others' work keeps the queue moving.
                    user = rng.choice(OTHER_USERS)
                job = make_job(sim, part, nodes, per, duration, rng, user=user)
                assign_id(sim, job)
                sim._pending.append(job)
                sim._jobs_changed = changed = True
    if changed:
        dispatch(sim, t)


def dispatch(sim: SimulatedCluster, t: float) -> None:
    """Start what fits, in priority order (job id), and give the rest Slurm's reasons."""
    rng = sim._sched_rng
    blocked: set[int] = set()
    still: list[SimJob] = []
    for job in sim._pending:
        if job.user == QOS_USER and sim._user_gpus[job.user] + job.gpu_count > sim._qos_cap:
            reason = "QOSMaxGpuPerUser"
        elif job.partition in blocked and job.limit_s > BACKFILL_LIMIT_S:
            reason = "Priority"
        elif try_place(sim, job, rng):
            job.warm_until_s = t + rng.uniform(15.0, 90.0)  # loading data and weights
            start_job(sim, job, t, t + job.duration_s)
            continue
        elif job.partition in blocked:
            reason = "Priority"
        else:
            blocked.add(job.partition)
            reason = "Resources"
        if reason != job.reason:
            job.reason = reason
            job.slurm = None
            sim._jobs_changed = True
        still.append(job)
    sim._pending = still
