"""The NVML source on a fake pynvml fed by the simulator: values and units, errors as values, retries,
and that the blocking calls stay off the event loop."""

from __future__ import annotations

import asyncio
import inspect
import os
import pwd
import threading

import pytest

from gputop.core.models import Reachability, SourceResult
from gputop.sim.incidents import incident_node_indices
from gputop.sim.simulator import SimulatedCluster
from gputop.sources import nvml as nvml_source
from gputop.sources.nvml import RETRY_FIRST_S, NvmlSource, throttle_reason_names
from tests.fake_pynvml import CONSTANTS, ERRORS, MIB, START_S, FakeNvml

NOW = START_S + 30.0
NO_SUCH_PID = 99_999_999  # above any pid_max


def only_node(result: SourceResult):
    assert len(result.nodes) == 1
    return result.nodes[0]


async def started(fake: FakeNvml, node: str = "gpu001") -> NvmlSource:
    source = NvmlSource(node, nvml_module=fake)
    await source.start()
    return source


async def collect_at(source: NvmlSource, fake: FakeNvml, now_s: float):
    fake.advance(now_s)
    return only_node(await source.collect(now_s))


# ---------------------------------------------------------------------- values


@pytest.mark.parametrize("text_as_bytes", [False, True])
async def test_values_match_the_simulator(text_as_bytes: bool) -> None:
    fake = FakeNvml(text_as_bytes=text_as_bytes, reserved_mib=330)
    source = await started(fake)
    node = await collect_at(source, fake, NOW)

    assert node.name == "gpu001"
    assert node.reachability is Reachability.OK
    assert node.sampled_at_s == NOW
    assert node.error is None
    assert node.expected_gpu_count == 8
    assert node.missing_gpu_count == 0
    expected = fake.samples()
    assert len(node.gpus) == len(expected) == 8
    for got, want in zip(node.gpus, expected, strict=True):
        assert got.index == want.index
        assert got.uuid == want.uuid and got.uuid.startswith("GPU-")
        assert got.name == want.name == "NVIDIA H100 80GB HBM3"
        assert got.pci_bus_id == want.pci_bus_id
        assert got.util_pct == want.util_pct
        assert got.mem_util_pct == want.mem_util_pct
        # v2 memory: the driver's reservation is not counted as used, as nvidia-smi shows it
        assert got.mem_used_mib == want.mem_used_mib
        assert got.mem_total_mib == want.mem_total_mib == 81559.0
        assert got.temp_c == want.temp_c
        assert got.power_w == pytest.approx(want.power_w, abs=1e-9)  # mW -> W
        assert got.power_limit_w == want.power_limit_w == 700.0
        assert got.sm_clock_mhz == want.sm_clock_mhz
        assert got.sm_clock_max_mhz == want.sm_clock_max_mhz
        assert got.ecc_uncorrected == want.ecc_uncorrected
        assert got.mig_enabled is False
        assert got.throttle_reasons == want.throttle_reasons
        assert got.retired_pages_pending is want.retired_pages_pending is None  # H100: rows remap instead
        assert got.remapped_rows_pending is want.remapped_rows_pending is False
        assert got.remapped_rows_failure is want.remapped_rows_failure is False
        assert (
            (got.pcie_link_gen, got.pcie_link_gen_max)
            == (want.pcie_link_gen, want.pcie_link_gen_max)
            == (5, 5)
        )
        assert got.pcie_link_width_lanes == want.pcie_link_width_lanes == 16
        assert got.pcie_link_width_max_lanes == want.pcie_link_width_max_lanes == 16
        assert [(p.pid, p.used_mib) for p in got.processes] == [(p.pid, p.used_mib) for p in want.processes]
    # the simulator's hot GPU throttles on temperature: the reason survives the trip through the bitmask
    assert node.gpus[3].throttle_reasons == ("sw_thermal_slowdown",)
    assert any(g.processes for g in node.gpus)


async def test_values_follow_the_simulator_over_time() -> None:
    fake = FakeNvml()
    source = await started(fake)
    first = await collect_at(source, fake, NOW)
    later = await collect_at(source, fake, NOW + 120.0)
    assert later.sampled_at_s == NOW + 120.0
    assert [g.power_w for g in later.gpus] == pytest.approx([g.power_w for g in fake.samples()], abs=1e-9)
    assert [g.temp_c for g in first.gpus] != [g.temp_c for g in later.gpus]


async def test_memory_falls_back_to_v1_without_the_v2_call() -> None:
    fake = FakeNvml(reserved_mib=330)
    fake.make_unsupported("nvmlDeviceGetMemoryInfo")  # both versions refused
    source = await started(fake)
    node = await collect_at(source, fake, NOW)
    assert all(g.mem_used_mib is None and g.mem_total_mib is None for g in node.gpus)

    class V1Only(FakeNvml):
        nvmlMemory_v2 = None  # an older pynvml without the v2 structure

    old = V1Only(reserved_mib=330)
    source = await started(old)
    node = await collect_at(source, old, NOW)
    want = old.expected(0)
    assert node.gpus[0].mem_used_mib == want.mem_used_mib + 330  # v1 counts the reservation as used


async def test_mig_gpu_utilization_is_none_not_zero() -> None:
    cluster = SimulatedCluster(nodes=8, start_time_s=START_S)
    fake = FakeNvml(cluster, node=incident_node_indices(8)["mig"])
    source = await started(fake)
    node = await collect_at(source, fake, NOW)
    mig = [g for g in node.gpus if g.mig_enabled]
    assert len(mig) == 1
    gpu = mig[0]
    assert gpu.util_pct is None and gpu.mem_util_pct is None
    assert gpu.mem_used_mib == fake.expected(gpu.index).mem_used_mib
    assert gpu.temp_c is not None and gpu.power_w is not None
    assert len(gpu.processes) == len(fake.expected(gpu.index).processes) > 1
    assert all(g.util_pct is not None for g in node.gpus if not g.mig_enabled)
    assert node.error is None


@pytest.mark.parametrize(
    ("function", "fields"),
    [
        ("nvmlDeviceGetPowerUsage", ("power_w",)),
        ("nvmlDeviceGetEnforcedPowerLimit", ("power_limit_w",)),
        ("nvmlDeviceGetTemperature", ("temp_c",)),
        ("nvmlDeviceGetTotalEccErrors", ("ecc_uncorrected",)),
        ("nvmlDeviceGetMigMode", ("mig_enabled",)),
        ("nvmlDeviceGetClockInfo", ("sm_clock_mhz",)),
        ("nvmlDeviceGetMaxClockInfo", ("sm_clock_max_mhz",)),
        ("nvmlDeviceGetPciInfo", ("pci_bus_id",)),
        ("nvmlDeviceGetUtilizationRates", ("util_pct", "mem_util_pct")),
        ("nvmlDeviceGetRemappedRows", ("remapped_rows_pending", "remapped_rows_failure")),
        ("nvmlDeviceGetCurrPcieLinkGeneration", ("pcie_link_gen",)),
        ("nvmlDeviceGetMaxPcieLinkWidth", ("pcie_link_width_max_lanes",)),
    ],
)
async def test_unsupported_field_is_none(function: str, fields: tuple[str, ...]) -> None:
    fake = FakeNvml()
    fake.make_unsupported(function, gpu=2)
    source = await started(fake)
    node = await collect_at(source, fake, NOW)
    assert len(node.gpus) == 8
    assert node.error is None
    for field in fields:
        assert getattr(node.gpus[2], field) is None
        assert getattr(node.gpus[1], field) is not None
    assert node.gpus[2].uuid == fake.expected(2).uuid


async def test_permission_and_other_errors_are_none_too() -> None:
    class Refusing(FakeNvml):
        def nvmlDeviceGetPowerUsage(self, handle):
            raise ERRORS["NVMLError_NoPermission"]()

        def nvmlDeviceGetTemperature(self, handle, sensor):
            raise ERRORS["NVMLError_Unknown"]()

        def nvmlDeviceGetComputeRunningProcesses(self, handle):
            raise ERRORS["NVMLError_NoPermission"]()

    fake = Refusing()
    source = await started(fake)
    node = await collect_at(source, fake, NOW)
    assert len(node.gpus) == 8
    assert all(g.power_w is None and g.temp_c is None and g.processes == () for g in node.gpus)
    assert all(g.power_limit_w == 700.0 for g in node.gpus)


async def test_throttle_reasons_fall_back_to_the_older_call() -> None:
    fake = FakeNvml()
    fake.make_unsupported("nvmlDeviceGetCurrentClocksEventReasons")
    source = await started(fake)
    node = await collect_at(source, fake, NOW)
    assert [g.throttle_reasons for g in node.gpus] == [g.throttle_reasons for g in fake.samples()]
    fake.make_unsupported("nvmlDeviceGetCurrentClocksThrottleReasons")
    node = await collect_at(source, fake, NOW + 1)
    assert all(g.throttle_reasons == () for g in node.gpus)


def test_throttle_reason_names() -> None:
    assert throttle_reason_names(0) == ()
    assert throttle_reason_names(0x1) == ("gpu_idle",)
    assert throttle_reason_names(0x1FF) == (
        "gpu_idle",
        "applications_clocks_setting",
        "sw_power_cap",
        "hw_slowdown",
        "sync_boost",
        "sw_thermal_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
        "display_clocks_setting",
    )
    assert throttle_reason_names(0x604) == ("sw_power_cap", "0x200", "0x400")


async def test_process_name_and_user_from_proc() -> None:
    fake = FakeNvml()
    fake.add_process(0, os.getpid(), 1234 * MIB)
    fake.add_process(0, NO_SUCH_PID, None)
    source = await started(fake)
    node = await collect_at(source, fake, NOW)
    procs = {p.pid: p for p in node.gpus[0].processes}
    mine = procs[os.getpid()]
    with open("/proc/self/comm", encoding="utf-8") as comm:
        assert mine.name == comm.read().strip()
    assert mine.user == pwd.getpwuid(os.getuid()).pw_name
    assert mine.used_mib == 1234.0
    gone = procs[NO_SUCH_PID]
    assert gone.name == "" and gone.user is None and gone.used_mib is None


# ---------------------------------------------------------------------- lost GPUs


async def test_lost_gpu_is_left_out_and_named() -> None:
    fake = FakeNvml()
    source = await started(fake)
    node = await collect_at(source, fake, NOW)
    assert len(node.gpus) == 8

    fake.lose_gpu(3)
    node = await collect_at(source, fake, NOW + 1)
    assert node.reachability is Reachability.OK
    assert [g.index for g in node.gpus] == [0, 1, 2, 4, 5, 6, 7]
    assert node.expected_gpu_count == 8
    assert node.missing_gpu_count == 1
    assert node.error == "GPU 3 lost: GPU is lost"
    assert source.expected_gpu_count == 8


async def test_gpu_lost_after_its_handle_is_left_out_too() -> None:
    fake = FakeNvml()
    fake.lose_gpu(5, handle=False)
    fake.lose_gpu(6)
    source = await started(fake)
    node = await collect_at(source, fake, NOW)
    assert [g.index for g in node.gpus] == [0, 1, 2, 3, 4, 7]
    assert node.missing_gpu_count == 2
    assert node.error == "GPU 5 lost: GPU is lost; GPU 6 lost: GPU is lost"


async def test_expected_count_is_the_first_one_seen() -> None:
    cluster = SimulatedCluster(nodes=1, start_time_s=START_S)
    fake = FakeNvml(cluster)
    source = await started(fake)
    await collect_at(source, fake, NOW)

    class Fewer(FakeNvml):
        def nvmlDeviceGetCount(self):
            super().nvmlDeviceGetCount()
            return 6

    fake.__class__ = Fewer  # the driver now enumerates fewer GPUs
    node = await collect_at(source, fake, NOW + 1)
    assert len(node.gpus) == 6
    assert node.expected_gpu_count == 8
    assert node.missing_gpu_count == 2


# ---------------------------------------------------------------------- no driver


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        ("NVMLError_DriverNotLoaded", "Driver Not Loaded"),
        ("NVMLError_LibraryNotFound", "NVML Shared Library Not Found"),
    ],
)
async def test_init_failure_is_down_with_reason_then_recovers(error: str, reason: str) -> None:
    fake = FakeNvml()
    fake.fail_init(ERRORS[error])
    source = await started(fake)
    node = await collect_at(source, fake, NOW)
    assert node.reachability is Reachability.DOWN
    assert node.error == f"NVML unavailable: {reason}"
    assert node.gpus == ()
    assert node.sampled_at_s is None
    assert node.expected_gpu_count is None
    assert fake.init_calls == 1

    # within the backoff: no new attempt, same answer, no thread
    node = await collect_at(source, fake, NOW + RETRY_FIRST_S / 2)
    assert node.reachability is Reachability.DOWN and fake.init_calls == 1

    # the next attempt fails too: the pause doubles
    node = await collect_at(source, fake, NOW + RETRY_FIRST_S)
    assert fake.init_calls == 2 and node.reachability is Reachability.DOWN
    await collect_at(source, fake, NOW + RETRY_FIRST_S + 1.5 * RETRY_FIRST_S)
    assert fake.init_calls == 2

    # the driver is back: picked up at the next attempt
    fake.fail_init(None)
    node = await collect_at(source, fake, NOW + 3 * RETRY_FIRST_S)
    assert fake.init_calls == 3
    assert node.reachability is Reachability.OK
    assert node.error is None
    assert len(node.gpus) == 8
    assert node.expected_gpu_count == 8
    await source.close()
    assert fake.shutdown_calls == 1


async def test_backoff_is_capped() -> None:
    fake = FakeNvml()
    fake.fail_init(ERRORS["NVMLError_DriverNotLoaded"])
    source = await started(fake)
    t = NOW
    for _ in range(30):
        await collect_at(source, fake, t)
        t += nvml_source.RETRY_MAX_S
    assert fake.init_calls == 30


async def test_driver_lost_mid_run_keeps_last_gpus_and_recovers() -> None:
    fake = FakeNvml()
    source = await started(fake)
    good = await collect_at(source, fake, NOW)

    fake.unload_driver(ERRORS["NVMLError_DriverNotLoaded"])
    node = await collect_at(source, fake, NOW + 1)
    assert node.reachability is Reachability.DOWN
    assert node.error == "NVML unavailable: Uninitialized"
    assert node.gpus == good.gpus
    assert node.sampled_at_s == NOW
    assert node.expected_gpu_count == 8

    node = await collect_at(source, fake, NOW + 1 + RETRY_FIRST_S)
    assert node.error == "NVML unavailable: Driver Not Loaded"

    fake.fail_init(None)
    node = await collect_at(source, fake, NOW + 1 + 3 * RETRY_FIRST_S)
    assert node.reachability is Reachability.OK and len(node.gpus) == 8


async def test_missing_pynvml_is_down_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_module(name: str):
        raise ModuleNotFoundError(f"No module named {name!r}")

    monkeypatch.setattr(nvml_source.importlib, "import_module", no_module)
    source = NvmlSource("gpu001")
    await source.start()
    node = only_node(await source.collect(NOW))
    assert node.reachability is Reachability.DOWN
    assert node.error is not None and node.error.startswith("NVML unavailable: pynvml")
    await source.close()


# ---------------------------------------------------------------------- the event loop


async def test_collect_reads_in_one_thread_off_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeNvml()
    source = await started(fake)
    await collect_at(source, fake, NOW)  # initialised

    to_thread_calls = 0
    real_to_thread = asyncio.to_thread

    async def counting_to_thread(func, /, *args, **kwargs):
        nonlocal to_thread_calls
        to_thread_calls += 1
        return await real_to_thread(func, *args, **kwargs)

    monkeypatch.setattr(nvml_source.asyncio, "to_thread", counting_to_thread)
    fake.delay_s = 0.3
    fake.call_threads.clear()
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    ticking = asyncio.create_task(ticker())
    fake.advance(NOW + 1)
    node = only_node(await source.collect(NOW + 1))
    done.set()
    await ticking

    assert len(node.gpus) == 8
    assert ticks >= 10  # the loop kept running while nvmlDeviceGetCount slept
    assert to_thread_calls == 1
    threads = {ident for _, ident in fake.call_threads}
    assert len(threads) == 1
    assert threading.get_ident() not in threads


async def test_a_read_that_missed_its_deadline_is_not_doubled() -> None:
    fake = FakeNvml()
    source = await started(fake)
    fake.advance(NOW)
    fake.delay_s = 0.3
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(source.collect(NOW), 0.05)
    # the next collect joins the read still running instead of starting another
    node = only_node(await source.collect(NOW + 1))
    assert node.reachability is Reachability.OK
    assert node.sampled_at_s == NOW
    assert sum(1 for name, _ in fake.call_threads if name == "nvmlDeviceGetCount") == 1
    assert fake.init_calls == 1


# ---------------------------------------------------------------------- lifecycle


async def test_close_shuts_nvml_down_once() -> None:
    fake = FakeNvml()
    source = await started(fake)
    await collect_at(source, fake, NOW)
    assert fake.initialized
    await source.close()
    assert fake.shutdown_calls == 1 and not fake.initialized
    await source.close()
    assert fake.shutdown_calls == 1


async def test_close_without_a_successful_init_does_not_shut_down() -> None:
    fake = FakeNvml()
    fake.fail_init(ERRORS["NVMLError_DriverNotLoaded"])
    source = await started(fake)
    await collect_at(source, fake, NOW)
    await source.close()
    assert fake.shutdown_calls == 0
    source = await started(FakeNvml())
    await source.close()  # never collected: never initialised


async def test_start_does_not_initialise() -> None:
    fake = FakeNvml()
    await started(fake)
    assert fake.init_calls == 0


def test_importing_gputop_does_not_import_pynvml() -> None:
    import subprocess
    import sys

    code = "import sys, gputop.sources.nvml; print('pynvml' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ---------------------------------------------------------------------- the fake against the real module


def test_fake_matches_the_real_pynvml() -> None:
    pynvml = pytest.importorskip("pynvml", reason="nvidia-ml-py (pynvml) is not installed")
    for name, value in CONSTANTS.items():
        assert getattr(pynvml, name) == value, name
    for name, cls in ERRORS.items():
        real = getattr(pynvml, name)
        assert issubclass(real, pynvml.NVMLError)
        assert cls().value == real().value, name
        if cls().value in FakeNvml.NVMLError._errcode_to_string:
            assert str(cls()) == str(real()), name
    fake = FakeNvml()
    for name in dir(FakeNvml):
        if not name.startswith("nvml") or name == "nvmlMemory_v2":
            continue
        fake_params = list(inspect.signature(getattr(fake, name)).parameters)
        real_params = list(inspect.signature(getattr(pynvml, name)).parameters)
        assert fake_params == real_params, name
    # NVMLError(code) comes back as the subclass for the code, in both
    lost = CONSTANTS["NVML_ERROR_GPU_IS_LOST"]
    assert isinstance(FakeNvml.NVMLError(lost), ERRORS["NVMLError_GpuIsLost"])
    assert isinstance(pynvml.NVMLError(lost), pynvml.NVMLError_GpuIsLost)
