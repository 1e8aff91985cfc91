"""The fleet's Slurm login node: what Slurm 22.05's clients print there, played from the simulator.

gputop reads Slurm where ``slurm.run_on`` says, over SSH. Logged in as `LOGIN_USER`, the fleet answers
the Slurm commands gputop runs with the simulated cluster's jobs and nodes, in the shape Slurm 22.05.8
prints them (openapi/v0.0.38 JSON, as captured from real 22.05.8 daemons: ``squeue --json``,
``sinfo --json``; ``scontrol --json`` is refused with 22.05's own words, so gputop takes the route a
22.05 site needs), and ``scontrol update`` drains and resumes the simulated nodes, as the demo's does.
No I/O and no timing (the server owns both).
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

from gputop.core.models import SlurmJob, SlurmNode, SlurmState
from gputop.core.nodeset import fold_nodes
from gputop.sim.demo_actions import SimulatedScontrol
from gputop.sim.simulator import SimulatedCluster

LOGIN_USER: Final = "slurm-login"
CONTROLLER_HOST: Final = "fake-fleet-ctld"

_META: Final = {
    "plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
    "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": "22.05.8"},
}
_NO_JSON_OPTION: Final = (
    "{program}: unrecognized option '--json'\nTry \"{program} --help\" for more information\n"
)
_SLURM_PROGRAMS: Final = frozenset({"squeue", "sinfo", "scontrol", "sacct", "sbatch", "scancel", "srun"})
_NODE_CPUS: Final = 128
_NODE_MEMORY_MIB: Final = 2_063_000


def _json(document: Mapping[str, object]) -> str:
    # 22.05's JSON writer indents by two and escapes every '/' (as in "openapi\/v0.0.38")
    return json.dumps(document, indent=2).replace("/", "\\/") + "\n"


def gres_type(model_key: str) -> str:
    """The GRES type a site names such GPUs by (``gpu:h100:8``): the model's key, lower case, no variant."""
    return model_key.split("-")[0].lower()


def fold_indices(indices: Iterable[int]) -> str:
    """GPU indices as Slurm writes them in IDX: ``0-3,6``."""
    ordered = sorted(set(indices))
    parts: list[str] = []
    start = previous = None
    for index in [*ordered, None]:
        if start is not None and (index is None or index != previous + 1):  # type: ignore[operator]
            parts.append(str(start) if start == previous else f"{start}-{previous}")
            start = None
        if index is not None and start is None:
            start = index
        previous = index
    return ",".join(parts)


class SlurmLogin:
    """The answers of the login node. ``gres_type`` is the GPU model's GRES name (``h100``)."""

    def __init__(
        self, cluster: SimulatedCluster, gres_type: str, clock: Callable[[], float], user: str = "root"
    ) -> None:
        self.cluster = cluster
        self.clock = clock
        self.gres_type = gres_type
        self._scontrol = SimulatedScontrol(lambda: cluster, user=user)

    # ---- the commands

    def run(self, command_line: str) -> tuple[int, str, str]:
        """(exit status, stdout, stderr) of one command line, as a login node's shell runs it."""
        try:
            argv = shlex.split(command_line)
        except ValueError:
            return 2, "", "sh: 1: Syntax error: Unterminated quoted string\n"
        argv = _without_env(argv)
        if not argv:
            return 0, "", ""
        program, args = argv[0].rsplit("/", 1)[-1], argv[1:]
        if program not in _SLURM_PROGRAMS:
            return 127, "", f"sh: 1: {argv[0]}: not found\n"
        self.cluster.advance_to(self.clock())
        state = self.cluster.result().slurm
        if state is None:
            return 1, "", f"{program}: error: Unable to contact slurm controller (connect failure)\n"
        if program == "squeue" and args == ["--json"]:
            return 0, _json(self.squeue_json(state)), ""
        if program == "sinfo" and args == ["--json"]:
            return 0, _json(self.sinfo_json(state)), ""
        if program == "sinfo" and args[:4] == ["-h", "-N", "-o", "%N"]:
            return self._node_names(state, args[4:])
        if program in ("scontrol", "squeue", "sinfo") and "--json" in args:
            return 1, "", _NO_JSON_OPTION.format(program=program)
        if program == "scontrol" and args == ["ping"]:
            return 0, f"Slurmctld(primary) at {CONTROLLER_HOST} is UP\n", ""
        if program == "scontrol" and args and "update".startswith(args[0].lower()):
            status, stderr = self._scontrol.answer(args)
            return status, "", stderr
        shown = " ".join([program, *args])
        return 1, "", f"{program}: this fake login node plays only what gputop runs, not '{shown}'\n"

    def _node_names(self, state: SlurmState, rest: Sequence[str]) -> tuple[int, str, str]:
        names = sorted(state.nodes)
        if rest[:1] == ["-p"] and len(rest) == 2:
            names = [name for name in names if rest[1] in state.nodes[name].partitions]
        elif rest:
            return 1, "", f"sinfo: unrecognized option '{rest[0]}'\n"
        return 0, "".join(f"{name}\n" for name in names), ""

    # ---- 22.05's documents

    def squeue_json(self, state: SlurmState) -> dict[str, object]:
        return {"meta": _META, "errors": [], "jobs": [self._job(job) for job in state.jobs]}

    def sinfo_json(self, state: SlurmState) -> dict[str, object]:
        in_use = _indices_in_use(state.jobs)
        return {
            "meta": _META,
            "errors": [],
            "nodes": [self._node(node, in_use.get(name, ())) for name, node in sorted(state.nodes.items())],
        }

    def _gres(self, count: int, indices: Sequence[int] | None = None) -> str:
        text = f"gpu:{self.gres_type}:{count}"
        return f"{text}(IDX:{fold_indices(indices)})" if indices else text

    def _job(self, job: SlurmJob) -> dict[str, object]:
        running = job.state == "RUNNING"
        nodes = sorted(job.gpus_by_node)
        per_node = len(job.gpus_by_node[nodes[0]]) if nodes else 0
        requested = job.gpus_requested or sum(map(len, job.gpus_by_node.values())) or 1
        start = int(job.start_time_s) if job.start_time_s is not None and running else 0
        limit_min = math.ceil(job.time_limit_s / 60) if job.time_limit_s else None
        uid = 1000 + sum(map(ord, job.user)) % 50000  # one made-up uid per user name, stable
        return {
            "account": job.partition,
            "array_job_id": 0,
            "array_task_id": None,
            "array_task_string": "",
            "cluster": "fake-fleet",
            "command": f"/home/{job.user}/run.sbatch",
            "end_time": start + limit_min * 60 if running and limit_min else 0,
            "gres_detail": [self._gres(len(job.gpus_by_node[n]), job.gpus_by_node[n]) for n in nodes],
            "group_id": uid,
            "job_id": int(job.job_id),
            "job_resources": _resources(nodes) if running else {},
            "job_state": job.state,
            "name": job.name,
            "nodes": fold_nodes(nodes) if running else "",
            "node_count": len(nodes) or max(1, math.ceil(requested / max(1, self.cluster.gpus_per_node))),
            "het_job_id": 0,
            "het_job_offset": 0,
            "partition": job.partition,
            "priority": 4294901000 - int(job.job_id) % 100000,
            "start_time": start,
            "state_description": "",
            "state_reason": job.pending_reason or "None",
            "submit_time": int(job.submit_time_s or job.start_time_s or self.cluster.now_s),
            "tasks": len(nodes) or 1,
            "time_limit": limit_min,
            "tres_alloc_str": f"cpu={len(nodes)},node={len(nodes)},billing={len(nodes)}" if running else "",
            "tres_per_job": "" if running else f"gres:gpu:{requested}",
            "tres_per_node": f"gres:gpu:{per_node}" if running else "",
            "tres_req_str": "cpu={0},node={0},billing={0}".format(max(1, len(nodes))),
            "user_id": uid,
            "user_name": job.user,
        }

    def _node(self, node: SlurmNode, indices: Sequence[int]) -> dict[str, object]:
        gpus = self.cluster.gpus_per_node
        used = self._gres(len(indices), indices) if indices else f"gpu:{self.gres_type}:0(IDX:N/A)"
        reason_time = int(node.reason_time_s) if node.reason_time_s is not None else 0
        return {
            "architecture": "x86_64",
            "cores": _NODE_CPUS // 2,
            "cpus": _NODE_CPUS,
            "gres": self._gres(gpus),
            "gres_drained": "N/A",
            "gres_used": used,
            "name": node.name,
            "address": node.name,
            "hostname": node.name,
            "state": node.base_state.value,
            "state_flags": sorted(node.flags),
            "partitions": list(node.partitions),
            "real_memory": _NODE_MEMORY_MIB,
            "reason": node.reason or "",
            "reason_changed_at": reason_time,
            "reason_set_by_user": node.reason_user,
            "slurmd_version": "22.05.8",
            "sockets": 2,
            "threads": 1,
            "tres": f"cpu={_NODE_CPUS},mem={_NODE_MEMORY_MIB}M,billing={_NODE_CPUS},gres/gpu={gpus}",
            "tres_used": f"gres/gpu={len(indices)}" if indices else None,
        }


def _without_env(argv: list[str]) -> list[str]:
    """``env NAME=value ... program args``, as gputop sends slurm.env: the program and its args."""
    if argv[:1] != ["env"]:
        return argv
    rest = argv[1:]
    while rest and "=" in rest[0] and not rest[0].startswith("="):
        rest = rest[1:]
    return rest


def _indices_in_use(jobs: Iterable[SlurmJob]) -> dict[str, list[int]]:
    in_use: dict[str, list[int]] = {}
    for job in jobs:
        if job.state == "RUNNING":
            for node, indices in job.gpus_by_node.items():
                in_use.setdefault(node, []).extend(indices)
    return in_use


def _resources(nodes: Sequence[str]) -> dict[str, object]:
    return {
        "nodes": fold_nodes(nodes),
        "allocated_cores": len(nodes),
        "allocated_hosts": len(nodes),
        "allocated_nodes": [{"nodename": name, "cpus_used": 0, "memory_used": 0} for name in nodes],
    }
