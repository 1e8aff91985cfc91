"""Drain and resume, planned before anything runs: the exact argv, who it touches, what keeps running.

Pure: a plan is built from the snapshot and what the user typed, and either comes back whole or is refused
with the reason. The argv goes to ``scontrol`` as a list (never through a shell), so a reason reaches Slurm
exactly as typed, quotes, ``;``, ``$(...)`` and all. A control character is refused with its position: a
NUL cannot be passed to any program, and a newline or an escape stored in Slurm would break every text
listing of the node (a line of its own can pose as another node's record) and reach other people's
terminals.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from gputop.core.health import Problem
from gputop.core.models import NodeSample, Severity, SlurmJob, SlurmState
from gputop.core.nodeset import fold_nodes, natural_key
from gputop.core.safe_text import first_unsafe
from gputop.core.slurm_names import slurm_spelling
from gputop.core.xid_codes import xid_verdict

NodeAction = Literal["drain", "resume"]

# Slurm keeps a node's reason in a fixed buffer and truncates silently past it; refuse instead.
MAX_REASON_CHARS = 1000
MAX_PROBLEMS_SHOWN = 3  # per node, in a resume's warning


@dataclass(frozen=True, slots=True)
class NodeActionPlan:
    action: NodeAction
    nodes: tuple[str, ...]  # natural order
    nodeset: str  # the same nodes folded, as scontrol takes them
    reason: str | None
    argv: tuple[str, ...]
    running_jobs: tuple[SlurmJob, ...]  # jobs on those nodes that keep running (drain lets them finish)
    already: tuple[str, ...]  # nodes already in the asked-for state: not an error, said in the dialog

    @property
    def command_line(self) -> str:
        """The argv as a user would type it, every word quoted: for showing, never for running."""
        return shlex.join(self.argv)

    @property
    def needs_count_typed(self) -> bool:
        """More than one node: the dialog asks for the count to be typed, so a stray Enter cannot do it."""
        return len(self.nodes) > 1


@dataclass(frozen=True, slots=True)
class Refused:
    reason: str


def plan_node_action(
    action: NodeAction,
    nodes: Iterable[str],
    cluster_nodes: Collection[str],
    reason: str | None,
    slurm: SlurmState | None,
) -> NodeActionPlan | Refused:
    """The plan to drain or resume ``nodes``, or why not."""
    wanted = sorted(set(nodes), key=natural_key)
    if not wanted:
        return Refused("no nodes chosen: mark nodes (space) or select one")
    outside = [n for n in wanted if n not in cluster_nodes]
    if outside:
        # Listed as given, not folded: a typed name may not even be a valid host name.
        shown = ", ".join(outside[:10]) + (f" and {len(outside) - 10} more" if len(outside) > 10 else "")
        return Refused(f"not nodes of this cluster: {shown}")
    if action == "drain":
        if reason is None or not reason.strip():
            return Refused("a reason is required: say why, so whoever resumes the node knows")
        if len(reason) > MAX_REASON_CHARS:
            return Refused(f"the reason is {len(reason)} characters; Slurm keeps at most {MAX_REASON_CHARS}")
        control = _first_control(reason)
        if control is not None:
            at, char = control
            return Refused(
                f"the reason holds a control character ({_char_name(char)}) at position {at + 1}, "
                "perhaps from a paste: type it as one line of plain text"
            )
    # scontrol is handed Slurm's own spelling of each name (it may differ from ours in case or domain)
    nodeset = fold_nodes(slurm_spelling(slurm, wanted))
    argv: tuple[str, ...] = ("scontrol", "update", f"NodeName={nodeset}")
    if action == "drain":
        # scontrol strips a double quote from each end of the value; quoting it whole keeps a reason
        # that starts or ends with one exactly as typed (checked on Slurm 22.05).
        argv += ("State=DRAIN", f'Reason="{reason}"')
    else:
        argv += ("State=RESUME",)
    return NodeActionPlan(
        action=action,
        nodes=tuple(wanted),
        nodeset=nodeset,
        reason=reason if action == "drain" else None,
        argv=argv,
        running_jobs=_running_jobs(wanted, slurm),
        already=_already(action, wanted, slurm),
    )


def _first_control(text: str) -> tuple[int, str] | None:
    at = first_unsafe(text)
    return None if at is None else (at, text[at])


def _char_name(char: str) -> str:
    names = {"\x00": "NUL", "\n": "a newline", "\r": "a carriage return", "\t": "a tab", "\x1b": "ESC"}
    return names.get(char, f"U+{ord(char):04X}")


def _running_jobs(nodes: Sequence[str], slurm: SlurmState | None) -> tuple[SlurmJob, ...]:
    if slurm is None:
        return ()
    chosen = set(nodes)
    return tuple(
        job
        for job in slurm.jobs
        if job.state == "RUNNING" and chosen.intersection(job.nodes or tuple(job.gpus_by_node))
    )


def _already(action: NodeAction, nodes: Sequence[str], slurm: SlurmState | None) -> tuple[str, ...]:
    if slurm is None:
        return ()
    found = []
    for name in nodes:
        node = slurm.nodes.get(name)
        if node is None:
            continue
        drain_set = "DRAIN" in node.flags
        down = node.base_state.value == "down"
        if (action == "drain" and drain_set) or (action == "resume" and not drain_set and not down):
            found.append(name)
    return tuple(found)


def reason_template(node: NodeSample, problems: Sequence[Problem]) -> str:
    """A drain reason that carries the evidence, for the dialog to prefill: the newest hardware Xid with
    its GPU and time, else the worst problem on the node; the user edits it before it runs."""
    verdicts = [(e, xid_verdict(e.code, e.message, node=node.name, gpu=e.gpu_index)) for e in node.xid_events]
    hardware = [(e, v) for e, v in verdicts if v.severity is Severity.CRIT]
    if hardware:
        event, verdict = max(hardware, key=lambda found: found[0].time_s)
        where = f" on GPU{event.gpu_index}" if event.gpu_index is not None else ""
        at = time.strftime("%Y-%m-%d %H:%M", time.gmtime(event.time_s))
        # the reason is the drain's: what it says to do is what comes after it
        then = verdict.action.removeprefix(f"drain {node.name}, then ")
        return f"Xid {event.code}{where} at {at} UTC: {then}"
    ranked = sorted(problems, key=lambda p: p.sort_key)
    for problem in ranked:
        if problem.node == node.name and problem.kind != "slurm":
            return problem.message
    return ""


def folded_reason(reasons: Mapping[str, str]) -> str:
    """One drain reason for several nodes from each node's own (`reason_template`): nodes with the same
    words share them, ``Xid 79 on GPU4 at ... (gpu007); GPU3 91 C (gpu[003,011])``; nodes without any are
    left out; at most MAX_REASON_CHARS, the rest counted."""
    by_words: dict[str, list[str]] = {}
    for node, words in reasons.items():
        if words.strip():
            by_words.setdefault(words.strip(), []).append(node)
    if len(reasons) == 1:
        return next(iter(by_words), "")
    parts = [f"{words} ({fold_nodes(nodes)})" for words, nodes in by_words.items()]
    text = ""
    for at, part in enumerate(parts):
        joined = f"{text}; {part}" if text else part
        more = len(parts) - at
        if len(joined) > MAX_REASON_CHARS - 20:
            return f"{text}; and {more} more" if text else part[: MAX_REASON_CHARS - 20]
        text = joined
    return text


@dataclass(frozen=True, slots=True)
class ResumeContext:
    """What a resume should show before it runs: why each node was drained, and what is still wrong."""

    lines: tuple[str, ...]
    still_critical: tuple[str, ...]  # nodes with CRIT problems of their own (Slurm's state aside)


def resume_context(
    nodes: Sequence[str], slurm: SlurmState | None, problems: Mapping[str, Sequence[Problem]]
) -> ResumeContext:
    lines: list[str] = []
    critical: list[str] = []
    for name in nodes:
        node = slurm.nodes.get(name) if slurm is not None else None
        if node is not None and node.reason:
            who = f" by {node.reason_user}" if node.reason_user else ""
            when = (
                time.strftime(" at %Y-%m-%d %H:%M UTC", time.gmtime(node.reason_time_s))
                if node.reason_time_s is not None
                else ""
            )
            lines.append(f"{name} drained{who}{when}: {node.reason}")
        own = sorted((p for p in problems.get(name, ()) if p.kind != "slurm"), key=lambda p: p.sort_key)
        crit = [p for p in own if p.severity is Severity.CRIT]
        if crit:
            critical.append(name)
        for problem in own[:MAX_PROBLEMS_SHOWN]:
            lines.append(f"  {problem.severity.value.upper()} {problem.message}")
        if len(own) > MAX_PROBLEMS_SHOWN:
            lines.append(f"  and {len(own) - MAX_PROBLEMS_SHOWN} more problems")
    return ResumeContext(tuple(lines), tuple(critical))
