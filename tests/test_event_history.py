"""The event history that survives a restart (gputop.core.event_history, kept by
gputop.actions.history_keeper): an Xid seen before the restart still counts towards a repeat after the
kernel log has dropped it, and a missing, corrupt or newer file is said and never stops gputop."""

from __future__ import annotations

import json
from pathlib import Path

from gputop.actions.history_keeper import HistoryKeeper
from gputop.core.config import Thresholds
from gputop.core.event_history import EventHistory
from gputop.core.models import ClusterSnapshot, XidEvent
from gputop.core.view import ViewStage
from tests.factories import node_sample

T0 = 1_800_000_000.0
HOUR_S = 3600.0
# a day's window, so that the history (not the kernel log's hour) is what holds the earlier events
DAY_WINDOW = Thresholds(xid_repeat_window_min=24 * 60)


def xid95(at_s: float) -> XidEvent:
    line = "NVRM: Xid (PCI:0000:1c:00): 95, pid=2121, Uncontained memory error"
    return XidEvent(at_s, 95, "0000:1c:00.0", 4, line)


def xid_problems(stage: ViewStage, events: tuple[XidEvent, ...], now_s: float) -> list[tuple[str, str]]:
    snapshot = ClusterSnapshot.build(
        "c", now_s, (node_sample("gpu01", sampled_at_s=now_s, xid_events=events),)
    )
    view = stage.derive(snapshot)
    return [(p.severity.value, p.message) for p in view.rows["gpu01"].problems if p.kind == "xid"]


def keeper(path: Path, said: list[str]) -> HistoryKeeper:
    return HistoryKeeper(path, EventHistory(), said.append)


def fresh_stage(history: EventHistory) -> ViewStage:
    stage = ViewStage(DAY_WINDOW, interval_s=1.0, judge_at_once=True)
    stage.history = history
    return stage


def test_xids_seen_before_a_restart_count_towards_a_repeat_after_the_log_dropped_them(tmp_path: Path) -> None:
    path = tmp_path / "history-c.json"
    said: list[str] = []
    first = keeper(path, said)
    first.load()
    assert said == [f"the event history: {path} does not exist yet, starting afresh"]
    stage = fresh_stage(first.history)
    # two Xid 95s an hour apart, each listed while the kernel log's hour holds it
    assert xid_problems(stage, (xid95(T0),), T0 + 10) == [("crit", "GPU4 Xid 95: Uncontained memory error")]
    xid_problems(stage, (xid95(T0 + HOUR_S),), T0 + HOUR_S + 10)
    first.maybe_save(T0 + HOUR_S + 10, force=True)
    assert path.stat().st_mode & 0o777 == 0o600

    # gputop restarts; the third one comes, alone in the kernel log's hour
    said.clear()
    second = keeper(path, said)
    second.load()
    assert said == []
    now_s = T0 + 2 * HOUR_S + 10
    problems = xid_problems(fresh_stage(second.history), (xid95(T0 + 2 * HOUR_S),), now_s)
    assert problems == [("crit", "GPU4 Xid 95 x3 in 1440 min: Uncontained memory error")]
    # without the history, the same view sees one event
    alone = xid_problems(fresh_stage(EventHistory()), (xid95(T0 + 2 * HOUR_S),), now_s)
    assert alone == [("crit", "GPU4 Xid 95: Uncontained memory error")]


def test_past_events_alone_raise_no_problem() -> None:
    history = EventHistory()
    stage = fresh_stage(history)
    xid_problems(stage, (xid95(T0),), T0 + 10)
    assert xid_problems(stage, (), T0 + 2 * HOUR_S) == []


def test_a_corrupt_file_is_set_aside_and_started_afresh(tmp_path: Path) -> None:
    path = tmp_path / "history-c.json"
    path.write_bytes(b'{"version": 1, "xid_events": [{"node": "gpu01", "ti')  # cut short
    said: list[str] = []
    kept = keeper(path, said)
    kept.load()
    (message,) = said
    assert message.startswith(f"the event history {path} was unreadable (not valid JSON: ")
    assert message.endswith(", starting afresh")
    (aside,) = [p for p in tmp_path.iterdir() if p.name.startswith("history-c.json.corrupt-")]
    assert aside.read_bytes().startswith(b'{"version": 1')
    assert not path.exists()
    kept.history.note_drain("gpu01", "xid:79", T0, "policy")
    kept.maybe_save(T0, force=True)
    assert json.loads(path.read_text())["drains"] == [
        {"node": "gpu01", "cause": "xid:79", "time_s": T0, "by": "policy"}
    ]


def test_a_file_of_another_version_is_left_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "history-c.json"
    path.write_text('{"version": 2, "future": true}')
    said: list[str] = []
    kept = keeper(path, said)
    kept.load()
    assert said == [
        f"the event history {path} has format version 2, this gputop reads 1: "
        "left as it is, and not saved over"
    ]
    kept.history.note_drain("gpu01", "xid:79", T0, "policy")
    kept.maybe_save(T0, force=True)
    assert json.loads(path.read_text()) == {"version": 2, "future": True}


def test_broken_records_are_left_out_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "history-c.json"
    good = {"node": "gpu01", "time_s": T0, "code": 79, "gpu": 4, "bus_id": "0000:1c:00.0", "message": "m"}
    path.write_text(
        json.dumps(
            {
                "version": 1,
                "xid_events": [good, {"node": "gpu01", "time_s": "yesterday", "code": 79}, 7],
                "drains": [{"node": "gpu01"}, {"node": "gpu01", "cause": "xid:79", "time_s": T0, "by": "x"}],
            }
        )
    )
    said: list[str] = []
    kept = keeper(path, said)
    kept.load()
    assert said == [f"the event history {path}: 3 records were not readable and were left out"]
    assert len(kept.history.drains("gpu01")) == 1
    assert kept.history.to_document()["xid_events"][0]["code"] == 79


def test_two_gputops_saving_one_file_keep_each_others_drains(tmp_path: Path) -> None:
    path = tmp_path / "history-c.json"
    watch, dashboard = keeper(path, []), keeper(path, [])
    watch.load()
    dashboard.load()
    watch.history.note_drain("gpu01", "xid:79", T0, "policy")
    watch.maybe_save(T0, force=True)
    dashboard.history.note_drain("gpu02", "xid:48", T0 + 5, "dashboard")
    dashboard.maybe_save(T0 + 5, force=True)
    nodes = [d["node"] for d in json.loads(path.read_text())["drains"]]
    assert nodes == ["gpu01", "gpu02"]


def test_events_without_a_gpu_are_kept_beside_those_with_one(tmp_path: Path) -> None:
    """A GPU that fell off the bus is not in the GPU list: its Xid names no GPU index."""
    path = tmp_path / "history-c.json"
    kept = keeper(path, [])
    stage = fresh_stage(kept.history)
    # the same time and code as a mapped event: only the GPU tells them apart
    line = "NVRM: Xid (PCI:0000:db:00): 95, pid=2121, Uncontained memory error"
    unmapped = XidEvent(T0, 95, "0000:db:00.0", None, line)
    xid_problems(stage, (xid95(T0), unmapped), T0 + 10)
    xid_problems(stage, (), T0 + HOUR_S)
    kept.maybe_save(T0 + HOUR_S, force=True)
    again = keeper(path, [])
    again.load()
    assert {(e["code"], e["gpu"]) for e in again.history.to_document()["xid_events"]} == {(95, None), (95, 4)}
