"""A stand-in for ``pynvml`` (nvidia-ml-py) that serves one node of gputop's simulator through the NVML
interface, with switches for what real drivers do: fields they do not support, GPUs that fall off the bus,
no driver at all, and slow calls.

Names, constants, signatures and the error hierarchy follow the real module (a test checks them against
it). Values come out in NVML's units: bytes, milliwatts, whole percents, degrees and MHz. A field the
simulated sample has as None (utilization of a MIG GPU) raises NVMLError_NotSupported, as the driver does.

    fake = FakeNvml()                    # one simulated node, 8 H100s
    fake.advance(now_s)                  # step the simulator
    fake.expected(0)                     # the GpuSample NVML is serving for device 0
    fake.make_unsupported("nvmlDeviceGetPowerUsage", gpu=2)
    fake.lose_gpu(3)                     # nvmlDeviceGetHandleByIndex(3) raises NVMLError_GpuIsLost
    fake.fail_init(FakeNvml.NVMLError_DriverNotLoaded)
"""

from __future__ import annotations

import string
import threading
import time
import types
from dataclasses import dataclass
from typing import Any

from gputop.core.models import GpuSample
from gputop.sim.simulator import SimulatedCluster

START_S = 1_700_000_000.0
MIB = 1024 * 1024

# ---------------------------------------------------------------------- constants, as pynvml spells them

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_FREQ_NOT_SUPPORTED = 24
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_DEPRECATED = 26
NVML_ERROR_NOT_READY = 27
NVML_ERROR_GPU_NOT_FOUND = 28
NVML_ERROR_INVALID_STATE = 29
NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30
NVML_ERROR_UNKNOWN = 999

NVML_TEMPERATURE_GPU = 0
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1
nvmlMemory_v2 = 0x02000028

# nvmlClocksEventReason* bits, by the names the simulator (and the query-gpu parser) use.
REASON_BITS = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clocks_setting": 0x100,
}

# ---------------------------------------------------------------------- errors, built as pynvml builds them


class NVMLError(Exception):
    _valClassMapping: dict[int, type[NVMLError]] = {}
    _errcode_to_string = {
        NVML_ERROR_UNINITIALIZED: "Uninitialized",
        NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
        NVML_ERROR_NOT_SUPPORTED: "Not Supported",
        NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
        NVML_ERROR_ALREADY_INITIALIZED: "Already Initialized",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
        NVML_ERROR_INSUFFICIENT_POWER: "Insufficient External Power",
        NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
        NVML_ERROR_TIMEOUT: "Timeout",
        NVML_ERROR_IRQ_ISSUE: "Interrupt Request Issue",
        NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
        NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
        NVML_ERROR_CORRUPTED_INFOROM: "Corrupted infoROM",
        NVML_ERROR_GPU_IS_LOST: "GPU is lost",
        NVML_ERROR_RESET_REQUIRED: "GPU requires restart",
        NVML_ERROR_OPERATING_SYSTEM: "The operating system has blocked the request.",
        NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
        NVML_ERROR_MEMORY: "Insufficient Memory",
        NVML_ERROR_UNKNOWN: "Unknown Error",
    }
    value: int

    def __new__(cls, value: int) -> NVMLError:
        """NVMLError(code) comes back as the subclass for that code, as in pynvml."""
        if cls is NVMLError:
            cls = NVMLError._valClassMapping.get(value, cls)
        obj = Exception.__new__(cls)
        obj.value = value
        return obj

    def __str__(self) -> str:
        return self._errcode_to_string.get(self.value, f"NVML Error with code {self.value}")


def _error_classes() -> dict[str, type[NVMLError]]:
    """NVML_ERROR_GPU_IS_LOST -> NVMLError_GpuIsLost, and so on, with pynvml's naming rule."""
    classes: dict[str, type[NVMLError]] = {}
    for const, code in list(globals().items()):
        if not const.startswith("NVML_ERROR_"):
            continue
        name = "NVMLError_" + string.capwords(const.replace("NVML_ERROR_", ""), "_").replace("_", "")

        def new(cls: type[NVMLError], *args: object, _code: int = code) -> NVMLError:
            return NVMLError.__new__(cls, _code)

        cls = type(name, (NVMLError,), {"__new__": new, "__module__": __name__})
        NVMLError._valClassMapping[code] = cls
        classes[name] = cls
    return classes


ERRORS = _error_classes()
globals().update(ERRORS)
CONSTANTS = {k: v for k, v in globals().items() if k.startswith("NVML_") or k == "nvmlMemory_v2"}

# ---------------------------------------------------------------------- the structures NVML hands back


@dataclass(frozen=True)
class Handle:
    index: int


@dataclass(frozen=True)
class PciInfo:
    busId: bytes | str
    domain: int
    bus: int
    device: int


@dataclass(frozen=True)
class Utilization:
    gpu: int
    memory: int


@dataclass(frozen=True)
class Memory:
    total: int
    free: int
    used: int
    reserved: int = 0
    version: int = 0


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    usedGpuMemory: int | None
    gpuInstanceId: int = 0xFFFFFFFF
    computeInstanceId: int = 0xFFFFFFFF


# ---------------------------------------------------------------------- the module


class FakeNvml(types.ModuleType):
    """A module object (``isinstance(fake, types.ModuleType)``) with pynvml's interface subset; each test
    builds its own, so switches never leak between tests."""

    def __init__(
        self,
        cluster: SimulatedCluster | None = None,
        *,
        node: int = 0,
        text_as_bytes: bool = False,
        reserved_mib: int = 0,
    ) -> None:
        """`node`: which of the cluster's nodes to serve. `text_as_bytes`: names, UUIDs and bus ids come
        back as bytes, as older pynvml releases return them. `reserved_mib`: memory the driver reserves,
        counted as used by the v1 memory call and not by v2 (as on real drivers)."""
        super().__init__("pynvml")
        self.cluster = cluster if cluster is not None else SimulatedCluster(nodes=1, start_time_s=START_S)
        self.node = node
        self.text_as_bytes = text_as_bytes
        self.reserved_mib = reserved_mib
        self.initialized = False
        self.init_calls = 0
        self.shutdown_calls = 0
        self.init_error: type[NVMLError] | None = None
        self.unsupported: dict[str, set[int] | None] = {}  # function -> GPU indices (None: every GPU)
        self.lost_handles: set[int] = set()
        self.lost_reads: set[int] = set()
        self.delay_s = 0.0  # nvmlDeviceGetCount sleeps this long (blocking), like a slow driver
        self.extra_processes: dict[int, list[ProcessInfo]] = {}
        self.call_threads: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ switches

    def advance(self, now_s: float) -> None:
        self.cluster.advance_to(now_s)

    def samples(self) -> tuple[GpuSample, ...]:
        return self.cluster.result().nodes[self.node].gpus

    def expected(self, index: int) -> GpuSample:
        return self.samples()[index]

    def fail_init(self, error: type[NVMLError] | None) -> None:
        """nvmlInit raises `error` from now on (None: it succeeds again)."""
        self.init_error = error

    def unload_driver(self, error: type[NVMLError]) -> None:
        """The driver goes away under a running program: every call fails until nvmlInit succeeds again."""
        self.init_error = error
        self.initialized = False

    def make_unsupported(self, function: str, gpu: int | None = None) -> None:
        if gpu is None:
            self.unsupported[function] = None
        else:
            current = self.unsupported.get(function, set())
            if current is not None:
                current.add(gpu)
                self.unsupported[function] = current

    def lose_gpu(self, index: int, *, handle: bool = True) -> None:
        """GPU `index` fell off the bus: its handle cannot be had (`handle=True`), or the handle is had
        but every read of it raises NVMLError_GpuIsLost."""
        (self.lost_handles if handle else self.lost_reads).add(index)

    def add_process(self, index: int, pid: int, used_bytes: int | None) -> None:
        self.extra_processes.setdefault(index, []).append(ProcessInfo(pid, used_bytes))

    # ------------------------------------------------------------------ plumbing

    def _enter(self, function: str, handle: Handle | None = None) -> GpuSample | None:
        with self._lock:
            self.call_threads.append((function, threading.get_ident()))
        if not self.initialized:
            raise ERRORS["NVMLError_Uninitialized"]()
        if handle is None:
            return None
        if handle.index in self.lost_reads:
            raise ERRORS["NVMLError_GpuIsLost"]()
        gpus = self.unsupported.get(function, set())
        if gpus is None or handle.index in gpus:
            raise ERRORS["NVMLError_NotSupported"]()
        return self.expected(handle.index)

    def _sample(self, function: str, handle: Handle) -> GpuSample:
        sample = self._enter(function, handle)
        assert sample is not None
        return sample

    def _text(self, value: str) -> bytes | str:
        return value.encode() if self.text_as_bytes else value

    @staticmethod
    def _value(value: Any) -> Any:
        if value is None:
            raise ERRORS["NVMLError_NotSupported"]()
        return value

    # ------------------------------------------------------------------ the NVML interface

    def nvmlInit(self) -> None:
        self.init_calls += 1
        if self.init_error is not None:
            raise self.init_error()
        self.initialized = True

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self.shutdown_calls += 1
        self.initialized = False

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        if self.delay_s:
            time.sleep(self.delay_s)
        return len(self.samples())

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Handle:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= index < len(self.samples()):
            raise ERRORS["NVMLError_InvalidArgument"]()
        if index in self.lost_handles:
            raise ERRORS["NVMLError_GpuIsLost"]()
        return Handle(index)

    def nvmlDeviceGetUUID(self, handle: Handle) -> bytes | str:
        return self._text(self._sample("nvmlDeviceGetUUID", handle).uuid)

    def nvmlDeviceGetName(self, handle: Handle) -> bytes | str:
        return self._text(self._sample("nvmlDeviceGetName", handle).name)

    def nvmlDeviceGetPciInfo(self, handle: Handle) -> PciInfo:
        bus_id = self._value(self._sample("nvmlDeviceGetPciInfo", handle).pci_bus_id)
        domain, bus, rest = bus_id.split(":")
        return PciInfo(self._text(bus_id), int(domain, 16), int(bus, 16), int(rest.split(".")[0], 16))

    def nvmlDeviceGetUtilizationRates(self, handle: Handle) -> Utilization:
        s = self._sample("nvmlDeviceGetUtilizationRates", handle)
        return Utilization(int(self._value(s.util_pct)), int(self._value(s.mem_util_pct)))

    def nvmlDeviceGetMemoryInfo(self, handle: Handle, version: int | None = None) -> Memory:
        s = self._sample("nvmlDeviceGetMemoryInfo", handle)
        total = int(self._value(s.mem_total_mib)) * MIB
        used = int(self._value(s.mem_used_mib)) * MIB
        reserved = self.reserved_mib * MIB
        free = total - used - reserved
        if not version:
            return Memory(total=total, free=free, used=used + reserved)
        if version != nvmlMemory_v2:
            raise ERRORS["NVMLError_ArgumentVersionMismatch"]()
        return Memory(total=total, free=free, used=used, reserved=reserved, version=version)

    def nvmlDeviceGetTemperature(self, handle: Handle, sensor: int) -> int:
        s = self._sample("nvmlDeviceGetTemperature", handle)
        if sensor != NVML_TEMPERATURE_GPU:
            raise ERRORS["NVMLError_InvalidArgument"]()
        return int(self._value(s.temp_c))

    def nvmlDeviceGetPowerUsage(self, handle: Handle) -> int:
        return round(self._value(self._sample("nvmlDeviceGetPowerUsage", handle).power_w) * 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Handle) -> int:
        s = self._sample("nvmlDeviceGetEnforcedPowerLimit", handle)
        return round(self._value(s.power_limit_w) * 1000)

    def nvmlDeviceGetClockInfo(self, handle: Handle, type: int) -> int:
        s = self._sample("nvmlDeviceGetClockInfo", handle)
        if type != NVML_CLOCK_SM:
            raise ERRORS["NVMLError_NotSupported"]()
        return int(self._value(s.sm_clock_mhz))

    def nvmlDeviceGetMaxClockInfo(self, handle: Handle, type: int) -> int:
        s = self._sample("nvmlDeviceGetMaxClockInfo", handle)
        if type != NVML_CLOCK_SM:
            raise ERRORS["NVMLError_NotSupported"]()
        return int(self._value(s.sm_clock_max_mhz))

    def nvmlDeviceGetTotalEccErrors(self, handle: Handle, errorType: int, counterType: int) -> int:
        s = self._sample("nvmlDeviceGetTotalEccErrors", handle)
        if (errorType, counterType) != (NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC):
            return 0
        return int(self._value(s.ecc_uncorrected))

    def nvmlDeviceGetMigMode(self, device: Handle) -> list[int]:
        s = self._sample("nvmlDeviceGetMigMode", device)
        mode = NVML_DEVICE_MIG_ENABLE if self._value(s.mig_enabled) else NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def _reasons(self, function: str, handle: Handle) -> int:
        mask = 0
        for name in self._sample(function, handle).throttle_reasons:
            mask |= REASON_BITS[name]
        return mask

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Handle) -> int:
        return self._reasons("nvmlDeviceGetCurrentClocksEventReasons", handle)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Handle) -> int:
        return self._reasons("nvmlDeviceGetCurrentClocksThrottleReasons", handle)

    def nvmlDeviceGetRemappedRows(self, device: Handle) -> tuple[int, int, int, int]:
        s = self._sample("nvmlDeviceGetRemappedRows", device)
        return (0, 0, int(self._value(s.remapped_rows_pending)), int(bool(s.remapped_rows_failure)))

    def nvmlDeviceGetRetiredPagesPendingStatus(self, device: Handle) -> int:
        s = self._sample("nvmlDeviceGetRetiredPagesPendingStatus", device)
        return int(self._value(s.retired_pages_pending))  # None (GPUs that remap rows instead) raises

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Handle) -> int:
        s = self._sample("nvmlDeviceGetCurrPcieLinkGeneration", handle)
        return int(self._value(s.pcie_link_gen))

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Handle) -> int:
        s = self._sample("nvmlDeviceGetMaxPcieLinkGeneration", handle)
        return int(self._value(s.pcie_link_gen_max))

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Handle) -> int:
        s = self._sample("nvmlDeviceGetCurrPcieLinkWidth", handle)
        return int(self._value(s.pcie_link_width_lanes))

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Handle) -> int:
        s = self._sample("nvmlDeviceGetMaxPcieLinkWidth", handle)
        return int(self._value(s.pcie_link_width_max_lanes))

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Handle) -> list[ProcessInfo]:
        s = self._sample("nvmlDeviceGetComputeRunningProcesses", handle)
        procs = [
            ProcessInfo(p.pid, None if p.used_mib is None else int(p.used_mib) * MIB) for p in s.processes
        ]
        return procs + self.extra_processes.get(handle.index, [])


for _name, _value in {**CONSTANTS, **ERRORS, "NVMLError": NVMLError}.items():
    setattr(FakeNvml, _name, _value)
