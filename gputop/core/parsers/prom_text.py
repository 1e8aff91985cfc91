"""Prometheus's text exposition format, as dcgm-exporter and node_exporter print it on /metrics.

    # HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
    # TYPE DCGM_FI_DEV_GPU_UTIL gauge
    DCGM_FI_DEV_XID_ERRORS{gpu="0",Hostname="node1",err_msg="a \\"quoted\\" word"} 79 1700000000000

Every sample becomes (name, labels, value, timestamp). Label values are read with the format's escapes
(backslash, quote, newline), so a value cannot close its quotes early and pose as another label; a line
that does not read (cut short, garbage) is counted and skipped, never guessed at. Sizes are bounded: a
line, a label value, the labels of one sample, the lines read.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

MAX_LINE_CHARS: Final = 16 * 1024
MAX_LABEL_CHARS: Final = 1024
MAX_LABELS: Final = 64
MAX_SAMPLES: Final = 2_000_000

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES: Final = {"\\": "\\", '"': '"', "n": "\n"}


@dataclass(frozen=True, slots=True)
class PromSample:
    name: str
    labels: Mapping[str, str]
    value: float
    timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class PromText:
    samples: tuple[PromSample, ...]
    types: Mapping[str, str] = field(default_factory=dict)  # metric family -> gauge, counter, ...
    bad_lines: int = 0  # lines that did not read as a sample (counted, skipped)
    notes: tuple[str, ...] = ()


def parse_prom_text(text: str) -> PromText:
    samples: list[PromSample] = []
    types: dict[str, str] = {}
    bad = 0
    first_bad = ""
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2][:200]] = parts[3].strip()[:20]
            continue
        sample = _sample(line) if len(line) <= MAX_LINE_CHARS else None
        if sample is None:
            bad += 1
            first_bad = first_bad or line[:80]
            continue
        samples.append(sample)
        if len(samples) >= MAX_SAMPLES:
            break
    notes = (f"{bad} lines did not read as samples (the first: {first_bad!r})",) if bad else ()
    return PromText(tuple(samples), types, bad, notes)


def _sample(line: str) -> PromSample | None:
    match = _NAME.match(line)
    if match is None:
        return None
    name = match.group()
    at = match.end()
    labels: dict[str, str] = {}
    if at < len(line) and line[at] == "{":
        read = _labels(line, at + 1, labels)
        if read is None:
            return None
        at = read
    rest = line[at:].split()
    if not rest or len(rest) > 2:
        return None
    value = _value(rest[0])
    if value is None:
        return None
    timestamp: int | None = None
    if len(rest) == 2:
        try:
            timestamp = int(rest[1])
        except ValueError:
            return None
    return PromSample(name, labels, value, timestamp)


def _labels(line: str, at: int, labels: dict[str, str]) -> int | None:
    """Reads `name="value",...}` from ``at``; where the sample goes on, or None when it does not read."""
    end = len(line)
    while True:
        while at < end and line[at] in " \t,":
            at += 1
        if at < end and line[at] == "}":
            return at + 1
        match = _LABEL_NAME.match(line, at)
        if match is None:
            return None
        label = match.group()
        at = match.end()
        while at < end and line[at] in " \t":
            at += 1
        if at + 1 >= end or line[at] != "=" or line[at + 1] != '"':
            return None
        at += 2
        chars: list[str] = []
        while True:
            if at >= end:
                return None  # cut short inside a value
            char = line[at]
            if char == '"':
                at += 1
                break
            if char == "\\":
                if at + 1 >= end:
                    return None
                chars.append(_ESCAPES.get(line[at + 1], "\\" + line[at + 1]))
                at += 2
                continue
            chars.append(char)
            at += 1
        if len(labels) >= MAX_LABELS:
            return None
        labels[label] = "".join(chars)[:MAX_LABEL_CHARS]


def _value(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    if math.isnan(value) and text.lower() not in ("nan",):
        return None
    return value
