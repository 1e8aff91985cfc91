"""What gputop remembers across restarts: the Xid events it has seen and the drains it made.

The kernel log that the Xid command reads goes back an hour, and gputop's own trackers start empty at
each start; so "the same Xid three times in a day" or "a node drained twice for the same cause within a
week" needs a memory of its own. This is it, pure: the view stage feeds it each snapshot's Xid events,
the actions record their drains, and `gputop.actions.state_file` keeps it in a small file in the state
directory (written atomically; a corrupt or missing file is said and started afresh).

What it gives the rules, per node (`NodeMemory`, the same object while nothing changed, so the view
stage's row reuse stays an identity check):
- the Xid events seen before that the kernel log no longer lists (counted by the repeat rule, never
  shown as problems of their own: an event out of the log is past);
- the causes gputop drained the node for more than once within `REDRAIN_WINDOW_S`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from gputop.core.models import ClusterSnapshot, XidEvent

HISTORY_VERSION: Final = 1
KEEP_S: Final = 7 * 24 * 3600.0  # what is older is forgotten
REDRAIN_WINDOW_S: Final = 7 * 24 * 3600.0  # drained twice for one cause within it: needs inspection
REDRAIN_COUNT: Final = 2
MAX_EVENTS_PER_NODE: Final = 200  # a node that logs Xids without end keeps its newest
MAX_DRAINS: Final = 10_000
MAX_MESSAGE_CHARS: Final = 400
MAX_NAME_CHARS: Final = 255


@dataclass(frozen=True, slots=True)
class DrainRecord:
    """A drain gputop made: the node, the cause it drained for (`cause_key`), when, and who asked
    ("policy" or "dashboard")."""

    node: str
    cause: str
    time_s: float
    by: str


class NodeMemory(NamedTuple):
    past_xids: tuple[XidEvent, ...]  # seen before, no longer in the kernel log's window
    redrains: tuple[tuple[str, int], ...]  # (cause, drains within REDRAIN_WINDOW_S) for counts >= 2


NO_MEMORY: Final = NodeMemory((), ())


def cause_key(kind: str, subject: str) -> str:
    """What a drain was for, comparable across drains: "xid:79", "missing", "retired_pages:count"."""
    return f"{kind}:{subject}" if subject else kind


def cause_words(cause: str) -> str:
    """A cause key as words: "xid:79" -> "Xid 79"."""
    kind, _, subject = cause.partition(":")
    if kind == "xid" and subject:
        return f"Xid {subject}"
    return cause.replace("_", " ").replace(":", " ")


def _event_key(event: XidEvent) -> tuple[float, int, int]:
    # -1: no GPU named (a key that sorts, where None would not)
    return (round(event.time_s, 3), event.code, -1 if event.gpu_index is None else event.gpu_index)


class EventHistory:
    def __init__(self) -> None:
        self._xids: dict[str, dict[tuple[float, int, int], XidEvent]] = {}
        self._drains: list[DrainRecord] = []
        self._last_seen: dict[str, tuple[XidEvent, ...]] = {}  # each node's event tuple last fed in
        self._memory: dict[str, NodeMemory] = {}
        self.changed = False  # something new since the last `mark_saved`
        self._now_s = 0.0  # the latest time seen (a snapshot's or a drain's): the redrain window ends there

    # -- feeding ----------------------------------------------------------------------------------------
    def update(self, snapshot: ClusterSnapshot) -> Mapping[str, NodeMemory]:
        """Takes in the snapshot's Xid events; returns the memory of the nodes that have any."""
        dirty: set[str] = set()
        self._now_s = max(self._now_s, snapshot.taken_at_s)
        for node in snapshot.nodes:
            events = node.xid_events
            if not events or self._last_seen.get(node.name) is events:
                continue
            self._last_seen[node.name] = events
            if self._add_xids(node.name, events):
                dirty.add(node.name)
            elif node.name in self._xids:
                dirty.add(node.name)  # the log's window moved: what is past changed
        for name in dirty:
            self._remember(name)
        return self._memory

    def _add_xids(self, node: str, events: Iterable[XidEvent]) -> bool:
        known = self._xids.setdefault(node, {})
        added = False
        for event in events:
            key = _event_key(event)
            if key not in known:
                known[key] = _bounded_event(event)
                added = True
        if len(known) > MAX_EVENTS_PER_NODE:
            for key in sorted(known)[: len(known) - MAX_EVENTS_PER_NODE]:
                del known[key]
        self.changed |= added
        return added

    def note_drain(self, node: str, cause: str, time_s: float, by: str) -> None:
        self._drains.append(DrainRecord(node[:MAX_NAME_CHARS], cause[:MAX_NAME_CHARS], time_s, by))
        self._now_s = max(self._now_s, time_s)
        del self._drains[:-MAX_DRAINS]
        self.changed = True
        self._remember(node)

    # -- reading ----------------------------------------------------------------------------------------
    def memory(self, node: str) -> NodeMemory:
        return self._memory.get(node, NO_MEMORY)

    def drains(self, node: str, cause: str | None = None, *, since_s: float = 0.0) -> list[DrainRecord]:
        return [
            d
            for d in self._drains
            if d.node == node and (cause is None or d.cause == cause) and d.time_s >= since_s
        ]

    def _remember(self, node: str) -> None:
        current = {_event_key(e) for e in self._last_seen.get(node, ())}
        past = tuple(e for key, e in sorted(self._xids.get(node, {}).items()) if key not in current)
        counts: dict[str, int] = {}
        for drain in self._drains:
            if drain.node == node and drain.time_s >= self._now_s - REDRAIN_WINDOW_S:
                counts[drain.cause] = counts.get(drain.cause, 0) + 1
        redrains = tuple(sorted((c, n) for c, n in counts.items() if n >= REDRAIN_COUNT))
        memory = NodeMemory(past, redrains)
        if memory == NO_MEMORY:
            self._memory.pop(node, None)
        elif self._memory.get(node) != memory:
            self._memory[node] = memory

    def forget_before(self, cutoff_s: float) -> None:
        """Drops what is older than ``cutoff_s`` (the file keeps a week)."""
        for node, known in list(self._xids.items()):
            for key in [k for k, e in known.items() if e.time_s < cutoff_s]:
                del known[key]
                self.changed = True
            if not known:
                del self._xids[node]
        kept = [d for d in self._drains if d.time_s >= cutoff_s]
        if len(kept) != len(self._drains):
            self._drains = kept
            self.changed = True
        for node in {*self._memory, *self._xids}:
            self._remember(node)

    # -- the file's document ------------------------------------------------------------------------------
    def to_document(self) -> dict[str, Any]:
        return {
            "version": HISTORY_VERSION,
            "xid_events": [
                {
                    "node": node,
                    "time_s": e.time_s,
                    "code": e.code,
                    "gpu": e.gpu_index,
                    "bus_id": e.pci_bus_id,
                    "message": e.message,
                }
                for node, known in sorted(self._xids.items())
                for e in known.values()
            ],
            "drains": [
                {"node": d.node, "cause": d.cause, "time_s": d.time_s, "by": d.by} for d in self._drains
            ],
        }

    def merge_document(self, document: object) -> str | None:
        """Takes in a document as `to_document` writes it (read back from the file, or another gputop's);
        None when it was read whole, else why not (what could be read is kept)."""
        if not isinstance(document, dict):
            return "not a JSON object"
        version = document.get("version")
        if version != HISTORY_VERSION:
            return f"format version {version!r}, this gputop reads {HISTORY_VERSION}"
        skipped = 0
        for item in _list(document.get("xid_events")):
            event = _xid_from(item)
            if event is None:
                skipped += 1
                continue
            self._add_xids(event[0], (event[1],))
        seen = set(self._drains)
        for item in _list(document.get("drains")):
            drain = _drain_from(item)
            if drain is None:
                skipped += 1
            elif drain not in seen:
                self._drains.append(drain)
                seen.add(drain)
        self._drains.sort(key=lambda d: d.time_s)
        del self._drains[:-MAX_DRAINS]
        for node in {*self._xids, *(d.node for d in self._drains)}:
            self._remember(node)
        return f"{skipped} records were not readable and were left out" if skipped else None

    def mark_saved(self) -> None:
        self.changed = False


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: object, limit: int = MAX_NAME_CHARS) -> str | None:
    return value[:limit] if isinstance(value, str) and value else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value == value and abs(value) < 1e12 else None


def _xid_from(item: object) -> tuple[str, XidEvent] | None:
    if not isinstance(item, dict):
        return None
    node, time_s, code, gpu = (
        _text(item.get("node")),
        _number(item.get("time_s")),
        item.get("code"),
        item.get("gpu"),
    )
    if node is None or time_s is None or not isinstance(code, int) or isinstance(code, bool):
        return None
    if gpu is not None and (not isinstance(gpu, int) or isinstance(gpu, bool) or not 0 <= gpu < 1024):
        return None
    bus = _text(item.get("bus_id"), 64)
    message = item.get("message")
    text = message[:MAX_MESSAGE_CHARS] if isinstance(message, str) else ""
    return node, XidEvent(time_s, code, bus, gpu, text)


def _drain_from(item: object) -> DrainRecord | None:
    if not isinstance(item, dict):
        return None
    node, cause, time_s, by = (
        _text(item.get("node")),
        _text(item.get("cause")),
        _number(item.get("time_s")),
        _text(item.get("by")),
    )
    if node is None or cause is None or time_s is None:
        return None
    return DrainRecord(node, cause, time_s, by or "")


def _bounded_event(event: XidEvent) -> XidEvent:
    if len(event.message) <= MAX_MESSAGE_CHARS:
        return event
    return XidEvent(
        event.time_s, event.code, event.pci_bus_id, event.gpu_index, event.message[:MAX_MESSAGE_CHARS]
    )
