"""Samples for tests, built in one place: a field added to GpuSample or NodeSample changes here only.

Every value can be overridden by keyword; the defaults are an idle-ish, healthy H100 80GB on a node that
answers. (`tests/conftest.py` offers the same as fixtures.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputop.core.fact_table import node_facts
from gputop.core.facts import NodeFacts
from gputop.core.models import GpuSample, NodeSample, Reachability

H100 = "NVIDIA H100 80GB HBM3"
H100_MEMORY_MIB = 81559.0

_GPU_DEFAULTS: dict[str, Any] = {
    "name": H100,
    "pci_bus_id": None,
    "util_pct": 50.0,
    "mem_util_pct": None,
    "mem_used_mib": 1000.0,
    "mem_total_mib": H100_MEMORY_MIB,
    "temp_c": 50.0,
    "power_w": 300.0,
    "power_limit_w": 700.0,
    "sm_clock_mhz": 1980.0,
    "sm_clock_max_mhz": 1980.0,
    "ecc_uncorrected": 0,
    "mig_enabled": False,
}
# What a MIG-side test leaves unknown: every reading from pci_bus_id to ecc_uncorrected.
UNKNOWN_READINGS: dict[str, Any] = dict.fromkeys(GpuSample._fields[3:14])


def gpu_sample(index: int, **overrides: Any) -> GpuSample:
    """GPU ``index`` (uuid ``GPU-<index>``), the defaults above, then ``overrides``."""
    fields = {"index": index, "uuid": f"GPU-{index}", **_GPU_DEFAULTS, **overrides}
    return GpuSample(**fields)


def node_sample(
    name: str, gpus: tuple[GpuSample, ...] | int = 8, *, sampled_at_s: float | None = 0.0, **overrides: Any
) -> NodeSample:
    """Node ``name`` answering (OK), with ``gpus`` (a count of default GPUs, or the samples themselves)."""
    samples = tuple(gpu_sample(i) for i in range(gpus)) if isinstance(gpus, int) else gpus
    fields: dict[str, Any] = {"reachability": Reachability.OK, "sampled_at_s": sampled_at_s, **overrides}
    return NodeSample(name=name, gpus=samples, **fields)


def facts_of(
    values: Mapping[str, object] | None = None,
    errors: Mapping[str, str] | None = None,
    read_at_s: float = 0.0,
) -> NodeFacts:
    """A node's typed facts from parsed values and errors by command name, all read at ``read_at_s``."""
    values = dict(values or {})
    return node_facts(values, dict.fromkeys(values, read_at_s), dict(errors or {}))
