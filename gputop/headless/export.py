"""`gputop export FILE`: a recording as CSV or JSON Lines, one row per GPU per sample, units in the column
names, for spreadsheets and notebooks; a node set and a time range narrow it."""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import IO

from gputop.core.history_store import METRIC_NAMES
from gputop.core.nodeset import expand_nodeset
from gputop.core.recording import Frame, RecordingError, TickDecoder
from gputop.core.safe_text import safe_line
from gputop.core.table_export import spreadsheet_safe
from gputop.sources.recording_file import read_recording

# units are in the names: time (UTC, ISO 8601), time_s (epoch seconds), util_pct, mem_used_mib, ...
COLUMNS = ("time", "time_s", "node", "gpu", *METRIC_NAMES)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gputop export",
        description="Write a recording's GPU readings as CSV or JSON Lines: one row per GPU per sample.",
    )
    parser.add_argument("file", metavar="FILE", help="a recording made by gputop record or --record")
    parser.add_argument("--format", choices=("csv", "jsonl"), default="csv")
    parser.add_argument("--nodes", metavar="SET", help="only these nodes, as a node set: gpu[001-016]")
    parser.add_argument("--from", dest="since", metavar="TIME", help="from this UTC time (2026-12-05T03:00)")
    parser.add_argument("--to", dest="until", metavar="TIME", help="up to this UTC time")
    parser.add_argument("-o", "--output", metavar="OUT", help="write here instead of standard output")
    return parser


def _when(text: str | None, what: str) -> float | None:
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise SystemExit(f"gputop export: --{what} {text!r}: not a time like 2026-12-05T03:00") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    since_s, until_s = _when(args.since, "from"), _when(args.until, "to")
    nodes: set[str] | None = None
    if args.nodes:
        try:
            nodes = set(expand_nodeset(args.nodes))
        except ValueError as err:
            print(safe_line(f"gputop export: --nodes: {err}"), file=sys.stderr)
            return 2
    try:
        recording = read_recording(args.file)
    except (OSError, RecordingError) as err:
        print(
            safe_line(f"gputop export: {args.file}: {getattr(err, 'strerror', None) or err}"), file=sys.stderr
        )
        return 2
    out: IO[str] = open(args.output, "w", encoding="utf-8", newline="") if args.output else sys.stdout  # noqa: SIM115
    try:
        rows = _write(recording.frames.frames, out, args.format, nodes, since_s, until_s)
    finally:
        if args.output:
            out.close()
    if recording.frames.stopped:
        print(safe_line(f"gputop export: {args.file}: {recording.frames.stopped}"), file=sys.stderr)
    print(f"gputop export: {rows} rows", file=sys.stderr)
    return 0


def _write(
    frames: Sequence[Frame],
    out: IO[str],
    fmt: str,
    nodes: set[str] | None,
    since_s: float | None,
    until_s: float | None,
) -> int:
    decoder = TickDecoder()
    writer = csv.writer(out, lineterminator="\n") if fmt == "csv" else None
    if writer is not None:
        writer.writerow(COLUMNS)
    rows = 0
    for found in frames:
        document = found.document
        if document.get("kind") != "tick":
            continue
        readings = decoder.decode(document, found.arrays)  # every tick, to keep the deltas whole
        time_s = float(document["t"])
        outside = (since_s is not None and time_s < since_s) or (until_s is not None and time_s > until_s)
        if readings is None or outside:
            continue
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time_s))
        for (node, gpu), values in zip(decoder.layout, readings.tolist(), strict=True):
            if nodes is not None and node not in nodes:
                continue
            cells = [None if math.isnan(v) else round(v, 3) for v in values]
            if writer is not None:
                shown = ("" if c is None else f"{c:g}" for c in cells)
                writer.writerow([stamp, f"{time_s:.3f}", spreadsheet_safe(node), gpu, *shown])
            else:
                row = dict(zip(COLUMNS, [stamp, round(time_s, 3), node, gpu, *cells], strict=True))
                out.write(json.dumps(row) + "\n")
            rows += 1
    return rows
