"""The NVML source on this machine's real GPUs, checked against nvidia-smi. Skipped, saying what is
missing, where there is no NVIDIA driver or GPU."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from gputop.core.models import Reachability
from gputop.sources.nvml import NvmlSource

pytestmark = pytest.mark.gpu

QUERY = "index,uuid,name,memory.total,power.limit,mig.mode.current"


def _require_gpu() -> None:
    if shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-smi is not on PATH (no NVIDIA driver on this machine)")
    pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py (pynvml) is not installed")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as err:
        pytest.skip(f"pynvml.nvmlInit() failed: {err} (no NVIDIA driver or GPU)")
    try:
        if pynvml.nvmlDeviceGetCount() == 0:
            pytest.skip("NVML sees no GPU on this machine")
    finally:
        pynvml.nvmlShutdown()


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # [N/A], [Not Supported]
        return None


def _nvidia_smi() -> list[list[str]]:
    out = subprocess.run(
        ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return [[cell.strip() for cell in line.split(",")] for line in out.stdout.splitlines() if line.strip()]


async def test_nvml_source_agrees_with_nvidia_smi() -> None:
    _require_gpu()
    source = NvmlSource("localhost")
    await source.start()
    try:
        now = time.time()
        result = await source.collect(now)
    finally:
        await source.close()
    rows = _nvidia_smi()

    assert len(result.nodes) == 1
    node = result.nodes[0]
    assert node.reachability is Reachability.OK, node.error
    assert node.error is None
    assert node.sampled_at_s == now
    assert node.expected_gpu_count == len(rows)
    assert len(node.gpus) == len(rows)

    for gpu, (index, uuid, name, mem_total, power_limit, mig) in zip(node.gpus, rows, strict=True):
        assert gpu.index == int(index)
        assert gpu.uuid == uuid
        assert gpu.name == name
        total = _number(mem_total)
        assert gpu.mem_total_mib is not None and total is not None
        assert abs(gpu.mem_total_mib - total) <= 1.0
        limit = _number(power_limit)
        if limit is None:
            assert gpu.power_limit_w is None
        else:
            assert gpu.power_limit_w is not None and abs(gpu.power_limit_w - limit) <= 1.0
        assert gpu.mig_enabled is {"Enabled": True, "Disabled": False}.get(mig)

        assert gpu.pci_bus_id is not None and gpu.pci_bus_id.count(":") == 2
        if gpu.mig_enabled:
            assert gpu.util_pct is None
        else:
            assert gpu.util_pct is not None and 0.0 <= gpu.util_pct <= 100.0
            assert gpu.mem_util_pct is not None and 0.0 <= gpu.mem_util_pct <= 100.0
        assert gpu.temp_c is not None and 5.0 <= gpu.temp_c <= 110.0
        assert gpu.mem_used_mib is not None and 0.0 <= gpu.mem_used_mib <= gpu.mem_total_mib
        if gpu.power_w is not None and gpu.power_limit_w is not None:
            assert 0.0 < gpu.power_w <= 1.5 * gpu.power_limit_w
        if gpu.sm_clock_mhz is not None and gpu.sm_clock_max_mhz is not None:
            assert 0.0 <= gpu.sm_clock_mhz <= gpu.sm_clock_max_mhz
        for proc in gpu.processes:
            assert proc.pid > 0
            assert proc.used_mib is None or proc.used_mib >= 0.0
