"""This machine's GPUs through NVML, for running gputop on a GPU node itself.

Reads the same fields as the SSH source's ``nvidia-smi --query-gpu`` stream (see ``QUERY_GPU_FIELDS``), in
the same units. ``pynvml`` (nvidia-ml-py) is imported in `start`, never when gputop is imported. Every
blocking NVML call of a collect runs in one `asyncio.to_thread` call, so a slow driver never holds up the
event loop.

NVML errors become values: a field the driver does not report (utilization on a MIG GPU, ECC on a board
without it) is ``None``; a GPU that cannot be read is left out and named in the sample's ``error``; no
driver at all gives a DOWN node that says why, and initialisation is tried again with a growing pause, so a
driver that comes back is picked up.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import pwd
from typing import Any, Final

from gputop.core.models import GpuProcess, GpuSample, NodeSample, Reachability, SourceResult
from gputop.core.parsers.query_gpu import throttle_reason_names

MIB: Final = 1024 * 1024

# Pause before trying nvmlInit again after a failure, doubling per failure up to the cap.
RETRY_FIRST_S: Final = 2.0
RETRY_MAX_S: Final = 60.0

# How long `close` waits for a read still running in its thread before shutting NVML down.
CLOSE_WAIT_S: Final = 5.0

# NVML's clocks event (throttle) reason bits carry the same names as the query-gpu parser gives them.


class NvmlSource:
    """One node, this machine, read through NVML."""

    name = "nvml"

    def __init__(self, node_name: str, nvml_module: Any = None) -> None:
        """`nvml_module` stands in for ``pynvml`` (the tests pass a fake); by default `start` imports it."""
        self.node_name = node_name
        self._nvml: Any = nvml_module
        self._initialized = False
        self._expected_gpus: int | None = None
        self._failures = 0
        self._retry_at_s: float | None = None
        self._error: str | None = None
        self._last_ok: NodeSample | None = None
        self._pending: asyncio.Task[NodeSample] | None = None
        self._users: dict[int, str] = {}

    # ------------------------------------------------------------------ the Source protocol

    async def start(self) -> None:
        # Only the import: nvmlInit runs in the first collect, which the poller bounds with a deadline.
        if self._nvml is None:
            await asyncio.to_thread(self._load_module)

    async def collect(self, now_s: float) -> SourceResult:
        pending = self._pending
        if pending is None or pending.done():
            if not self._initialized and self._retry_at_s is not None and now_s < self._retry_at_s:
                return SourceResult(nodes=(self._down_sample(),))
            pending = asyncio.create_task(asyncio.to_thread(self._read, now_s))
            pending.add_done_callback(_consume)
            self._pending = pending
        # A read still running from a collect that missed its deadline is awaited, not doubled: the
        # thread cannot be stopped, and two reads at once would race on this object's state.
        sample = await asyncio.shield(pending)
        return SourceResult(nodes=(sample,))

    async def close(self) -> None:
        pending = self._pending
        if pending is not None and not pending.done():
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(pending), CLOSE_WAIT_S)
        if self._initialized:
            await asyncio.to_thread(self._shutdown)

    @property
    def expected_gpu_count(self) -> int | None:
        """The device count seen at the first successful initialisation."""
        return self._expected_gpus

    # ------------------------------------------------------------------ blocking work (in a thread)

    def _load_module(self) -> bool:
        if self._nvml is not None:
            return True
        try:
            self._nvml = importlib.import_module("pynvml")
        except ImportError as err:
            self._error = f"NVML unavailable: pynvml (nvidia-ml-py) cannot be imported: {err}"
            return False
        return True

    def _init(self) -> bool:
        if not self._load_module():
            return False
        nvml = self._nvml
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as err:
            self._error = f"NVML unavailable: {_reason(err)}"
            return False
        self._initialized = True
        self._failures = 0
        self._retry_at_s = None
        self._error = None
        return True

    def _shutdown(self) -> None:
        nvml = self._nvml
        self._initialized = False
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()

    def _schedule_retry(self, now_s: float) -> None:
        self._failures += 1
        self._retry_at_s = now_s + min(RETRY_MAX_S, RETRY_FIRST_S * 2.0 ** (self._failures - 1))

    def _read(self, now_s: float) -> NodeSample:
        """Everything one collect needs, in one go: (re)initialise if needed, then every GPU."""
        if not self._initialized and not self._init():
            self._schedule_retry(now_s)
            return self._down_sample()
        nvml = self._nvml
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except nvml.NVMLError as err:
            # The driver went away under us (unloaded, reset): start over with a fresh nvmlInit later.
            self._error = f"NVML unavailable: {_reason(err)}"
            self._shutdown()
            self._schedule_retry(now_s)
            return self._down_sample()
        if self._expected_gpus is None:
            self._expected_gpus = count
        gpus: list[GpuSample] = []
        errors: list[str] = []
        for index in range(count):
            try:
                gpus.append(self._read_gpu(nvml, index))
            except nvml.NVMLError as err:
                errors.append(f"GPU {index} lost: {_reason(err)}")
        sample = NodeSample(
            name=self.node_name,
            reachability=Reachability.OK,
            sampled_at_s=now_s,
            gpus=tuple(gpus),
            expected_gpu_count=self._expected_gpus,
            error="; ".join(errors) or None,
        )
        self._last_ok = sample
        return sample

    def _read_gpu(self, nvml: Any, index: int) -> GpuSample:
        """One GPU. Raises NVMLError when the GPU itself cannot be read (no handle, no UUID, lost);
        any other field the driver refuses is None."""
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        lost = nvml.NVMLError_GpuIsLost
        failed = nvml.NVMLError

        def get(function: str, *args: Any) -> Any:
            method = getattr(nvml, function, None)
            if method is None:  # an older pynvml without it
                return None
            try:
                return method(handle, *args)
            except lost:
                raise
            except failed:
                return None

        name = get("nvmlDeviceGetName")
        pci = get("nvmlDeviceGetPciInfo")
        rates = get("nvmlDeviceGetUtilizationRates")
        # v2 reports used memory without the driver's reservation, as nvidia-smi does; older drivers lack it.
        v2 = getattr(nvml, "nvmlMemory_v2", None)
        memory = get("nvmlDeviceGetMemoryInfo", v2) if v2 is not None else None
        if memory is None:
            memory = get("nvmlDeviceGetMemoryInfo")
        mig = get("nvmlDeviceGetMigMode")
        reasons = get("nvmlDeviceGetCurrentClocksEventReasons")
        if reasons is None:
            reasons = get("nvmlDeviceGetCurrentClocksThrottleReasons")
        sm = nvml.NVML_CLOCK_SM
        # (correctable, uncorrectable, pending, failure); Ampere and newer only
        remapped = get("nvmlDeviceGetRemappedRows")
        retired_pending = get("nvmlDeviceGetRetiredPagesPendingStatus")
        return GpuSample(
            index=index,
            uuid=uuid,
            name=_text(name) if name is not None else "",
            pci_bus_id=_text(pci.busId) if pci is not None else None,
            util_pct=_float(rates.gpu) if rates is not None else None,
            mem_util_pct=_float(rates.memory) if rates is not None else None,
            mem_used_mib=_mib(memory.used) if memory is not None else None,
            mem_total_mib=_mib(memory.total) if memory is not None else None,
            temp_c=_float(get("nvmlDeviceGetTemperature", nvml.NVML_TEMPERATURE_GPU)),
            power_w=_watts(get("nvmlDeviceGetPowerUsage")),
            power_limit_w=_watts(get("nvmlDeviceGetEnforcedPowerLimit")),
            sm_clock_mhz=_float(get("nvmlDeviceGetClockInfo", sm)),
            sm_clock_max_mhz=_float(get("nvmlDeviceGetMaxClockInfo", sm)),
            ecc_uncorrected=_int(
                get(
                    "nvmlDeviceGetTotalEccErrors",
                    nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                    nvml.NVML_VOLATILE_ECC,
                )
            ),
            mig_enabled=int(mig[0]) == nvml.NVML_DEVICE_MIG_ENABLE if mig is not None else None,
            throttle_reasons=throttle_reason_names(int(reasons)) if reasons is not None else (),
            processes=self._processes(get("nvmlDeviceGetComputeRunningProcesses")),
            retired_pages_pending=bool(retired_pending) if retired_pending is not None else None,
            remapped_rows_pending=bool(remapped[2]) if remapped is not None else None,
            remapped_rows_failure=bool(remapped[3]) if remapped is not None else None,
            pcie_link_gen=_int(get("nvmlDeviceGetCurrPcieLinkGeneration")),
            pcie_link_gen_max=_int(get("nvmlDeviceGetMaxPcieLinkGeneration")),
            pcie_link_width_lanes=_int(get("nvmlDeviceGetCurrPcieLinkWidth")),
            pcie_link_width_max_lanes=_int(get("nvmlDeviceGetMaxPcieLinkWidth")),
        )

    def _processes(self, running: Any) -> tuple[GpuProcess, ...]:
        if not running:
            return ()
        out: list[GpuProcess] = []
        for proc in running:
            pid = int(proc.pid)
            used = getattr(proc, "usedGpuMemory", None)
            out.append(GpuProcess(pid, _process_name(pid), _mib(used), self._process_user(pid)))
        return tuple(out)

    def _process_user(self, pid: int) -> str | None:
        """The owner of /proc/<pid> by name (the uid as text when no name maps to it); None when the
        process is gone or not visible here (another PID namespace)."""
        try:
            uid = os.stat(f"/proc/{pid}").st_uid
        except OSError:
            return None
        user = self._users.get(uid)
        if user is None:
            try:
                user = pwd.getpwuid(uid).pw_name
            except KeyError:
                user = str(uid)
            self._users[uid] = user
        return user

    # ------------------------------------------------------------------ values

    def _down_sample(self) -> NodeSample:
        """DOWN, saying why, with the last good GPUs kept for triage."""
        last = self._last_ok
        return NodeSample(
            name=self.node_name,
            reachability=Reachability.DOWN,
            sampled_at_s=last.sampled_at_s if last is not None else None,
            gpus=last.gpus if last is not None else (),
            expected_gpu_count=self._expected_gpus,
            error=self._error or "NVML unavailable",
        )


def _consume(task: asyncio.Task[NodeSample]) -> None:
    """Fetch the outcome of a read nobody awaited any more (its collect timed out), so asyncio does not
    log it as never retrieved; the poller reports failures of the reads it does await."""
    if not task.cancelled():
        task.exception()


def _reason(err: BaseException) -> str:
    return str(err) or type(err).__name__


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _mib(value: Any) -> float | None:
    """Bytes to whole MiB, rounded down as nvidia-smi prints them."""
    return None if value is None else float(int(value) // MIB)


def _watts(value: Any) -> float | None:
    """NVML's milliwatts to watts."""
    return None if value is None else int(value) / 1000.0


def _process_name(pid: int) -> str:
    """/proc/<pid>/comm, or "" when it cannot be read (the process ended, or lives in another PID
    namespace)."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as comm:
            return comm.read().strip()
    except OSError:
        return ""
