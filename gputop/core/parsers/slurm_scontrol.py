"""``scontrol show node`` and ``scontrol show job``, with or without ``-d``, as multi-line records or in
the one-line ``-o`` form.

Records are ``Key=value`` words. A value may contain spaces (``OS=Linux 6.8 ...``, ``Reason=xid 79``): a
word that does not start a new key (``CapitalisedKey=``) belongs to the value before it. A node's reason
ends in ``[user@time]``, which is read off first so that the reason may contain anything. ``-d`` adds,
per job, lines like ``Nodes=node[01-02] CPU_IDs=0-1 Mem=0 GRES=gpu:h100:4(IDX:0-3)`` (older Slurm:
``GRES_IDX=gpu(IDX:0-3)``): the GPU indices the job holds on each of those nodes.

Times have no zone: see ``gputop.core.parsers.slurm_common`` (read as UTC unless ``utc_offset_s`` says).
"""

from __future__ import annotations

import re

from gputop.core.models import SlurmJob, SlurmNode
from gputop.core.parsers.common import ParseFailure, ParserInfo
from gputop.core.parsers.slurm_common import (
    SlurmJobs,
    SlurmNodes,
    excerpt,
    expand_nodelist,
    is_known_no_duration,
    is_none_word,
    job_gpu_request,
    job_id_text,
    merge_nodes,
    node_gpus,
    parse_duration,
    parse_gpu_indices,
    parse_job_state,
    parse_node_state,
    parse_slurm_time,
    pending_reason,
    text_or_none,
)

# -d adds GresUsed (node) and per-node GRES indices (job); -o puts each record on one line.
SCONTROL_NODES_ARGV = ("scontrol", "-d", "-o", "show", "node")
SCONTROL_JOBS_ARGV = ("scontrol", "-d", "-o", "show", "job")

_NODE_KIND = "scontrol-node"
_JOB_KIND = "scontrol-job"

_KEY = re.compile(r"([A-Z][A-Za-z0-9_:/]*)=(.*)", re.DOTALL)
_REASON = re.compile(r"(?<!\S)Reason=(?P<text>[^\n]*?)\s*\[(?P<user>[^\]@\s]*)@(?P<time>[^\]\s]*)\]")
_UID_SUFFIX = re.compile(r"\(\d+\)$")
_NOTHING = ("no nodes in the system", "no jobs in the system")
_DETAIL_KEYS = frozenset({"CPU_IDs", "Mem", "GRES", "GRES_IDX"})


def _pairs(text: str) -> list[tuple[str, str]]:
    """``Key=value`` pairs in order; words that start no key are added to the value before them."""
    pairs: list[tuple[str, str]] = []
    for word in text.split():
        match = _KEY.fullmatch(word)
        if match:
            pairs.append((match.group(1), match.group(2)))
        elif pairs:
            key, value = pairs[-1]
            pairs[-1] = (key, f"{value} {word}" if value else word)
    return pairs


def _records(text: str, first_key: str) -> tuple[list[str], list[str]]:
    """The records (each starting at ``first_key=``) and the non-empty lines before the first one."""
    records: list[list[str]] = []
    stray: list[str] = []
    for line in text.splitlines():
        if line.lstrip().startswith(first_key + "="):
            records.append([line])
        elif records:
            records[-1].append(line)
        elif line.strip():
            stray.append(line.strip())
    return ["\n".join(lines) for lines in records], stray


def _no_records(kind: str, text: str, stray: list[str], first_key: str) -> tuple[str, ...] | ParseFailure:
    """Output without a record: the notes of an empty listing, or why it is not one."""
    if not text.strip():
        return ("empty output: nothing listed",)
    if stray and stray[0].lower().rstrip(".") in _NOTHING:
        return ()
    said = stray[0][:200] if stray else text.strip()[:200]
    return ParseFailure(kind, f"no {first_key}= record found; the command printed: {said}", excerpt(text))


def _user(text: str | None) -> str | None:
    value = text_or_none(text)
    return _UID_SUFFIX.sub("", value) if value else None


def _time(text: str | None, utc_offset_s: float, what: str, notes: list[str]) -> float | None:
    when = parse_slurm_time(text, utc_offset_s)
    if when is None and not is_none_word(text):
        notes.append(f"{what} {text!r} is not a time gputop reads (set SLURM_TIME_FORMAT=standard)")
    return when


# --- nodes -----------------------------------------------------------------------------------------------


def _node(record: str, utc_offset_s: float, notes: list[str]) -> SlurmNode | None:
    reason = user = None
    when: float | None = None
    match = _REASON.search(record)
    if match:
        reason = match.group("text").strip() or None
        user = _user(match.group("user"))
        name_hint = record.split(None, 1)[0]
        when = _time(match.group("time"), utc_offset_s, f"{name_hint}: reason time", notes)
        record = record[: match.start()] + " " + record[match.end() :]
    fields = dict(_pairs(record))
    name = text_or_none(fields.get("NodeName"))
    if name is None:
        notes.append("a node record without a NodeName skipped")
        return None
    if reason is None:
        reason = text_or_none(fields.get("Reason"))
        user = _user(fields.get("ReasonUid"))
        when = _time(fields.get("ReasonTime"), utc_offset_s, f"{name}: reason time", notes)
    raw_state = fields.get("State", "").strip()
    state = parse_node_state(raw_state)
    if not raw_state:
        notes.append(f"{name}: no State printed")
    elif state.not_understood:
        notes.append(f"{name}: state words {', '.join(state.not_understood)} not understood; kept as flags")
    configured, allocated, indices = node_gpus(
        fields.get("Gres"), fields.get("GresUsed"), fields.get("CfgTRES"), fields.get("AllocTRES")
    )
    partitions = tuple(
        p.strip() for p in (text_or_none(fields.get("Partitions")) or "").split(",") if p.strip()
    )
    return SlurmNode(
        name=name,
        base_state=state.base,
        flags=state.flags,
        reason=reason,
        reason_user=user,
        reason_time_s=when,
        partitions=partitions,
        gpus_configured=configured,
        gpus_allocated=allocated,
        gpu_indices_in_use=indices,
        state_text=raw_state or None,
    )


def parse_scontrol_nodes(text: str, *, utc_offset_s: float = 0.0) -> SlurmNodes | ParseFailure:
    """``scontrol [-d] [-o] show node``."""
    records, stray = _records(text, "NodeName")
    if not records:
        empty = _no_records(_NODE_KIND, text, stray, "NodeName")
        return empty if isinstance(empty, ParseFailure) else SlurmNodes(notes=empty)
    notes: list[str] = []
    if stray:
        notes.append(f"skipped {len(stray)} line(s) before the first node: {stray[0][:120]}")
    nodes = [node for record in records if (node := _node(record, utc_offset_s, notes)) is not None]
    return SlurmNodes(merge_nodes(nodes, notes), tuple(notes))


# --- jobs ------------------------------------------------------------------------------------------------


def _int(text: str | None) -> int | None:
    """The first whole number: "4-4" (NumNodes min-max) -> 4; None when there is none."""
    match = re.match(r"\s*(\d+)", text or "")
    return int(match.group(1)) if match else None


def _job(record: str, utc_offset_s: float, notes: list[str]) -> SlurmJob | None:
    fields: dict[str, str] = {}
    details: list[dict[str, str]] = []
    for key, value in _pairs(record):
        if key == "Nodes":
            details.append({"Nodes": value})
        elif details and key in _DETAIL_KEYS:
            details[-1][key] = value
        else:
            fields[key] = value
    raw_id = text_or_none(fields.get("JobId"))
    if raw_id is None:
        notes.append("a job record without a JobId skipped")
        return None
    job_id = job_id_text(
        raw_id,
        array_job_id=_int(fields.get("ArrayJobId")),
        array_task=fields.get("ArrayTaskId"),
        het_job_id=_int(fields.get("HetJobId")),
        het_job_offset=_int(fields.get("HetJobOffset")),
    )
    state = parse_job_state(fields.get("JobState", ""))
    if state.note:
        notes.append(f"job {job_id}: {state.note}")
    nodelist, nodes, note = expand_nodelist(fields.get("NodeList"))
    if note:
        notes.append(f"job {job_id}: {note}")
    gpus_by_node: dict[str, tuple[int, ...]] = {}
    for detail in details:
        gres = detail.get("GRES") or detail.get("GRES_IDX")
        indices = parse_gpu_indices(gres) if gres else None
        if not indices:
            continue
        _, names, note = expand_nodelist(detail.get("Nodes"))
        if note:
            notes.append(f"job {job_id}: {note}")
        for name in names:
            gpus_by_node[name] = indices
    # scontrol writes the spaces of a reason's description as '_' "for easier parsing"; turn them back
    reason = text_or_none(fields.get("Reason"))
    limit = fields.get("TimeLimit")
    if parse_duration(limit) is None and not is_known_no_duration(limit):
        notes.append(f"job {job_id}: time limit {limit!r} not read")
    started = None
    if not state.pending:
        started = _time(fields.get("StartTime"), utc_offset_s, f"job {job_id}: start time", notes)
    return SlurmJob(
        job_id=job_id,
        name=fields.get("JobName", "").strip(),
        user=_user(fields.get("UserId")) or "",
        partition=(text_or_none(fields.get("Partition")) or ""),
        state=state.state,
        gpus_by_node=gpus_by_node,
        start_time_s=started,
        time_limit_s=parse_duration(limit),
        pending_reason=pending_reason(state.state, reason.replace("_", " ") if reason else None),
        nodelist=nodelist,
        nodes=nodes,
        gpus_requested=job_gpu_request(
            alloc_tres=fields.get("TRES"),
            job_gres=fields.get("JOB_GRES"),
            per_job=fields.get("TresPerJob"),
            per_node=fields.get("TresPerNode"),
            per_task=fields.get("TresPerTask"),
            node_count=_int(fields.get("NumNodes")) or (len(nodes) or None),
            task_count=_int(fields.get("NumTasks")),
        ),
        submit_time_s=_time(fields.get("SubmitTime"), utc_offset_s, f"job {job_id}: submit time", notes),
        elapsed_s=parse_duration(fields.get("RunTime")),
        state_flags=state.flags,
    )


def parse_scontrol_jobs(text: str, *, utc_offset_s: float = 0.0) -> SlurmJobs | ParseFailure:
    """``scontrol [-d] [-o] show job``."""
    records, stray = _records(text, "JobId")
    if not records:
        empty = _no_records(_JOB_KIND, text, stray, "JobId")
        return empty if isinstance(empty, ParseFailure) else SlurmJobs(notes=empty)
    notes: list[str] = []
    if stray:
        notes.append(f"skipped {len(stray)} line(s) before the first job: {stray[0][:120]}")
    jobs = [job for record in records if (job := _job(record, utc_offset_s, notes)) is not None]
    return SlurmJobs(tuple(jobs), tuple(notes))


def _parse_nodes(text: str) -> SlurmNodes | ParseFailure:
    return parse_scontrol_nodes(text)


def _parse_jobs(text: str) -> SlurmJobs | ParseFailure:
    return parse_scontrol_jobs(text)


PARSERS: dict[str, ParserInfo] = {
    _NODE_KIND: ParserInfo(_NODE_KIND, "scontrol [-d] [-o] show node", _parse_nodes),
    _JOB_KIND: ParserInfo(_JOB_KIND, "scontrol [-d] [-o] show job", _parse_jobs),
}
