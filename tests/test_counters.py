"""The counters fleets judge GPUs by: `nvidia-smi -q` (PCIe replays, ECC, retired pages, spare rows, HBM
temperature) and `nvidia-smi nvlink -e`, read from real outputs, turned into rates between two reads, and
judged against the config's limits (DCGM's by default); the simulator shows each."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gputop.core.config import Thresholds
from gputop.core.models import ClusterSnapshot, Severity
from gputop.core.parsers.nvlink_errors import NvlinkErrors, parse_nvlink_errors
from gputop.core.parsers.registry import registry
from gputop.core.parsers.smi_counters import GpuCounters, SmiCounters, parse_smi_counters
from gputop.core.view import ViewStage
from gputop.sim.counters import nvlink_errors_text, smi_counters_text
from gputop.sim.simulator import SimulatedCluster
from tests.factories import facts_of, gpu_sample, node_sample

FIXTURES = Path(__file__).parent / "fixtures"
AZURE_A100 = (
    FIXTURES
    / "nvidia-smi-q-text"
    / "a100-sxm4-40gb-x8-azure-nd-a100-v4-drv460-passthrough-azhpc-diagnostics.txt"
)
H800 = FIXTURES / "nvidia-smi-q-text" / "h800-80gb-drv525-single-gpu-i0-llm-action.txt"
ECC_535 = (
    FIXTURES
    / "nvidia-smi-q-text"
    / "a100-sxm4-40gb-x8-drv535-q-d-ECC-first-2-gpus-TRUNCATED-id60859828466.txt"
)
NVLINK_E = (
    FIXTURES / "nvidia-smi-nvlink-e" / "a100-sxm4-40gb-gpu0-12links-drv535-nvlink-e-i0-id60859828466.txt"
)
T0 = 1_800_000_000.0
T = Thresholds()
BUS = "00000000:18:00.0"


def test_the_full_report_of_an_8_gpu_a100_node_gives_each_gpus_counters() -> None:
    parsed = parse_smi_counters(AZURE_A100.read_text())
    assert isinstance(parsed, SmiCounters)
    assert [g.pci_bus_id for g in parsed.gpus][:2] == ["00000001:00:00.0", "00000002:00:00.0"]
    assert len(parsed.gpus) == 8
    first = parsed.gpus[0]
    assert (first.pcie_replays, first.ecc_volatile_correctable, first.ecc_volatile_uncorrectable) == (0, 0, 0)
    assert (first.remapped_rows_correctable, first.banks_without_spare) == (0, 0)
    assert (first.memory_temp_c, first.memory_max_operating_temp_c, first.gpu_slowdown_temp_c) == (
        40.0,
        95.0,
        89.0,
    )
    assert first.retired_pages is None  # "N/A" on an A100: it remaps rows instead
    # "Pending" of MIG Mode, of Retired Pages and of Remapped Rows are three different things
    assert first.retired_pages_pending is None
    assert parsed.by_bus_id("0001:00:00.0") is first


def test_ecc_disabled_reads_as_not_reported_never_zero() -> None:
    parsed = parse_smi_counters(H800.read_text())
    assert isinstance(parsed, SmiCounters)
    (gpu,) = parsed.gpus
    assert gpu.ecc_volatile_correctable is None and gpu.ecc_volatile_uncorrectable is None
    assert gpu.memory_temp_c == 44.0


def test_driver_535s_split_ecc_lines_are_summed_and_the_aggregate_is_not_taken_for_the_volatile() -> None:
    parsed = parse_smi_counters(ECC_535.read_text())
    assert isinstance(parsed, SmiCounters)
    assert [g.ecc_volatile_correctable for g in parsed.gpus] == [0, 0]  # GPU 0B's 87 are aggregate
    assert [g.pcie_replays for g in parsed.gpus] == [None, None]  # -d ECC alone: no PCI section


def test_the_older_single_and_double_bit_layout_and_retired_pages() -> None:
    # the layout of drivers before about 525 (V100 era), written here: no real capture with counts at hand
    text = (
        "GPU 00000000:18:00.0\n"
        "    ECC Errors\n"
        "        Volatile\n"
        "            Single Bit\n"
        "                Device Memory             : 12\n"
        "                Total                     : 14\n"
        "            Double Bit\n"
        "                Total                     : 0\n"
        "    Retired Pages\n"
        "        Single Bit ECC                    : 60\n"
        "        Double Bit ECC                    : 4\n"
        "        Pending Page Blacklist            : Yes\n"
    )
    parsed = parse_smi_counters(text)
    assert isinstance(parsed, SmiCounters)
    (gpu,) = parsed.gpus
    assert (gpu.ecc_volatile_correctable, gpu.ecc_volatile_uncorrectable) == (14, 0)
    assert (gpu.retired_pages, gpu.retired_pages_pending) == (64, True)
    node = node_sample("gpu001", (gpu_sample(0, pci_bus_id=BUS),), facts=facts_of({"counters": parsed}))
    view = ViewStage(T, interval_s=1.0).derive(ClusterSnapshot.build("c", T0, (node,)))
    (problem,) = [p for p in view.rows["gpu001"].problems if p.kind == "retired_pages"]
    assert problem.severity is Severity.CRIT and problem.action == "drain gpu001, then RMA GPU0"


def test_garbage_is_a_failure_with_its_reason() -> None:
    assert parse_smi_counters("Segmentation fault\n").reason == "no 'GPU <bus id>' sections"  # type: ignore[union-attr]
    assert "nvidia-smi-q" in registry() and "nvlink-errors" in registry()


def test_nvlink_error_counters_of_a_real_a100() -> None:
    parsed = parse_nvlink_errors(NVLINK_E.read_text())
    assert isinstance(parsed, NvlinkErrors)
    (gpu,) = parsed.gpus
    assert gpu.uuid == "GPU-fde0a018-ad1a-bbec-ccf6-50a9f64bd178"
    assert len(gpu.links) == 12 and (gpu.crc, gpu.replay, gpu.recovery) == (0, 0, 0)
    assert gpu.links[0].counters == (("Replay Errors", 0), ("Recovery Errors", 0), ("CRC Errors", 0))
    assert parse_nvlink_errors("") == NvlinkErrors(notes=("no output: no NVLink reported",))


def test_newer_drivers_counters_are_kept_under_their_names_and_sorted_by_kind() -> None:
    text = (
        "GPU 0: NVIDIA GB200 (UUID: GPU-x)\n\t Link 0: Rx Errors: 3\n"
        "\t Link 0: Link recovery failed events: 2\n"
    )
    parsed = parse_nvlink_errors(text)
    assert isinstance(parsed, NvlinkErrors)
    assert parsed.gpus[0].recovery == 2 and parsed.gpus[0].crc == 0
    assert parsed.gpus[0].links[0].counters == (("Rx Errors", 3), ("Link recovery failed events", 2))


def _counters(**values: object) -> SmiCounters:
    return SmiCounters((dataclasses.replace(GpuCounters(BUS), **values),))  # type: ignore[arg-type]


def _problems(stage: ViewStage, at_s: float, counters: SmiCounters, links: NvlinkErrors | None = None):  # type: ignore[no-untyped-def]
    values: dict[str, object] = {"counters": counters}
    if links is not None:
        values["nvlink_errors"] = links
    node = node_sample(
        "gpu001", (gpu_sample(0, pci_bus_id=BUS),), sampled_at_s=at_s, facts=facts_of(values, read_at_s=at_s)
    )
    view = stage.derive(ClusterSnapshot.build("c", at_s, (node,)))
    return [(p.severity, p.kind, p.message) for p in view.rows["gpu001"].problems]


def test_a_rate_needs_two_reads_and_a_reset_counter_gives_none() -> None:
    stage = ViewStage(T, interval_s=1.0)
    assert _problems(stage, T0, _counters(pcie_replays=1000, ecc_volatile_correctable=5)) == []
    # 60 s later: 20 replays a minute (limit 8), 5 single-bit errors a minute (limit 10)
    assert _problems(stage, T0 + 60, _counters(pcie_replays=1020, ecc_volatile_correctable=10)) == [
        (Severity.WARN, "pcie_replay", "GPU0 PCIe replays 20/min (limit 8/min)")
    ]
    # the GPU was reset: its counters start again, no negative rate and no problem
    assert _problems(stage, T0 + 120, _counters(pcie_replays=3, ecc_volatile_correctable=0)) == []
    assert _problems(stage, T0 + 180, _counters(pcie_replays=3, ecc_volatile_correctable=900)) == [
        (Severity.WARN, "ecc_sbe", "GPU0 900 single-bit ECC errors/min (limit 10/min)")
    ]


def test_the_rates_a_tick_handed_out_stay_as_they_were_and_an_unchanged_tick_hands_them_again() -> None:
    from gputop.core.counter_rates import CounterRateTracker

    def snapshot(at_s: float, replays: int, read_at_s: float) -> ClusterSnapshot:
        facts = facts_of({"counters": _counters(pcie_replays=replays)}, read_at_s=read_at_s)
        node = node_sample("gpu001", (gpu_sample(0, pci_bus_id=BUS),), sampled_at_s=at_s, facts=facts)
        return ClusterSnapshot.build("c", at_s, (node,))

    tracker = CounterRateTracker()
    tracker.update(snapshot(T0, 1000, T0))
    first = tracker.update(snapshot(T0 + 60, 1020, T0 + 60))
    assert first["gpu001"][0].pcie_replays_per_min == 20.0
    same = snapshot(T0 + 61, 1020, T0 + 60)  # the same read again: nothing new
    assert tracker.update(same) is first
    later = tracker.update(snapshot(T0 + 120, 1080, T0 + 120))
    assert later["gpu001"][0].pcie_replays_per_min == 60.0
    assert first["gpu001"][0].pcie_replays_per_min == 20.0  # what the earlier view holds is unchanged


def test_nvlink_crc_rate_and_new_replay_errors_warn() -> None:
    stage = ViewStage(T, interval_s=1.0)

    def links(crc: int, replays: int) -> NvlinkErrors:
        text = (
            f"GPU 0: NVIDIA H100 (UUID: GPU-0)\n\t Link 0: Replay Errors: {replays}\n"
            f"\t Link 0: CRC Errors: {crc}\n"
        )
        parsed = parse_nvlink_errors(text)
        assert isinstance(parsed, NvlinkErrors)
        return parsed

    quiet = _counters()
    assert _problems(stage, T0, quiet, links(0, 0)) == []
    assert _problems(stage, T0 + 60, quiet, links(3_000, 0)) == []  # 50/s: under DCGM's 100/s
    assert sorted(_problems(stage, T0 + 120, quiet, links(33_000, 2))) == [
        (Severity.WARN, "nvlink_errors", "GPU0 2 new NVLink replay/recovery errors"),
        (Severity.WARN, "nvlink_errors", "GPU0 NVLink CRC errors 500/s (limit 100/s)"),
    ]


def test_hbm_temperature_against_the_memorys_own_limit() -> None:
    stage = ViewStage(T, interval_s=1.0)
    assert _problems(stage, T0, _counters(memory_temp_c=89.0, memory_max_operating_temp_c=95.0)) == []
    assert _problems(stage, T0 + 60, _counters(memory_temp_c=91.0, memory_max_operating_temp_c=95.0)) == [
        (Severity.WARN, "hbm_temp", "GPU0 HBM 91 C, near its 95 C limit")
    ]
    assert _problems(stage, T0 + 120, _counters(memory_temp_c=95.0, memory_max_operating_temp_c=95.0)) == [
        (Severity.CRIT, "hbm_temp", "GPU0 HBM 95 C, at its 95 C limit (memory slowed down)")
    ]
    strict = ViewStage(dataclasses.replace(T, hbm_temp_margin_c=2.0), interval_s=1.0)
    assert _problems(strict, T0, _counters(memory_temp_c=92.0, memory_max_operating_temp_c=95.0)) == []


def test_the_simulators_text_reads_back_as_the_values_it_came_from() -> None:
    cluster = SimulatedCluster(nodes=32, start_time_s=T0)
    for node in cluster.result().nodes:
        counters, links = node.facts.counters.value, node.facts.nvlink_errors.value
        assert isinstance(counters, SmiCounters) and isinstance(links, NvlinkErrors)
        assert parse_smi_counters(smi_counters_text(counters)) == SmiCounters(counters.gpus)
        text = nvlink_errors_text(links.gpus, "NVIDIA H100 80GB HBM3", {g.index: g.uuid for g in node.gpus})
        again = parse_nvlink_errors(text)
        assert isinstance(again, NvlinkErrors)
        assert [g.links for g in again.gpus] == [g.links for g in links.gpus]


def test_the_demo_cluster_shows_each_counter_signal_and_a_flapping_port() -> None:
    cluster = SimulatedCluster(nodes=32, start_time_s=T0)
    stage = ViewStage(T, interval_s=1.0)
    where = {i.kind: i.node for i in cluster.incidents}
    kinds: dict[str, set[str]] = {}
    for step in range(0, 301, 10):
        cluster.advance_to(T0 + step)
        result = cluster.result()
        view = stage.derive(ClusterSnapshot.build("demo", T0 + step, result.nodes, result.slurm))
        for name, row in view.rows.items():
            kinds.setdefault(name, set()).update(f"{p.kind}:{p.severity.name}" for p in row.problems)
        flapping = [p for p in view.rows[where["ib_flapping"]].problems if "flapping" in p.message]
        if flapping:
            kinds[where["ib_flapping"]].add("flapping")
    assert "pcie_replay:WARN" in kinds[where["pcie_replays"]]
    assert "nvlink_errors:WARN" in kinds[where["nvlink_crc"]]
    assert "ecc_sbe:WARN" in kinds[where["sbe_storm"]]
    assert "hbm_temp:WARN" in kinds[where["hbm_hot"]]
    assert "remap:WARN" in kinds[where["memory_wear"]]
    assert "flapping" in kinds[where["ib_flapping"]]
    quiet = set(cluster.node_names) - {i.node for i in cluster.incidents}
    counter_kinds = {"pcie_replay", "nvlink_errors", "ecc_sbe", "hbm_temp"}
    assert not any(k.split(":")[0] in counter_kinds for name in quiet for k in kinds[name])
