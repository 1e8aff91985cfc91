"""Parsers for the driver's error messages, compute apps, `nvidia-smi -L` and kernel Xid lines, on real
captured outputs (tests/fixtures, see PROVENANCE.md) and odd input."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop.core.models import GpuProcess, GpuSample, Severity
from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.compute_apps import ComputeAppsResult, parse_compute_apps
from gputop.core.parsers.driver_errors import detect_driver_error
from gputop.core.parsers.gpu_list import GpuList, parse_gpu_list
from gputop.core.parsers.query_gpu import (
    QUERY_GPU_FIELDS,
    StreamLineReader,
    header_fields,
    parse_query_gpu_line,
)
from gputop.core.parsers.xid import TimeBase, XidLog, bus_key, parse_xid
from gputop.core.xid_codes import xid_verdict
from tests.test_parsers_metrics import (  # the helpers both files use
    FIXTURES,
    fixture,
    query_gpu,
    samples,
    stream_line,
)

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
