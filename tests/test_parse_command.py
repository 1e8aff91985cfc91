"""`gputop parse KIND [FILE|-]` as a user runs it: JSON out, reasons and exit codes on failure."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import NamedTuple

from gputop.parse_command import to_json

FIXTURES = Path(__file__).parent / "fixtures"
H100_CSV = (
    FIXTURES / "nvidia-smi-query-gpu-csv" / "h100-80gb-hbm3-drv595-index-name-driver-pstate-pcie-gen.csv"
)
MIG_LIST = FIXTURES / "nvidia-smi-L" / "a100-sxm4-80gb-mig-7x1g.10gb-new-MIG-uuid-datadog-pr33120.txt"


def gputop(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "gputop", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        check=False,
    )
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode("utf-8"), done.stderr.decode("utf-8")
    )


def test_parse_a_file() -> None:
    done = gputop("parse", "query-gpu", str(H100_CSV))
    assert done.returncode == 0, done.stderr
    value = json.loads(done.stdout)
    assert value["gpus"][0]["temp_c"] == 29.0
    assert value["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert value["gpus"][0]["throttle_reasons"] == []
    assert value["rows"][0]["driver_version"] == "595.71.05"
    assert value["notes"] == []


def test_parse_stdin_with_dash() -> None:
    done = gputop("parse", "nvidia-smi-L", "-", stdin=MIG_LIST.read_bytes())
    assert done.returncode == 0, done.stderr
    (gpu,) = json.loads(done.stdout)["gpus"]
    assert gpu["uuid"] == "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16"
    assert [d["uuid"] for d in gpu["mig_devices"]][:2] == [
        "MIG-feb88891-0321-5fef-9c87-d4af3b54259e",
        "MIG-a25704ba-3a06-5299-a795-fd7cf4d13973",
    ]


def test_parse_reads_stdin_when_no_file_is_given_and_survives_binary_junk() -> None:
    junk = bytes(range(256)) + b"\nNVRM: Xid (PCI:0000:01:00): 31, pid=1, name=x, MMU Fault\n"
    done = gputop("parse", "xid", stdin=junk)
    assert done.returncode == 0, done.stderr
    value = json.loads(done.stdout)
    assert [e["code"] for e in value["events"]] == [31]
    assert value["time_base"] == "none"


def test_list_names_every_kind_with_its_command() -> None:
    done = gputop("parse", "--list")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    kinds = {line.split()[0]: line for line in lines}
    for kind in ("query-gpu", "compute-apps", "nvidia-smi-L", "xid"):
        assert kind in kinds
    assert "nvidia-smi -L" in kinds["nvidia-smi-L"]
    assert lines == sorted(lines)


def test_unknown_kind_lists_the_known_ones() -> None:
    done = gputop("parse", "smi-q", str(H100_CSV))
    assert done.returncode == 2
    assert done.stdout == ""
    assert "unknown kind 'smi-q'" in done.stderr
    assert "query-gpu" in done.stderr and "xid" in done.stderr
    assert "Traceback" not in done.stderr


def test_missing_file() -> None:
    done = gputop("parse", "query-gpu", "/nonexistent/out.csv")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("gputop parse: cannot read /nonexistent/out.csv")
    assert "Traceback" not in done.stderr


def test_a_parse_failure_gives_its_reason_and_exit_1() -> None:
    error = FIXTURES / "nvidia-smi-default" / "ERROR-unable-to-determine-device-handle-old-format-2015.txt"
    done = gputop("parse", "query-gpu", str(error))
    assert done.returncode == 1
    assert done.stdout == ""
    assert "GPU 0000:0B:00.0 lost: unable to determine the device handle" in done.stderr
    empty = gputop("parse", "nvidia-smi-L", "-", stdin=b"")
    assert empty.returncode == 1
    assert "empty output" in empty.stderr


def test_no_kind_is_a_usage_error() -> None:
    done = gputop("parse")
    assert done.returncode == 2
    assert "--list" in done.stderr


def test_the_dashboard_flags_still_work() -> None:
    done = gputop("--version")
    assert done.returncode == 0
    assert done.stdout.startswith("gputop ")


class Colour(StrEnum):
    RED = "red"


class Pair(NamedTuple):
    a: int
    b: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Holder:
    pair: Pair
    colour: Colour
    links: dict[tuple[str, str], str]
    tags: frozenset[str]
    ratio: float


def test_to_json_shapes() -> None:
    value = Holder(
        Pair(1, ("x", "y")), Colour.RED, {("GPU0", "GPU1"): "NV12"}, frozenset({"b", "a"}), math.nan
    )
    assert to_json(value) == {
        "pair": {"a": 1, "b": ["x", "y"]},
        "colour": "red",
        "links": {"GPU0,GPU1": "NV12"},
        "tags": ["a", "b"],
        "ratio": None,
    }
    json.dumps(to_json(value), allow_nan=False)


def test_parse_xid_prints_each_events_severity_and_action() -> None:
    """So a site can check what gputop makes of its own kernel logs."""
    lines = (
        (FIXTURES / "kernel-xid" / "kmsg-line-xid145-rlw-rxpipe-nonfatal-gpud-pr1174.txt").read_text()
        + "NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n"
        + "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (OS Reboot)\n"
    )
    done = gputop("parse", "xid", "-", stdin=lines.encode())
    assert done.returncode == 0, done.stderr
    events = {e["code"]: e for e in json.loads(done.stdout)["events"]}
    assert (events[145]["severity"], events[145]["action"]) == ("info", "none: informational")
    assert events[79]["severity"] == "crit" and "reboot" in events[79]["action"]
    assert events[79]["bucket"] == "RESTART_BM"
    assert events[154]["severity"] == "crit" and "reboot" in events[154]["action"]
