"""Terminal escape sequences in a tool's output: drivers 590 and later underline the header of
``nvidia-smi topo -m`` even into a pipe (real captures in fixtures/nvidia-smi-topo/*-ansi-underlined-*);
a one-GPU output failed ("no topology matrix header") and larger ones grew a phantom device holding GPU0's
links. Layout parsers now read the output without them; text users write keeps them, shown."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from gputop.core.models import GpuSample
from gputop.core.parsers.escapes import strip_terminal_escapes
from gputop.core.parsers.registry import LAYOUT_MODULES, registry
from gputop.core.parsers.topo import Topology, parse_topo
from gputop.parse_command import main as parse_main
from gputop.sources.commands import QUERY_GPU_FIELDS
from gputop.sources.metrics_stream import MetricsAssembler

FIXTURES = Path(__file__).parent / "fixtures"
TOPO = FIXTURES / "nvidia-smi-topo"
UNDERLINED = sorted(TOPO.glob("*-ansi-underlined-*"))


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("\t\x1b[4mGPU0\tCPU Affinity\x1b[0m\n", "\tGPU0\tCPU Affinity\n"),  # SGR underline on and off
        ("a\x1b]2;title\x07b", "ab"),  # OSC ended by BEL
        ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),  # OSC 8 hyperlink, ended by ST
        ("open\x1b]2;never closed\nnext", "open\nnext"),  # an open string ends with its line
        ("x\x1b(By", "xy"),  # a designator (nF)
        ("\x9b1mbold", "bold"),  # 8-bit CSI
        ("tail\x1b", "tail"),
        ("no escapes at all, 12%", "no escapes at all, 12%"),
        ("\x1b[38;2;255;0;0mred\x1b[m", "red"),
    ],
)
def test_sequences_are_removed_and_the_text_kept(text: str, plain: str) -> None:
    assert strip_terminal_escapes(text) == plain


def test_text_without_escapes_is_returned_as_it_is() -> None:
    text = "GPU0\tX \n" * 100
    assert strip_terminal_escapes(text) is text


def test_real_underlined_captures_are_there() -> None:
    assert len(UNDERLINED) >= 3
    for path in UNDERLINED:
        raw = path.read_text(encoding="utf-8")
        assert "\x1b[4m" in raw and "\x1b[0m" in raw, path.name
        assert isinstance(parse_topo(raw), Topology) is False, "the raw parser alone cannot read it"


@pytest.mark.parametrize("path", UNDERLINED, ids=lambda p: p.name)
def test_a_one_gpu_underlined_capture_reads_as_one_gpu(path: Path) -> None:
    result = registry()["topo"].parse(path.read_text(encoding="utf-8"))
    assert isinstance(result, Topology), result
    assert result.gpus == ("GPU0",)
    assert all("\x1b" not in device for device in result.devices)


def _underlined(text: str) -> str:
    """The header line of a topo -m output, underlined as drivers 590 and later write it."""
    lines = text.split("\n")
    at = next(i for i, line in enumerate(lines) if "GPU0" in line)
    header = lines[at]
    body = header.lstrip()
    lines[at] = header[: len(header) - len(body)] + "\x1b[4m" + body + "\x1b[0m"
    return "\n".join(lines)


def test_an_eight_gpu_output_with_the_header_underlined_has_no_phantom_device() -> None:
    # derived here from a real 8-GPU capture (the file itself is never changed)
    (path,) = TOPO.glob("v100-sxm2-32gb-x8-*")
    text = path.read_text(encoding="utf-8")
    underlined = _underlined(text)
    before = parse_topo(underlined)
    assert isinstance(before, Topology) and "\x1b[4mGPU0" in before.devices  # what gputop used to read
    after = registry()["topo"].parse(underlined)
    assert after == parse_topo(text)
    assert isinstance(after, Topology) and len(after.gpus) == 8


def test_layout_kinds_strip_and_user_text_kinds_keep_escapes() -> None:
    stripped = {kind for kind, info in registry().items() if info.parse.__module__ in LAYOUT_MODULES}
    assert {"topo", "query-gpu", "nvlink", "ibstat", "nvidia-smi-L", "mig-lgi"} <= stripped
    assert not {"compute-apps", "xid", "squeue-json", "scontrol-job"} & stripped


def test_gputop_parse_reads_an_underlined_capture(tmp_path: Path) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        status = parse_main(["topo", str(UNDERLINED[0])])
    assert status == 0 and '"GPU0"' in out.getvalue() and "\\u001b" not in out.getvalue()


def test_a_streamed_line_with_escapes_reads_as_the_plain_line() -> None:
    fields = QUERY_GPU_FIELDS
    values = {
        "index": "0",
        "uuid": "GPU-1",
        "name": "NVIDIA H100 80GB HBM3",
        "pci.bus_id": "00000000:18:00.0",
    }
    cells = [values.get(field, "[N/A]") for field in fields]
    plain = ", ".join(cells)
    coloured = "\x1b[1m" + plain + "\x1b[0m"
    read = []
    for line in (plain, coloured):
        assembler = MetricsAssembler(fields, expected_gpus=1)
        assembler.feed(line.encode())
        assert assembler.complete is not None, line
        read.append(assembler.complete[0])
    assert isinstance(read[0], GpuSample) and read[0] == read[1]
