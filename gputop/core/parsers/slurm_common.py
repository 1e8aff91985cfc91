"""What the Slurm parsers share: numbers from both JSON generations, node and job states, GRES/TRES strings,
times, node lists, and the values the parsers return.

Times. JSON outputs carry epoch seconds. Text outputs (scontrol, sinfo, squeue) print the controller's local
time with no zone ("2026-12-02T17:06:39", or whatever ``SLURM_TIME_FORMAT`` asks for): the core has no
clock and no zone database, so such a time is read as UTC unless the caller passes ``utc_offset_s`` (the
offset of the zone the command ran in, e.g. +3600 for CET). Run the text commands with
``SLURM_TIME_FORMAT=standard`` (see ``TEXT_ENV``) so the format is the one read here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import MappingProxyType

from gputop.core.models import SlurmBaseState, SlurmJob, SlurmNode
from gputop.core.nodeset import expand_nodeset

# The environment the text commands should run with, so their timestamps read as "2026-12-02T17:06:39".
TEXT_ENV: Mapping[str, str] = MappingProxyType({"SLURM_TIME_FORMAT": "standard"})

# Words Slurm prints for "no value", compared case-insensitively.
NONE_WORDS = frozenset({"", "(null)", "null", "n/a", "none", "unknown", "not_set", "none assigned", "(none)"})

# Slurm's NO_VAL / INFINITE sentinels (32-bit), which the 22.05 JSON sometimes prints as plain numbers.
_NO_VAL32 = 0xFFFFFFFE


@dataclass(frozen=True, slots=True)
class SlurmNodes:
    """Nodes as one Slurm output describes them, in the order it printed them."""

    nodes: tuple[SlurmNode, ...] = ()
    notes: tuple[str, ...] = ()  # what was odd but not fatal, said so a person can act on it
    slurm_version: str | None = None
    # Nodes whose record in a text listing cannot be trusted: listed twice, or cut or lengthened by a line
    # break or Slurm's own key words in a free-text field (a drain reason). See slurm_checked.
    doubtful: frozenset[str] = frozenset()

    def by_name(self) -> dict[str, SlurmNode]:
        return {node.name: node for node in self.nodes}


@dataclass(frozen=True, slots=True)
class SlurmJobs:
    """Jobs as one Slurm output describes them, in the order it printed them."""

    jobs: tuple[SlurmJob, ...] = ()
    notes: tuple[str, ...] = ()
    slurm_version: str | None = None
    # Jobs whose record in a text listing cannot be trusted (a job name or path holding a line break or
    # Slurm's key words): see slurm_checked.
    doubtful: frozenset[str] = frozenset()


def is_none_word(text: str | None) -> bool:
    return text is None or text.strip().lower() in NONE_WORDS


def text_or_none(text: object) -> str | None:
    """A stripped string, or None for a non-string or one of Slurm's "no value" words."""
    if not isinstance(text, str) or is_none_word(text):
        return None
    return text.strip()


# --- numbers from JSON -----------------------------------------------------------------------------------


def json_number(value: object) -> float | None:
    """A number from either JSON generation.

    22.05 (openapi v0.0.38) prints plain numbers (null when unset); 23.02+ (data_parser v0.0.39 and later)
    prints ``{"set": bool, "infinite": bool, "number": N}``. Unset gives None, infinite gives ``math.inf``,
    and anything that is not a number gives None.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, Mapping):
        if value.get("infinite") is True:
            return math.inf
        if value.get("set") is False:
            return None
        return json_number(value.get("number"))
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def json_count(value: object) -> int | None:
    """A non-negative whole number (a count or an id); None for unset, infinite or Slurm's NO_VAL."""
    number = json_number(value)
    if number is None or not math.isfinite(number) or number < 0 or number >= _NO_VAL32:
        return None
    return int(number)


def json_time(value: object) -> float | None:
    """Epoch seconds; None for unset, infinite or 0 (Slurm's "never")."""
    number = json_number(value)
    if number is None or not math.isfinite(number) or number <= 0 or number >= _NO_VAL32:
        return None
    return number


def json_minutes(value: object) -> float | None:
    """A time limit in minutes as seconds; None for UNLIMITED (infinite, null or NO_VAL) and unset."""
    number = json_count(value)
    return None if number is None else number * 60.0


def json_text(value: object) -> str | None:
    return text_or_none(value)


# --- times in text ---------------------------------------------------------------------------------------

_ISO_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d)(?::(\d\d))?")
_DURATION = re.compile(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)")
# Time limits that mean "no number": UNLIMITED and the words Slurm prints when it has none.
_NO_DURATION = frozenset(
    {"unlimited", "infinite", "invalid", "partition_limit", "not_set", "n/a", "none", ""}
)


def parse_slurm_time(text: str | None, utc_offset_s: float = 0.0) -> float | None:
    """ "2026-12-02T17:06:39" as epoch seconds, read as UTC shifted by ``utc_offset_s``; None for
    "Unknown", "None", "N/A" and anything that is not an ISO time."""
    if text is None:
        return None
    match = _ISO_TIME.fullmatch(text.strip())
    if not match:
        return None
    year, month, day, hour, minute, second = (int(g) if g else 0 for g in match.groups())
    try:
        moment = datetime(year, month, day, hour, minute, second, tzinfo=UTC)
    except ValueError:
        return None
    return moment.timestamp() - utc_offset_s


def parse_duration(text: str | None) -> float | None:
    """Slurm's ``[days-][hours:]minutes:seconds`` ("1-00:00:00", "30:00", "0:02") in seconds; None for
    UNLIMITED, INVALID, N/A and anything else."""
    if text is None or text.strip().lower() in _NO_DURATION:
        return None
    raw = text.strip()
    match = _DURATION.fullmatch(raw)
    if not match:
        if raw.isdigit():  # a bare number of minutes, as sbatch --time takes it
            return int(raw) * 60.0
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def is_known_no_duration(text: str | None) -> bool:
    return text is None or text.strip().lower() in _NO_DURATION


# --- node lists ------------------------------------------------------------------------------------------


def expand_nodelist(text: str | None) -> tuple[str, tuple[str, ...], str | None]:
    """(folded text as printed, names, a note if the text could not be expanded)."""
    folded = text_or_none(text)
    if folded is None or (folded.startswith("(") and folded.endswith(")")):
        return "", (), None
    try:
        return folded, expand_nodeset(folded), None
    except ValueError as err:
        return folded, (), f"node list {folded!r} not expanded: {err}"


# --- node states -----------------------------------------------------------------------------------------

# Suffixes sinfo and scontrol append to a state word.
STATE_SUFFIXES: Mapping[str, str] = {
    "*": "NOT_RESPONDING",
    "~": "POWERED_DOWN",
    "#": "POWERING_UP",
    "%": "POWERING_DOWN",
    "!": "POWER_DOWN",  # power down pending
    "$": "MAINT",  # in a maintenance reservation
    "@": "REBOOT_REQUESTED",
    "^": "REBOOT_ISSUED",
    "-": "PLANNED",  # the backfill scheduler has planned a job here
}

_BASES: Mapping[str, SlurmBaseState] = {
    "IDLE": SlurmBaseState.IDLE,
    "MIX": SlurmBaseState.MIXED,
    "MIXED": SlurmBaseState.MIXED,
    "ALLOC": SlurmBaseState.ALLOCATED,
    "ALLOCATED": SlurmBaseState.ALLOCATED,
    "DOWN": SlurmBaseState.DOWN,
    "FUTR": SlurmBaseState.FUTURE,
    "FUTURE": SlurmBaseState.FUTURE,
    "UNK": SlurmBaseState.UNKNOWN,
    "UNKNOWN": SlurmBaseState.UNKNOWN,
}

_I, _A, _U = SlurmBaseState.IDLE, SlurmBaseState.ALLOCATED, SlurmBaseState.UNKNOWN
# Words that name a flag, with the base state sinfo's word stands for when no base word is printed next
# to it: sinfo says "drng" where scontrol says "MIXED+DRAIN" or "ALLOCATED+DRAIN" (Slurm itself reads
# DRAINING back as ALLOCATED+DRAIN), "drain" for IDLE+DRAIN, "comp" for a node whose job is completing.
_FLAG_WORDS: Mapping[str, tuple[str, SlurmBaseState]] = {
    "DRAIN": ("DRAIN", _I),
    "DRAINED": ("DRAIN", _I),
    "DRNG": ("DRAIN", _A),
    "DRAINING": ("DRAIN", _A),
    "COMP": ("COMPLETING", _A),
    "COMPLETING": ("COMPLETING", _A),
    "FAIL": ("FAIL", _I),
    "FAILG": ("FAIL", _A),
    "FAILING": ("FAIL", _A),
    "MAINT": ("MAINT", _I),
    "RESV": ("RESERVED", _I),
    "RESERVED": ("RESERVED", _I),
    "PLND": ("PLANNED", _I),
    "PLANNED": ("PLANNED", _I),
    "INVAL": ("INVALID_REG", _U),
    "INVALID": ("INVALID_REG", _U),
    "INVALID_REG": ("INVALID_REG", _U),
    "POW_DN": ("POWERED_DOWN", _I),
    "POWERED_DOWN": ("POWERED_DOWN", _I),
    "POWER_SAVE": ("POWERED_DOWN", _I),
    "POW_UP": ("POWERING_UP", _I),
    "POWER_UP": ("POWERING_UP", _I),
    "POWERING_UP": ("POWERING_UP", _I),
    "POWERING_DOWN": ("POWERING_DOWN", _I),
    "POWER_DOWN": ("POWER_DOWN", _I),
    "POWER_DRAIN": ("POWER_DRAIN", _I),
    "NPC": ("PERFCTRS", _A),
    "PERFCTRS": ("PERFCTRS", _A),
    "NO_RESPOND": ("NOT_RESPONDING", _U),
    "NOT_RESPONDING": ("NOT_RESPONDING", _U),
    "BOOT": ("REBOOT_ISSUED", _U),
    "REBOOT": ("REBOOT_REQUESTED", _U),
    "REBOOT_REQUESTED": ("REBOOT_REQUESTED", _U),
    "REBOOT_ISSUED": ("REBOOT_ISSUED", _U),
    "BLOCKED": ("BLOCKED", _U),
    "CLOUD": ("CLOUD", _U),
    "DYNAMIC_FUTURE": ("DYNAMIC_FUTURE", _U),
    "DYNAMIC_NORM": ("DYNAMIC_NORM", _U),
    "RESUME": ("RESUME", _U),
    "UNDRAIN": ("UNDRAIN", _U),
}


@dataclass(frozen=True, slots=True)
class NodeState:
    base: SlurmBaseState
    flags: frozenset[str]
    not_understood: tuple[str, ...] = ()  # words kept as flags as they were, upper-cased


def parse_node_state(state: str | Sequence[object]) -> NodeState:
    """A node state in any of Slurm's spellings: scontrol's "MIXED+DRAIN", "IDLE*", "DOWN*+DRAIN"; sinfo's
    "drng", "idle~", "down*", "mix-"; JSON's "mixed" with state_flags, or ["IDLE", "DRAIN"].

    Never fails: a word it does not know is kept as a flag (and listed in ``not_understood``); with no base
    word at all the base is UNKNOWN.
    """
    words = state.split("+") if isinstance(state, str) else [w for w in state if isinstance(w, str)]
    base: SlurmBaseState | None = None
    implied: SlurmBaseState | None = None
    flags: set[str] = set()
    odd: list[str] = []
    for raw in words:
        word = raw.strip()
        while word and word[-1] in STATE_SUFFIXES:
            flags.add(STATE_SUFFIXES[word[-1]])
            word = word[:-1]
        word = word.upper()
        if not word:
            continue
        if word in _BASES:
            base = base or _BASES[word]
        elif word in _FLAG_WORDS:
            flag, implies = _FLAG_WORDS[word]
            flags.add(flag)
            if implied is None or implied is SlurmBaseState.UNKNOWN:
                implied = implies
        else:
            flags.add(word)
            odd.append(word)
    return NodeState(base or implied or SlurmBaseState.UNKNOWN, frozenset(flags), tuple(odd))


# --- job states ------------------------------------------------------------------------------------------

JOB_BASE_STATES = (
    "PENDING",
    "RUNNING",
    "SUSPENDED",
    "COMPLETED",
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
    "OUT_OF_MEMORY",
)
# Flags squeue prints instead of the base state, in Slurm's order of precedence (job_state_string).
JOB_SHOWN_FLAGS = (
    "COMPLETING",
    "STAGE_OUT",
    "CONFIGURING",
    "RESIZING",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "SPECIAL_EXIT",
    "STOPPED",
    "REVOKED",
    "RESV_DEL_HOLD",
    "SIGNALING",
)
JOB_COMPACT_STATES: Mapping[str, str] = {
    "PD": "PENDING",
    "R": "RUNNING",
    "S": "SUSPENDED",
    "CD": "COMPLETED",
    "CA": "CANCELLED",
    "F": "FAILED",
    "TO": "TIMEOUT",
    "NF": "NODE_FAIL",
    "PR": "PREEMPTED",
    "BF": "BOOT_FAIL",
    "DL": "DEADLINE",
    "OOM": "OUT_OF_MEMORY",
    "CG": "COMPLETING",
    "CF": "CONFIGURING",
    "RS": "RESIZING",
    "RQ": "REQUEUED",
    "RF": "REQUEUE_FED",
    "RH": "REQUEUE_HOLD",
    "SE": "SPECIAL_EXIT",
    "ST": "STOPPED",
    "RV": "REVOKED",
    "RD": "RESV_DEL_HOLD",
    "SI": "SIGNALING",
    "SO": "STAGE_OUT",
}
_JOB_WORDS = frozenset(JOB_BASE_STATES) | frozenset(JOB_SHOWN_FLAGS)


@dataclass(frozen=True, slots=True)
class JobState:
    state: str  # what squeue's %T would print: RUNNING, PENDING, COMPLETING, ...
    flags: frozenset[str]
    note: str | None = None
    base: str | None = None  # the base state under a shown flag (PENDING under REQUEUED), where printed

    @property
    def pending(self) -> bool:
        return "PENDING" in (self.state, self.base)


def parse_job_state(value: str | Sequence[object]) -> JobState:
    """ "RUNNING", "R", "PD", ["RUNNING", "COMPLETING"] or a word clipped by a narrow column ("COMPLETIN")."""
    words = [value] if isinstance(value, str) else [w for w in value if isinstance(w, str)]
    base: str | None = None
    flags: set[str] = set()
    note = None
    for raw in words:
        word = raw.strip().upper()
        if not word:
            continue
        word = JOB_COMPACT_STATES.get(word, word)
        if word not in _JOB_WORDS and len(word) >= 4:
            # squeue clips long names to the column width: take a word only one state starts with
            candidates = [known for known in _JOB_WORDS if known.startswith(word)]
            if len(candidates) == 1:
                note = f"job state {raw.strip()!r} read as {candidates[0]} (clipped by the column width)"
                word = candidates[0]
        if word in JOB_BASE_STATES and base is None:
            base = word
        else:
            flags.add(word)
    shown = next((flag for flag in JOB_SHOWN_FLAGS if flag in flags), None)
    state = shown or base or (sorted(flags)[0] if flags else "UNKNOWN")
    if not (shown or base) and words:
        note = note or f"job state {words!r} not understood"
    return JobState(state, frozenset(flags), note, base)


# --- GRES and TRES ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GresItem:
    """One item of a GRES string such as ``gpu:h100:4(IDX:0-3)``."""

    name: str  # gpu, shard, nic, ...
    type: str | None  # h100, tesla_t4, a100_3g.20gb
    count: int | None
    indices: tuple[int, ...] | None  # the IDX list; () for IDX:N/A; None when none was printed


_COUNT = re.compile(r"(\d+)([KMGTP]?)", re.IGNORECASE)
_COUNT_SCALE = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
_PARENS = re.compile(r"\(([^()]*)\)")
# Far beyond any node's GPUs: a range wider than this is garbage, not a list to build.
_MAX_INDEX = 1 << 16


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside parentheses: "gpu:2(IDX:0,2),nic:1" -> ["gpu:2(IDX:0,2)", "nic:1"]."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        elif char == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


def _count(text: str) -> int | None:
    match = _COUNT.fullmatch(text.strip())
    if not match:
        return None
    return int(match.group(1)) * _COUNT_SCALE[match.group(2).upper()]


def parse_index_list(text: str) -> tuple[int, ...] | None:
    """ "0-3,5" -> (0, 1, 2, 3, 5); "N/A" or "" -> (); None when it is not an index list."""
    raw = text.strip()
    if raw.upper().startswith("IDX:"):
        raw = raw[4:].strip()
    if raw.lower() in ("n/a", "", "none", "(null)"):
        return ()
    found: set[int] = set()
    for part in raw.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not match:
            return None
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) else low
        if high < low or high >= _MAX_INDEX:
            return None
        found.update(range(low, high + 1))
    return tuple(sorted(found))


def parse_gres(text: str | None) -> tuple[GresItem, ...]:
    """Every item of a GRES or TRES-per-X string, in any spelling Slurm prints:
    ``gpu:h100:8(S:0-1)``, ``gpu:h100:4(IDX:0-3),gpu:a100:1(IDX:5)``, ``gres:gpu:4``, ``gres/gpu:h100:2``,
    ``gres/gpu=2``, ``gpu(IDX:0-1)``; ``(null)`` and ``N/A`` give ()."""
    if text is None or is_none_word(text):
        return ()
    items: list[GresItem] = []
    for raw in split_top_level(text):
        head = raw.split("(", 1)[0].strip()
        for prefix in ("gres:", "gres/"):
            if head.lower().startswith(prefix):
                head = head[len(prefix) :]
        count: int | None = None
        if "=" in head:  # TRES spelling: gpu=2, gpu:h100=2
            head, _, number = head.partition("=")
            count = _count(number)
        parts = [p for p in head.split(":") if p and p.lower() != "no_consume"]
        if not parts:
            continue
        name = parts[0].strip()
        rest = parts[1:]
        if count is None and rest and _count(rest[-1]) is not None:
            count = _count(rest[-1])
            rest = rest[:-1]
        elif count is None:
            count = 1  # a GRES named without a count means one
        gres_type = ":".join(rest) or None
        indices: tuple[int, ...] | None = None
        for group in _PARENS.findall(raw):
            if group.strip().upper().startswith("IDX:"):
                found = parse_index_list(group)
                if found is not None:
                    indices = tuple(sorted({*(indices or ()), *found}))
        items.append(GresItem(name, gres_type, count, indices))
    return tuple(items)


def parse_gpu_indices(text: str | None) -> tuple[int, ...] | None:
    """The GPU indices in ``IDX:0-3,5``, ``IDX:N/A`` (no GPUs: ()), ``gpu:h100:2(IDX:0,2)`` or
    ``gpu:2(IDX:0-1),gpu:a100:1(IDX:3)``; None when the text names no GPU indices at all."""
    if text is None:
        return None
    raw = text.strip()
    if raw.upper().startswith("IDX:") or re.fullmatch(r"[\d,\s-]+", raw):
        return parse_index_list(raw)
    found: tuple[int, ...] | None = None
    for item in parse_gres(raw):
        if item.name == "gpu" and item.indices is not None:
            found = tuple(sorted({*(found or ()), *item.indices}))
    return found


def gres_gpu_count(text: str | None) -> int | None:
    """GPUs in a GRES string (all types added up); 0 for "(null)" or no gpu item; None for no text."""
    if text is None:
        return None
    return sum(item.count or 0 for item in parse_gres(text) if item.name == "gpu")


def gres_has_gpu(text: str | None) -> bool:
    return any(item.name == "gpu" for item in parse_gres(text))


def parse_tres(text: str | None) -> dict[str, str]:
    """ "cpu=64,mem=500G,gres/gpu=8" -> {"cpu": "64", "mem": "500G", "gres/gpu": "8"}."""
    if text is None or is_none_word(text):
        return {}
    pairs: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if sep and key.strip():
            pairs[key.strip()] = value.strip()
    return pairs


def tres_gpu_count(text: str | None) -> int | None:
    """GPUs in a TRES string: ``gres/gpu=N``, else the typed ``gres/gpu:h100=N`` added up; None if absent."""
    tres = parse_tres(text)
    if "gres/gpu" in tres:
        return _count(tres["gres/gpu"])
    typed = [_count(v) for k, v in tres.items() if k.startswith("gres/gpu:")]
    if not typed:
        return None
    return sum(n or 0 for n in typed)


def node_gpus(
    gres: str | None, gres_used: str | None, cfg_tres: str | None, alloc_tres: str | None
) -> tuple[int | None, int | None, tuple[int, ...] | None]:
    """(configured, allocated, indices in use) for a node from what its output printed (None: absent)."""
    tracked = tres_gpu_count(cfg_tres)
    if gres is not None and gres_has_gpu(gres):
        configured: int | None = gres_gpu_count(gres)
    elif tracked is not None:
        configured = tracked
    elif gres is not None:
        configured = 0
    else:
        configured = None
    indices = parse_gpu_indices(gres_used) if gres_used is not None else None
    allocated: int | None = None
    if gres_used is not None and (gres_has_gpu(gres_used) or not configured):
        allocated = gres_gpu_count(gres_used)
        if indices and (allocated or 0) < len(indices):
            allocated = len(indices)
    elif tracked is not None:
        allocated = tres_gpu_count(alloc_tres) or 0
    return configured, allocated, indices


def job_gpu_request(
    *,
    alloc_tres: str | None = None,
    job_gres: str | None = None,
    per_job: str | None = None,
    per_node: str | None = None,
    per_task: str | None = None,
    node_count: int | None = None,
    task_count: int | None = None,
    req_tres: str | None = None,
) -> int | None:
    """GPUs for the whole job, from the first of these that names GPUs: the allocated TRES, scontrol's
    JOB_GRES, --gpus (per job), per node times nodes, per task times tasks, the requested TRES."""
    allocated = tres_gpu_count(alloc_tres)
    if allocated is not None:
        return allocated
    if job_gres is not None and gres_has_gpu(job_gres):
        return gres_gpu_count(job_gres)
    if per_job is not None and gres_has_gpu(per_job):
        return gres_gpu_count(per_job)
    if per_node is not None and gres_has_gpu(per_node):
        return (gres_gpu_count(per_node) or 0) * max(1, node_count or 1)
    if per_task is not None and gres_has_gpu(per_task):
        return (gres_gpu_count(per_task) or 0) * max(1, task_count or 1)
    return tres_gpu_count(req_tres)


# --- building the results --------------------------------------------------------------------------------


def merge_nodes(nodes: Iterable[SlurmNode], notes: list[str]) -> tuple[SlurmNode, ...]:
    """One node per name, in first-seen order; a node listed once per partition (sinfo -N) gets them all."""
    merged: dict[str, SlurmNode] = {}
    for node in nodes:
        seen = merged.get(node.name)
        if seen is None:
            merged[node.name] = node
            continue
        partitions = seen.partitions + tuple(p for p in node.partitions if p not in seen.partitions)
        if (seen.base_state, seen.flags) != (node.base_state, node.flags):
            notes.append(
                f"{node.name}: listed with two states ({seen.state_text}, {node.state_text}); first kept"
            )
        merged[node.name] = replace(seen, partitions=partitions)
    return tuple(merged.values())


def job_id_text(
    job_id: object,
    array_job_id: int | None = None,
    array_task: object = None,
    het_job_id: int | None = None,
    het_job_offset: int | None = None,
) -> str:
    """The id as squeue prints it: "1234", array tasks "1230_4" (pending ranges "1230_[5-9%2]"), het
    job components "100+1"."""
    if array_job_id:
        task = str(array_task).strip() if array_task is not None else ""
        if task.isdigit():
            return f"{array_job_id}_{task}"
        if task and not is_none_word(task):
            return f"{array_job_id}_[{task.strip('[]')}]"
    if het_job_id:
        return f"{het_job_id}+{het_job_offset or 0}"
    if isinstance(job_id, float) and job_id.is_integer():
        return str(int(job_id))
    return str(job_id).strip()


def pending_reason(state: str, reason: str | None) -> str | None:
    """Slurm's reason, kept while the job is not running ("None" means none)."""
    if state == "RUNNING" or reason is None or is_none_word(reason):
        return None
    return reason


def excerpt(text: str, lines: int = 3) -> str:
    return "\n".join(text.strip().splitlines()[:lines])[:300]
