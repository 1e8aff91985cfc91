"""InfiniBand ports that go down and come back: flapping, a WARN, rather than a CRIT each time it drops.

`IbFlapTracker` is fed one snapshot per tick. A port that comes back up within
`Thresholds.ib_flap_grace_s` of going down has flapped; while it has flapped within
`ib_flap_window_min`, the health rules call it flapping (WARN), and a drop back within the grace is part
of the flapping, not a new CRIT. A port that stays down past the grace is down (CRIT), flaps or not.

Pure: every time comes from the snapshots. Cheap on a quiet fleet: a node whose ports tuple is the same
object as at the last tick, and that has no port in flux, costs one lookup.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gputop.core.models import ClusterSnapshot, IbPort, Reachability


@dataclass(frozen=True, slots=True)
class PortFlaps:
    count: int  # times it went down and came back within the grace, in the window
    down_since_s: float | None  # when it went down this time; None while it is up


# node -> port label -> its flaps (only ports that flapped in the window)
IbFlaps = Mapping[str, Mapping[str, PortFlaps]]


@dataclass(slots=True)
class _PortState:
    up: bool
    down_since_s: float | None
    backs_s: tuple[float, ...]  # when it came back within the grace, newest last


class IbFlapTracker:
    def __init__(self, grace_s: float, window_s: float) -> None:
        self.grace_s = grace_s
        self.window_s = window_s
        self.flaps: dict[str, dict[str, PortFlaps]] = {}
        self._ports: dict[str, tuple[IbPort, ...]] = {}  # the ports tuple last seen, by node
        self._states: dict[str, dict[str, _PortState]] = {}  # by node, by port label
        self._in_flux: set[str] = set()  # nodes with a port down or flapped in the window

    def update(self, snapshot: ClusterSnapshot) -> IbFlaps:
        now_s = snapshot.taken_at_s
        for node in snapshot.nodes:
            name = node.name
            ports = node.ib_ports
            if node.reachability is not Reachability.OK:
                continue  # no fresh ibstat: nothing new about its ports
            if self._ports.get(name) is ports and name not in self._in_flux:
                continue
            self._ports[name] = ports
            self._step(name, ports, now_s)
        return dict(self.flaps)  # the views keep it: later ticks must not change it

    def _step(self, name: str, ports: tuple[IbPort, ...], now_s: float) -> None:
        states = self._states.setdefault(name, {})
        flaps: dict[str, PortFlaps] = {}
        in_flux = False
        for port in ports:
            label = port.label
            state = states.get(label)
            up = port.is_up
            if state is None:
                states[label] = state = _PortState(up, None if up else now_s, ())
            elif up and not state.up:
                went_down = state.down_since_s
                if went_down is not None and now_s - went_down <= self.grace_s:
                    state.backs_s = (*state.backs_s, now_s)
                state.up, state.down_since_s = True, None
            elif not up and state.up:
                state.up, state.down_since_s = False, now_s
            state.backs_s = tuple(t for t in state.backs_s if now_s - t <= self.window_s)
            if state.backs_s:
                flaps[label] = PortFlaps(len(state.backs_s), state.down_since_s)
            in_flux = in_flux or bool(state.backs_s) or not state.up
        if flaps:
            self.flaps[name] = flaps
        else:
            self.flaps.pop(name, None)
        if in_flux:
            self._in_flux.add(name)
        else:
            self._in_flux.discard(name)
