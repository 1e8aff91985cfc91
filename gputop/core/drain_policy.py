"""The auto-drain policy: which nodes to drain or resume on the view's problems, within guardrails.

Pure: `DrainPolicy.decide` reads a view (its rows' problems and Slurm's nodes) and the time, and returns
the decisions; the runner (`gputop.actions.policy_runner`) records each in the audit log, acts on the
ones that act, and tells `DrainPolicy` what happened. What it keeps between ticks (`PolicyState`) is saved
by the runner, so a restart neither forgets its drains nor closes its circuit breaker.

The rules, in the order they are checked for a node:
- A node with a problem whose action class is one of ``drain_classes`` is drained, with a reason
  that starts with ``gputop:`` and carries the evidence and what to do.
- Never a node that someone else drained (its DRAIN flag is set with another reason), nor one that is
  down or not responding in Slurm: those are left alone, and the decision says so.
- The circuit breaker: at most ``max_drains_per_hour`` drains in any hour, and at most
  ``max_partition_pct`` of any partition's nodes drained by the policy at once. A drain past either limit
  is not made; the breaker opens, and from then on the policy makes no drain and no resume until a person
  resets it (`gputop watch --reset-breaker`, or the dashboard's policy dialog).
- Optionally (``resume_after_clear_min``) a node the policy drained is resumed once it has answered with
  no such problem for that long, unless it was drained for the same cause before within a week (then it
  needs a person's look, and stays drained).
- In dry-run, every decision is made and recorded as if acted on, and nothing is run.

A decision is returned once, when it is new for its node: the same "left alone" is not repeated every tick.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from gputop.core.config import PolicyConfig
from gputop.core.event_history import REDRAIN_WINDOW_S, EventHistory, cause_key, cause_words
from gputop.core.models import Reachability, SlurmBaseState, SlurmNode, SlurmState
from gputop.core.node_actions import MAX_REASON_CHARS
from gputop.core.problem import Problem
from gputop.core.safe_text import first_unsafe
from gputop.core.summary import ClusterView

REASON_PREFIX: Final = "gputop:"
HOUR_S: Final = 3600.0
STATE_VERSION: Final = 1

Verdict = Literal["drain", "resume", "skip", "hold", "breaker", "release"]
# drain, resume: the policy acts (or, in dry-run, would); skip: a node with a matching problem is left
# alone, and why; hold: one of its own drains it will not resume, and why; breaker: the breaker opened;
# release: one of its drains that someone else resumed or took over, no longer the policy's


@dataclass(frozen=True, slots=True)
class Decision:
    node: str
    verdict: Verdict
    why: str  # in words, for the audit log, the webhook and the screen
    cause: str = ""  # cause_key of the problem it is about
    reason: str = ""  # a drain's Slurm reason
    problem: str = ""  # the problem's words
    severity: str = ""  # the problem's severity
    dry_run: bool = False
    time_s: float = 0.0

    @property
    def acts(self) -> bool:
        return self.verdict in ("drain", "resume")

    def to_record(self) -> dict[str, Any]:
        """The decision as the audit log and the webhook carry it."""
        return {
            "node": self.node,
            "decision": self.verdict,
            "dry_run": self.dry_run,
            "why": self.why,
            "cause": self.cause,
            "reason": self.reason,
            "problem": self.problem,
            "severity": self.severity,
            "decided_at_s": round(self.time_s, 3),
        }


@dataclass(slots=True)
class OwnDrain:
    """A drain the policy made: while Slurm still shows its reason, it is the policy's."""

    node: str
    cause: str
    reason: str
    time_s: float
    confirmed: bool = True  # False: the intent was written, the outcome not (gputop stopped in between)


@dataclass(slots=True)
class PolicyState:
    own: dict[str, OwnDrain] = field(default_factory=dict)
    drain_times_s: list[float] = field(default_factory=list)  # the policy's drains, for the hourly limit
    breaker_why: str | None = None  # None: closed
    breaker_since_s: float | None = None
    clear_since_s: dict[str, float] = field(default_factory=dict)  # own drains answering without the cause

    @property
    def breaker_open(self) -> bool:
        return self.breaker_why is not None

    def to_document(self) -> dict[str, Any]:
        return {
            "version": STATE_VERSION,
            "own_drains": [
                {
                    "node": d.node,
                    "cause": d.cause,
                    "reason": d.reason,
                    "time_s": d.time_s,
                    "confirmed": d.confirmed,
                }
                for d in self.own.values()
            ],
            "drain_times_s": self.drain_times_s,
            "breaker": None
            if self.breaker_why is None
            else {"why": self.breaker_why, "since_s": self.breaker_since_s},
        }

    @staticmethod
    def from_document(document: object) -> PolicyState | str:
        """The state a file held, or why it cannot be read."""
        if not isinstance(document, dict):
            return "not a JSON object"
        if document.get("version") != STATE_VERSION:
            return f"format version {document.get('version')!r}, this gputop reads {STATE_VERSION}"
        state = PolicyState()
        for item in document.get("own_drains") or ():
            if not isinstance(item, dict):
                return "an own_drains entry is not an object"
            node, cause, reason, when = (
                item.get("node"),
                item.get("cause"),
                item.get("reason"),
                item.get("time_s"),
            )
            if not (isinstance(node, str) and isinstance(cause, str) and isinstance(reason, str)):
                return "an own_drains entry lacks its node, cause or reason"
            if not isinstance(when, int | float) or isinstance(when, bool):
                return f"own drain of {node!r} has no time"
            state.own[node] = OwnDrain(node, cause, reason, float(when), item.get("confirmed") is not False)
        times = document.get("drain_times_s") or []
        if not isinstance(times, list) or not all(isinstance(t, int | float) for t in times):
            return "drain_times_s is not a list of numbers"
        state.drain_times_s = [float(t) for t in times]
        breaker = document.get("breaker")
        if isinstance(breaker, dict):
            why, since = breaker.get("why"), breaker.get("since_s")
            state.breaker_why = why if isinstance(why, str) and why else "opened (no reason recorded)"
            state.breaker_since_s = float(since) if isinstance(since, int | float) else None
        elif breaker is not None:
            return "breaker is neither null nor an object"
        return state


class DrainPolicy:
    def __init__(
        self, config: PolicyConfig, state: PolicyState | None = None, history: EventHistory | None = None
    ) -> None:
        self.config = config
        self.state = state if state is not None else PolicyState()
        self.history = history
        self._said: dict[str, tuple[str, str]] = {}  # node -> (verdict, why) last returned
        self.dry_run_drained: dict[str, OwnDrain] = {}  # in dry-run: what it would have drained

    # -- deciding ---------------------------------------------------------------------------------------
    def decide(self, view: ClusterView, now_s: float) -> list[Decision]:
        """The decisions new this tick, in node order."""
        slurm = view.snapshot.slurm
        if slurm is None or slurm.sampled_at_s is None:
            return []  # without Slurm's state it cannot tell whose a drain is: no decision at all
        config = self.config
        state = self.state
        owned = self._owned()
        drained_this_tick: list[str] = []
        decisions: list[Decision] = []
        for name, row in view.rows.items():
            slurm_node = slurm.nodes.get(name)
            mine = owned.get(name)
            # in dry-run nothing was drained, so Slurm cannot confirm what it would have done
            if mine is not None and not config.dry_run and not _still_mine(mine, slurm_node):
                self._release(name)
                owned.pop(name, None)
                why = _released_why(mine, slurm_node)
                decisions.append(
                    Decision(name, "release", why, mine.cause, dry_run=config.dry_run, time_s=now_s)
                )
                mine = None
            elif mine is not None and not mine.confirmed and not config.dry_run:
                mine.confirmed = True  # Slurm shows the drain whose outcome was never written: it was made
                if self.history is not None:
                    self.history.note_drain(name, mine.cause, mine.time_s, "policy")
            matching = [
                p for p in row.problems if p.action_class in config.drain_classes and p.kind != "slurm"
            ]
            if matching:
                state.clear_since_s.pop(name, None)
                worst = min(matching, key=_problem_order)
                said = self._on_problem(name, worst, slurm_node, mine, slurm, owned, drained_this_tick, now_s)
                if said is not None:
                    decisions.append(said)
                continue
            if mine is not None:
                said = self._on_clear(name, mine, row.reachability, slurm_node, now_s)
                if said is not None:
                    decisions.append(said)
                continue
            self._said.pop(name, None)
        return decisions

    def _on_problem(
        self,
        name: str,
        problem: Problem,
        slurm_node: SlurmNode | None,
        mine: OwnDrain | None,
        slurm: SlurmState,
        owned: Mapping[str, OwnDrain],
        drained_this_tick: list[str],
        now_s: float,
    ) -> Decision | None:
        cause = cause_key(problem.kind, problem.subject)
        base = Decision(
            name,
            "skip",
            "",
            cause,
            problem=problem.message,
            severity=problem.severity.value,
            dry_run=self.config.dry_run,
            time_s=now_s,
        )
        if mine is not None:
            self._said[name] = ("drained", "")
            return None  # drained by the policy already
        if slurm_node is None:
            return self._say(_with(base, why="not a node Slurm lists: nothing to drain"))
        if slurm_node.base_state is SlurmBaseState.DOWN or "NOT_RESPONDING" in slurm_node.flags:
            return self._say(
                _with(base, why=f"{slurm_node.label} in Slurm: left to Slurm and whoever handles it")
            )
        if "DRAIN" in slurm_node.flags:
            who = f" by {slurm_node.reason_user}" if slurm_node.reason_user else ""
            reason = f": {slurm_node.reason}" if slurm_node.reason else ""
            return self._say(_with(base, why=f"already drained{who}{reason}; not the policy's: left alone"))
        if self.state.breaker_open:
            return self._say(_with(base, why=f"circuit breaker open: {self.state.breaker_why}; not acting"))
        tripped = self._limit_reached(name, slurm_node, slurm, owned, drained_this_tick, now_s)
        if tripped is not None:
            self.state.breaker_why = tripped
            self.state.breaker_since_s = now_s
            opened = self._say(
                _with(base, verdict="breaker", why=f"circuit breaker opened: {tripped}; not acting")
            )
            self._said[name] = ("skip", f"circuit breaker open: {tripped}; not acting")  # said already
            return opened
        repeats = (
            len(self.history.drains(name, cause, since_s=now_s - REDRAIN_WINDOW_S)) if self.history else 0
        )
        reason = drain_reason(problem, repeats)
        drained_this_tick.append(name)
        why = f"{problem.severity.value.upper()} {problem.message}: action class {problem.action_class}"
        return self._say(_with(base, verdict="drain", why=why, reason=reason))

    def _on_clear(
        self,
        name: str,
        mine: OwnDrain,
        reachability: Reachability,
        slurm_node: SlurmNode | None,
        now_s: float,
    ) -> Decision | None:
        state = self.state
        if reachability is not Reachability.OK:
            state.clear_since_s.pop(name, None)  # a node that does not answer is not clear
            return None
        since = state.clear_since_s.setdefault(name, now_s)
        after_min = self.config.resume_after_clear_min
        if after_min is None or now_s - since < after_min * 60.0:
            return None
        base = Decision(name, "hold", "", mine.cause, dry_run=self.config.dry_run, time_s=now_s)
        repeats = (
            len(self.history.drains(name, mine.cause, since_s=now_s - REDRAIN_WINDOW_S))
            if self.history
            else 0
        )
        if repeats >= 2:
            why = (
                f"drained {repeats}x for {cause_words(mine.cause)} within a week: needs a person's "
                "inspection, not resumed"
            )
            return self._say(_with(base, why=why))
        if slurm_node is not None and (
            slurm_node.base_state is SlurmBaseState.DOWN or "NOT_RESPONDING" in slurm_node.flags
        ):
            return self._say(_with(base, why=f"{slurm_node.label} in Slurm: not resumed"))
        if state.breaker_open:
            return self._say(_with(base, why=f"circuit breaker open: {state.breaker_why}; not resuming"))
        why = f"no {cause_words(mine.cause)} problem for {after_min:g} min"
        return self._say(_with(base, verdict="resume", why=why))

    def _limit_reached(
        self,
        name: str,
        slurm_node: SlurmNode,
        slurm: SlurmState,
        owned: Mapping[str, OwnDrain],
        drained_this_tick: Sequence[str],
        now_s: float,
    ) -> str | None:
        config = self.config
        times = [t for t in self._drain_times() if t > now_s - HOUR_S]
        made = len(times) + len(drained_this_tick)
        if made >= config.max_drains_per_hour:
            plural = "" if made == 1 else "s"
            return f"{made} drain{plural} in the last hour, the limit is {config.max_drains_per_hour}"
        policy_drained = {*owned, *drained_this_tick}
        for partition in slurm_node.partitions:
            members = [n for n in slurm.nodes.values() if partition in n.partitions]
            after = sum(1 for n in members if n.name in policy_drained) + 1
            pct = 100.0 * after / len(members)
            if pct > config.max_partition_pct:
                return (
                    f"draining {name} would make {after} of partition {partition}'s {len(members)} nodes "
                    f"drained by the policy ({pct:.0f}%), the limit is {config.max_partition_pct:g}%"
                )
        return None

    # -- what happened ------------------------------------------------------------------------------------
    def drained(self, decision: Decision, *, confirmed: bool = True) -> None:
        """A drain was made (or, in dry-run, would have been); ``confirmed`` False: it is about to run, and
        its outcome is not known yet (`confirm` or `undrain` follows)."""
        record = OwnDrain(decision.node, decision.cause, decision.reason, decision.time_s, confirmed)
        if self.config.dry_run:
            self.dry_run_drained[decision.node] = record
            return
        self.state.own[decision.node] = record
        self.state.drain_times_s = [t for t in self.state.drain_times_s if t > decision.time_s - HOUR_S]
        self.state.drain_times_s.append(decision.time_s)
        if confirmed:
            self._note(decision)

    def confirm(self, decision: Decision) -> None:
        mine = self.state.own.get(decision.node)
        if mine is not None:
            mine.confirmed = True
            self._note(decision)

    def undrain(self, decision: Decision) -> None:
        """The drain failed: not the policy's, and it does not count towards the hourly limit."""
        self.state.own.pop(decision.node, None)
        if decision.time_s in self.state.drain_times_s:
            self.state.drain_times_s.remove(decision.time_s)
        self._said.pop(decision.node, None)

    def _note(self, decision: Decision) -> None:
        if self.history is not None:
            self.history.note_drain(decision.node, decision.cause, decision.time_s, "policy")

    def resumed(self, decision: Decision) -> None:
        self._release(decision.node)

    def failed(self, decision: Decision) -> None:
        """An action that did not happen: it is decided afresh next tick."""
        self._said.pop(decision.node, None)

    def reset_breaker(self) -> str | None:
        """Closes the breaker; what it said, or None where it was closed."""
        why = self.state.breaker_why
        self.state.breaker_why = None
        self.state.breaker_since_s = None
        self._said.clear()
        return why

    # -- inside -------------------------------------------------------------------------------------------
    def _owned(self) -> dict[str, OwnDrain]:
        return dict(self.dry_run_drained) if self.config.dry_run else dict(self.state.own)

    def _drain_times(self) -> Iterable[float]:
        if self.config.dry_run:
            return [d.time_s for d in self.dry_run_drained.values()]
        return self.state.drain_times_s

    def _release(self, name: str) -> None:
        (self.dry_run_drained if self.config.dry_run else self.state.own).pop(name, None)
        self.state.clear_since_s.pop(name, None)
        self._said.pop(name, None)

    def _say(self, decision: Decision) -> Decision | None:
        said = (decision.verdict, decision.why)
        if decision.verdict in ("drain", "resume", "breaker", "release"):
            self._said[decision.node] = said
            return decision
        if self._said.get(decision.node) == said:
            return None
        self._said[decision.node] = said
        return decision


def _still_mine(mine: OwnDrain, slurm_node: SlurmNode | None) -> bool:
    """Whether Slurm still shows the policy's drain: the DRAIN flag with a ``gputop:`` reason (Slurm may
    cut a long reason short, so the start is what counts)."""
    if slurm_node is None or "DRAIN" not in slurm_node.flags:
        return False
    return (slurm_node.reason or "").startswith(REASON_PREFIX)


def _released_why(mine: OwnDrain, slurm_node: SlurmNode | None) -> str:
    if not mine.confirmed and slurm_node is not None and "DRAIN" not in slurm_node.flags:
        return "the drain whose outcome was never recorded was not made (Slurm shows the node undrained)"
    if slurm_node is None:
        return "Slurm no longer lists the node: forgotten"
    if "DRAIN" not in slurm_node.flags:
        return f"resumed by someone else ({slurm_node.label}): no longer the policy's"
    who = f" by {slurm_node.reason_user}" if slurm_node.reason_user else ""
    return f"its reason was changed{who}: no longer the policy's"


def _problem_order(problem: Problem) -> tuple[int, str]:
    order = {"reboot": 0, "support": 1, "reset": 2}
    return (order.get(problem.action_class, 3), problem.message)


def _with(decision: Decision, **changes: Any) -> Decision:
    from dataclasses import replace

    return replace(decision, **changes)


def drain_reason(problem: Problem, earlier_drains: int = 0) -> str:
    """The Slurm reason of a policy drain: ``gputop:``, the evidence with its time, what to do; and when
    the node was drained for the same cause before within a week, that it needs inspection."""
    at = time.strftime(" at %Y-%m-%d %H:%M UTC", time.gmtime(problem.since_s)) if problem.since_s else ""
    then = problem.action.removeprefix(f"drain {problem.node}, then ").removeprefix(
        f"drain {problem.node} and "
    )
    text = f"{REASON_PREFIX} {problem.message}{at}"
    if then:
        text += f": {then}"
    if earlier_drains:
        text += f"; drained {earlier_drains + 1}x for this within a week: inspect before resuming"
    text = "".join(" " if first_unsafe(ch) is not None else ch for ch in text)
    return text[:MAX_REASON_CHARS]
