"""Each health rule fires on a real sample or a simulator incident, and stays quiet on healthy input; the
tracker's sustain and hysteresis keep hovering values from flapping."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gputop.core.config import Thresholds
from gputop.core.health import assess_node
from gputop.core.health_tracker import HealthTracker
from gputop.core.models import ClusterSnapshot, GpuSample, NodeSample, Severity, SlurmJob, SlurmState
from gputop.core.parsers.nvlink import parse_nvlink
from gputop.core.parsers.query_gpu import throttle_reason_names
from gputop.core.parsers.xid import parse_xid
from gputop.core.problem import gpu_verdicts
from gputop.core.xid_catalog import CATALOG
from gputop.core.xid_codes import xid74_registers, xid_verdict
from gputop.sim.simulator import SimulatedCluster
from tests.factories import facts_of
from tests.test_core_views import NOW, gpu, node

FIXTURES = Path(__file__).parent / "fixtures"
T = Thresholds()


def problems(sample: NodeSample, thresholds: Thresholds = T) -> list[tuple[Severity, str, str]]:
    return [(p.severity, p.kind, p.message) for p in assess_node(sample, None, thresholds, NOW)]


def one_gpu(**kw: object) -> NodeSample:
    return node("gpu001", (gpu(0, **kw),), expected_gpu_count=1)


# ---- hysteresis and sustain ------------------------------------------------------------------------------


def feed(tracker: HealthTracker, temps: list[float], mem_pct: float = 10.0, step_s: float = 1.0) -> list[str]:
    """The temperature flag's severity at each step, "" for none."""
    seen = []
    for i, temp in enumerate(temps):
        sample = one_gpu(temp=temp, mem_used=81559.0 * mem_pct / 100)
        snapshot = ClusterSnapshot.build("c", NOW + i * step_s, (sample,))
        flags = tracker.update(snapshot).get("gpu001", ())
        seen.append(next((f.severity.value for f in flags if f.kind == "temp"), ""))
    return seen


def test_a_temperature_hovering_at_the_threshold_does_not_flap() -> None:
    hovering = [84.0, 86.0] * 30
    assert set(feed(HealthTracker(T), hovering)) == {""}  # never over for 30 s in a row
    at_once = HealthTracker(dataclasses.replace(T, temp_sustain_s=0.0))
    assert feed(at_once, hovering) == [""] + ["warn"] * 59  # flagged once, held by the 3 C hysteresis
    assert feed(at_once, [83.0, 82.5, 81.9, 84.0]) == ["warn", "warn", "", ""]


def test_the_very_same_samples_again_are_judged_as_fresh_copies_would_be() -> None:
    """A store's source hands the same sample objects on between its refreshes: the tracker skips the
    GPUs that had nothing over a threshold, and the ones that had still move in time (sustain)."""
    cluster = SimulatedCluster(nodes=40, gpus_per_node=8, seed=5, start_time_s=NOW)
    nodes = list(cluster.result().nodes)
    hot = dataclasses.replace(nodes[3], gpus=tuple(g._replace(temp_c=92.0) for g in nodes[3].gpus))
    full = dataclasses.replace(
        nodes[7], gpus=tuple(g._replace(mem_used_mib=g.mem_total_mib) for g in nodes[7].gpus)
    )
    nodes[3], nodes[7] = hot, full
    same, fresh = HealthTracker(T), HealthTracker(T)
    for i in range(40):
        at_s = NOW + i
        kept = same.update(ClusterSnapshot.build("c", at_s, tuple(nodes)))
        copies = tuple(dataclasses.replace(n) for n in nodes)
        assert kept == fresh.update(ClusterSnapshot.build("c", at_s, copies))
    assert {f.kind for f in kept[hot.name]} == {"temp"}  # after the 30 s of sustain, on the same sample
    assert {f.kind for f in kept[full.name]} == {"mem"}


def test_a_spike_shorter_than_the_sustain_time_is_not_flagged_one_that_lasts_is() -> None:
    tracker = HealthTracker(T)  # 30 s
    assert set(feed(tracker, [60.0] + [92.0] * 20 + [60.0])) == {""}
    lasting = feed(HealthTracker(T), [92.0] * 40)
    assert lasting[:30] == [""] * 30
    assert lasting[30:] == ["crit"] * 10


def test_crit_clears_to_warn_then_to_nothing_through_the_hysteresis() -> None:
    tracker = HealthTracker(dataclasses.replace(T, temp_sustain_s=0.0))
    assert feed(tracker, [91.0, 88.0, 86.5, 84.0, 81.0]) == ["crit", "crit", "warn", "warn", ""]


def test_memory_has_a_two_point_hysteresis() -> None:
    tracker = HealthTracker(T)
    seen = []
    for i, pct in enumerate([94.0, 96.0, 94.0, 93.5, 92.9, 94.9]):
        sample = one_gpu(mem_used=81559.0 * pct / 100)
        flags = tracker.update(ClusterSnapshot.build("c", NOW + i, (sample,))).get("gpu001", ())
        seen.append(any(f.kind == "mem" for f in flags))
    assert seen == [False, True, True, True, False, False]


def test_pcie_generation_counts_only_under_load_and_once_it_lasts() -> None:
    tracker = HealthTracker(T)
    seen = []
    for i, util in enumerate([0.0] * 40 + [90.0] * 31):
        sample = one_gpu(util=util, pcie_link_gen=1, pcie_link_gen_max=5)
        flags = tracker.update(ClusterSnapshot.build("c", NOW + i, (sample,))).get("gpu001", ())
        seen.append(any(f.kind == "pcie_gen" for f in flags))
    assert seen == [False] * 70 + [True]  # idle GPUs lower the link speed: normal


def test_rows_are_rebuilt_only_when_a_flag_changes() -> None:
    from gputop.core.summary import derive_rows

    tracker = HealthTracker(dataclasses.replace(T, temp_sustain_s=0.0))
    sample = one_gpu(temp=86.0)
    first = ClusterSnapshot.build("c", NOW, (sample,))
    rows = derive_rows(first, first.nodes, T, health=tracker.update(first))
    second = ClusterSnapshot.build("c", NOW + 1, (sample,))
    from gputop.core.summary import ClusterView, summarize

    view = ClusterView(first, rows, summarize(rows.values()))
    again = derive_rows(second, second.nodes, T, view, health=tracker.update(second))
    assert again["gpu001"] is rows["gpu001"]
    assert rows["gpu001"].problems[0].message == "GPU0 86 C"


# ---- per-GPU verdicts ------------------------------------------------------------------------------------


def test_gpu_verdicts_are_each_gpus_worst_problem() -> None:
    sample = node(
        "gpu001",
        (gpu(0), gpu(1, temp=92.0, pcie_link_width_lanes=8, pcie_link_width_max_lanes=16), gpu(2, temp=86.0)),
        expected_gpu_count=3,
    )
    verdicts = gpu_verdicts(assess_node(sample, None, T, NOW))
    assert 0 not in verdicts
    assert verdicts[1] == (Severity.CRIT, "GPU1 92 C")
    assert verdicts[2] == (Severity.WARN, "GPU2 86 C")


# ---- facts a GPU reports ------------------------------------------------------------------------------


def test_healthy_gpus_with_every_new_field_have_no_problem() -> None:
    healthy = one_gpu(
        retired_pages_pending=False,
        remapped_rows_pending=False,
        remapped_rows_failure=False,
        pcie_link_gen=5,
        pcie_link_gen_max=5,
        pcie_link_width_lanes=16,
        pcie_link_width_max_lanes=16,
        throttle_reasons=throttle_reason_names(0x1 | 0x4),  # idle and the power cap: nothing wrong
    )
    assert problems(healthy) == []


def test_row_remapping_pending_warns_failed_is_critical() -> None:
    assert problems(one_gpu(remapped_rows_pending=True)) == [
        (Severity.WARN, "remap", "GPU0 row remapping pending: reset the GPU")
    ]
    assert problems(one_gpu(remapped_rows_pending=True, remapped_rows_failure=True)) == [
        (Severity.CRIT, "remap", "GPU0 row remapping failed: replace the GPU")
    ]
    assert problems(one_gpu(retired_pages_pending=True)) == [
        (Severity.WARN, "retired_pages", "GPU0 page retirement pending: reset the GPU")
    ]


def test_pcie_width_below_max_always_warns_generation_only_under_load() -> None:
    narrow = one_gpu(util=0.0, pcie_link_width_lanes=8, pcie_link_width_max_lanes=16)
    assert problems(narrow) == [(Severity.WARN, "pcie", "GPU0 PCIe x8, max x16")]
    assert problems(one_gpu(util=3.0, pcie_link_gen=1, pcie_link_gen_max=5)) == []
    assert problems(one_gpu(util=95.0, pcie_link_gen=3, pcie_link_gen_max=5)) == [
        (Severity.WARN, "pcie", "GPU0 PCIe gen3, max gen5 under load")
    ]


def test_throttle_reasons_by_severity() -> None:
    def throttled(mask: int) -> list[tuple[Severity, str, str]]:
        return problems(one_gpu(throttle_reasons=throttle_reason_names(mask)))

    assert throttled(0x80 | 0x4) == [
        (Severity.CRIT, "throttle", "GPU0 throttled: HW power brake (node power supply)")
    ]
    assert throttled(0x40 | 0x20) == [(Severity.WARN, "throttle", "GPU0 throttled: HW thermal slowdown")]
    assert throttled(0x8) == [(Severity.WARN, "throttle", "GPU0 throttled: HW slowdown")]
    assert throttled(0x20) == [(Severity.WARN, "throttle", "GPU0 throttled: SW thermal slowdown")]
    assert throttled(0x4) == throttled(0x1) == throttled(0x2) == []


# What each catalogue bucket means to gputop, written out here independently of the module under test.
EXPECTED_BY_BUCKET: dict[str, Severity | None] = {
    "IGNORE": None,
    "RESTART_APP": Severity.WARN,
    "CHECK_MECHANICALS": Severity.WARN,
    "CHECK_UVM": Severity.WARN,
    "UPDATE_SWFW": Severity.WARN,
    "WORKFLOW_XID_45": Severity.WARN,
    "RESET_GPU": Severity.CRIT,
    "RESTART_BM": Severity.CRIT,
    "RESTART_VM": Severity.CRIT,
    "CONTACT_SUPPORT": Severity.CRIT,
    "WORKFLOW_XID_48": Severity.CRIT,
    "WORKFLOW_NVLINK_ERR": Severity.CRIT,
}


def test_every_catalogue_code_follows_its_bucket() -> None:
    """Each code's verdict follows the catalogue row it came from: its bucket and the severity that bucket
    means. A code the catalogue lists as unused is a WARN; 144-150, 154 and 162-172 are tested apart."""
    assert min(CATALOG) == 1 and max(CATALOG) >= 172 and len(CATALOG) == max(CATALOG)
    special = {*range(144, 151), 154, *range(162, 173)}
    for code, entry in CATALOG.items():
        verdict = xid_verdict(code, node="gpu042", gpu=3)
        if code in special:
            continue
        assert verdict.bucket == entry.immediate, code
        expected = Severity.WARN if entry.description == "Unused" else EXPECTED_BY_BUCKET[entry.immediate]
        assert verdict.severity is expected, (code, entry.immediate, verdict)
        assert verdict.action, code
        if expected is Severity.CRIT:
            assert "drain gpu042" in verdict.action, (code, verdict.action)


def test_the_codes_the_old_split_got_wrong() -> None:
    def verdict(code: int, text: str = "") -> tuple[Severity | None, str]:
        found = xid_verdict(code, text, node="gpu042", gpu=3)
        return found.severity, found.action

    for code in (63, 92):  # the catalogue's IGNORE: a remap recorded, a high single-bit rate
        assert verdict(code)[0] is None
    assert verdict(94) == (Severity.WARN, "restart the job on GPU3")  # contained: the job's
    assert verdict(61)[0] is Severity.WARN  # unused on current GPUs
    for code in (109, 136, 155, 156, 158):
        assert verdict(code) == (Severity.CRIT, "drain gpu042, then reset GPU3"), code
    assert verdict(151) == (Severity.CRIT, "drain gpu042, then restart its VM")
    for code in (167, 171, 172):
        severity, action = verdict(code)
        assert severity is Severity.CRIT and "reset GPU3" in action and "gputop's reading" in action
    assert verdict(79) == (
        Severity.CRIT,
        "drain gpu042, then reboot gpu042: a GPU reset will not bring GPU3 back",
    )
    assert verdict(48) == (Severity.CRIT, "drain gpu042, then reset GPU3 so the failed row is remapped")
    assert verdict(9999)[0] is Severity.WARN and "not in NVIDIA's Xid catalogue" in verdict(9999)[1]


# Xid 154 lines as drivers print them, from public bug reports and notes found by text search (GitHub
# documents; the index does not say which repository): NVIDIA 610 with "OS Reboot", a desktop driver's
# "PF FLR" (a function-level reset), and the catalogue's own wording.
REAL_154_LINES = (
    "NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (OS Reboot)",
    "NVRM: Xid (PCI:0000:0d:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (PF FLR)",
    "NVRM: Xid (PCI:0000:02:00): 154, GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot "
    "Required)",
)


def test_xid_154_does_what_its_line_names() -> None:
    reboot, reset, reboot_again = (xid_verdict(154, line, node="gpu042", gpu=0) for line in REAL_154_LINES)
    assert reboot == reboot_again
    assert (reboot.severity, reboot.action) == (Severity.CRIT, "drain gpu042, then reboot gpu042")
    assert (reset.severity, reset.action) == (Severity.CRIT, "drain gpu042, then reset GPU0")
    none = xid_verdict(154, "154, GPU recovery action changed from 0x2 (Node Reboot Required) to 0x0 (None)")
    assert none.severity is None
    assert xid_verdict(154, "154, something else").severity is Severity.WARN


def test_nvlink5_xids_take_their_severity_from_the_line() -> None:
    line = (FIXTURES / "kernel-xid" / "kmsg-line-xid145-rlw-rxpipe-nonfatal-gpud-pr1174.txt").read_text()
    assert xid_verdict(145, line).severity is None  # Nonfatal: informational
    fatal = xid_verdict(145, line.replace("Nonfatal", "Fatal"), node="gpu042", gpu=1)
    assert (fatal.severity, fatal.action) == (Severity.CRIT, "drain gpu042, then reset GPU1")
    for name in (
        "kmsg-line-xid149-netir-fatal-gpud-pr1174.txt",
        "kmsg-line-xid149-netir-link-evt-fatal-gpud-pr1160.txt",
    ):
        (event,) = parse_xid((FIXTURES / "kernel-xid" / name).read_text()).events
        verdict = xid_verdict(event.code, event.message, node="gpu042", gpu=0)
        assert (event.code, verdict.severity, verdict.action_class) == (149, Severity.CRIT, "reset"), name
        assert verdict.action == "drain gpu042, then reset GPU0"
    (saw,) = parse_xid(
        (FIXTURES / "kernel-xid" / "kmsg-line-xid144-saw-mvb-nonfatal-gpud-pr1160.txt").read_text()
    ).events
    assert (saw.code, xid_verdict(saw.code, saw.message).severity) == (144, None)
    assert xid_verdict(146, "146, TLW_RX").severity is Severity.WARN  # neither word: decode it


def test_xid_74_keeps_its_register_words() -> None:
    text = (
        FIXTURES / "kernel-xid" / "dmesg-line-xid74-nvlink-registers-nvsentinel-design-doc.txt"
    ).read_text()
    (event,) = parse_xid(text).events
    assert event.message.endswith(
        "NVLink: fatal error detected on link 14(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"
    )
    assert xid74_registers(event.message) == (14, (0, 0, 0x10000, 0, 0, 0, 0))
    verdict = xid_verdict(74, event.message, node="gpu042", gpu=2)
    assert verdict.meaning.endswith("on link 14 (0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)")
    assert (verdict.severity, verdict.action_class) == (Severity.CRIT, "reset")
    assert xid74_registers("74, NVLink Error on GPU 0000:3b:00") is None


def test_xid_rules_on_real_kernel_logs() -> None:
    rlw = parse_xid(
        (FIXTURES / "kernel-xid" / "kmsg-line-xid145-rlw-rxpipe-nonfatal-gpud-pr1174.txt").read_text()
    )
    # Nonfatal: listed with the node (its events), no problem
    assert rlw.events and not [p for p in problems(node("gpu001", xid_events=rlw.events)) if p[1] == "xid"]
    mmu = parse_xid(
        (
            FIXTURES / "kernel-xid" / "dmesg-rtx5070ti-open-595-xid31-mmu-fault-new-format-ogkm-1030.txt"
        ).read_text()
    )
    assert mmu.events
    severities = {p[0] for p in problems(node("gpu001", xid_events=mmu.events)) if p[1] == "xid"}
    assert severities == {Severity.WARN}  # an application's page fault


NVLINK_TEXT = (
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n"
    "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-b)\n\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 GB/s\n"
    "GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-c)\n\t Link 0: <inactive>\n\t Link 1: <inactive>\n"
)


def test_an_inactive_nvlink_on_the_node_alone_warns_once() -> None:
    status = parse_nvlink(NVLINK_TEXT)
    sample = node(
        "gpu001", (gpu(0), gpu(1), gpu(2)), expected_gpu_count=3, facts=facts_of({"nvlink": status})
    )
    # GPU2 has no link up at all (a board without bridges): its peers' comparison speaks for that
    assert problems(sample) == [(Severity.WARN, "nvlink", "GPU0 has 1 of 2 NVLinks active")]


# ---- simulator incidents -----------------------------------------------------------------------------------


def test_the_new_simulator_incidents_are_found_and_healthy_nodes_stay_quiet() -> None:
    cluster = SimulatedCluster(seed=42, start_time_s=NOW)
    by_kind = {i.kind: i for i in cluster.incidents}
    result = cluster.result()
    samples = {n.name: n for n in result.nodes}
    pcie = by_kind["pcie_degraded"]
    assert problems(samples[pcie.node]) == [(Severity.WARN, "pcie", "GPU2 PCIe x8, max x16")]
    remap = by_kind["remap_pending"]
    assert problems(samples[remap.node]) == [
        (Severity.WARN, "remap", "GPU6 row remapping pending: reset the GPU")
    ]
    troubled = {i.node for i in cluster.incidents}
    for name, sample in samples.items():
        if name not in troubled:
            kinds = {p[1] for p in problems(sample)}
            assert not kinds & {"remap", "retired_pages", "pcie", "nvlink"}, name


def test_a_gpu_sample_without_the_new_fields_reads_them_as_unknown() -> None:
    sample = GpuSample(0, "GPU-0", "x", None, 1.0, 1.0, 1.0, 2.0, 40.0, 1.0, 2.0, 1.0, 1.0, 0, False)
    assert sample.remapped_rows_pending is None and sample.pcie_link_width_lanes is None


def one_job_on_gpu001() -> SlurmState:
    """Job 4812008 running on GPUs 0-3 of gpu001."""
    job = SlurmJob("4812008", "train", "alice", "train", "RUNNING", gpus_by_node={"gpu001": (0, 1, 2, 3)})
    return SlurmState(nodes={}, jobs=(job,), sampled_at_s=NOW)


def test_an_application_xid_names_the_job_holding_the_gpu() -> None:
    from gputop.core.models import XidEvent
    from gputop.core.summary import node_row

    page_fault = XidEvent(NOW - 5, 31, "0000:3b:00", 2, "pid=4242, name=python, Ch 00000008, intr 00000000")
    sample = node("gpu001", xid_events=(page_fault,))
    jobs = one_job_on_gpu001()
    (xid,) = [p for p in node_row(sample, None, T, NOW, jobs=jobs).problems if p.kind == "xid"]
    assert (xid.severity, xid.action) == (Severity.WARN, "restart job 4812008 on GPU2")
    (alone,) = [p for p in node_row(sample, None, T, NOW).problems if p.kind == "xid"]
    assert alone.action == "restart the job on GPU2"


def test_repeats_change_the_verdict() -> None:
    from gputop.core.models import XidEvent
    from gputop.core.summary import node_row

    def xid(code: int, gpu_index: int, ago_s: float) -> XidEvent:
        return XidEvent(NOW - ago_s, code, "0000:3b:00", gpu_index, "pid=1, name=python")

    def xids(
        *events: XidEvent, jobs: SlurmState | None = None
    ) -> list[tuple[Severity, int | None, str, str]]:
        row = node_row(node("gpu001", xid_events=events), None, T, NOW, jobs=jobs)
        return [(p.severity, p.gpu_index, p.message, p.action) for p in row.problems if p.kind == "xid"]

    # three times on one GPU within the hour: a hardware suspect, whatever one contained error says
    ((severity, gpu_index, message, action),) = xids(xid(94, 3, 50), xid(94, 3, 900), xid(94, 3, 3000))
    assert (severity, gpu_index) == (Severity.CRIT, 3) and "Xid 94 x3 in 60 min" in message
    assert action == "hardware suspect: drain gpu001, run dcgmi diag -r 3 on GPU3, then RMA it if it fails"
    # twice, or a third time outside the window: the catalogue's verdict, counted
    assert xids(xid(94, 3, 50), xid(94, 3, 900)) == [
        (Severity.WARN, 3, "GPU3 Xid 94 x2: Contained memory error", "restart the job on GPU3")
    ]
    assert xids(xid(94, 3, 50), xid(94, 3, 900), xid(94, 3, 4000))[0][0] is Severity.WARN
    # even an informational Xid, repeated, is a suspect
    assert xids(xid(63, 1, 10), xid(63, 1, 20), xid(63, 1, 30))[0][0] is Severity.CRIT
    # the same application Xid on several GPUs of one job: the job's, once
    jobs = one_job_on_gpu001()
    assert xids(xid(31, 1, 5), xid(31, 2, 6), jobs=jobs) == [
        (
            Severity.WARN,
            None,
            "Xid 31 on GPU1,GPU2 of job 4812008: GPU memory page fault",
            "the job, not the GPUs: restart job 4812008 and look at the application",
        )
    ]
