"""`gputop snapshot --json`: everything one round saw, as one JSON document.

Each key is written out here rather than dumped from the dataclasses, so a field added to a model does
not change the document by accident (the schema rule is in report.py). The slow facts as parsed
(topology, NVLink, MIG listings) are not included: their shapes are the parsers', and `gputop parse`
prints them; what they imply is in the problems (kind "interconnect").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputop.core.idle import IdleState
from gputop.core.jobs import JobRow
from gputop.core.models import GpuProcess, GpuSample, IbPort, NodeSample, SlurmNode, SlurmState, XidEvent
from gputop.headless.report import finding_document, finite, round_header
from gputop.headless.round import Round
from gputop.headless.verdict import Verdict, node_findings


def snapshot_document(round_: Round, verdict: Verdict) -> dict[str, Any]:
    view = round_.view
    snapshot = view.snapshot
    jobs_on_gpus = _jobs_by_gpu(snapshot.slurm)
    return {
        **round_header(round_, verdict),
        "problems": [finding_document(f) for f in verdict.findings],
        "source_errors": list(round_.source_errors),
        "nodes": [
            _node(round_, node, view.rows[node.name].slurm_state, jobs_on_gpus, view.idle)
            for node in snapshot.nodes
        ],
        "slurm": _slurm(snapshot.slurm, view.jobs),
    }


def _node(
    round_: Round,
    node: NodeSample,
    slurm_state: str | None,
    jobs_on_gpus: Mapping[tuple[str, int], str],
    idle: IdleState | None,
) -> dict[str, Any]:
    findings = node_findings(round_, node.name)
    return {
        "name": node.name,
        "reachability": node.reachability.value,
        "sampled_at_s": node.sampled_at_s,
        "error": node.error,
        "severity": findings[0].severity.value if findings else "ok",
        "slurm_state": slurm_state,
        "expected_gpu_count": node.expected_gpu_count,
        "gpus": [_gpu(node.name, gpu, jobs_on_gpus, idle) for gpu in node.gpus],
        "ib_ports": [_ib_port(port) for port in node.ib_ports],
        "ib_failures": [{"adapter": f.adapter, "reason": f.reason} for f in node.ib_failures],
        "xid_events": [_xid(event) for event in node.xid_events],
        "facts_read": list(node.facts.read()),
        "fact_errors": dict(node.facts.errors()),
        "problems": [finding_document(f) for f in findings],
    }


def _gpu(
    node: str, gpu: GpuSample, jobs_on_gpus: Mapping[tuple[str, int], str], idle: IdleState | None
) -> dict[str, Any]:
    key = (node, gpu.index)
    idle_gpu = idle.gpus.get(key) if idle is not None else None
    return {
        "index": gpu.index,
        "uuid": gpu.uuid,
        "name": gpu.name,
        "pci_bus_id": gpu.pci_bus_id,
        "util_pct": finite(gpu.util_pct),
        "mem_util_pct": finite(gpu.mem_util_pct),
        "mem_used_mib": finite(gpu.mem_used_mib),
        "mem_total_mib": finite(gpu.mem_total_mib),
        "temp_c": finite(gpu.temp_c),
        "power_w": finite(gpu.power_w),
        "power_limit_w": finite(gpu.power_limit_w),
        "sm_clock_mhz": finite(gpu.sm_clock_mhz),
        "sm_clock_max_mhz": finite(gpu.sm_clock_max_mhz),
        "ecc_uncorrected": gpu.ecc_uncorrected,
        "mig_enabled": gpu.mig_enabled,
        "throttle_reasons": list(gpu.throttle_reasons),
        "processes": [_process(p) for p in gpu.processes],
        "job_id": jobs_on_gpus.get(key),
        # held by a job and idle: for how long so far, and whether past thresholds.idle_minutes
        "idle_s": finite(idle_gpu.idle_s) if idle_gpu is not None else None,
        "idle_flagged": idle is not None and key in idle.flagged,
    }


def _process(process: GpuProcess) -> dict[str, Any]:
    return {
        "pid": process.pid,
        "name": process.name,
        "used_mib": finite(process.used_mib),
        "user": process.user,
    }


def _ib_port(port: IbPort) -> dict[str, Any]:
    return {
        "ca_name": port.ca_name,
        "port": port.port,
        "state": port.state,
        "physical_state": port.physical_state,
        "rate_gbps": finite(port.rate_gbps),
        "link_layer": port.link_layer,
    }


def _xid(event: XidEvent) -> dict[str, Any]:
    return {
        "time_s": event.time_s,
        "code": event.code,
        "pci_bus_id": event.pci_bus_id,
        "gpu_index": event.gpu_index,
        "message": event.message,
    }


def _slurm(state: SlurmState | None, jobs: Mapping[str, JobRow]) -> dict[str, Any] | None:
    if state is None:
        return None
    return {
        "sampled_at_s": state.sampled_at_s,
        "error": state.error,
        "nodes": [_slurm_node(node) for node in state.nodes.values()],
        "jobs": [_job(row) for row in jobs.values()],
    }


def _slurm_node(node: SlurmNode) -> dict[str, Any]:
    return {
        "name": node.name,
        "state": node.label,
        "base_state": node.base_state.value,
        "flags": sorted(node.flags),
        "reason": node.reason,
        "reason_user": node.reason_user,
        "reason_time_s": node.reason_time_s,
        "partitions": list(node.partitions),
        "gpus_configured": node.gpus_configured,
        "gpus_allocated": node.gpus_allocated,
        "gpu_indices_in_use": list(node.gpu_indices_in_use) if node.gpu_indices_in_use is not None else None,
    }


def _job(row: JobRow) -> dict[str, Any]:
    job = row.job
    return {
        "job_id": job.job_id,
        "name": job.name,
        "user": job.user,
        "partition": job.partition,
        "state": job.state,
        "pending_reason": job.pending_reason,
        "nodes": row.nodes_text,
        "gpus_by_node": {node: list(indices) for node, indices in job.gpus_by_node.items()},
        "gpus": row.gpus,
        "util_mean_pct": finite(row.util_mean_pct),
        "idle_gpus": row.idle_gpus,
        "wasted_gpu_hours": finite(row.wasted_gpu_hours),
        "submit_time_s": job.submit_time_s,
        "start_time_s": job.start_time_s,
        "elapsed_s": finite(row.elapsed_s),
        "time_limit_s": job.time_limit_s,
    }


def _jobs_by_gpu(state: SlurmState | None) -> dict[tuple[str, int], str]:
    """(node, GPU index) -> the running job that holds it, from the jobs' GRES indices."""
    held: dict[tuple[str, int], str] = {}
    for job in state.jobs if state is not None else ():
        if job.state != "RUNNING":
            continue
        for node, indices in job.gpus_by_node.items():
            for index in indices:
                held[(node, index)] = job.job_id
    return held
