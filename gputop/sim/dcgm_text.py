"""What a node's dcgm-exporter prints on /metrics, from the simulator's samples: the fake fleet's
exporters and the stores the tests and benchmarks load speak the real exposition format.

Sites differ, and so can this: `Hostname` or `hostname` and `UUID` or `uuid` (the spellings releases and
relabelling use), and a site that does not export the profiling fields (or only those).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gputop.core.models import NodeSample


@dataclass(frozen=True, slots=True)
class ExporterStyle:
    host_label: str = "Hostname"  # or "hostname"
    uuid_label: str = "UUID"  # or "uuid"
    device_util: bool = True  # DCGM_FI_DEV_GPU_UTIL
    profiling: bool = False  # DCGM_FI_PROF_GR_ENGINE_ACTIVE


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def exposition(
    nodes: Iterable[NodeSample], style: ExporterStyle = ExporterStyle(), time_ms: int | None = None
) -> str:
    """The /metrics text of ``nodes`` (each answering node's GPUs), with ``time_ms`` on every sample when
    given (the form a store's import takes)."""
    families: dict[str, list[str]] = {}
    stamp = f" {time_ms}" if time_ms is not None else ""
    for node in nodes:
        if not node.gpus:
            continue
        last_xid = {e.gpu_index: e.code for e in node.xid_events if e.gpu_index is not None}
        for gpu in node.gpus:
            labels = ",".join(
                (
                    f'gpu="{gpu.index}"',
                    f'{style.uuid_label}="{_escape(gpu.uuid)}"',
                    f'pci_bus_id="{_escape(gpu.pci_bus_id or "")}"',
                    f'device="nvidia{gpu.index}"',
                    f'modelName="{_escape(gpu.name)}"',
                    f'{style.host_label}="{_escape(node.name)}"',
                    'DCGM_FI_DRIVER_VERSION="570.124.06"',
                )
            )
            used, total = gpu.mem_used_mib, gpu.mem_total_mib
            code = last_xid.get(gpu.index, 0)
            values: list[tuple[str, float | None, str]] = [
                ("DCGM_FI_DEV_GPU_UTIL", gpu.util_pct if style.device_util else None, ""),
                (
                    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
                    gpu.util_pct / 100.0 if style.profiling and gpu.util_pct is not None else None,
                    "",
                ),
                ("DCGM_FI_DEV_MEM_COPY_UTIL", gpu.mem_util_pct, ""),
                ("DCGM_FI_DEV_FB_USED", used, ""),
                ("DCGM_FI_DEV_FB_FREE", None if used is None or total is None else total - used, ""),
                ("DCGM_FI_DEV_GPU_TEMP", gpu.temp_c, ""),
                ("DCGM_FI_DEV_POWER_USAGE", gpu.power_w, ""),
                ("DCGM_FI_DEV_SM_CLOCK", gpu.sm_clock_mhz, ""),
                ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", gpu.ecc_uncorrected, ""),
                ("DCGM_FI_DEV_XID_ERRORS", code, f',err_code="{code}"'),
            ]
            for metric, value, extra in values:
                if value is not None:
                    families.setdefault(metric, []).append(f"{metric}{{{labels}{extra}}} {value:.17g}{stamp}")
    return _text(families)


_STATE_IDS = {"Down": 1, "Init": 2, "Armed": 3, "Active": 4, "ActiveDefer": 5}
_PHYSICAL_IDS = {"Sleep": 1, "Polling": 2, "Disabled": 3, "PortConfigurationTraining": 4, "LinkUp": 5}


def node_exporter_ib(nodes: Iterable[NodeSample], time_ms: int | None = None, port: int = 9100) -> str:
    """What each node's node_exporter prints of its InfiniBand ports (the infiniband collector), the
    host in `instance` as a scrape labels it."""
    stamp = f" {time_ms}" if time_ms is not None else ""
    families: dict[str, list[str]] = {}
    for node in nodes:
        for ib in node.ib_ports:
            labels = f'device="{_escape(ib.ca_name)}",port="{ib.port}",instance="{_escape(node.name)}:{port}"'
            values = (
                ("node_infiniband_state_id", _STATE_IDS.get(ib.state, 0)),
                ("node_infiniband_physical_state_id", _PHYSICAL_IDS.get(ib.physical_state, 0)),
                (
                    "node_infiniband_rate_bytes_per_second",
                    None if ib.rate_gbps is None else ib.rate_gbps * 1e9 / 8,
                ),
            )
            for metric, value in values:
                if value is not None:
                    families.setdefault(metric, []).append(f"{metric}{{{labels}}} {value:.17g}{stamp}")
    return _text(families)


def _text(families: dict[str, list[str]]) -> str:
    """Each family's samples under its TYPE line ("" for none)."""
    lines: list[str] = []
    for metric, samples in families.items():
        lines.append(f"# TYPE {metric} gauge")
        lines.extend(samples)
    return "\n".join(lines) + "\n" if lines else ""
