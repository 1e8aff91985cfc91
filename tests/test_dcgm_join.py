"""dcgm-exporter's exposition text and series, as sites really have them: real captured /metrics (the
vGPU scrape with Xid err_code labels, the MIG scrape cut mid-line, the 2.x README block with blank
sentinels), both label spellings, the instance fallback, fields a site does not export."""

from __future__ import annotations

from pathlib import Path

from gputop.core.dcgm_join import Series, host_of, is_blank, join, series_of_text
from gputop.core.parsers.prom_text import parse_prom_text

FIXTURES = Path(__file__).parent / "fixtures" / "dcgm-exporter-metrics"


def real(name: str) -> str:
    return next(FIXTURES.glob(f"{name}*")).read_text()


def test_the_vgpu_scrape_joins_into_one_gpu_with_what_it_exports() -> None:
    text = parse_prom_text(real("grid-a100-8c"))
    assert text.bad_lines == 0 and len(text.samples) == 12 and text.types["DCGM_FI_DEV_GPU_UTIL"] == "gauge"
    xid = next(s for s in text.samples if s.name == "DCGM_FI_DEV_XID_ERRORS")
    assert xid.labels["err_code"] == "0" and xid.labels["err_msg"] == "No Error"
    joined = join(series_of_text(text.samples))
    node = joined.nodes["vks-cluster-0-0-np1-worker-xtxww-xw4wp-wn7j2"]
    (gpu,) = node.sample.gpus
    assert (gpu.index, gpu.name, gpu.uuid) == (0, "GRID A100-8C", "GPU-f809e614-a528-4083-acbf-334600000000")
    assert (gpu.sm_clock_mhz, gpu.util_pct, gpu.mem_used_mib, gpu.mem_total_mib) == (1410.0, 0.0, 0.0, 7531.0)
    assert node.sample.xid_events == ()  # Xid 0: "No Error"
    # what this site does not export is unknown, not 0
    assert gpu.temp_c is None and gpu.power_w is None
    assert "temp_c" not in node.exported and "util_pct" in node.exported
    assert {"temp_c", "power_w"} <= node.sample.not_exported and "util_pct" not in node.sample.not_exported
    # the node screen says so, in the cell and under Collection, rather than showing n/a
    from textual.app import App

    from gputop.tui.palette import Palette
    from gputop.tui.screens.node import gpu_cells

    palette = Palette.from_app(App())
    cells = gpu_cells(gpu, node.sample.name, None, {}, palette, None, node.sample.not_exported)
    assert cells["temp"].plain == "not exported" and cells["power"].plain == "not exported"
    assert cells["util"].plain == "0%"
    # and the map marks the cell as not exported, for the metrics it lacks only
    from gputop.core.heatmap import NOT_EXPORTED, cell_codes
    from gputop.core.metrics import Metric, heat_scales

    scales = heat_scales(85.0, 95.0, 95.0)
    assert cell_codes(node.sample, (), Metric.TEMP, scales[Metric.TEMP]) == (NOT_EXPORTED,)
    assert cell_codes(node.sample, (), Metric.POWER, scales[Metric.POWER]) == (NOT_EXPORTED,)
    assert cell_codes(node.sample, (), Metric.UTIL, scales[Metric.UTIL]) == (scales[Metric.UTIL].step(0.0),)


def test_the_mig_scrape_cut_mid_line_keeps_its_whole_lines_and_marks_mig() -> None:
    text = parse_prom_text(real("h100-mig"))
    assert len(text.samples) == 3 and text.bad_lines == 1  # the last line, cut mid-UUID
    assert {s.labels["GPU_I_ID"] for s in text.samples} == {"7", "8", "9"}
    joined = join(series_of_text(text.samples))
    (gpu,) = joined.nodes["gsrh100-074"].sample.gpus
    assert gpu.mig_enabled is True and gpu.util_pct is None  # under MIG: not reported, as nvidia-smi


def test_old_label_style_and_blank_sentinels() -> None:
    text = parse_prom_text(real("dcgm-exporter-2.x"))
    temp = next(s for s in text.samples if s.name == "DCGM_FI_DEV_MEMORY_TEMP")
    assert temp.labels == {
        "gpu": "0",
        "UUID": "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",
        "container": "",
        "namespace": "",
        "pod": "",
    }
    assert is_blank(temp.value) and is_blank(2147483632.0) and is_blank(140737488355328.0)
    assert not is_blank(2147483631.0) and not is_blank(75.0)
    # no host label at all (a 2.x exporter scraped without relabelling): counted, not guessed
    joined = join(series_of_text(text.samples))
    assert joined.nodes == {} and joined.unplaced == 2  # the SM clock and the HBM temperature


def test_label_spellings_instance_fallback_and_a_sites_own_label() -> None:
    def util(labels: dict[str, str], value: float = 50.0) -> Series:
        return Series("DCGM_FI_DEV_GPU_UTIL", {"gpu": "0", **labels}, value, 1_800_000_000.0)

    joined = join(
        [
            util({"Hostname": "GPU001.cluster.example", "UUID": "GPU-a"}),
            util({"hostname": "gpu002", "uuid": "GPU-b"}),
            util({"instance": "gpu003.example:9400"}),
            util({"instance": "gpu004:9400", "Hostname": "gpu004"}, 9223372036854775794.0),  # blank
            Series("DCGM_FI_DEV_GPU_TEMP", {"gpu": "1", "Hostname": "gpu001"}, 71.0),
            Series(
                "DCGM_FI_DEV_XID_ERRORS",
                {"gpu": "1", "Hostname": "gpu001", "err_code": "79"},
                79.0,
                1_800_000_100.0,
            ),
        ]
    )
    assert sorted(joined.nodes) == ["gpu001", "gpu002", "gpu003", "gpu004"]
    first = joined.nodes["gpu001"].sample
    assert [g.uuid for g in first.gpus] == ["GPU-a", ""] and first.gpus[1].temp_c == 71.0
    assert [(e.code, e.gpu_index, e.time_s) for e in first.xid_events] == [(79, 1, 1_800_000_100.0)]
    assert joined.nodes["gpu002"].sample.gpus[0].uuid == "GPU-b"
    assert joined.nodes["gpu004"].sample.gpus[0].util_pct is None  # DCGM's blank is no reading
    assert host_of({"node": "Rack1-GPU7", "Hostname": "x"}, "node") == "rack1-gpu7"
    # a host or identity label that is not one (escape sequences, spaces) is left out, never a node's name
    hostile = join(
        [
            util({"Hostname": "\x1b[31mevil"}),
            util({"Hostname": "gpu009", "UUID": "GPU-\x1b]0;title\x07"}),
        ]
    )
    assert list(hostile.nodes) == ["gpu009"] and hostile.unplaced == 2  # its reading and its time
    assert hostile.nodes["gpu009"].sample.gpus[0].uuid == ""
    # a label value cannot pose as another label: quotes and backslashes stay inside it
    text = parse_prom_text('DCGM_FI_DEV_GPU_UTIL{gpu="0",Hostname="evil\\",gpu=\\"7",x="\\\\"} 5\n')
    assert text.samples[0].labels == {"gpu": "0", "Hostname": 'evil",gpu="7', "x": "\\"}


def test_the_joiner_keeps_slow_metrics_between_their_refreshes_and_drops_gone_gpus() -> None:
    from gputop.core.dcgm_join import SAMPLE_TIME, DcgmJoiner

    place = {"Hostname": "a", "gpu": "0"}
    other = {"Hostname": "b", "gpu": "0"}
    joiner = DcgmJoiner()
    full = joiner.update(
        {
            "DCGM_FI_DEV_GPU_UTIL": [(place, 40.0), (other, 10.0)],
            "DCGM_FI_DEV_POWER_MGMT_LIMIT": [(place, 700.0), (other, 700.0)],
            SAMPLE_TIME: [({**place, "UUID": "GPU-a"}, 100.0), ({**other, "UUID": "GPU-b"}, 100.0)],
        }
    )
    assert full.nodes["a"].sample.gpus[0].power_limit_w == 700.0
    # a refresh without the slow metric: its last value stays, the reading moves, the identity stays
    fast = joiner.update({"DCGM_FI_DEV_GPU_UTIL": [(place, 60.0)], SAMPLE_TIME: [(place, 115.0)]})
    (gpu,) = fast.nodes["a"].sample.gpus
    assert (gpu.util_pct, gpu.power_limit_w, gpu.uuid) == (60.0, 700.0, "GPU-a")
    assert fast.nodes["a"].sample.sampled_at_s == 115.0
    # host b has no sample time in this refresh: gone from the store, gone from the join
    assert "b" not in fast.nodes


def test_counters_become_the_facts_the_counter_rules_judge() -> None:
    """PCIe replays and NVLink CRC errors from the store, read a minute apart: the same rate rules as
    nvidia-smi -q and nvlink -e give, on the same GPU."""
    from gputop.core.config import Thresholds
    from gputop.core.dcgm_join import SAMPLE_TIME, DcgmJoiner
    from gputop.core.models import ClusterSnapshot
    from gputop.core.view import ViewStage

    place = {"Hostname": "gpu001", "gpu": "2"}
    ident = {**place, "UUID": "GPU-c", "pci_bus_id": "00000000:3A:00.0"}
    joiner = DcgmJoiner()
    stage = ViewStage(Thresholds(), interval_s=1.0, judge_at_once=True)
    view = None
    for minute, (replays, crc) in enumerate(((100, 0), (160, 30_000))):
        t = 1_800_000_000.0 + 60 * minute
        joined = joiner.update(
            {
                "DCGM_FI_DEV_GPU_UTIL": [(place, 90.0)],
                "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": [(place, float(replays))],
                "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL": [(place, float(crc))],
                "DCGM_FI_DEV_MEMORY_TEMP": [(place, 93.0)],
                SAMPLE_TIME: [(ident, t)],
            }
        )
        node = joined.nodes["gpu001"].sample
        assert node.facts.counters.read_at_s == t
        view = stage.derive(ClusterSnapshot.build("c", t, (node,), None))
    assert view is not None
    kinds = {(p.kind, p.gpu_index) for p in view.rows["gpu001"].problems}
    assert ("pcie_replay", 2) in kinds and ("nvlink_errors", 2) in kinds
    # a refresh that does not ask for the counters keeps the same facts (no new read, no new rate)
    again = joiner.update({"DCGM_FI_DEV_GPU_UTIL": [(place, 91.0)], SAMPLE_TIME: [(place, 1_800_000_075.0)]})
    assert again.nodes["gpu001"].sample.facts is node.facts


def test_answers_added_one_at_a_time_in_any_order_join_as_all_at_once() -> None:
    # the source joins each answer as it is decoded, so that all of them are never held at once
    import itertools

    from gputop.core.dcgm_fields import MIG_PROFILE_LABEL, XID
    from gputop.core.dcgm_join import SAMPLE_TIME, DcgmJoiner

    a0, a1 = {"Hostname": "a", "gpu": "0"}, {"Hostname": "a", "gpu": "1"}
    mig = {**a1, MIG_PROFILE_LABEL: "1g.10gb", "GPU_I_ID": "7"}
    first = {
        "DCGM_FI_DEV_GPU_UTIL": [(a0, 40.0), (a1, 10.0)],
        "DCGM_FI_DEV_GPU_TEMP": [(a0, 50.0), (a1, 60.0)],
        XID: [(a0, 79.0)],
        SAMPLE_TIME: [({**a0, "UUID": "GPU-a0"}, 100.0), (mig, 100.0)],
    }
    # the next refresh: a1 is no longer under MIG, a0's Xid is gone, the temperature is not asked
    second = {
        "DCGM_FI_DEV_GPU_UTIL": [(a0, 45.0), (a1, 20.0)],
        XID: [],
        SAMPLE_TIME: [(a0, 115.0), (a1, 115.0)],
    }
    expected = DcgmJoiner()
    expected.update(first)
    whole = expected.update(second).nodes["a"].sample
    assert whole.gpus[1].mig_enabled is False and not whole.xid_events
    assert whole.gpus[0].temp_c == 50.0  # not asked: kept
    for order in itertools.permutations(second):
        joiner = DcgmJoiner()
        joiner.update(first)
        assert joiner.update(first).nodes["a"].sample.gpus[1].mig_enabled is True
        joiner.begin()
        for metric in order:
            joiner.add(metric, second[metric])
        assert joiner.finish().nodes["a"].sample == whole, order


def test_a_gpu_is_under_mig_while_any_answer_says_so_whichever_comes_first() -> None:
    import itertools

    from gputop.core.dcgm_fields import MIG_PROFILE_LABEL
    from gputop.core.dcgm_join import SAMPLE_TIME, DcgmJoiner

    a1 = {"Hostname": "a", "gpu": "1"}
    mig = {**a1, MIG_PROFILE_LABEL: "1g.10gb", "GPU_I_ID": "7"}
    answers = {"DCGM_FI_PROF_GR_ENGINE_ACTIVE": [(mig, 0.5)], SAMPLE_TIME: [(a1, 115.0)]}
    for order in itertools.permutations(answers):
        joiner = DcgmJoiner()
        joiner.update({SAMPLE_TIME: [(a1, 100.0)]})
        joiner.begin()
        for metric in order:
            joiner.add(metric, answers[metric])
        assert joiner.finish().nodes["a"].sample.gpus[0].mig_enabled is True, order


def test_the_sample_builder_reads_every_gauge_into_its_field_at_its_scale() -> None:
    """_sample reads the gauges written out by name, for speed: each of GAUGES lands in its field."""
    from gputop.core.dcgm_fields import GAUGES
    from gputop.core.dcgm_join import _Gpu, _sample

    gpu = _Gpu(0, "gpu001")
    for at, metric in enumerate(GAUGES):
        gpu.values[metric] = float(at + 1)
    sample = _sample(gpu)
    for at, (field_name, scale) in enumerate(GAUGES.values()):
        assert getattr(sample, field_name) == (at + 1) * scale, field_name


def test_the_memory_total_is_worked_out_when_free_memory_is_read_and_kept_between() -> None:
    """Free memory is a slow metric: the total comes from used and free read together, and an update
    that reads only the used memory keeps that total (not used + an older free)."""
    from gputop.core.dcgm_fields import FB_FREE, SLOW_METRICS
    from gputop.core.dcgm_join import SAMPLE_TIME, DcgmJoiner

    assert FB_FREE in SLOW_METRICS
    place = {"Hostname": "gpu001", "gpu": "0"}
    joiner = DcgmJoiner()
    first = joiner.update(
        {SAMPLE_TIME: [(place, 1.0)], "DCGM_FI_DEV_FB_USED": [(place, 10.0)], FB_FREE: [(place, 90.0)]}
    )
    assert first.nodes["gpu001"].sample.gpus[0].mem_total_mib == 100.0
    later = joiner.update({SAMPLE_TIME: [(place, 2.0)], "DCGM_FI_DEV_FB_USED": [(place, 30.0)]})
    (gpu,) = later.nodes["gpu001"].sample.gpus
    assert (gpu.mem_used_mib, gpu.mem_total_mib) == (30.0, 100.0)
    gone = joiner.update({SAMPLE_TIME: [(place, 3.0)], "DCGM_FI_DEV_FB_USED": [(place, 30.0)], FB_FREE: []})
    assert gone.nodes["gpu001"].sample.gpus[0].mem_total_mib is None  # free no longer exported
