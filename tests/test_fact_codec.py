"""The recorded form of the parsers' values: real outputs parsed, written, read back equal; a file's
bad values refused with a reason, never built into another type."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputop.core.fact_codec import MAX_TEXT, CodecError, decode, encode
from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.ib import parse_ibstat, parse_ibv_devinfo
from gputop.core.parsers.smi_counters import parse_smi_counters
from gputop.core.parsers.topo import LinkClass, Topology, parse_topo
from gputop.core.parsers.xid import XidLog, parse_xid

FIXTURES = Path(__file__).parent / "fixtures"


def real(kind: str) -> list[Path]:
    return sorted((FIXTURES / kind).glob("*.txt"))


@pytest.mark.parametrize(
    ("kind", "parse"),
    [
        ("nvidia-smi-topo", parse_topo),
        ("ib", lambda text: parse_ibv_devinfo(text) if "hca_id" in text else parse_ibstat(text)),
        ("nvidia-smi-q-text", parse_smi_counters),
        ("kernel-xid", parse_xid),
    ],
)
def test_real_outputs_parsed_come_back_equal_through_json(kind: str, parse: object) -> None:
    read = 0
    for path in real(kind):
        value = parse(path.read_text(errors="replace"))  # type: ignore[operator]
        if isinstance(value, ParseFailure):
            continue
        back = decode(json.loads(json.dumps(encode(value))), type(value))
        assert back == value, path.name
        read += 1
    assert read >= 2, kind


def test_what_does_not_read_as_the_declared_type_is_refused() -> None:
    topology = parse_topo((real("nvidia-smi-topo")[0]).read_text())
    assert isinstance(topology, Topology)
    good = encode(topology)
    assert isinstance(good, list)
    with pytest.raises(CodecError):
        decode([1, 2, 3], Topology)  # devices must be texts
    with pytest.raises(CodecError):
        decode([*good, ["extra"]], Topology)  # more fields than the type has
    with pytest.raises(CodecError):
        decode("GPU0", XidLog)  # a dataclass is a list of its fields
    with pytest.raises(CodecError):
        decode(["nope"], tuple[LinkClass, ...])  # an enum's values only
    with pytest.raises(CodecError):
        decode(True, int)  # a boolean is no count
    deep: object = "x"
    for _ in range(40):
        deep = [deep]
    with pytest.raises(CodecError):
        decode(deep, tuple[str, ...])
    # texts are bounded as the parsers bound theirs
    assert len(decode("x" * (MAX_TEXT * 3), str)) == MAX_TEXT
