"""`gputop check`'s output: a summary line with performance data, then one line per problem; or one JSON
document.

The text follows the monitoring plugin format (Nagios, Icinga, Checkmk, Sensu): the first line is the
status a monitoring system shows, ``| crit=8 warn=7 nodes=32 answering=31`` its performance data, and the
lines after it the long output. A '|' in any line would start performance data there, so the text
itself carries none ('|' in a node name, a drain reason or a job name is shown as '¦').

The JSON keys are a contract with scripts and monitoring: SCHEMA_VERSION goes up when one is renamed,
removed or changes meaning (adding a key does not), and README.md documents them.
"""

from __future__ import annotations

import math
from typing import Any

from gputop.core.safe_text import safe_line
from gputop.headless.round import Round
from gputop.headless.verdict import ExitStatus, Finding, Verdict

SCHEMA_VERSION = 1
FINDING_MAX_CHARS = 2000  # a problem quoting a command's stderr stays one readable line


def check_lines(round_: Round, verdict: Verdict) -> list[str]:
    """The summary with its performance data, then ``CRIT gpu042 GPU3 Xid 79: GPU has fallen off the bus``
    per problem, worst first."""
    return [summary_line(round_, verdict), *(finding_line(f) for f in verdict.findings)]


def no_pipe(text: str) -> str:
    """Text for the plugin format, where '|' would start performance data."""
    return text.replace("|", "\u00a6")


def performance_data(verdict: Verdict) -> str:
    return (
        f"crit={verdict.crit} warn={verdict.warn} nodes={verdict.nodes} answering={verdict.nodes_answering}"
    )


def finding_line(finding: Finding) -> str:
    where = f"{finding.node} " if finding.node is not None else ""
    # one line per problem, also for a message that quotes a command's several lines of stderr
    message = " / ".join(line.strip() for line in finding.message.splitlines() if line.strip())
    if finding.action:
        message += f"; action: {finding.action}"
    return no_pipe(safe_line(f"{finding.severity.value.upper()} {where}{message}", FINDING_MAX_CHARS))


def summary_line(round_: Round, verdict: Verdict) -> str:
    status = verdict.status.name
    if verdict.status is ExitStatus.UNKNOWN:
        said = f"nothing answered within {round_.timeout_s:g}s"
    else:
        counts = f"{verdict.crit} crit, {verdict.warn} warn" if verdict.findings else "no problems"
        said = f"{counts} on {verdict.nodes_answering} of {verdict.nodes} nodes answering"
    unverified = (
        "; host keys NOT verified (ssh.verify_host_keys is false)"
        if round_.host_keys_verified is False
        else ""
    )
    text = no_pipe(safe_line(f"gputop check: {status}: {said} ({round_.cluster}{unverified})"))
    return f"{text} | {performance_data(verdict)}"


def check_document(round_: Round, verdict: Verdict) -> dict[str, Any]:
    return {
        **round_header(round_, verdict),
        "exit_status": int(verdict.status),
        "problems": [finding_document(f) for f in verdict.findings],
    }


def failure_document(message: str) -> dict[str, Any]:
    """What `check --json` prints when it could not check at all (exit status 3)."""
    return {
        "schema": SCHEMA_VERSION,
        "status": ExitStatus.UNKNOWN.word,
        "exit_status": int(ExitStatus.UNKNOWN),
        "error": message,
    }


def round_header(round_: Round, verdict: Verdict) -> dict[str, Any]:
    """The keys `check --json` and `snapshot --json` share."""
    summary = round_.view.summary
    return {
        "schema": SCHEMA_VERSION,
        "cluster": round_.cluster,
        "demo": round_.is_demo,
        "taken_at_s": round_.view.snapshot.taken_at_s,
        "timeout_s": round_.timeout_s,
        "elapsed_s": round(round_.elapsed_s, 3),
        "status": verdict.status.word,
        "host_keys_verified": round_.host_keys_verified,  # false: ssh.verify_host_keys is off; null: no SSH
        "summary": {
            "nodes": verdict.nodes,
            "nodes_answering": verdict.nodes_answering,
            "nodes_stale": summary.nodes_stale,
            "nodes_down": summary.nodes_down,
            "gpus": summary.gpu_count,
            "util_mean_pct": finite(summary.util_mean_pct),
            "power_w": finite(summary.power_w),
            "crit": verdict.crit,
            "warn": verdict.warn,
        },
    }


def finding_document(finding: Finding) -> dict[str, Any]:
    return {
        "severity": finding.severity.value,
        "node": finding.node,
        "gpu": finding.gpu_index,
        "kind": finding.kind,
        "message": finding.message,
        "action": finding.action or None,
    }


def finite(value: float | None) -> float | None:
    """JSON has no NaN or infinity: an unusable number is null, as an unread one is."""
    return value if value is not None and math.isfinite(value) else None
