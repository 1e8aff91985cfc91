"""The GPU models the simulator can play, with the figures nvidia-smi reports for them.

Names are spelled as ``nvidia-smi --query-gpu=name`` prints them, memory as its ``memory.total`` (MiB),
so simulated data looks exactly like collected data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class GpuModel:
    key: str  # the short name used in configuration: "H100", "A100-80GB", ...
    name: str  # as nvidia-smi prints it
    mem_total_mib: int
    power_limit_w: float
    idle_power_w: float  # no context, no work: what a healthy idle GPU draws
    sm_clock_max_mhz: int
    sm_clock_idle_mhz: int  # where the clock rests when nothing holds the GPU
    mig_slice_mib: int  # memory of the smallest MIG instance (1g.*)
    ib_rate_gbps: float  # the InfiniBand generation such nodes ship with: NDR 400, HDR 200
    nvlinks_per_gpu: int  # NVLinks of one GPU, as `nvidia-smi nvlink -s` lists them
    nvlink_speed_gbyte_s: float  # GB/s (bytes) per link and direction, as `nvlink -s` prints it
    pcie_gen_max: int = 5  # the PCIe generation the GPU's link trains at (x16 on every model here)


_MODELS = (
    GpuModel(
        key="H100",
        name="NVIDIA H100 80GB HBM3",
        mem_total_mib=81559,
        power_limit_w=700.0,
        idle_power_w=70.0,
        sm_clock_max_mhz=1980,
        sm_clock_idle_mhz=345,
        mig_slice_mib=9856,
        ib_rate_gbps=400.0,
        nvlinks_per_gpu=18,
        nvlink_speed_gbyte_s=26.562,
    ),
    GpuModel(
        key="H200",
        name="NVIDIA H200",
        mem_total_mib=143771,
        power_limit_w=700.0,
        idle_power_w=75.0,
        sm_clock_max_mhz=1980,
        sm_clock_idle_mhz=345,
        mig_slice_mib=17920,
        ib_rate_gbps=400.0,
        nvlinks_per_gpu=18,
        nvlink_speed_gbyte_s=26.562,
    ),
    GpuModel(
        key="A100-80GB",
        name="NVIDIA A100-SXM4-80GB",
        mem_total_mib=81920,
        power_limit_w=400.0,
        idle_power_w=62.0,
        sm_clock_max_mhz=1410,
        sm_clock_idle_mhz=210,
        mig_slice_mib=9728,
        ib_rate_gbps=200.0,
        nvlinks_per_gpu=12,
        nvlink_speed_gbyte_s=25.0,
        pcie_gen_max=4,
    ),
    GpuModel(
        key="A100-40GB",
        name="NVIDIA A100-SXM4-40GB",
        mem_total_mib=40960,
        power_limit_w=400.0,
        idle_power_w=55.0,
        sm_clock_max_mhz=1410,
        sm_clock_idle_mhz=210,
        mig_slice_mib=4864,
        ib_rate_gbps=200.0,
        nvlinks_per_gpu=12,
        nvlink_speed_gbyte_s=25.0,
        pcie_gen_max=4,
    ),
    GpuModel(
        key="B200",
        name="NVIDIA B200",
        mem_total_mib=183359,
        power_limit_w=1000.0,
        idle_power_w=140.0,
        sm_clock_max_mhz=1965,
        sm_clock_idle_mhz=120,
        mig_slice_mib=23040,
        ib_rate_gbps=400.0,
        nvlinks_per_gpu=18,
        nvlink_speed_gbyte_s=53.125,
    ),
)

GPU_MODELS: Mapping[str, GpuModel] = MappingProxyType({model.key: model for model in _MODELS})


def gpu_model(key: str) -> GpuModel:
    """The model for a short name, or a ValueError that lists the names there are."""
    try:
        return GPU_MODELS[key]
    except KeyError:
        known = ", ".join(GPU_MODELS)
        raise ValueError(f"unknown GPU model {key!r}; known models: {known}") from None
