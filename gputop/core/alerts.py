"""Alerts: every current problem across the cluster, worst first, with how long it has lasted, and what
the user did about it (acknowledged, silenced for a while).

`AlertBook` is fed each tick's node rows and keeps one alert per problem identity (node, kind, GPU and
subject: the Xid code, the port): the message may change from tick to tick ("GPU3 91 C", then
"GPU3 92 C") and it is still the same alert, with the time it was first seen. An alert whose problem is
gone is dropped, with its acknowledgement: if it comes back it is new again. A silence lasts until its
time, whether the problem comes and goes or not.

New CRIT alerts (a problem that is new, or was a warning) that are neither acknowledged nor silenced are
reported once, for the UI to ring the bell or notify; not on the first update, whose problems were there
before anyone was watching. Pure: times come from the caller.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from gputop.core.health import Problem
from gputop.core.models import NodeSample, Severity
from gputop.core.slices import run_to_end

PROBLEMS_PER_SLICE = 1000  # some 3 ms of work between two yields


class AlertKey(NamedTuple):
    node: str
    kind: str
    gpu_index: int | None
    subject: str = ""  # Problem.subject: the Xid code, the port, the job

    @property
    def text(self) -> str:
        """One string per alert, for a table row key: "gpu042/xid/GPU3/79"."""
        gpu = "node" if self.gpu_index is None else f"GPU{self.gpu_index}"
        return f"{self.node}/{self.kind}/{gpu}" + (f"/{self.subject}" if self.subject else "")


@dataclass(frozen=True, slots=True)
class Alert:
    key: AlertKey
    severity: Severity
    message: str  # the latest wording of the problem
    since_s: float  # first seen (this time round)
    acknowledged: bool = False
    silenced_until_s: float | None = None
    action: str = ""  # what to do about it, where the rule says (Problem.action)

    @property
    def node(self) -> str:
        return self.key.node

    def silenced(self, now_s: float) -> bool:
        return self.silenced_until_s is not None and now_s < self.silenced_until_s

    @property
    def sort_key(self) -> tuple[int, float, str]:
        """Worst first, then the oldest (the one that has waited longest), then by node."""
        return (-self.severity.rank, self.since_s, self.key.text)


@dataclass(frozen=True, slots=True)
class AlertState:
    alerts: Mapping[str, Alert]  # by AlertKey.text
    new_crit: tuple[Alert, ...] = ()  # CRIT since this update, neither acknowledged nor silenced
    taken_at_s: float = 0.0

    def ordered(self) -> list[Alert]:
        return sorted(self.alerts.values(), key=lambda a: a.sort_key)


@dataclass
class AlertBook:
    state: AlertState = field(default_factory=lambda: AlertState({}))
    _acknowledged: set[AlertKey] = field(default_factory=set)
    _silenced_until_s: dict[AlertKey, float] = field(default_factory=dict)
    _primed: bool = False  # an update has happened: later CRITs are news
    _marks: int = 0  # acknowledgements and silences so far: one made during a sliced update is re-read

    def update(self, problems: Iterable[Problem], now_s: float, settling: Collection[str] = ()) -> AlertState:
        """``settling``: nodes not yet heard in full (`FirstLook`): what they report now was already
        wrong when gputop started, not news."""
        return run_to_end(self.update_steps(problems, now_s, settling))

    def update_steps(
        self,
        problems: Iterable[Problem],
        now_s: float,
        settling: Collection[str] = (),
        problems_per_slice: int = PROBLEMS_PER_SLICE,
    ) -> Generator[None, None, AlertState]:
        """`update`, yielding after every ``problems_per_slice`` problems (a store's refresh at 10,000
        nodes brings thousands). The state changes only when the last slice is done."""
        old = self.state.alerts
        marks = self._marks
        alerts: dict[str, Alert] = {}
        new_crit: list[Alert] = []
        for count, problem in enumerate(problems, 1):
            if not count % problems_per_slice:
                yield
            key = AlertKey(problem.node, problem.kind, problem.gpu_index, problem.subject)
            text = key.text
            seen = alerts.get(text)
            if seen is not None and seen.severity.rank >= problem.severity.rank:
                continue  # two problems with one identity: the worse one speaks for both
            before = old.get(text)
            alert = Alert(
                key,
                problem.severity,
                problem.message,
                before.since_s if before is not None else _began(problem, now_s),
                key in self._acknowledged,
                self._silence(key, now_s),
                problem.action,
            )
            alerts[text] = alert
            worse = before is None or before.severity is not Severity.CRIT
            quiet = alert.acknowledged or alert.silenced(now_s)
            if problem.severity is Severity.CRIT and worse and not quiet:
                new_crit.append(alert)
        if marks != self._marks:
            # acknowledged or silenced between slices: those alerts say so now, and do not ring
            restated: dict[int, Alert] = {}
            for text, alert in alerts.items():
                marked = replace(
                    alert,
                    acknowledged=alert.key in self._acknowledged,
                    silenced_until_s=self._silence(alert.key, now_s),
                )
                if marked != alert:
                    alerts[text] = restated[id(alert)] = marked
            new_crit = [
                marked
                for marked in (restated.get(id(a), a) for a in new_crit)
                if not (marked.acknowledged or marked.silenced(now_s))
            ]
        # an acknowledgement holds while its problem lasts; a silence until its time
        self._acknowledged &= {a.key for a in alerts.values()}
        news = (
            tuple(a for a in new_crit if alerts[a.key.text] is a and a.key.node not in settling)
            if self._primed
            else ()
        )
        self._primed = True
        self.state = AlertState(alerts, news, now_s)
        return self.state

    def _silence(self, key: AlertKey, now_s: float) -> float | None:
        until = self._silenced_until_s.get(key)
        if until is not None and until <= now_s:
            del self._silenced_until_s[key]
            return None
        return until

    def acknowledge(self, text: str, acknowledged: bool = True) -> AlertState:
        """Marks (or unmarks) the alert as seen by someone: it stays listed, dimmed, and never rings."""
        alert = self.state.alerts.get(text)
        if alert is None:
            return self.state
        self._marks += 1
        if acknowledged:
            self._acknowledged.add(alert.key)
        else:
            self._acknowledged.discard(alert.key)
        return self._restate(text, acknowledged=acknowledged)

    def silence(self, text: str, until_s: float | None) -> AlertState:
        """Silences the alert until ``until_s`` (None: lifts the silence); it stays listed."""
        alert = self.state.alerts.get(text)
        if alert is None:
            return self.state
        self._marks += 1
        if until_s is None:
            self._silenced_until_s.pop(alert.key, None)
        else:
            self._silenced_until_s[alert.key] = until_s
        return self._restate(text, silenced_until_s=until_s)

    def _restate(self, text: str, **changes: object) -> AlertState:
        alerts = dict(self.state.alerts)
        alerts[text] = replace(alerts[text], **changes)  # type: ignore[arg-type]
        self.state = replace(self.state, alerts=alerts, new_crit=())
        return self.state


# A node whose source has no slow facts (NVML) is heard in full once it has answered this long.
SETTLE_S = 30.0


class FirstLook:
    """Which nodes gputop has heard in full. Over SSH a node's first metrics come at once and its slow
    facts (the Xid log, the IB ports) a few seconds later: the CRITs those bring were there before gputop
    started, and announcing them as new would be a burst of false news at every start. A node is heard in
    full once its first facts are read, or once it has answered for SETTLE_S."""

    def __init__(self) -> None:
        self._pending: set[str] = set()
        self._known = 0  # how many nodes the last snapshot had: a new one is pending too
        self._settled: set[str] = set()
        self._answering_since: dict[str, float] = {}

    def settling(self, nodes: Sequence[NodeSample], now_s: float) -> frozenset[str]:
        """The nodes not heard in full before this tick; then notes which are after it."""
        if len(nodes) != self._known:
            self._known = len(nodes)
            self._pending |= {node.name for node in nodes} - self._settled
        if not self._pending:
            return frozenset()
        settling = frozenset(self._pending)
        for node in nodes:
            if node.name not in settling or node.sampled_at_s is None:
                continue
            since = self._answering_since.setdefault(node.name, now_s)
            if node.facts.heard or now_s - since >= SETTLE_S:
                self._pending.discard(node.name)
                self._settled.add(node.name)
                self._answering_since.pop(node.name, None)
        return settling


def _began(problem: Problem, now_s: float) -> float:
    """When an alert began: the source's own time for its event where it has one (never later than now:
    a node's clock may run ahead), else now, when gputop first saw it."""
    return now_s if problem.since_s is None else min(problem.since_s, now_s)


def alert_reason(alert: Alert) -> str:
    """A drain reason carrying the alert's evidence: its words and since when (UTC)."""
    since = time.strftime("%Y-%m-%d %H:%M", time.gmtime(alert.since_s))
    return f"{alert.message} (since {since} UTC)"
