"""A round's problems, worst first, and the exit status they add up to.

Exit statuses follow the monitoring plugin convention (Nagios, Icinga, Sensu, Checkmk all read them):
0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN.

UNKNOWN means gputop could not check: bad arguments, a config it does not understand, a cluster it
cannot launch (command.py), or a round in which nothing at all came from the cluster (no node sent data,
Slurm was not read). With no evidence from the cluster, gputop cannot tell a cluster outage from its own
broken access (a wrong key, a missing identity file, the monitoring host off the network), and that is
what UNKNOWN is for; the problems still name every node and why it failed.

Once anything answered, a node that does not is a CRIT problem ("down: ..."): from where monitoring sits,
a node nobody can reach while its peers answer is down, and that must page.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

from gputop.core.models import Reachability, Severity
from gputop.core.nodeset import natural_key
from gputop.headless.round import Round


class ExitStatus(IntEnum):
    OK = 0
    WARN = 1
    CRIT = 2
    UNKNOWN = 3

    @property
    def word(self) -> str:
        """As the text output and the JSON say it: "ok", "warn", "crit", "unknown"."""
        return self.name.lower()


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem as the headless commands report it: a node's (from the health rules) or, with no
    node, a source's (Slurm unreadable, a source that failed or missed the deadline)."""

    severity: Severity
    node: str | None
    gpu_index: int | None
    kind: str  # the health rules' kinds ("xid", "down", ...), "unchecked", or "source"
    message: str
    action: str = ""  # what to do about it, where the rule says ("" where the message says it all)

    @property
    def sort_key(self) -> tuple[int, bool, tuple[tuple[str | int, ...], str], int]:
        return (
            -self.severity.rank,
            self.node is not None,  # a source's problem first: it explains the nodes' after it
            natural_key(self.node or ""),
            -1 if self.gpu_index is None else self.gpu_index,
        )


@dataclass(frozen=True, slots=True)
class Verdict:
    findings: tuple[Finding, ...]  # worst first
    status: ExitStatus
    crit: int
    warn: int
    nodes: int
    nodes_answering: int  # fresh data this round (neither stale nor down)


def node_findings(round_: Round, node: str) -> tuple[Finding, ...]:
    """One node's problems, as its row in the view has them (worst first), plus slow facts left unread."""
    row = round_.view.rows.get(node)
    found = (
        [Finding(p.severity, p.node, p.gpu_index, p.kind, p.message, p.action) for p in row.problems]
        if row
        else []
    )
    unread = round_.unread_facts.get(node)
    if unread:
        message = f"not read within {round_.timeout_s:g}s: {', '.join(unread)}"
        found.append(Finding(Severity.WARN, node, None, "unchecked", message))
    return tuple(sorted(found, key=lambda f: f.sort_key))


def judge(round_: Round) -> Verdict:
    findings = [f for node in round_.view.rows for f in node_findings(round_, node)]
    findings.extend(_source_findings(round_))
    findings.sort(key=lambda f: f.sort_key)
    crit = sum(1 for f in findings if f.severity is Severity.CRIT)
    warn = sum(1 for f in findings if f.severity is Severity.WARN)
    rows = round_.view.rows.values()
    return Verdict(
        findings=tuple(findings),
        status=status_of(findings, heard_from_cluster=round_.heard_from_cluster),
        crit=crit,
        warn=warn,
        nodes=len(rows),
        nodes_answering=sum(1 for row in rows if row.reachability is Reachability.OK),
    )


def status_of(findings: Iterable[Finding], *, heard_from_cluster: bool) -> ExitStatus:
    if not heard_from_cluster:
        return ExitStatus.UNKNOWN
    severities = {f.severity for f in findings}
    if Severity.CRIT in severities:
        return ExitStatus.CRIT
    if Severity.WARN in severities:
        return ExitStatus.WARN
    return ExitStatus.OK


def _source_findings(round_: Round) -> list[Finding]:
    messages = list(round_.source_errors)
    slurm = round_.view.snapshot.slurm
    if slurm is not None and slurm.error:
        messages.append(f"Slurm: {slurm.error}")
    return [Finding(Severity.WARN, None, None, "source", message) for message in messages]
