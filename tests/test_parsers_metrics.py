"""Parsers for the fast metrics and simple facts: query-gpu CSV, compute apps, `nvidia-smi -L`, Xid lines,
and the driver error messages, on real captured outputs (tests/fixtures, see PROVENANCE.md) and odd input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gputop.core.models import GpuProcess, GpuSample, Severity
from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.compute_apps import COMPUTE_APPS_FIELDS, ComputeAppsResult, parse_compute_apps
from gputop.core.parsers.driver_errors import detect_driver_error
from gputop.core.parsers.gpu_list import GpuList, parse_gpu_list
from gputop.core.parsers.query_gpu import (
    QUERY_GPU_FIELDS,
    QueryGpuResult,
    StreamLineReader,
    header_fields,
    parse_query_gpu,
    parse_query_gpu_line,
    throttle_reason_names,
    throttling_reasons,
)
from gputop.core.parsers.registry import registry
from gputop.core.parsers.xid import TimeBase, XidLog, bus_key, parse_xid
from gputop.core.xid_codes import xid_verdict
from gputop.sources import commands

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(family: str, name: str) -> str:
    return (FIXTURES / family / name).read_text(encoding="utf-8")


def samples(family: str) -> list[Path]:
    found = sorted((FIXTURES / family).iterdir())
    assert found, f"no fixtures in {family}"
    return found


def query_gpu(text: str, fields: tuple[str, ...] | None = None) -> QueryGpuResult:
    result = parse_query_gpu(text, fields)
    assert isinstance(result, QueryGpuResult), result
    return result


def stream_line(**cells: str) -> str:
    """A `--format=csv,noheader,nounits` line in QUERY_GPU_FIELDS order, as nvidia-smi spaces it."""
    values = {
        "index": "0",
        "uuid": "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16",
        "name": "NVIDIA H100 80GB HBM3",
        "pci.bus_id": "00000000:3B:00.0",
        "utilization.gpu": "87",
        "utilization.memory": "45",
        "memory.used": "61234",
        "memory.total": "81559",
        "temperature.gpu": "67",
        "power.draw": "612.34",
        "power.limit": "700.00",
        "clocks.sm": "1980",
        "clocks.max.sm": "1980",
        "ecc.errors.uncorrected.volatile.total": "0",
        "mig.mode.current": "Disabled",
        "clocks_throttle_reasons.active": "0x0000000000000004",
        "retired_pages.pending": "[N/A]",
        "remapped_rows.pending": "No",
        "remapped_rows.failure": "No",
        "pcie.link.gen.current": "5",
        "pcie.link.gen.max": "5",
        "pcie.link.width.current": "16",
        "pcie.link.width.max": "16",
    }
    for key, value in cells.items():
        values[key.replace("__", ".")] = value
    return ", ".join(values[f] for f in QUERY_GPU_FIELDS)


# -- the registry and the command table ----------------------------------------------------------------


def test_parsers_are_registered_under_the_kinds_the_command_table_uses() -> None:
    kinds = registry()
    for kind in ("query-gpu", "compute-apps", "nvidia-smi-L", "xid"):
        assert kinds[kind].kind == kind
        assert kinds[kind].summary
    used = {spec.parser for spec in commands.default_commands().values()}
    assert {"query-gpu", "compute-apps", "nvidia-smi-L", "xid"} <= used


PURITY_PROBE = """
import builtins, io, os, socket, sys
def refuse(*args, **kwargs):
    raise AssertionError(f"I/O at import: {args[:1]}")
builtins.open = refuse
io.open = refuse
os.listdir = refuse
socket.socket = refuse
import gputop.core.parsers.query_gpu, gputop.core.parsers.compute_apps, gputop.core.parsers.gpu_list
import gputop.core.parsers.xid, gputop.core.parsers.driver_errors
print("\\n".join(sorted(sys.modules)))
"""


def test_these_parsers_stay_pure() -> None:
    done = subprocess.run([sys.executable, "-c", PURITY_PROBE], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    forbidden = (
        "textual",
        "rich",
        "asyncssh",
        "pynvml",
        "httpx",
        "gputop.tui",
        "gputop.sources",
        "gputop.poller",
    )
    assert sorted(m for m in loaded for f in forbidden if m == f or m.startswith(f + ".")) == []


def test_core_field_lists_match_the_commands_gputop_runs() -> None:
    assert QUERY_GPU_FIELDS == commands.QUERY_GPU_FIELDS
    assert COMPUTE_APPS_FIELDS == commands.COMPUTE_APPS_FIELDS


# -- query-gpu: real CSVs ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", samples("nvidia-smi-query-gpu-csv"), ids=lambda p: p.name)
def test_every_real_query_gpu_csv_parses_cleanly(path: Path) -> None:
    result = query_gpu(path.read_text(encoding="utf-8"))
    assert result.gpus
    assert len(result.rows) == len(result.gpus)
    assert not any("skipped" in note for note in result.notes)


def test_h100_csv_values() -> None:
    result = query_gpu(
        fixture("nvidia-smi-query-gpu-csv", "h100-80gb-hbm3-drv595-index-name-driver-pstate-pcie-gen.csv")
    )
    (gpu,) = result.gpus
    assert gpu.index == 0
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.temp_c == 29.0
    assert gpu.util_pct == 0.0
    assert gpu.mem_total_mib == 81559.0
    assert gpu.mem_used_mib == 0.0
    assert gpu.power_w is None  # not asked for: unknown, never 0
    assert gpu.pcie_link_gen == 5
    assert gpu.pcie_link_gen_max is None  # not asked for
    assert result.rows[0] == {"driver_version": "595.71.05", "pstate": "P0", "memory.free": "81081 MiB"}
    assert result.fields[6] == "utilization.gpu"  # "[%]" stripped from the header


def test_v100_loop_log_keeps_every_row_in_order() -> None:
    result = query_gpu(
        fixture("nvidia-smi-query-gpu-csv", "v100-32gb-dgx2-loop-l5-timestamp-units-17rows-aau-claaudia.csv")
    )
    assert len(result.gpus) == 17
    assert {g.index for g in result.gpus} == {0}
    third = result.gpus[2]
    assert third.mem_used_mib == 30994.0
    assert third.mem_total_mib == 32480.0
    assert third.util_pct == 99.0
    assert third.mem_util_pct == 51.0
    assert result.rows[2] == {"timestamp": "2020/11/12 13:48:21.417", "memory.free": "1486 MiB"}
    assert result.gpus[5].util_pct == 32.0
    assert result.rows[-1]["timestamp"] == "2020/11/12 13:49:31.451"


def test_rtx_3070_csv_without_index_numbers_gpus_by_row() -> None:
    result = query_gpu(fixture("nvidia-smi-query-gpu-csv", "geforce-rtx-3070-timestamp-name-temp-mem.csv"))
    (gpu,) = result.gpus
    assert gpu.name == "NVIDIA GeForce RTX 3070"
    assert gpu.temp_c == 50.0
    assert (gpu.util_pct, gpu.mem_util_pct) == (1.0, 1.0)
    assert (gpu.mem_used_mib, gpu.mem_total_mib) == (1081.0, 8192.0)
    assert gpu.index == 0
    assert "no index column: GPUs numbered by row" in result.notes


# -- query-gpu: whole outputs, odd shapes ---------------------------------------------------------------


HEADER = (
    "index, uuid, name, pci.bus_id, utilization.gpu [%], utilization.memory [%], memory.used [MiB], "
    "memory.total [MiB], temperature.gpu, power.draw [W], power.limit [W], clocks.current.sm [MHz], "
    "clocks.max.sm [MHz], ecc.errors.uncorrected.volatile.total, mig.mode.current, "
    "clocks_throttle_reasons.active"
)
# The header of the stream's own fields (QUERY_GPU_FIELDS) as nvidia-smi prints it.
STREAM_HEADER = (
    HEADER + ", retired_pages.pending, remapped_rows.pending, remapped_rows.failure, pcie.link.gen.current, "
    "pcie.link.gen.max, pcie.link.width.current, pcie.link.width.max"
)
UNITS_ROW = (
    "1, GPU-aa, NVIDIA A100-SXM4-80GB, 00000000:07:00.0, 45 %, 12 %, 1234 MiB, 81920 MiB, 61, "
    "250.50 W, 400.00 W, 1410 MHz, 1410 MHz, 0, Enabled, 0x0000000000000044"
)


def test_header_with_display_names_and_units() -> None:
    result = query_gpu(HEADER + "\n" + UNITS_ROW + "\n")
    (gpu,) = result.gpus
    assert gpu == GpuSample(
        index=1,
        uuid="GPU-aa",
        name="NVIDIA A100-SXM4-80GB",
        pci_bus_id="00000000:07:00.0",
        util_pct=45.0,
        mem_util_pct=12.0,
        mem_used_mib=1234.0,
        mem_total_mib=81920.0,
        temp_c=61.0,
        power_w=250.5,
        power_limit_w=400.0,
        sm_clock_mhz=1410.0,
        sm_clock_max_mhz=1410.0,
        ecc_uncorrected=0,
        mig_enabled=True,
        throttle_reasons=("sw_power_cap", "hw_thermal_slowdown"),
    )
    assert result.rows == ({},)
    assert result.notes == ()


def test_no_value_cells_become_none() -> None:
    row = (
        "0, GPU-bb, NVIDIA GeForce RTX 3070, 00000000:01:00.0, [N/A], [Not Supported], 100 MiB, "
        "8192 MiB, 40, [Unknown Error], [N/A], 210 MHz, 2100 MHz, [N/A], [N/A], [N/A]"
    )
    (gpu,) = query_gpu(HEADER + "\n" + row).gpus
    assert gpu.util_pct is None
    assert gpu.mem_util_pct is None
    assert gpu.power_w is None
    assert gpu.ecc_uncorrected is None
    assert gpu.mig_enabled is None
    assert gpu.throttle_reasons == ()
    assert gpu.mem_used_mib == 100.0


def test_loop_output_with_repeated_header_crlf_tabs_and_trailing_blanks() -> None:
    rows = [stream_line(index=str(i % 2), **{"temperature__gpu": str(50 + i)}) for i in range(4)]
    tabbed = rows[2].replace(", ", ",\t")
    header = STREAM_HEADER
    text = f"{header}\r\n{rows[0]}\r\n{rows[1]}   \r\n\r\n{header}\r\n{tabbed}\r\n{rows[3]}\t\r\n\r\n"
    result = query_gpu(text)
    assert [g.index for g in result.gpus] == [0, 1, 0, 1]
    assert [g.temp_c for g in result.gpus] == [50.0, 51.0, 52.0, 53.0]
    assert result.notes == ()


def test_a_copy_with_tabs_for_commas() -> None:
    text = "index\ttemperature.gpu [C]\tmemory.used [MiB]\n0\t45\t1024 MiB\n"
    (gpu,) = query_gpu(text).gpus
    assert (gpu.index, gpu.temp_c, gpu.mem_used_mib) == (0, 45.0, 1024.0)


def test_rows_with_wrong_column_count_or_bad_numbers_are_skipped_with_notes() -> None:
    good = stream_line()
    short = ", ".join(good.split(", ")[:-1])
    bad_number = stream_line(memory__used="lots")
    result = query_gpu("\n".join([good, short, bad_number, good]))
    assert len(result.gpus) == 2
    assert any("line 2: 22 columns, expected 23" in n for n in result.notes)
    assert any("line 3: memory.used: unreadable value 'lots'" in n for n in result.notes)


def test_long_broken_logs_cap_their_notes() -> None:
    result = query_gpu("\n".join([stream_line()] + ["1, 2"] * 100))
    assert len(result.gpus) == 1
    assert len(result.notes) == 21
    assert result.notes[-1] == "80 more row(s) skipped"


def test_explicit_fields_without_header() -> None:
    result = query_gpu("3, 71, 1024\n", ("index", "temperature.gpu", "memory.used"))
    (gpu,) = result.gpus
    assert (gpu.index, gpu.temp_c, gpu.mem_used_mib) == (3, 71.0, 1024.0)


def test_the_header_wins_over_the_fields_argument() -> None:
    result = query_gpu("index, temperature.gpu\n2, 40\n", ("index", "memory.used"))
    assert result.gpus[0].temp_c == 40.0
    assert result.gpus[0].mem_used_mib is None


def test_a_second_column_for_the_same_slot_stays_raw() -> None:
    result = query_gpu("index, power.draw [W], power.draw.instant [W]\n0, 100.00 W, 130.00 W\n")
    assert result.gpus[0].power_w == 100.0
    assert result.rows[0] == {"power.draw.instant": "130.00 W"}


def test_header_only_is_an_empty_result_with_a_note() -> None:
    result = query_gpu(HEADER + "\n")
    assert result.gpus == ()
    assert "header only: no GPU rows" in result.notes


@pytest.mark.parametrize("text", ["", "\n\n", "   \r\n"])
def test_empty_output_is_a_failure(text: str) -> None:
    result = parse_query_gpu(text)
    assert isinstance(result, ParseFailure)
    assert result.reason == "empty output"


def test_garbage_is_a_failure_with_an_excerpt() -> None:
    junk = bytes(range(256)).decode("utf-8", errors="replace")
    for text in ("hello world", junk, "a,b,c\n1,2", "\x00\x01\x02"):
        result = parse_query_gpu(text)
        assert isinstance(result, ParseFailure), text
        assert result.kind == "query-gpu"


def test_a_driver_error_instead_of_rows_is_the_failure_reason() -> None:
    text = fixture("nvidia-smi-default", "ERROR-unable-to-determine-device-handle-tesla-p4-synology.txt")
    result = parse_query_gpu(text)
    assert isinstance(result, ParseFailure)
    assert result.reason == "GPU 0000:07:00.0 lost: unable to determine the device handle"


def test_a_driver_error_among_rows_is_noted() -> None:
    text = stream_line() + "\nUnable to determine the device handle for GPU 0000:3B:00.0: Unknown Error\n"
    result = query_gpu(text)
    assert len(result.gpus) == 1
    assert "line 2: GPU 0000:3B:00.0 lost: unable to determine the device handle" in result.notes


# -- query-gpu: the stream line parser ------------------------------------------------------------------


def test_stream_line_in_query_gpu_fields_order() -> None:
    gpu = parse_query_gpu_line(stream_line(index="7"), QUERY_GPU_FIELDS)
    assert isinstance(gpu, GpuSample)
    assert gpu.index == 7
    assert gpu.uuid == "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16"
    assert gpu.pci_bus_id == "00000000:3B:00.0"
    assert (gpu.util_pct, gpu.mem_util_pct) == (87.0, 45.0)
    assert (gpu.mem_used_mib, gpu.mem_total_mib) == (61234.0, 81559.0)
    assert (gpu.temp_c, gpu.power_w, gpu.power_limit_w) == (67.0, 612.34, 700.0)
    assert (gpu.sm_clock_mhz, gpu.sm_clock_max_mhz) == (1980.0, 1980.0)
    assert gpu.ecc_uncorrected == 0
    assert gpu.mig_enabled is False
    assert gpu.throttle_reasons == ("sw_power_cap",)
    assert gpu.processes == ()


def test_stream_lines_for_eight_gpus_match_the_whole_output_parser() -> None:
    lines = [
        stream_line(
            index=str(i),
            uuid=f"GPU-{i:08x}",
            utilization__gpu=str(i * 12),
            temperature__gpu=str(40 + i),
            mig__mode__current="Enabled" if i % 2 else "Disabled",
            clocks_throttle_reasons__active=f"0x{1 << i:016x}",
        )
        for i in range(8)
    ]
    one_by_one = [parse_query_gpu_line(line, QUERY_GPU_FIELDS) for line in lines]
    assert one_by_one == list(query_gpu("\n".join(lines)).gpus)
    assert [g.util_pct for g in one_by_one if isinstance(g, GpuSample)] == [i * 12.0 for i in range(8)]


def test_stream_lines_of_every_real_sample_read_as_the_whole_output_parser_reads_them() -> None:
    """The stream's compiled reader falls back to the careful converters, and then keeps them for the
    columns that needed them: the first pass and the second give the same samples as the careful parse."""
    for path in samples("nvidia-smi-query-gpu-csv"):
        lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        header = header_fields([cell.strip() for cell in lines[0].split(",")])
        assert header is not None, path.name
        careful = query_gpu("\n".join(lines)).gpus
        for _ in range(2):
            read = [parse_query_gpu_line(line.strip(), header) for line in lines[1:]]
            assert [g for g in read if g is not None] == list(careful), path.name


def test_a_column_that_printed_n_a_once_still_reads_numbers_and_n_a() -> None:
    fields = (*QUERY_GPU_FIELDS[:4], "utilization.gpu")  # a layout of its own, so no other test taught it
    plain = "3, GPU-3, NVIDIA A100-SXM4-80GB, 00000000:07:00.0, 42"
    unknown = "3, GPU-3, NVIDIA A100-SXM4-80GB, 00000000:07:00.0, [N/A]"
    utilization = []
    for line in (plain, unknown, plain, unknown, plain):
        gpu = parse_query_gpu_line(line, fields)
        assert isinstance(gpu, GpuSample)
        utilization.append(gpu.util_pct)
    assert utilization == [42.0, None, 42.0, None, 42.0]
    broken = parse_query_gpu_line("3, GPU-3, NVIDIA A100-SXM4-80GB, 00000000:07:00.0, lots", fields)
    assert isinstance(broken, ParseFailure) and "utilization.gpu" in broken.reason


def test_stream_line_for_a_mig_gpu_with_no_values() -> None:
    line = stream_line(
        utilization__gpu="[N/A]",
        utilization__memory="[N/A]",
        ecc__errors__uncorrected__volatile__total="[N/A]",
        mig__mode__current="Enabled",
        clocks_throttle_reasons__active="0x0000000000000001",
    )
    gpu = parse_query_gpu_line(line, QUERY_GPU_FIELDS)
    assert isinstance(gpu, GpuSample)
    assert gpu.util_pct is None and gpu.mem_util_pct is None and gpu.ecc_uncorrected is None
    assert gpu.mig_enabled is True
    assert gpu.throttle_reasons == ("gpu_idle",)


def test_stream_line_accepts_a_list_of_fields_and_units() -> None:
    gpu = parse_query_gpu_line("2, 45 %, 250.50 W", ["index", "utilization.gpu", "power.draw"])
    assert isinstance(gpu, GpuSample)
    assert (gpu.index, gpu.util_pct, gpu.power_w) == (2, 45.0, 250.5)


@pytest.mark.parametrize("line", ["", "   ", "\t", HEADER, "index, uuid"])
def test_stream_blank_and_header_lines_are_none(line: str) -> None:
    fields = ("index", "uuid") if line == "index, uuid" else QUERY_GPU_FIELDS
    assert parse_query_gpu_line(line, fields) is None


@pytest.mark.parametrize(
    "line",
    [
        "garbage",
        "1, 2, 3",
        stream_line() + ", 1",
        stream_line(index="[N/A]"),
        stream_line(memory__used="12x4"),
        stream_line(clocks_throttle_reasons__active="0xZZ"),
        bytes(range(256)).decode("utf-8", errors="replace"),
        (b"\xff\xfe" * 30 + b"," * 15).decode("utf-8", errors="replace"),
    ],
)
def test_stream_bad_lines_are_failures_never_exceptions(line: str) -> None:
    result = parse_query_gpu_line(line, QUERY_GPU_FIELDS)
    assert isinstance(result, ParseFailure)
    assert result.kind == "query-gpu"
    assert result.excerpt == line[:200]


def test_stream_failure_names_the_field() -> None:
    result = parse_query_gpu_line(stream_line(temperature__gpu="hot"), QUERY_GPU_FIELDS)
    assert isinstance(result, ParseFailure)
    assert result.reason == "temperature.gpu: unreadable value 'hot'"


def test_stream_line_with_crlf_and_spaces() -> None:
    gpu = parse_query_gpu_line("  " + stream_line(index="3") + "\r\n", QUERY_GPU_FIELDS)
    assert isinstance(gpu, GpuSample)
    assert gpu.index == 3
    assert gpu.throttle_reasons == ("sw_power_cap",)


# -- throttle reasons -----------------------------------------------------------------------------------


def test_throttle_reason_bits() -> None:
    assert throttle_reason_names(0) == ()
    assert throttle_reason_names(0x1) == ("gpu_idle",)
    assert throttle_reason_names(0x4) == ("sw_power_cap",)
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
    assert throttle_reason_names(0x204) == ("sw_power_cap", "0x200")


def test_an_idle_gpu_lists_gpu_idle_but_is_not_throttling() -> None:
    assert throttling_reasons(("gpu_idle",)) == ()
    assert throttling_reasons(("gpu_idle", "hw_slowdown")) == ("hw_slowdown",)


# -- driver errors ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        (
            "ERROR-unable-to-determine-device-handle-old-format-2015.txt",
            "GPU 0000:0B:00.0 lost: unable to determine the device handle",
        ),
        (
            "ERROR-unable-to-determine-device-handle-tesla-p4-synology.txt",
            "GPU 0000:07:00.0 lost: unable to determine the device handle",
        ),
    ],
)
def test_driver_errors_in_real_outputs(name: str, reason: str) -> None:
    assert detect_driver_error(fixture("nvidia-smi-default", name)) == reason


@pytest.mark.parametrize(
    "name",
    [
        "v100-sxm2-32gb-8gpu-azure-drv460-infoROM-corrupted-WARNING-azhpc.txt",  # a warning; the GPUs work
        "h200-mig-1x3g.71gb-drv580-nvge-capture.txt",
    ],
)
def test_working_nvidia_smi_outputs_are_not_driver_errors(name: str) -> None:
    assert detect_driver_error(fixture("nvidia-smi-default", name)) is None


@pytest.mark.parametrize("family", ["kernel-xid", "nvidia-smi-L", "nvidia-smi-query-gpu-csv"])
def test_kernel_logs_and_good_outputs_are_not_driver_errors(family: str) -> None:
    for path in samples(family):
        assert detect_driver_error(path.read_text(encoding="utf-8")) is None, path.name


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "Unable to determine the device handle for GPU0000:3B:00.0: GPU is lost.  Reboot the system to "
            "recover this GPU\nUnable to determine the device handle for GPU0000:86:00.0: Unknown Error\n",
            "GPU 0000:3B:00.0, 0000:86:00.0 lost: unable to determine the device handle",
        ),
        (
            "Unable to determine the device handle for gpu 0000:3B:00.0: GPU is lost.  Reboot the system "
            "to recover this GPU",
            "GPU 0000:3B:00.0 lost: unable to determine the device handle",
        ),
        ("GPU is lost. Reboot the system to recover this GPU", "GPU lost (reboot to recover it)"),
        ("No devices were found\n", "no GPUs found (No devices were found)"),
        ("Error: GPU has fallen off the bus.", "GPU has fallen off the bus"),
        (
            "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.\n",
            "nvidia-smi cannot communicate with the NVIDIA driver (driver not loaded?)",
        ),
        (
            "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 535.161\n",
            "NVML driver/library version mismatch (driver updated without a reboot?)",
        ),
        ("Failed to initialize NVML: Unknown Error", "NVML failed to initialize: Unknown Error"),
        ("bash: nvidia-smi: command not found\n", "nvidia-smi not installed"),
        ("bash: line 1: nvidia-smi: command not found", "nvidia-smi not installed"),
        ("sh: 1: nvidia-smi: not found", "nvidia-smi not installed"),
        ("zsh:1: command not found: nvidia-smi", "nvidia-smi not installed"),
        ("bash: /usr/bin/nvidia-smi: No such file or directory", "nvidia-smi not installed"),
        ("bash: ibstat: command not found", "ibstat not installed"),
    ],
)
def test_driver_error_messages(text: str, reason: str) -> None:
    assert detect_driver_error(text) == reason


@pytest.mark.parametrize(
    "text",
    [
        "",
        "0, 45, 1234",
        "cat: /etc/foo: No such file or directory",
        "No MIG devices found",
        "No MIG-enabled devices found.",
        "No GPU instances found: Not Found",
        "No compute instances found: Not Found",
        "-- No entries --",
        "2024-05-01T10:11:12+0000 gpu01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', "
        "name=<unknown>, GPU has fallen off the bus.",
        "[  12.5] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",
        bytes(range(256)).decode("utf-8", errors="replace"),
    ],
)
def test_not_driver_errors(text: str) -> None:
    assert detect_driver_error(text) is None


# -- compute apps -----------------------------------------------------------------------------------------


def compute_apps(text: str) -> ComputeAppsResult:
    result = parse_compute_apps(text)
    assert isinstance(result, ComputeAppsResult), result
    return result


def test_compute_apps_noheader_nounits() -> None:
    text = (
        "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16, 4123, python, 30994\n"
        "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16, 4124, /usr/bin/python3, 1024\n"
        "GPU-5428af19-1e82-a38c-ee42-cdd3ad745b7e, 99, ./train, [N/A]\n"
    )
    result = compute_apps(text)
    assert result.processes == (
        ("GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16", GpuProcess(4123, "python", 30994.0)),
        ("GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16", GpuProcess(4124, "/usr/bin/python3", 1024.0)),
        ("GPU-5428af19-1e82-a38c-ee42-cdd3ad745b7e", GpuProcess(99, "./train", None)),
    )
    assert [p.pid for p in result.by_gpu()["GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16"]] == [4123, 4124]


def test_compute_apps_with_header_and_units() -> None:
    text = (
        "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\r\n"
        "GPU-aa, 12, python, 512 MiB\r\n"
        "GPU-bb, 13, /opt/app, bin/run, 2 MiB\r\n"
    )
    result = compute_apps(text)
    assert result.processes == (
        ("GPU-aa", GpuProcess(12, "python", 512.0)),
        ("GPU-bb", GpuProcess(13, "/opt/app, bin/run", 2.0)),
    )


@pytest.mark.parametrize(
    "text", ["", "\n", "No running processes found\n", "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"]
)
def test_no_processes_is_an_empty_result(text: str) -> None:
    assert compute_apps(text).processes == ()


def test_compute_apps_bad_rows() -> None:
    result = compute_apps("GPU-aa, 12, python, 512\nGPU-aa, twelve, python, 5\nGPU-aa, 3\n")
    assert len(result.processes) == 1
    assert len(result.notes) == 2
    failure = parse_compute_apps("garbage\n\x00\xff")
    assert isinstance(failure, ParseFailure)
    lost = parse_compute_apps("Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error")
    assert isinstance(lost, ParseFailure)
    assert lost.reason == "GPU 0000:0B:00.0 lost: unable to determine the device handle"


# -- nvidia-smi -L -----------------------------------------------------------------------------------------


def gpu_list(text: str) -> GpuList:
    result = parse_gpu_list(text)
    assert isinstance(result, GpuList), result
    return result


@pytest.mark.parametrize("path", samples("nvidia-smi-L"), ids=lambda p: p.name)
def test_every_real_gpu_list_parses_cleanly(path: Path) -> None:
    result = gpu_list(path.read_text(encoding="utf-8"))
    assert result.gpus
    assert result.notes == ()


def test_gpu_list_single_gpu() -> None:
    result = gpu_list(fixture("nvidia-smi-L", "a100-sxm4-40gb-gcp-single-gpu-no-mig-drv580.txt"))
    (gpu,) = result.gpus
    assert (gpu.index, gpu.name) == (0, "NVIDIA A100-SXM4-40GB")
    assert gpu.uuid == "GPU-5428af19-1e82-a38c-ee42-cdd3ad745b7e"
    assert gpu.mig_devices == ()


def test_gpu_list_new_mig_uuids() -> None:
    result = gpu_list(
        fixture("nvidia-smi-L", "a100-sxm4-80gb-mig-7x1g.10gb-new-MIG-uuid-datadog-pr33120.txt")
    )
    (gpu,) = result.gpus
    assert gpu.uuid == "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16"
    assert len(gpu.mig_devices) == 7
    first, last = gpu.mig_devices[0], gpu.mig_devices[-1]
    assert first.uuid == "MIG-feb88891-0321-5fef-9c87-d4af3b54259e"
    assert last.uuid == "MIG-1aae4990-b962-574e-8375-119d6d9b9687"
    assert (last.gpu_index, last.mig_index, last.profile, last.device_id) == (0, 6, "1g.10gb", "0:6")
    assert (first.gi_id, first.ci_id) == (None, None)


def test_gpu_list_old_mig_uuids_name_gpu_and_compute_instances() -> None:
    result = gpu_list(fixture("nvidia-smi-L", "a100-sxm4-40gb-thetagpu-mig-old-MIG-GPU-uuid-format.txt"))
    (gpu,) = result.gpus
    assert gpu.name == "A100-SXM4-40GB"
    assert [d.uuid for d in gpu.mig_devices] == [
        "MIG-GPU-2fa5cf01-9520-1bc1-995b-cc0c6d9bca7c/1/0",
        "MIG-GPU-2fa5cf01-9520-1bc1-995b-cc0c6d9bca7c/2/0",
    ]
    assert [(d.profile, d.gi_id, d.ci_id) for d in gpu.mig_devices] == [
        ("1c.3g.20gb", 1, 0),
        ("1c.3g.20gb", 2, 0),
    ]


def test_gpu_list_indented_copy() -> None:
    result = gpu_list(
        fixture("nvidia-smi-L", "a100-sxm4-40gb-gcp-mig-7x1g.5gb-old-uuid-RST-INDENTED-cloud-native-docs.txt")
    )
    (gpu,) = result.gpus
    assert gpu.uuid == "GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f"
    assert [d.gi_id for d in gpu.mig_devices] == [7, 8, 9, 11, 12, 13, 14]
    assert {d.profile for d in gpu.mig_devices} == {"1g.5gb"}


def test_gpu_list_several_gpus_and_odd_lines() -> None:
    text = (
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aa)\r\n"
        "  MIG 3g.40gb     Device  0: (UUID: MIG-11)\r\n"
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bb)\r\n"
        "Unable to determine the device handle for GPU 0000:86:00.0: Unknown Error\r\n"
        "something else\r\n"
    )
    result = gpu_list(text)
    assert [(g.index, g.uuid, len(g.mig_devices)) for g in result.gpus] == [
        (0, "GPU-aa", 1),
        (1, "GPU-bb", 0),
    ]
    assert result.gpu(1) is result.gpus[1]
    assert result.notes == (
        "line 4: GPU 0000:86:00.0 lost: unable to determine the device handle",
        "line 5: not understood: 'something else'",
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty output"),
        ("No devices were found\n", "no GPUs found (No devices were found)"),
        ("bash: nvidia-smi: command not found", "nvidia-smi not installed"),
        (bytes(range(256)).decode("utf-8", errors="replace"), "no GPU line (GPU <n>: <name> (UUID: ...))"),
    ],
)
def test_gpu_list_failures(text: str, reason: str) -> None:
    result = parse_gpu_list(text)
    assert isinstance(result, ParseFailure)
    assert result.reason == reason


# -- Xid --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", samples("kernel-xid"), ids=lambda p: p.name)
def test_every_real_kernel_log_parses_cleanly(path: Path) -> None:
    result = parse_xid(path.read_text(encoding="utf-8"))
    assert isinstance(result, XidLog)
    assert not any("not understood" in note for note in result.notes)


def test_xid_new_format_with_pid_and_name() -> None:
    log = parse_xid(
        fixture("kernel-xid", "dmesg-rtx5070ti-open-595-xid31-mmu-fault-new-format-ogkm-1030.txt")
    )
    (event,) = log.events
    assert log.time_base is TimeBase.BOOT
    assert (event.code, event.pci_bus_id, event.gpu_index) == (31, "0000:01:00", None)
    assert event.time_s == pytest.approx(365.969681)
    assert event.message.startswith("pid=13705, name=UnrealEditor, channel 0x0000000c")
    assert log.gpu_uuids == {"0000:01:00": "GPU-4e391288-897c-ba5d-6944-dfbea55ebcfa"}


def test_xid_old_formats_and_elided_lines() -> None:
    log = parse_xid(fixture("kernel-xid", "dmesg-geforce-drv418-xid31-13-32-ELIDED-dxvk-1027.txt"))
    assert [e.code for e in log.events] == [31, 13, 13, 13, 13, 32]
    assert log.events[-1].message == "Channel ID 00000052 intr 02000000"
    assert log.events[-1].time_s == pytest.approx(31609.615516)
    oldest = parse_xid(fixture("kernel-xid", "dmesg-old-format-xid32-xid31-bumblebee-677.txt"))
    assert [e.code for e in oldest.events] == [32, 32, 31]
    assert oldest.events[2].message == "Ch 00000003, engmask 00000101, intr 10000000"


def test_xid_lines_without_time() -> None:
    log = parse_xid(
        fixture("kernel-xid", "kmsg-gtx1660ti-xid31-ce0-no-timestamps-redacted-uuid-ogkm-363.txt")
    )
    assert log.time_base is TimeBase.NONE
    assert [(e.code, e.time_s, e.pci_bus_id) for e in log.events] == [(31, 0.0, "0000:08:00")] * 2
    nvlink = parse_xid(fixture("kernel-xid", "kmsg-line-xid145-rlw-rxpipe-nonfatal-gpud-pr1174.txt"))
    (event,) = nvlink.events
    assert (event.code, event.pci_bus_id) == (145, "0018:01:00")
    assert event.message.startswith("RLW_RXPIPE Nonfatal XC0 i0 Link 13")


def test_xid_journal_without_xid_lines() -> None:
    log = parse_xid(fixture("kernel-xid", "journal-rtx5090-rminitadapter-failed-TRUNCATED-ogkm-862.txt"))
    assert log.events == ()


def test_xid_journalctl_short_iso_gives_epoch_times() -> None:
    text = (
        "-- Logs begin at Wed 2024-05-01 00:00:00 UTC, end at Wed 2024-05-01 12:00:00 UTC. --\n"
        "2024-05-01T10:11:12+0000 gpu017 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', "
        "name=<unknown>, GPU has fallen off the bus.\n"
        "2024-05-01T12:11:13+02:00 gpu017 kernel: NVRM: Xid (PCI:0000:86:00): 48, pid=123, name=python, "
        "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer "
        "at partition 6.\n"
    )
    log = parse_xid(text)
    assert log.time_base is TimeBase.EPOCH
    assert [e.time_s for e in log.events] == [1714558272.0, 1714558273.0]
    assert [e.code for e in log.events] == [79, 48]
    assert log.events[0].message == "pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    assert log.notes == ()
    assert parse_xid("-- No entries --\n").events == ()


def test_xid_dmesg_t_kmsg_and_syslog_prefixes() -> None:
    dated = parse_xid("[Wed May  1 10:11:12 2024] NVRM: Xid (PCI:0000:cb:00): 13, Graphics Exception\n")
    assert dated.time_base is TimeBase.EPOCH
    assert dated.events[0].time_s == 1714558272.0
    assert "times without a zone read as UTC" in dated.notes
    kmsg = parse_xid("4,1234,365969681,-;NVRM: Xid (PCI:0000:01:00): 31, pid=1, name=x, MMU Fault\n")
    assert kmsg.time_base is TimeBase.BOOT
    assert kmsg.events[0].time_s == pytest.approx(365.969681)
    syslog = "May  1 10:11:12 gpu kernel: NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n"
    assert parse_xid(syslog).time_base is TimeBase.NONE
    assert parse_xid(syslog, year=2024).events[0].time_s == 1714558272.0


def test_xid_boot_times_become_epoch_and_bus_ids_become_indices() -> None:
    log = parse_xid("[  100.5] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n")
    absolute = log.since_boot_to_epoch(1714550000.0)
    assert absolute.time_base is TimeBase.EPOCH
    assert absolute.events[0].time_s == 1714550100.5
    assert absolute.since_boot_to_epoch(5.0) is absolute
    indexed = absolute.with_gpu_indices({"00000000:3B:00.0": 2, "00000000:86:00.0": 5})
    assert indexed.events[0].gpu_index == 2


def test_bus_keys() -> None:
    assert bus_key("PCI:0000:3b:00") == bus_key("00000000:3B:00.0") == "0000:3b:00"
    assert bus_key("0018:01:00") == "0018:01:00"
    assert bus_key("00008ED0:00:00.0") == "8ed0:00:00"
    assert bus_key("not a bus") is None


def test_xid_odd_input() -> None:
    junk = bytes(range(256)).decode("utf-8", errors="replace")
    assert parse_xid(junk).events == ()
    assert parse_xid("").events == ()
    broken = parse_xid("[ 1.0] NVRM: Xid (PCI:0000:01:00): seventy-nine\n")
    assert broken.events == ()
    assert broken.notes and "not understood" in broken.notes[0]
    mixed = parse_xid(
        "[ 1.0] NVRM: Xid (PCI:0000:01:00): 13, a\n"
        "2024-05-01T10:11:12Z h kernel: NVRM: Xid (PCI:0000:01:00): 13, b\n"
    )
    assert mixed.time_base is TimeBase.BOOT
    assert any("mix time formats" in note for note in mixed.notes)


@pytest.mark.parametrize(
    "cells",
    [
        "0, GPU-a, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 97, 40, 70000, 81559, 71, 650.5, 700.00,"
        " 1980, 1980, 0, Disabled, 0x0000000000000000, [N/A], No, No, 5, 5, 16, 16",
        "3, GPU-b, NVIDIA A100, 00000000:3B:00.0, [N/A], [N/A], 1000, 40960, 40, 60.1, 400.00, 1410, 1410,"
        " [N/A], Enabled, 0x0000000000000001, No, [N/A], [N/A], 4, 4, 16, 16",
        "1, GPU-c, NVIDIA GeForce RTX 3070, [N/A], 5, 3, 300, 8192, 45, [N/A], [N/A], 210, 1905, [N/A],"
        " [N/A], 0x0000000000000004, [N/A], [N/A], [N/A], 1, 4, 16, 16",
        "2 , GPU-d , NVIDIA B200 , 00000000:1A:00.0 , 0 , 0 , 0 , 183359 , 30 , 140 , 1000 , 120 , 1965 , 3 ,"
        " Disabled , 0x0000000000000000 , [N/A] , Yes , No , 5 , 5 , 8 , 16 ",
    ],
)
def test_a_stream_line_reads_as_the_same_row_of_a_whole_output_does(cells: str) -> None:
    from gputop.core.parsers.query_gpu import parse_query_gpu

    fast = parse_query_gpu_line(cells, QUERY_GPU_FIELDS)
    whole = parse_query_gpu(cells + "\n", QUERY_GPU_FIELDS)
    assert isinstance(fast, GpuSample) and not isinstance(whole, ParseFailure)
    assert fast == whole.gpus[0]
    assert type(fast) is GpuSample


def test_memory_repair_and_pcie_link_fields() -> None:
    line = stream_line(
        retired_pages__pending="Yes",
        remapped_rows__pending="Yes",
        remapped_rows__failure="No",
        pcie__link__gen__current="3",
        pcie__link__width__current="8",
    )
    gpu = parse_query_gpu_line(line, QUERY_GPU_FIELDS)
    assert isinstance(gpu, GpuSample)
    assert (gpu.retired_pages_pending, gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (
        True,
        True,
        False,
    )
    assert (gpu.pcie_link_gen, gpu.pcie_link_gen_max) == (3, 5)
    assert (gpu.pcie_link_width_lanes, gpu.pcie_link_width_max_lanes) == (8, 16)


def test_memory_repair_fields_unsupported_or_odd_are_unknown_not_a_lost_row() -> None:
    line = stream_line(
        retired_pages__pending="[N/A]",
        remapped_rows__pending="[Not Supported]",
        remapped_rows__failure="Maybe",
    )
    gpu = parse_query_gpu_line(line, QUERY_GPU_FIELDS)
    assert isinstance(gpu, GpuSample)
    assert (gpu.retired_pages_pending, gpu.remapped_rows_pending, gpu.remapped_rows_failure) == (
        None,
        None,
        None,
    )
    assert gpu.temp_c == 67.0


@pytest.mark.parametrize(
    ("name", "model", "width"),
    [
        ("h100-80gb-drv590-all-fields-camelcase-header-nvge-capture.csv", "NVIDIA H100 80GB HBM3", 212),
        ("l40s-drv595-all-fields-camelcase-header-nvge-capture.csv", "NVIDIA L40S", 202),
        (
            "rtx2080super-drv610-all-fields-camelcase-header-nvge-capture.csv",
            "NVIDIA GeForce RTX 2080 SUPER",
            241,
        ),
    ],
)
def test_a_wide_header_with_camelcase_names_is_a_header(name: str, model: str, width: int) -> None:
    """Drivers 580-610 name fields such as pci.baseClass, fabric.cliqueId and
    encoder.stats.sessionCount: the header was taken for data, and the parse ended 'no readable row'."""
    text = (FIXTURES / "nvidia-smi-query-gpu-csv" / name).read_text(encoding="utf-8")
    header = [cell.strip() for cell in text.splitlines()[0].split(",")]
    assert "pci.baseClass" in header and header_fields(header) is not None
    result = query_gpu(text)
    assert len(result.fields) == width and len(result.gpus) == 1
    gpu = result.gpus[0]
    assert gpu.name == model and gpu.temp_c is not None and gpu.mem_total_mib


def test_a_reader_that_guards_a_column_keeps_that_to_itself() -> None:
    """Each stream reader owns its compiled plan: one GPU that prints "[N/A]" in a column makes its own
    reader take the careful converter there, not every other node's reader of the same layout."""
    quirky, plain = StreamLineReader(QUERY_GPU_FIELDS), StreamLineReader(QUERY_GPU_FIELDS)
    odd = quirky.read(stream_line(power__draw="[N/A]"), {})
    assert isinstance(odd, GpuSample) and odd.power_w is None
    quirky_plan, plain_plan = quirky.read.args[0], plain.read.args[0]  # type: ignore[attr-defined]
    assert quirky_plan.guarded and not plain_plan.guarded
    assert quirky_plan.fast is not plain_plan.fast
    assert not StreamLineReader(QUERY_GPU_FIELDS).read.args[0].guarded  # type: ignore[attr-defined]
    read = plain.read(stream_line(), {})
    assert isinstance(read, GpuSample) and read.power_w == 612.34


GH_DOC = FIXTURES / "kernel-xid"


def test_a_gpu_off_the_bus_logged_without_an_xid_counts_as_xid_79_on_its_bus() -> None:
    """The driver's own message, over three dmesg lines or three syslog records, is an Xid 79 on that
    bus; the same GPU's "GPU has fallen off the bus." after an Xid 79 is not a second event."""
    continued = parse_xid(
        (GH_DOC / "dmesg-h100-drv525-fallen-off-bus-no-xid-continuation-gh-doc.txt").read_text()
    )
    ((event,),) = (continued.events,)
    assert (event.code, event.pci_bus_id, event.time_s) == (79, "0000:5d:00.0", 14387.209961)
    assert "without an Xid" in event.message and continued.time_base is TimeBase.BOOT
    records = parse_xid(
        (GH_DOC / "syslog-h100-drv525-fallen-off-bus-no-xid-three-records-gh-doc.txt").read_text(), year=2024
    )
    assert [(e.code, e.pci_bus_id) for e in records.events] == [(79, "0000:5d:00.0")]
    with_xid = parse_xid((GH_DOC / "dmesg-h100-drv525-xid79-and-fallen-off-bus-line-gh-doc.txt").read_text())
    assert [(e.code, e.pci_bus_id) for e in with_xid.events] == [(79, "0000:5d:00")]
    # nvidia-smi's bus id maps both spellings to the same GPU
    mapped = continued.with_gpu_indices({bus_key("00000000:5D:00.0"): 3})
    assert mapped.events[0].gpu_index == 3
    assert xid_verdict(79, mapped.events[0].message).severity is Severity.CRIT
