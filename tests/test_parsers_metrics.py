"""Parsers for the fast metrics: the registry and command table, query-gpu CSV (real captures, odd
shapes, the stream line parser) and throttle reasons, on real captured outputs (tests/fixtures, see
PROVENANCE.md) and odd input. The facts' parsers are tested in test_parsers_smi_facts.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gputop.core.models import GpuSample
from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.compute_apps import COMPUTE_APPS_FIELDS
from gputop.core.parsers.query_gpu import (
    QUERY_GPU_FIELDS,
    QueryGpuResult,
    header_fields,
    parse_query_gpu,
    parse_query_gpu_line,
    throttle_reason_names,
    throttling_reasons,
)
from gputop.core.parsers.registry import registry
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
