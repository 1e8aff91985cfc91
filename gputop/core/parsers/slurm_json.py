"""Slurm's JSON: ``squeue --json`` / ``scontrol show job --json`` / slurmrestd jobs, and ``sinfo --json`` /
``scontrol show node --json`` / slurmrestd nodes, in both schema generations.

22.05 (openapi v0.0.38) prints plain numbers, a job's ``job_state`` and a node's ``state`` as one string,
and node flags (DRAIN, ...) in ``state_flags``; its ``sinfo --json`` lists nodes. 23.02 and later
(data_parser v0.0.39+) wrap numbers as ``{"set", "infinite", "number"}``, print states as lists of words
(["IDLE", "DRAIN"]), and ``sinfo --json`` gives ``sinfo: [...]`` entries with the node names nested. Both are
read by the same code through ``json_number``/``parse_node_state``; unknown keys are ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gputop.core.models import SlurmJob, SlurmNode
from gputop.core.parsers.common import BoundedNotes, ParseFailure, ParserInfo
from gputop.core.parsers.json_items import Counted, JsonError, decode_object
from gputop.core.parsers.slurm_clusters import cluster_name, qualified
from gputop.core.parsers.slurm_common import (
    SlurmJobs,
    SlurmNodes,
    excerpt,
    expand_nodelist,
    job_gpu_request,
    job_id_text,
    json_count,
    json_minutes,
    json_text,
    json_time,
    merge_nodes,
    node_gpus,
    parse_gpu_indices,
    parse_job_state,
    parse_node_state,
    pending_reason,
)

SQUEUE_JSON_ARGV = ("squeue", "--json")
SINFO_JSON_ARGV = ("sinfo", "--json")

_JOB_KIND = "squeue-json"
_NODE_KIND = "sinfo-json"


def _decode(
    kind: str, text: str, command: str, lists: Mapping[str, Callable[[object], None]]
) -> tuple[Mapping[str, object], tuple[str, ...]] | ParseFailure:
    """The decoded document (each list in ``lists`` handed element by element to its callback, see
    `gputop.core.parsers.json_items`) and notes about it, or why it could not be read."""
    # No strip() or splitlines() of the whole: a queue's document can be 100 MB, and each would copy it
    # while holding up every other thread.
    begins = len(text) - len(text.lstrip()) if text[:1].isspace() else 0
    if begins == len(text):
        return ParseFailure(kind, f"empty output (expected the JSON document {command} prints)")
    stripped = text if begins == 0 else text[begins:]
    first = stripped[:1000].splitlines()[0]
    start = 0
    if not stripped.startswith("{"):
        at = stripped.find("\n{")
        if at >= 0:
            start = at + 1  # a warning line printed before the document
    try:
        doc = decode_object(stripped, start, lists)
    except JsonError as err:
        if "unrecognized option" in first or "invalid option" in first:
            reason = (
                f"this {command.split()[0]} has no --json (Slurm before 21.08?): read its text output instead"
            )
        elif not stripped.startswith(("{", "[")) and start == 0:
            reason = f"not JSON; the command printed: {first.strip()[:200]}"
        else:
            reason = f"not valid JSON ({err}); was the output cut short?"
        return ParseFailure(kind, reason, excerpt(stripped[:100_000]))
    skipped = (f"skipped text before the JSON: {first.strip()[:200]}",) if start else ()
    return doc, skipped


def _messages(doc: Mapping[str, object], key: str) -> list[str]:
    found: list[str] = []
    entries = doc.get(key)
    if not isinstance(entries, list):
        return found
    for entry in entries:
        if isinstance(entry, str) and entry.strip():
            found.append(entry.strip())
        elif isinstance(entry, Mapping):
            words = json_text(entry.get("description")) or json_text(entry.get("error")) or ""
            number = entry.get("error_number", entry.get("errno"))
            if isinstance(number, int) and number:
                words = f"{words} (error {number})".strip()
            source = json_text(entry.get("source"))
            if source and words:
                words = f"{words} [{source}]"
            if words:
                found.append(words)
    return found


def _version(doc: Mapping[str, object]) -> str | None:
    meta = doc.get("meta")
    if not isinstance(meta, Mapping):
        return None
    for key in ("slurm", "Slurm"):
        slurm = meta.get(key)
        if isinstance(slurm, Mapping):
            release = json_text(slurm.get("release"))
            if release:
                return release
            version = slurm.get("version")
            if isinstance(version, Mapping):
                parts = [
                    str(version.get(k)) for k in ("major", "minor", "micro") if version.get(k) is not None
                ]
                if parts:
                    return ".".join(parts)
    return None


def _notes_of(doc: Mapping[str, object], earlier: Sequence[str]) -> list[str]:
    notes = list(earlier)
    notes += [f"Slurm warned: {w}" for w in _messages(doc, "warnings")]
    notes += [f"Slurm error: {e}" for e in _messages(doc, "errors")]
    return notes


def _words(value: object) -> list[str]:
    if isinstance(value, str):
        return [value] if value.strip() else []
    if isinstance(value, Sequence):
        return [w for w in value if isinstance(w, str) and w.strip()]
    return []


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _uid(value: object) -> str:
    uid = json_count(value)
    return "" if uid is None else str(uid)


# --- jobs ------------------------------------------------------------------------------------------------


def _allocation_names(job: Mapping[str, object]) -> list[str]:
    """Node names in the order Slurm lists the job's allocation (the order of gres_detail)."""
    resources = job.get("job_resources")
    if not isinstance(resources, Mapping):
        return []
    allocation = resources.get("allocated_nodes")  # v0.0.38/39: [{"nodename": ...}]
    nodes = resources.get("nodes")
    if isinstance(nodes, Mapping):  # v0.0.40+: {"list": ..., "allocation": [{"name": ...}]}
        allocation = nodes.get("allocation")
    names: list[str] = []
    if isinstance(allocation, list):
        for entry in allocation:
            if isinstance(entry, Mapping):
                name = json_text(entry.get("nodename")) or json_text(entry.get("name"))
                if name:
                    names.append(name)
    return names


def _job(job: Mapping[str, object], notes: list[str]) -> SlurmJob | None:
    raw_id = job.get("job_id")
    number = json_count(raw_id)
    if number is None:
        notes.append(f"a job without a readable job_id ({raw_id!r}) skipped")
        return None
    array_task = job.get("array_task_id")
    task = json_count(array_task)
    job_id = job_id_text(
        number,
        array_job_id=json_count(job.get("array_job_id")),
        array_task=task if task is not None else json_text(job.get("array_task_string")),
        het_job_id=json_count(job.get("het_job_id")),
        het_job_offset=json_count(job.get("het_job_offset")),
    )
    state = parse_job_state(_words(job.get("job_state")))
    if state.note:
        notes.append(f"job {job_id}: {state.note}")
    nodelist, nodes, note = expand_nodelist(_str(job.get("nodes")))
    if note:
        notes.append(f"job {job_id}: {note}")
    gpus_by_node: dict[str, tuple[int, ...]] = {}
    details = _words(job.get("gres_detail")) if isinstance(job.get("gres_detail"), list) else []
    if details:
        order = _allocation_names(job) or list(nodes)
        if len(order) != len(details):
            notes.append(
                f"job {job_id}: {len(details)} gres_detail entries for {len(order)} nodes; matched in order"
            )
        for name, detail in zip(order, details, strict=False):
            indices = parse_gpu_indices(detail)
            if indices:
                gpus_by_node[name] = indices
    started = json_time(job.get("start_time")) if not state.pending else None
    ended = json_time(job.get("end_time"))
    finished = state.state not in ("PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING")
    elapsed = ended - started if finished and started is not None and ended is not None else None
    reason = json_text(job.get("state_description")) or json_text(job.get("state_reason"))
    return SlurmJob(
        job_id=job_id,
        name=json_text(job.get("name")) or "",
        user=json_text(job.get("user_name")) or _uid(job.get("user_id")),
        partition=json_text(job.get("partition")) or "",
        state=state.state,
        gpus_by_node=gpus_by_node,
        start_time_s=started,
        time_limit_s=json_minutes(job.get("time_limit")),
        pending_reason=pending_reason(state.state, reason),
        nodelist=nodelist,
        nodes=nodes,
        gpus_requested=job_gpu_request(
            alloc_tres=_str(job.get("tres_alloc_str")),
            per_job=_str(job.get("tres_per_job")),
            per_node=_str(job.get("tres_per_node")),
            per_task=_str(job.get("tres_per_task")),
            node_count=json_count(job.get("node_count")) or (len(nodes) or None),
            task_count=json_count(job.get("tasks")),
            req_tres=_str(job.get("tres_req_str")),
        ),
        submit_time_s=json_time(job.get("submit_time")),
        elapsed_s=elapsed if elapsed is None or elapsed >= 0 else None,
        state_flags=state.flags,
        cluster=cluster_name(job.get("cluster")),
    )


class _Taken:
    """Entries of a listing turned into models as they are decoded, and notes on those that were not."""

    def __init__(self, convert: Callable[[Mapping[str, object], list[str]], object], what: str) -> None:
        self.convert = convert
        self.what = what
        self.found: list[Any] = []
        self.notes = BoundedNotes()

    def __call__(self, entry: object) -> None:
        if not isinstance(entry, Mapping):
            self.notes.append(f"a {self.what} entry that is not an object skipped: {str(entry)[:80]!r}")
            return
        made = self.convert(entry, self.notes)
        if isinstance(made, list):
            self.found.extend(made)
        elif made is not None:
            self.found.append(made)

    def take_all(self, entries: object) -> bool:
        """Every entry of an already decoded list; False when it is not a list."""
        if isinstance(entries, Counted):
            return True
        if not isinstance(entries, list):
            return False
        for entry in entries:
            self(entry)
        return True


def jobs_from_json(doc: Mapping[str, object], notes_so_far: Sequence[str] = ()) -> SlurmJobs | ParseFailure:
    """Jobs from an already decoded document (slurmrestd answers arrive as dicts)."""
    taken = _Taken(_job, "jobs")
    listed = taken.take_all(doc.get("jobs"))
    return _jobs_of(doc, taken, listed, notes_so_far)


def _jobs_of(
    doc: Mapping[str, object], taken: _Taken, listed: bool, notes_so_far: Sequence[str]
) -> SlurmJobs | ParseFailure:
    notes = _notes_of(doc, notes_so_far)
    errors = _messages(doc, "errors")
    if errors and not taken.found:  # an empty or missing list next to an error is the error, not "no jobs"
        return ParseFailure(_JOB_KIND, "Slurm answered with an error: " + "; ".join(errors))
    if not listed:
        if "nodes" in doc or "sinfo" in doc:
            return ParseFailure(_JOB_KIND, "this is a node listing, not jobs: read it as sinfo-json")
        keys = ", ".join(sorted(str(k) for k in doc)[:8]) or "none"
        return ParseFailure(_JOB_KIND, f"no 'jobs' list in the document (top-level keys: {keys})")
    return SlurmJobs(tuple(qualified(taken.found)), (*notes, *taken.notes.done()), _version(doc))


def parse_squeue_json(text: str) -> SlurmJobs | ParseFailure:
    taken = _Taken(_job, "jobs")
    loaded = _decode(_JOB_KIND, text, "squeue --json", {"jobs": taken})
    if isinstance(loaded, ParseFailure):
        return loaded
    doc, skipped = loaded
    return _jobs_of(doc, taken, taken.take_all(doc.get("jobs")), skipped)


# --- nodes -----------------------------------------------------------------------------------------------


def _node(entry: Mapping[str, object], notes: list[str]) -> SlurmNode | None:
    name = json_text(entry.get("name"))
    if name is None:
        notes.append("a node without a name skipped")
        return None
    words = _words(entry.get("state")) + _words(entry.get("state_flags"))
    state = parse_node_state(words)
    if state.not_understood:
        notes.append(f"{name}: state words {', '.join(state.not_understood)} not understood; kept as flags")
    configured, allocated, indices = node_gpus(
        _str(entry.get("gres")),
        _str(entry.get("gres_used")),
        _str(entry.get("tres")),
        _str(entry.get("tres_used")),
    )
    partitions = tuple(p.strip() for p in _words(entry.get("partitions")))
    return SlurmNode(
        name=name,
        base_state=state.base,
        flags=state.flags,
        reason=json_text(entry.get("reason")),
        reason_user=json_text(entry.get("reason_set_by_user")),
        reason_time_s=json_time(entry.get("reason_changed_at")),
        partitions=partitions,
        gpus_configured=configured,
        gpus_allocated=allocated,
        gpu_indices_in_use=indices,
        state_text="+".join(w.strip().upper() for w in words) or None,
    )


def _sinfo_entry(entry: Mapping[str, object], notes: list[str]) -> list[SlurmNode]:
    """One ``sinfo: [...]`` entry (23.02+): a group of nodes sharing a state, partition and reason."""
    listing = entry.get("nodes")
    raw_names: list[str] = []
    if isinstance(listing, Mapping):
        raw_names = _words(listing.get("nodes")) or _words(listing.get("hostnames"))
    else:
        raw_names = _words(listing)
    names: list[str] = []
    for raw in raw_names:
        _, expanded, note = expand_nodelist(raw)
        if note:
            notes.append(note)
        names.extend(expanded)
    if not names:
        notes.append("a sinfo entry without node names skipped")
        return []
    node_part = entry.get("node")
    words = _words(node_part.get("state")) if isinstance(node_part, Mapping) else []
    state = parse_node_state(words)
    if state.not_understood:
        notes.append(
            f"{names[0]}: state words {', '.join(state.not_understood)} not understood; kept as flags"
        )
    part = entry.get("partition")
    partition = json_text(part.get("name")) if isinstance(part, Mapping) else json_text(part)
    reason = entry.get("reason")
    if isinstance(reason, Mapping):
        text = json_text(reason.get("description"))
        user = json_text(reason.get("user"))
        when = json_time(reason.get("time"))
    else:
        text, user, when = json_text(reason), None, None
    gres = entry.get("gres")
    total = _str(gres.get("total")) if isinstance(gres, Mapping) else _str(gres)
    used = _str(gres.get("used")) if isinstance(gres, Mapping) and len(names) == 1 else None
    configured, allocated, indices = node_gpus(total, used, None, None)
    return [
        SlurmNode(
            name=name,
            base_state=state.base,
            flags=state.flags,
            reason=text,
            reason_user=user,
            reason_time_s=when,
            partitions=(partition,) if partition else (),
            gpus_configured=configured,
            gpus_allocated=allocated,
            gpu_indices_in_use=indices,
            state_text="+".join(w.strip().upper() for w in words) or None,
        )
        for name in names
    ]


def nodes_from_json(doc: Mapping[str, object], notes_so_far: Sequence[str] = ()) -> SlurmNodes | ParseFailure:
    """Nodes from an already decoded document: ``nodes: [...]`` or sinfo's ``sinfo: [...]`` entries."""
    nodes, groups = _Taken(_node, "nodes"), _Taken(_sinfo_entry, "sinfo")
    has_nodes, has_groups = nodes.take_all(doc.get("nodes")), groups.take_all(doc.get("sinfo"))
    return _nodes_of(doc, has_nodes, has_groups, nodes, groups, notes_so_far)


def _nodes_of(
    doc: Mapping[str, object],
    has_nodes: bool,
    has_groups: bool,
    nodes: _Taken,
    groups: _Taken,
    notes_so_far: Sequence[str],
) -> SlurmNodes | ParseFailure:
    notes = _notes_of(doc, notes_so_far)
    errors = _messages(doc, "errors")
    if errors and not nodes.found and not groups.found:
        return ParseFailure(_NODE_KIND, "Slurm answered with an error: " + "; ".join(errors))
    if not has_nodes and not has_groups:
        if "jobs" in doc:
            return ParseFailure(_NODE_KIND, "this is a job listing, not nodes: read it as squeue-json")
        keys = ", ".join(sorted(str(k) for k in doc)[:8]) or "none"
        return ParseFailure(
            _NODE_KIND, f"no 'nodes' or 'sinfo' list in the document (top-level keys: {keys})"
        )
    taken = nodes if has_nodes else groups
    notes += taken.notes.done()
    return SlurmNodes(merge_nodes(taken.found, notes), tuple(notes), _version(doc))


def parse_sinfo_json(text: str) -> SlurmNodes | ParseFailure:
    nodes, groups = _Taken(_node, "nodes"), _Taken(_sinfo_entry, "sinfo")
    loaded = _decode(_NODE_KIND, text, "sinfo --json", {"nodes": nodes, "sinfo": groups})
    if isinstance(loaded, ParseFailure):
        return loaded
    doc, skipped = loaded
    has_nodes = nodes.take_all(doc.get("nodes"))
    has_groups = groups.take_all(doc.get("sinfo"))
    return _nodes_of(doc, has_nodes, has_groups, nodes, groups, skipped)


PARSERS: dict[str, ParserInfo] = {
    _JOB_KIND: ParserInfo(
        _JOB_KIND, "squeue --json, scontrol show job --json, slurmrestd .../jobs", parse_squeue_json
    ),
    _NODE_KIND: ParserInfo(
        _NODE_KIND, "sinfo --json, scontrol show node --json, slurmrestd .../nodes", parse_sinfo_json
    ),
}
