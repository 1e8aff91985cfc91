"""The alert book: identity across ticks, worst and oldest first, acknowledgements and silences, and new
CRIT alerts announced once (never for what was there when gputop started)."""

from __future__ import annotations

from gputop.core.alerts import AlertBook, AlertKey, alert_reason
from gputop.core.health import Problem
from gputop.core.models import Severity
from tests.factories import facts_of

T0 = 1_800_000_000.0
CRIT, WARN = Severity.CRIT, Severity.WARN


def hot(temp: int, severity: Severity = WARN, node: str = "gpu001") -> Problem:
    return Problem(severity, node, 3, "temp", f"GPU3 {temp} C")


def xid(node: str = "gpu002") -> Problem:
    return Problem(CRIT, node, 4, "xid", "GPU4 Xid 79: GPU has fallen off the bus", "79")


def test_an_alert_keeps_its_start_while_its_words_change_and_is_new_again_after_it_cleared() -> None:
    book = AlertBook()
    book.update([hot(86)], T0)
    state = book.update([hot(88)], T0 + 30)
    (alert,) = state.alerts.values()
    assert alert.message == "GPU3 88 C" and alert.since_s == T0
    assert alert.key == AlertKey("gpu001", "temp", 3) and alert.key.text == "gpu001/temp/GPU3"
    book.update([], T0 + 60)
    (again,) = book.update([hot(87)], T0 + 90).alerts.values()
    assert again.since_s == T0 + 90


def test_worst_then_oldest_first() -> None:
    book = AlertBook()
    book.update([hot(86)], T0)
    state = book.update([hot(86), xid("gpu009"), hot(87, node="gpu000")], T0 + 10)
    assert [a.key.text for a in state.ordered()] == [
        "gpu009/xid/GPU4/79",
        "gpu001/temp/GPU3",
        "gpu000/temp/GPU3",
    ]


def test_new_crit_is_announced_once_and_not_for_what_was_there_at_start() -> None:
    book = AlertBook()
    assert book.update([xid()], T0).new_crit == (), "there before anyone watched"
    assert book.update([xid()], T0 + 1).new_crit == ()
    state = book.update([xid(), xid("gpu003")], T0 + 2)
    assert [a.node for a in state.new_crit] == ["gpu003"]
    assert book.update([xid(), xid("gpu003")], T0 + 3).new_crit == ()
    # a warning that becomes critical is news too
    book.update([hot(86)], T0 + 4)
    assert [a.key.kind for a in book.update([hot(91, CRIT)], T0 + 5).new_crit] == ["temp"]


def test_acknowledged_lasts_while_the_problem_does_and_is_never_announced() -> None:
    book = AlertBook()
    book.update([hot(86)], T0)
    book.acknowledge("gpu001/temp/GPU3")
    state = book.update([hot(91, CRIT)], T0 + 1)
    assert state.alerts["gpu001/temp/GPU3"].acknowledged and state.new_crit == ()
    book.update([], T0 + 2)
    assert not book.update([hot(86)], T0 + 3).alerts["gpu001/temp/GPU3"].acknowledged
    book.acknowledge("gpu001/temp/GPU3")
    assert not book.acknowledge("gpu001/temp/GPU3", False).alerts["gpu001/temp/GPU3"].acknowledged
    assert book.acknowledge("nope/x/node").alerts.keys() == {"gpu001/temp/GPU3"}


def test_a_silence_lasts_until_its_time_even_if_the_problem_comes_and_goes() -> None:
    book = AlertBook()
    book.update([hot(86)], T0)
    book.silence("gpu001/temp/GPU3", T0 + 600)
    book.update([], T0 + 10)
    state = book.update([hot(91, CRIT)], T0 + 20)
    alert = state.alerts["gpu001/temp/GPU3"]
    assert alert.silenced(T0 + 20) and state.new_crit == ()
    later = book.update([hot(91, CRIT)], T0 + 601).alerts["gpu001/temp/GPU3"]
    assert not later.silenced(T0 + 601) and later.silenced_until_s is None
    book.silence("gpu001/temp/GPU3", T0 + 9999)
    assert book.silence("gpu001/temp/GPU3", None).alerts["gpu001/temp/GPU3"].silenced_until_s is None


def test_two_problems_of_one_kind_on_one_gpu_make_one_alert_the_worse() -> None:
    book = AlertBook()
    state = book.update(
        [Problem(WARN, "n1", 0, "xid", "GPU0 Xid 13"), Problem(CRIT, "n1", 0, "xid", "GPU0 Xid 79")], T0
    )
    (alert,) = state.alerts.values()
    assert alert.severity is CRIT and alert.message == "GPU0 Xid 79"


def test_the_drain_reason_carries_the_words_and_since_when() -> None:
    book = AlertBook()
    (alert,) = book.update([xid()], T0).alerts.values()
    assert alert_reason(alert) == "GPU4 Xid 79: GPU has fallen off the bus (since 2027-01-15 08:00 UTC)"


def test_subjects_keep_two_xids_on_one_gpu_and_two_ports_of_one_node_apart() -> None:
    book = AlertBook()
    xids = [
        Problem(CRIT, "n1", 0, "xid", "GPU0 Xid 48", "48"),
        Problem(CRIT, "n1", 0, "xid", "GPU0 Xid 79", "79"),
    ]
    ports = [Problem(CRIT, "n1", None, "ib", f"mlx5_{i} port 1 Down", f"mlx5_{i} port 1") for i in (1, 3)]
    assert sorted(book.update([*xids, *ports], T0).alerts) == [
        "n1/ib/node/mlx5_1 port 1",
        "n1/ib/node/mlx5_3 port 1",
        "n1/xid/GPU0/48",
        "n1/xid/GPU0/79",
    ]


def test_an_alert_begins_when_its_event_did_not_when_gputop_first_saw_it() -> None:
    """An Xid logged at 14:53 read by a gputop started at 15:08: the alert's age and the drain reason
    built from it say 14:53, not 15:08."""
    from gputop.core.config import Thresholds
    from gputop.core.health import assess_node
    from gputop.core.models import NodeSample, Reachability, XidEvent

    logged_s, started_s = 1_800_000_000.0, 1_800_000_900.0  # 08:00, and gputop 15 minutes later
    node = NodeSample(
        "gpu007", Reachability.OK, started_s, (), 8, xid_events=(XidEvent(logged_s, 79, None, 4, "fell off"),)
    )
    problems = assess_node(node, None, Thresholds(), started_s)
    (xid,) = [p for p in problems if p.kind == "xid"]
    assert xid.since_s == logged_s
    book = AlertBook()
    alert = book.update(problems, started_s).alerts[xid_key_text(xid)]
    assert alert.since_s == logged_s
    assert alert_reason(alert).endswith("(since 2027-01-15 08:00 UTC)")
    ahead = Problem(Severity.CRIT, "gpu008", 1, "xid", "GPU1 Xid 79", "79", started_s + 3600)
    assert book.update([ahead], started_s).alerts[xid_key_text(ahead)].since_s == started_s, "never ahead"


def xid_key_text(problem: Problem) -> str:
    return AlertKey(problem.node, problem.kind, problem.gpu_index, problem.subject).text


def test_a_node_is_heard_in_full_once_its_first_facts_are_read_or_after_a_while() -> None:
    from gputop.core.alerts import SETTLE_S, FirstLook
    from gputop.core.models import NodeSample, Reachability

    look = FirstLook()
    quiet = NodeSample("gpu001", Reachability.OK, 0.0, (), 8)  # metrics, no facts yet
    told = NodeSample("gpu002", Reachability.OK, 0.0, (), 8, facts=facts_of({}, {"topology": "timed out"}))
    never = NodeSample("gpu003", Reachability.DOWN, None)
    assert look.settling([quiet, told, never], 0.0) == {"gpu001", "gpu002", "gpu003"}
    # gpu002's facts came in that tick: from the next one on, what it reports is news
    assert look.settling([quiet, told, never], 1.0) == {"gpu001", "gpu003"}
    assert look.settling([quiet, told, never], SETTLE_S + 1.0) == {"gpu001", "gpu003"}
    assert look.settling([quiet, told, never], SETTLE_S + 2.0) == {"gpu003"}, "answered long enough"
    new = NodeSample("gpu004", Reachability.OK, 5.0, (), 8)
    assert "gpu004" in look.settling([quiet, told, never, new], SETTLE_S + 3.0), "a node added later"


def test_an_alert_carries_the_problems_action_for_the_alerts_pane() -> None:
    from gputop.tui.widgets.alert_table import ALERT_COLUMNS, AlertContext

    action = "drain gpu007, then reset GPU4 so the failed row is remapped"
    xid = Problem(Severity.CRIT, "gpu007", 4, "xid", "GPU4 Xid 48: Double Bit ECC Error", "48", 100.0, action)
    state = AlertBook().update([xid], 200.0)
    (alert,) = state.alerts.values()
    assert alert.action == action
    (problem_column,) = [c for c in ALERT_COLUMNS if c.key == "message"]
    text, severity = problem_column.cell(alert, AlertContext(200.0))
    assert text == f"GPU4 Xid 48: Double Bit ECC Error -> {action}" and severity is Severity.CRIT
