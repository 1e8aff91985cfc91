"""An InfiniBand port that goes down and comes back within the grace is flapping (WARN), not a CRIT at
every drop; one that stays down past the grace is down (CRIT)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gputop.core.config import Thresholds
from gputop.core.models import ClusterSnapshot, IbPort, Severity
from gputop.core.parsers.ib import IbStat, parse_ibstat
from gputop.core.view import ViewStage
from tests.factories import node_sample

FIXTURE = (
    Path(__file__).parent
    / "fixtures"
    / "ib"
    / "ibstat-h100-ndr-ib-cx7-plus-cx6-eth-12ca-eth-ports-DOWN-gpud.txt"
)
T0 = 1_800_000_000.0
T = Thresholds()  # grace 120 s, window 30 min


def real_ports() -> tuple[IbPort, ...]:
    """The ports of a real H100 node's ibstat, the InfiniBand ones (all Active there)."""
    parsed = parse_ibstat(FIXTURE.read_text())
    assert isinstance(parsed, IbStat)
    ports = tuple(p for p in parsed.to_ports() if p.link_layer == "InfiniBand")
    assert ports and all(p.is_up for p in ports)
    return ports


def with_first_down(ports: tuple[IbPort, ...]) -> tuple[IbPort, ...]:
    return (dataclasses.replace(ports[0], state="Down", physical_state="Disabled"), *ports[1:])


def ib_problems(stage: ViewStage, at_s: float, ports: tuple[IbPort, ...]) -> list[tuple[Severity, str]]:
    node = node_sample("gpu001", 8, sampled_at_s=at_s, ib_ports=ports)
    view = stage.derive(ClusterSnapshot.build("c", at_s, (node,)))
    return [(p.severity, p.message) for p in view.rows["gpu001"].problems if p.kind == "ib"]


def test_a_port_that_drops_and_comes_back_is_flapping_not_down_twice() -> None:
    up = real_ports()
    down = with_first_down(up)
    label = up[0].label
    stage = ViewStage(T, interval_s=1.0)
    assert ib_problems(stage, T0, up) == []
    # the first drop: nothing says yet it will come back
    assert ib_problems(stage, T0 + 30, down) == [(Severity.CRIT, f"{label} Down")]
    # back within the grace: flapping
    assert ib_problems(stage, T0 + 60, up) == [
        (Severity.WARN, f"{label} flapping: down and back 1x in 30 min")
    ]
    # down again: part of the flapping, not a second CRIT
    assert ib_problems(stage, T0 + 90, down) == [
        (Severity.WARN, f"{label} Down, flapping: back 1x in 30 min")
    ]
    # but down for longer than the grace: down
    assert ib_problems(stage, T0 + 90 + T.ib_flap_grace_s + 1, down) == [(Severity.CRIT, f"{label} Down")]


def test_a_port_back_after_the_grace_did_not_flap_and_the_flapping_ends_with_the_window() -> None:
    up = real_ports()
    down = with_first_down(up)
    stage = ViewStage(T, interval_s=1.0)
    ib_problems(stage, T0, up)
    ib_problems(stage, T0 + 10, down)
    assert ib_problems(stage, T0 + 10 + T.ib_flap_grace_s + 30, up) == []  # a long outage, then fixed
    ib_problems(stage, T0 + 1000, down)
    assert ib_problems(stage, T0 + 1030, up)[0][0] is Severity.WARN  # flapped
    assert ib_problems(stage, T0 + 1030 + T.ib_flap_window_min * 60 + 1, up) == []  # and no longer
