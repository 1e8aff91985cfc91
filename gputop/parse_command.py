"""`gputop parse KIND [FILE|-]`: what gputop makes of a command's output, printed as JSON.

For checking a parser against a node's real output without running the dashboard:
`nvidia-smi -L | gputop parse nvidia-smi-L`. Exit status: 0 parsed, 1 the parser gave up (its reason on
stderr), 2 a usage problem (unknown kind, unreadable file).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

from gputop.core.models import XidEvent
from gputop.core.parsers.common import OUTPUT_MAX_BYTES, ParseFailure, cut_note
from gputop.core.parsers.registry import registry
from gputop.core.parsers.xid import XidLog
from gputop.core.safe_text import safe_block, safe_line
from gputop.core.xid_codes import xid_verdict


def to_json(value: Any) -> Any:
    """Plain JSON values from parser results: dataclasses and NamedTuples become objects, tuples and
    sets lists, enums their values; a non-finite float becomes null (JSON has no NaN)."""
    if isinstance(value, Enum):
        return to_json(value.value)
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return {name: to_json(getattr(value, name)) for name in value._fields}
    if isinstance(value, Mapping):
        return {_key(k): to_json(v) for k, v in value.items()}
    if isinstance(value, set | frozenset):
        return sorted((to_json(v) for v in value), key=str)
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [to_json(v) for v in value]
    return str(value)


def _key(key: Any) -> str:
    if isinstance(key, tuple):
        return ",".join(str(to_json(k)) for k in key)  # topology links are keyed by (row, column)
    return str(to_json(key))


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gputop parse",
        description="Print as JSON what gputop makes of a command's output (a file, or - for stdin).",
    )
    parser.add_argument("kind", nargs="?", help="which output it is (see --list)")
    parser.add_argument("file", nargs="?", default="-", help="the saved output; - or nothing reads stdin")
    parser.add_argument("--list", action="store_true", help="list the kinds and the commands they read")
    return parser


EXCERPT_MAX_CHARS = 1000


def _read(path: str) -> str:
    """The output to parse, at most OUTPUT_MAX_BYTES of it (a word on stderr says when it was cut)."""
    if path == "-":
        if sys.stdin.isatty():
            print("gputop parse: reading the output from stdin (Ctrl-D ends it)", file=sys.stderr)
        data = sys.stdin.buffer.read(OUTPUT_MAX_BYTES + 1)
    else:
        with open(path, "rb") as handle:
            data = handle.read(OUTPUT_MAX_BYTES + 1)
    if len(data) > OUTPUT_MAX_BYTES:
        data = data[:OUTPUT_MAX_BYTES]
        print(
            f"gputop parse: {safe_line(path)}: {cut_note(len(data) + 1)}; the rest is ignored",
            file=sys.stderr,
        )
    # nodes print what they like; a stray byte must not hide the rest of the output
    return data.decode("utf-8", errors="replace")


def main(argv: Sequence[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    parsers = registry()
    if args.list:
        width = max((len(kind) for kind in parsers), default=0)
        for kind in sorted(parsers):
            print(f"{kind:<{width}}  {parsers[kind].summary}")
        return 0
    if args.kind is None:
        print("gputop parse: which kind? (gputop parse --list shows them)", file=sys.stderr)
        return 2
    info = parsers.get(args.kind)
    if info is None:
        known = ", ".join(sorted(parsers))
        print(f"gputop parse: unknown kind {args.kind!r}; known kinds: {known}", file=sys.stderr)
        return 2
    try:
        text = _read(args.file)
    except OSError as err:
        print(f"gputop parse: cannot read {args.file}: {err.strerror or err}", file=sys.stderr)
        return 2
    result = info.parse(text)
    if isinstance(result, ParseFailure):
        print(safe_line(f"gputop parse: {result.kind}: {result.reason}"), file=sys.stderr)
        if result.excerpt:
            print(safe_block(result.excerpt, EXCERPT_MAX_CHARS), file=sys.stderr)
        return 1
    document = to_json(result)
    if isinstance(result, XidLog):
        document["events"] = [
            _with_verdict(event, shown)
            for event, shown in zip(result.events, document["events"], strict=True)
        ]
    print(json.dumps(document, indent=2))
    return 0


def _with_verdict(event: XidEvent, shown: dict[str, Any]) -> dict[str, Any]:
    """An Xid event with what gputop makes of it, so a site can check its own kernel logs: the
    severity ("info": listed, no alert), meaning, action and the catalogue's bucket."""
    verdict = xid_verdict(event.code, event.message, gpu=event.gpu_index)
    severity = verdict.severity.value if verdict.severity is not None else "info"
    return {
        **shown,
        "severity": severity,
        "meaning": verdict.meaning,
        "action": verdict.action,
        "bucket": verdict.bucket,
    }
