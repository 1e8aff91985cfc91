"""Text ``squeue`` and ``sinfo``: gputop's own pipe-separated formats (the fallback where ``--json`` is
missing), and the tables people paste: the default formats, ``sinfo -N [-l]``, ``sinfo -R`` and custom
``-o``/``-O`` tables with a header line.

gputop's formats print every field at its full width (an ``-o`` field without a width is never cut), one
record per line, separated by ``|``; the free-text field that may itself contain ``|`` (job name, node
reason) comes last. The source that runs the commands and the tests use the constants below, so the
format and its parser cannot drift apart. Run them with ``slurm_common.TEXT_ENV``
(``SLURM_TIME_FORMAT=standard``) so times read as "2026-12-02T17:06:39".

A table with a header is read column by column: words are matched to the header word they line up with
(right-justified columns end where their header ends, left-justified ones start where it starts), so a
reason with spaces stays one cell and a value that ran into the next column ("COMPLETININVALID", when a
9-wide STATE column meets TIME_LEFT) is cut where that column starts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gputop.core.models import SlurmJob, SlurmNode
from gputop.core.parsers.common import ParseFailure, ParserInfo
from gputop.core.parsers.slurm_clusters import cluster_parts, read_each, with_cluster
from gputop.core.parsers.slurm_common import (
    JOB_COMPACT_STATES,
    SlurmJobs,
    SlurmNodes,
    excerpt,
    expand_nodelist,
    is_known_no_duration,
    is_none_word,
    job_gpu_request,
    merge_nodes,
    node_gpus,
    parse_duration,
    parse_job_state,
    parse_node_state,
    parse_slurm_time,
    pending_reason,
    text_or_none,
)

# squeue -o codes and what gputop calls them. %b is the GRES/TRES asked per node ("gres:gpu:4"), %r the
# reason code, %N the folded node list, %V/%S submit/start time, %l the limit, %M the time used so far.
SQUEUE_FIELDS: tuple[tuple[str, str], ...] = (
    ("%i", "job_id"),  # "1234", array task "1230_4", het component "100+1"
    ("%P", "partition"),
    ("%u", "user"),
    ("%T", "state"),
    ("%r", "reason"),
    ("%D", "node_count"),
    ("%N", "nodelist"),
    ("%b", "tres_per_node"),
    ("%V", "submit_time"),
    ("%S", "start_time"),
    ("%l", "time_limit"),
    ("%M", "elapsed"),
    ("%j", "name"),  # last: a job name may contain '|'
)
SQUEUE_FORMAT = "|".join(code for code, _ in SQUEUE_FIELDS)
SQUEUE_ARGV = ("squeue", "--all", "--noheader", "--format", SQUEUE_FORMAT)

# sinfo -N -o codes: one line per node and partition. %T is the long state with its suffix ("drained*"),
# %u/%H who set the reason and when, %G the configured GRES, %E the reason.
SINFO_FIELDS: tuple[tuple[str, str], ...] = (
    ("%N", "node"),
    ("%T", "state"),
    ("%P", "partition"),
    ("%u", "reason_user"),
    ("%H", "reason_time"),
    ("%G", "gres"),
    ("%E", "reason"),  # last: a reason may contain '|'
)
SINFO_FORMAT = "|".join(code for code, _ in SINFO_FIELDS)
SINFO_ARGV = ("sinfo", "--all", "--Node", "--noheader", "--format", SINFO_FORMAT)

_SQUEUE_KIND = "squeue"
_SINFO_KIND = "sinfo"

# Header words of squeue's and sinfo's tables (default, -l, -o and -O names) and gputop's field names.
_SQUEUE_HEADERS: Mapping[str, str] = {
    "JOBID": "job_id",
    "JOB_ID": "job_id",
    "PARTITION": "partition",
    "NAME": "name",
    "USER": "user",
    "ST": "state",
    "STATE": "state",
    "TIME": "elapsed",
    "TIME_LIMIT": "time_limit",
    "TIME_LIMI": "time_limit",  # squeue -l clips its header to the column
    "TIMELIMIT": "time_limit",
    "NODES": "node_count",
    "NODELIST(REASON)": "nodelist_reason",
    "NODELIST": "nodelist",
    "REASON": "reason",
    "START_TIME": "start_time",
    "SUBMIT_TIME": "submit_time",
    "TRES_PER_NODE": "tres_per_node",
    "GRES": "tres_per_node",
    "TRES_PER_JOB": "tres_per_job",
    "TRES_ALLOC": "tres_alloc",
}
_SQUEUE_DEFAULT = ("JOBID", "PARTITION", "NAME", "USER", "ST", "TIME", "NODES", "NODELIST(REASON)")
_SINFO_HEADERS: Mapping[str, str] = {
    "NODELIST": "node",
    "HOSTNAMES": "node",
    "STATE": "state",
    "PARTITION": "partition",
    "USER": "reason_user",
    "TIMESTAMP": "reason_time",
    "GRES": "gres",
    "GRES_USED": "gres_used",
    "REASON": "reason",
}
_WORD = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class _Column:
    name: str
    start: int
    end: int


def _columns(header: str) -> list[_Column]:
    return [_Column(m.group().upper(), m.start(), m.end()) for m in _WORD.finditer(header)]


def _nearest(columns: Sequence[_Column], start: int, end: int) -> int:
    """The column a word at [start, end) lines up with: its start with a column's start (left-justified)
    or its end with a column's end (right-justified), whichever is closest."""
    distances = [min(abs(start - c.start), abs(end - c.end)) for c in columns]
    return distances.index(min(distances))


def _cells(line: str, columns: Sequence[_Column]) -> list[str]:
    words = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(line)]
    if len(words) == len(columns):
        return [word for _, _, word in words]
    cells: list[list[tuple[int, int, str]]] = [[] for _ in columns]
    for start, end, word in words:
        cells[_nearest(columns, start, end)].append((start, end, word))
    for k in range(1, len(columns)):
        if cells[k] or not cells[k - 1]:
            continue
        start, end, word = cells[k - 1][-1]
        cut = columns[k].start
        if start < cut < end:  # a value that ran into the next column
            cells[k - 1][-1] = (start, cut, word[: cut - start])
            cells[k].append((cut, end, word[cut - start :]))
    return [" ".join(word for _, _, word in cell) for cell in cells]


def _table(
    lines: Sequence[str], header: int, names: Mapping[str, str]
) -> tuple[list[str], list[dict[str, str]]]:
    """(gputop field names of the header, one {field: cell} per data line) for a table with a header."""
    columns = _columns(lines[header])
    fields = [names.get(column.name, column.name.lower()) for column in columns]
    rows = []
    for line in lines[header + 1 :]:
        if line.strip():
            rows.append(dict(zip(fields, _cells(line, columns), strict=True)))
    return fields, rows


def _header_line(lines: Sequence[str], words: frozenset[str]) -> int | None:
    for i, line in enumerate(lines):
        if words & set(line.split()):  # Slurm's headers are upper case; "node state" in an error is not one
            return i
    return None


def _is_pipe_format(line: str, fields: Sequence[object]) -> bool:
    return line.count("|") >= len(fields) - 1


_TITLE = re.compile(r"[A-Z][A-Z_()]*")


def _is_pipe_header(line: str, field_count: int) -> bool:
    cells = line.split("|")
    return len(cells) == field_count and all(_TITLE.fullmatch(cell.strip()) for cell in cells)


def _pipe_rows(
    kind: str, lines: Sequence[str], fields: Sequence[tuple[str, str]], notes: list[str]
) -> list[dict[str, str]]:
    names = [name for _, name in fields]
    rows = []
    first = True
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if first and _is_pipe_header(line, len(names)):
            # the same format without -h (or under -M, where each cluster has its header) starts with
            # the column titles: "JOBID|PARTITION|USER|..."
            first = False
            continue
        first = False
        cells = line.split("|", len(names) - 1)
        if len(cells) != len(names):
            notes.append(f"line {number}: {len(cells)} fields where {kind} prints {len(names)}; skipped")
            continue
        rows.append(dict(zip(names, (cell.strip() for cell in cells), strict=True)))
    return rows


def _int(text: str | None) -> int | None:
    match = re.match(r"\s*(\d+)", text or "")
    return int(match.group(1)) if match else None


def _complaint(lines: Sequence[str]) -> str | None:
    """The line where Slurm said what went wrong ("squeue: error: ...", "slurm_load_jobs error: ...")."""
    for line in lines:
        if "error" in line.lower() or "invalid" in line.lower():
            return line.strip()[:200]
    return None


# --- squeue ----------------------------------------------------------------------------------------------


def _job(row: Mapping[str, str], utc_offset_s: float, notes: list[str]) -> SlurmJob | None:
    job_id = text_or_none(row.get("job_id"))
    if job_id is None:
        notes.append("a line without a job id skipped")
        return None
    state = parse_job_state(row.get("state", ""))
    if state.note:
        notes.append(f"job {job_id}: {state.note}")
    reason = row.get("reason")
    listed = row.get("nodelist")
    combined = (row.get("nodelist_reason") or "").strip()
    if combined.startswith("(") and combined.endswith(")"):
        reason = reason or combined[1:-1]
    elif combined:
        listed = listed or combined
    nodelist, nodes, note = expand_nodelist(listed)
    if note:
        notes.append(f"job {job_id}: {note}")
    limit = row.get("time_limit")
    if limit is not None and parse_duration(limit) is None and not is_known_no_duration(limit):
        notes.append(f"job {job_id}: time limit {limit!r} not read")
    node_count = _int(row.get("node_count")) or (len(nodes) or None)
    started = None
    if not state.pending:  # a pending job's start time is only Slurm's estimate
        started = parse_slurm_time(row.get("start_time"), utc_offset_s)
    return SlurmJob(
        job_id=job_id,
        name=(row.get("name") or "").strip(),
        user=text_or_none(row.get("user")) or "",
        partition=text_or_none(row.get("partition")) or "",
        state=state.state,
        start_time_s=started,
        time_limit_s=parse_duration(limit),
        pending_reason=pending_reason(state.state, reason),
        nodelist=nodelist,
        nodes=nodes,
        gpus_requested=job_gpu_request(
            alloc_tres=row.get("tres_alloc"),
            per_job=row.get("tres_per_job"),
            per_node=row.get("tres_per_node"),
            node_count=node_count,
        ),
        submit_time_s=parse_slurm_time(row.get("submit_time"), utc_offset_s),
        elapsed_s=parse_duration(row.get("elapsed")),
        state_flags=state.flags,
    )


def _headerless_default(lines: Sequence[str]) -> list[dict[str, str]] | None:
    """Default squeue lines without their header (squeue -h, or grep): 8 columns, the 5th a state code."""
    names = [_SQUEUE_HEADERS[h] for h in _SQUEUE_DEFAULT]
    rows = []
    for line in lines:
        if not line.strip():
            continue
        cells = line.split(None, len(names) - 1)
        if len(cells) != len(names) or cells[4].upper() not in JOB_COMPACT_STATES:
            return None
        rows.append(dict(zip(names, cells, strict=True)))
    return rows


def parse_squeue_fields(
    text: str, fields: Sequence[tuple[str, str]], *, utc_offset_s: float = 0.0
) -> SlurmJobs | ParseFailure:
    """``squeue -h -o`` with ``fields`` joined by ``|`` (gputop's formats)."""
    notes: list[str] = []
    lines = text.replace("\r", "").splitlines()
    content = [line for line in lines if line.strip()]
    if content and not _is_pipe_format(content[0], fields):
        said = _complaint(content) or content[0][:200]
        return ParseFailure(_SQUEUE_KIND, f"not squeue's {'|'.join(c for c, _ in fields)} lines: {said}")
    rows = _pipe_rows(_SQUEUE_KIND, lines, fields, notes)
    jobs = [job for row in rows if (job := _job(row, utc_offset_s, notes)) is not None]
    _note_repeats(jobs, notes)
    return SlurmJobs(tuple(jobs), tuple(notes))


def parse_sinfo_fields(
    text: str, fields: Sequence[tuple[str, str]], *, utc_offset_s: float = 0.0
) -> SlurmNodes | ParseFailure:
    """``sinfo -N -h -o`` with ``fields`` joined by ``|`` (gputop's formats)."""
    notes: list[str] = []
    lines = text.replace("\r", "").splitlines()
    content = [line for line in lines if line.strip()]
    if content and not _is_pipe_format(content[0], fields):
        said = _complaint(content) or content[0][:200]
        return ParseFailure(_SINFO_KIND, f"not sinfo's {'|'.join(c for c, _ in fields)} lines: {said}")
    rows = _pipe_rows(_SINFO_KIND, lines, fields, notes)
    nodes = [node for row in rows for node in _nodes(row, utc_offset_s, notes)]
    return SlurmNodes(merge_nodes(nodes, notes), tuple(notes), doubtful=_doubtful_lines(lines, fields))


def _doubtful_lines(lines: Sequence[str], fields: Sequence[tuple[str, str]]) -> frozenset[str]:
    """Nodes whose lines a free-text last field (a reason) may have forged or cut: a node listed twice in
    one partition, or the node before a line that is not a whole record (a reason's line break)."""
    seen: set[tuple[str, str]] = set()
    doubtful: set[str] = set()
    names = [name for _, name in fields]
    previous: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        cells = line.split("|", len(names) - 1)
        if len(cells) != len(names):
            doubtful.update(previous)
            continue
        row = dict(zip(names, cells, strict=True))
        _, previous_names, _ = expand_nodelist(row.get("node"))
        previous = list(previous_names)
        for name in previous:
            key = (name, row.get("partition", "").strip())
            if key in seen:
                doubtful.add(name)
            seen.add(key)
    return frozenset(doubtful)


def parse_squeue(text: str, *, utc_offset_s: float = 0.0) -> SlurmJobs | ParseFailure:
    """``squeue -h -o SQUEUE_FORMAT`` (gputop's), or a squeue table: default, -l, custom with a header;
    of one cluster or of several (``-M``, each part after its ``CLUSTER:`` line)."""
    parts = cluster_parts(text)
    if len(parts) == 1:
        cluster, part = parts[0]
        read = _squeue_part(part, utc_offset_s)
        if isinstance(read, ParseFailure) or cluster is None:
            return read
        return SlurmJobs(tuple(with_cluster(read.jobs, cluster, qualify=False)), read.notes)
    qualify = sum(1 for cluster, _ in parts if cluster is not None) > 1
    each = read_each(parts, lambda part: _squeue_part(part, utc_offset_s))
    if isinstance(each, ParseFailure):
        return each
    found, notes = each
    jobs = [job for cluster, read in found for job in with_cluster(read.jobs, cluster, qualify)]
    if qualify:
        named = [cluster for cluster, _ in parts if cluster]
        notes.append(f"jobs of {len(named)} clusters ({', '.join(named)}): ids written cluster:id")
    return SlurmJobs(tuple(jobs), tuple(notes))


def _squeue_part(text: str, utc_offset_s: float) -> SlurmJobs | ParseFailure:
    lines = text.replace("\r", "").splitlines()
    content = [line for line in lines if line.strip()]
    if not content:
        return SlurmJobs(notes=("no jobs listed",))
    notes: list[str] = []
    header = _header_line(lines, frozenset({"JOBID", "JOB_ID"}))
    rows: list[dict[str, str]] | None
    if header is None and _is_pipe_format(content[0], SQUEUE_FIELDS):
        rows = _pipe_rows(_SQUEUE_KIND, lines, SQUEUE_FIELDS, notes)
    elif header is not None:
        _, rows = _table(lines, header, _SQUEUE_HEADERS)
    else:
        rows = _headerless_default(content)
        if rows is None:
            said = _complaint(content)
            reason = (
                f"squeue failed: {said}"
                if said
                else f"no JOBID header, and not gputop's format (squeue -h -o '{SQUEUE_FORMAT}')"
            )
            return ParseFailure(_SQUEUE_KIND, reason, excerpt(text))
        notes.append("no header line: read as squeue's default columns")
    jobs = [job for row in rows if (job := _job(row, utc_offset_s, notes)) is not None]
    _note_repeats(jobs, notes)
    return SlurmJobs(tuple(jobs), tuple(notes))


def _note_repeats(jobs: Sequence[SlurmJob], notes: list[str]) -> None:
    """One id twice is two clusters' jobs printed without their CLUSTER lines: say so, since a job of
    one cluster would otherwise be taken for the other's."""
    seen: set[str] = set()
    repeated: list[str] = []
    for job in jobs:
        if job.job_id in seen and job.job_id not in repeated:
            repeated.append(job.job_id)
        seen.add(job.job_id)
    if repeated:
        notes.append(
            f"job ids listed twice ({', '.join(repeated[:5])}): several clusters' jobs without their"
            " CLUSTER lines (SLURM_CLUSTERS set, or -M with --noheader)? Jobs of one id may differ"
        )


# --- sinfo -----------------------------------------------------------------------------------------------


def _nodes(row: Mapping[str, str], utc_offset_s: float, notes: list[str]) -> list[SlurmNode]:
    listed = row.get("node", "")
    _, names, note = expand_nodelist(listed)
    if note:
        notes.append(note)
    if not names:
        return []
    raw_state = (row.get("state") or "").strip()
    state = parse_node_state(raw_state)
    if state.not_understood:
        notes.append(f"{listed}: state words {', '.join(state.not_understood)} not understood; kept as flags")
    partition = (text_or_none(row.get("partition")) or "").rstrip("*")
    when_text = row.get("reason_time")
    when = parse_slurm_time(when_text, utc_offset_s)
    if when is None and not is_none_word(when_text):
        notes.append(f"{listed}: reason time {when_text!r} not read (set SLURM_TIME_FORMAT=standard)")
    configured, allocated, indices = node_gpus(row.get("gres"), row.get("gres_used"), None, None)
    return [
        SlurmNode(
            name=name,
            base_state=state.base,
            flags=state.flags,
            reason=text_or_none(row.get("reason")),
            reason_user=text_or_none(row.get("reason_user")),
            reason_time_s=when,
            partitions=(partition,) if partition else (),
            gpus_configured=configured,
            gpus_allocated=allocated,
            gpu_indices_in_use=indices,
            state_text=raw_state or None,
        )
        for name in names
    ]


def parse_sinfo(text: str, *, utc_offset_s: float = 0.0) -> SlurmNodes | ParseFailure:
    """``sinfo -N -h -o SINFO_FORMAT`` (gputop's), or a sinfo table with node names: default, -N, -N -l,
    -R, custom with a header. A table without a NODELIST column names no node and is refused. Several
    clusters' tables (``-M``) are read each on its own."""
    parts = cluster_parts(text)
    if len(parts) == 1:
        return _sinfo_part(parts[0][1], utc_offset_s)
    each = read_each(parts, lambda part: _sinfo_part(part, utc_offset_s))
    if isinstance(each, ParseFailure):
        return each
    found, notes = each
    nodes = [node for _, read in found for node in read.nodes]
    named = [cluster for cluster, _ in parts if cluster]
    notes.append(f"nodes of {len(named)} cluster(s) ({', '.join(named)}): a name two clusters share is one")
    return SlurmNodes(merge_nodes(nodes, notes), tuple(notes))


def _sinfo_part(text: str, utc_offset_s: float) -> SlurmNodes | ParseFailure:
    lines = text.replace("\r", "").splitlines()
    content = [line for line in lines if line.strip()]
    if not content:
        return SlurmNodes(notes=("no nodes listed",))
    notes: list[str] = []
    header = _header_line(lines, frozenset(_SINFO_HEADERS) | {"AVAIL", "NODES"})
    doubtful: frozenset[str] = frozenset()
    if header is None and _is_pipe_format(content[0], SINFO_FIELDS):
        rows = _pipe_rows(_SINFO_KIND, lines, SINFO_FIELDS, notes)
        doubtful = _doubtful_lines(lines, SINFO_FIELDS)
    elif header is not None:
        fields, rows = _table(lines, header, _SINFO_HEADERS)
        if "node" not in fields:
            columns = " ".join(lines[header].split())
            return ParseFailure(
                _SINFO_KIND,
                f"no NODELIST column ({columns}): gputop needs node names; run sinfo -N -o '{SINFO_FORMAT}'",
                excerpt(text),
            )
        if "state" not in fields:
            notes.append("no STATE column: node states are unknown")
    else:
        said = _complaint(content)
        reason = (
            f"sinfo failed: {said}" if said else f"no header line, and not gputop's format ({SINFO_FORMAT})"
        )
        return ParseFailure(_SINFO_KIND, reason, excerpt(text))
    nodes = [node for row in rows for node in _nodes(row, utc_offset_s, notes)]
    return SlurmNodes(merge_nodes(nodes, notes), tuple(notes), doubtful=doubtful)


def _parse_squeue(text: str) -> SlurmJobs | ParseFailure:
    return parse_squeue(text)


def _parse_sinfo(text: str) -> SlurmNodes | ParseFailure:
    return parse_sinfo(text)


PARSERS: dict[str, ParserInfo] = {
    _SQUEUE_KIND: ParserInfo(
        _SQUEUE_KIND, f"squeue -h -o '{SQUEUE_FORMAT}', or a squeue table", _parse_squeue
    ),
    _SINFO_KIND: ParserInfo(_SINFO_KIND, f"sinfo -N -h -o '{SINFO_FORMAT}', or a sinfo table", _parse_sinfo),
}
