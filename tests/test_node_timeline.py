"""Each node's timeline: problems starting and clearing, Slurm drains and resumes, MIG changes, as the
view stage sees them tick by tick; and the node screen's chart marks them."""

from __future__ import annotations

from gputop.core.config import Thresholds
from gputop.core.models import ClusterSnapshot, SlurmBaseState, SlurmNode, SlurmState
from gputop.core.view import ViewStage
from gputop.tui.screens.node import chart_events
from tests.factories import gpu_sample, node_sample

T0 = 1_800_000_000.0


def slurm(drained: bool) -> SlurmState:
    flags = frozenset({"DRAIN"}) if drained else frozenset()
    reason = "RMA GPU3 (OPS-7)" if drained else None
    return SlurmState({"a": SlurmNode("a", SlurmBaseState.IDLE, flags, reason, "ops")}, (), T0)


def test_problems_drains_and_mig_changes_are_kept_with_their_times() -> None:
    stage = ViewStage(Thresholds(), interval_s=1.0, judge_at_once=True)
    cool = node_sample("a", 4, sampled_at_s=T0)
    hot = node_sample("a", (gpu_sample(0), gpu_sample(1), gpu_sample(2), gpu_sample(3, temp_c=96.0)))
    mig = node_sample(
        "a", (gpu_sample(0), gpu_sample(1), gpu_sample(2, mig_enabled=True, util_pct=None), gpu_sample(3))
    )
    ticks = [
        (cool, False),  # learnt: nothing happened at the first look
        (hot, False),  # GPU3 hot
        (cool, True),  # cooled; drained
        (cool, False),  # resumed
        (mig, False),  # MIG on GPU2
        (cool, False),  # and off
    ]
    for tick, (node, drained) in enumerate(ticks):
        snapshot = ClusterSnapshot.build("c", T0 + tick, (node,), slurm(drained))
        view = stage.derive(snapshot)
    assert view.timeline is not None
    events = [(e.time_s - T0, e.kind, e.label) for e in view.timeline.events("a")]
    assert (1.0, "problem", "GPU3 96 C") in events
    assert (2.0, "cleared", "cleared: GPU3 96 C") in events
    assert (2.0, "drain", "drained: RMA GPU3 (OPS-7)") in events
    assert (3.0, "resume", "resumed") in events
    assert (4.0, "mig", "MIG on GPU2") in events
    assert (5.0, "mig", "MIG off GPU2") in events
    assert all(e.time_s >= T0 + 1 for e in view.timeline.events("a"))  # nothing at the first look
    # the chart marks them all, once each
    labels = [
        e.label for e in chart_events(view.snapshot.nodes[0], view.rows["a"].problems, None, view.timeline)
    ]
    assert labels.count("GPU3 96 C") == 1 and "MIG on GPU2" in labels and "resumed" in labels


def test_an_unchanged_node_costs_nothing_and_the_list_is_bounded() -> None:
    stage = ViewStage(Thresholds(), interval_s=1.0, judge_at_once=True)
    node = node_sample("a", 2, sampled_at_s=T0)
    for tick in range(3):
        view = stage.derive(ClusterSnapshot.build("c", T0 + tick, (node,), None))
    assert view.timeline is not None and view.timeline.events("a") == ()
    hot = node_sample("a", (gpu_sample(0, temp_c=96.0), gpu_sample(1)), sampled_at_s=T0)
    for tick in range(3, 600):
        view = stage.derive(ClusterSnapshot.build("c", T0 + tick, (hot if tick % 2 else node,), None))
    assert len(view.timeline.events("a")) == 200  # the newest 200
    assert view.timeline.events("nobody") == ()
