"""``scontrol show node`` and ``scontrol show job``, with or without ``-d``, as multi-line records or in
the one-line ``-o`` form.

Records are ``Key=value`` words. A value may contain spaces (``OS=Linux 6.8 ...``, ``Reason=xid 79``): a
word that does not start a new key (``CapitalisedKey=``) belongs to the value before it. A node's reason
is the last field and ends in ``[user@time]``: everything from ``Reason=`` to the last ``[user@time]`` at
the end of the record is the reason, read off first, so that it may contain anything (its own
``[user@time]``, ``State=`` words).

Text cannot say where a free-text field ends: a job name or working directory that holds ``UserId=`` or a
line break followed by ``JobId=...`` reads as other fields or as another job. A record that shows it (a
key printed twice, a record cut short, a name or id listed twice) is named in ``doubtful``, and
`gputop.core.parsers.slurm_checked` takes such a record's fields from a listing that has no free text.

``-d`` adds, per job, lines like ``Nodes=node[01-02] CPU_IDs=0-1 Mem=0 GRES=gpu:h100:4(IDX:0-3)`` (older
Slurm: ``GRES_IDX=gpu(IDX:0-3)``): the GPU indices the job holds on each of those nodes.

Times have no zone: see ``gputop.core.parsers.slurm_common`` (read as UTC unless ``utc_offset_s`` says).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

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
_REASON = re.compile(
    r"(?<!\S)Reason=(?P<text>.*?)\s*\[(?P<user>[^\]@\s]*)@(?P<time>[^\]\s]*)\]\s*\Z", re.DOTALL
)
_REASON_KEY = re.compile(r"(?<!\S)Reason=")
_UID_SUFFIX = re.compile(r"\(\d+\)$")
_NOTHING = ("no nodes in the system", "no jobs in the system")
_DETAIL_KEYS = frozenset({"Nodes", "CPU_IDs", "Mem", "GRES", "GRES_IDX"})
# Keys scontrol prints in every job record (22.05 to 25.x): a record without them was cut short.
_JOB_KEYS_ALWAYS = frozenset({"JobId", "UserId", "JobState", "Partition"})


def _repeated_keys(pairs: list[tuple[str, str]]) -> list[str]:
    """Keys a record prints more than once (the per-node detail keys may repeat)."""
    seen: set[str] = set()
    repeated: list[str] = []
    for key, _value in pairs:
        if key in _DETAIL_KEYS:
            continue
        if key in seen and key not in repeated:
            repeated.append(key)
        seen.add(key)
    return repeated


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


def _node(record: str, utc_offset_s: float, notes: list[str], doubtful: set[str]) -> SlurmNode | None:
    reason = user = None
    when: float | None = None
    first_reason = _REASON_KEY.search(record)
    match = _REASON.match(record, first_reason.start()) if first_reason else None
    if first_reason and not match and "ReasonUid=" not in record:
        # a reason without its [user@time] at the end: a line break in it cut the record
        doubtful.add(record.split(None, 1)[0].removeprefix("NodeName="))
    if match:
        reason = match.group("text").strip() or None
        user = _user(match.group("user"))
        name_hint = record.split(None, 1)[0]
        when = _time(match.group("time"), utc_offset_s, f"{name_hint}: reason time", notes)
        record = record[: match.start()] + " " + record[match.end() :]
    pairs = _pairs(record)
    fields = dict(pairs)
    name = text_or_none(fields.get("NodeName"))
    if name is None:
        notes.append("a node record without a NodeName skipped")
        return None
    if _repeated_keys(pairs):
        doubtful.add(name)
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
    doubtful: set[str] = set()
    nodes = [node for record in records if (node := _node(record, utc_offset_s, notes, doubtful)) is not None]
    doubtful.update(_listed_twice(node.name for node in nodes))
    if doubtful:
        notes.append(_doubtful_note("node", doubtful, "a drain reason"))
    return SlurmNodes(merge_nodes(nodes, notes), tuple(notes), doubtful=frozenset(doubtful))


def _listed_twice(names: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    twice: set[str] = set()
    for name in names:
        (twice if name in seen else seen).add(name)
    return twice


def _doubtful_note(what: str, names: set[str], field: str) -> str:
    shown = ", ".join(sorted(names)[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (
        f"{what} records of {shown} are ambiguous in scontrol's text ({field} holds a line break or "
        f"Slurm's key words); their fields are not trusted"
    )


# --- jobs ------------------------------------------------------------------------------------------------


def _int(text: str | None) -> int | None:
    """The first whole number: "4-4" (NumNodes min-max) -> 4; None when there is none."""
    match = re.match(r"\s*(\d+)", text or "")
    return int(match.group(1)) if match else None


def _job(record: str, utc_offset_s: float, notes: list[str], doubtful: set[str]) -> SlurmJob | None:
    fields: dict[str, str] = {}
    details: list[dict[str, str]] = []
    pairs = _pairs(record)
    keys = {key for key, _ in pairs}
    suspect = bool(_repeated_keys(pairs)) or not keys >= _JOB_KEYS_ALWAYS
    for key, value in pairs:
        if key == "JobId" and "JobId" in fields:
            continue  # the first is the record's: a later one is in a free-text field
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
    if suspect:
        doubtful.add(raw_id)
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
    doubtful: set[str] = set()  # numeric JobIds of records that cannot be trusted
    jobs = [job for record in records if (job := _job(record, utc_offset_s, notes, doubtful)) is not None]
    ids = [_numeric_id(record) for record in records]
    doubtful.update(_listed_twice(i for i in ids if i))
    shown = {job.job_id for job, raw in zip(jobs, ids, strict=False) if raw in doubtful}
    if doubtful:
        notes.append(_doubtful_note("job", shown or doubtful, "a job name or path"))
    return SlurmJobs(tuple(jobs), tuple(notes), doubtful=frozenset(shown | doubtful))


def _numeric_id(record: str) -> str | None:
    first = record.split(None, 1)[0] if record.strip() else ""
    return first.removeprefix("JobId=") or None


def _parse_nodes(text: str) -> SlurmNodes | ParseFailure:
    return parse_scontrol_nodes(text)


def _parse_jobs(text: str) -> SlurmJobs | ParseFailure:
    return parse_scontrol_jobs(text)


PARSERS: dict[str, ParserInfo] = {
    _NODE_KIND: ParserInfo(_NODE_KIND, "scontrol [-d] [-o] show node", _parse_nodes),
    _JOB_KIND: ParserInfo(_JOB_KIND, "scontrol [-d] [-o] show job", _parse_jobs),
}
