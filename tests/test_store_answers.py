"""A store's instant answers read as the store wrote them: each series' labels looked up by their JSON
text and decoded once (`read_vector`, `DcgmJoiner.add_raw`), the same nodes as decoding every label dict
gives, on real captured exporter outputs and the simulator's; and hostile or damaged series that can
neither pose as another field nor stop the rest."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gputop.core.dcgm_join import SAMPLE_TIME, DcgmJoiner, join_answers, series_of_text
from gputop.core.models import GpuSample
from gputop.core.parsers.prom_text import parse_prom_text
from gputop.sim.dcgm_text import exposition
from gputop.sim.simulator import SimulatedCluster
from gputop.sources.store_answers import Digest, read_columns, read_vector

FIXTURES = Path(__file__).parent / "fixtures" / "dcgm-exporter-metrics"


def vector(result: list[dict[str, object]], **extra: object) -> bytes:
    return orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": result}, **extra})


def answers_of_text(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """An exporter's exposition as a store's answers: each metric's series, and their sample times."""
    by_metric: dict[str, list[tuple[dict[str, str], float]]] = {}
    for one in series_of_text(parse_prom_text(text).samples):
        by_metric.setdefault(one.metric, []).append((dict(one.labels), one.value))
        by_metric.setdefault(SAMPLE_TIME, []).append((dict(one.labels), one.time_s or 1.7e9))
    return by_metric


def digest_of(answers: dict[str, list[tuple[dict[str, str], float]]]) -> Digest:
    digest = Digest(None, "http://store")
    digest.begin()
    for metric, pairs in answers.items():
        body = vector([{"metric": labels, "value": [1.7e9, repr(value)]} for labels, value in pairs])
        digest.add(metric, body)
    return digest


def test_real_exporter_outputs_read_raw_join_as_the_label_dicts_do() -> None:
    texts = [path.read_text() for path in sorted(FIXTURES.iterdir()) if path.suffix != ".md"]
    simulated = SimulatedCluster(nodes=6, gpus_per_node=8, seed=3, start_time_s=1_700_000_000.0)
    texts.append(exposition(simulated.result().nodes, time_ms=1_700_000_000_000))
    assert len(texts) >= 4
    for text in texts:
        answers = answers_of_text(text)
        expected = join_answers(answers)
        nodes, notes = digest_of(answers).finish()
        assert sorted(nodes, key=lambda n: n.name) == sorted(
            (n.sample for n in expected.nodes.values()), key=lambda n: n.name
        )
        assert notes == expected.notes


def test_the_same_labels_text_is_decoded_once_and_another_spelling_finds_the_same_gpu() -> None:
    joiner = DcgmJoiner()
    plain = b'{"Hostname":"gpu01","gpu":"0"}'
    escaped = b'{"Hostname":"gpu\\u00301","gpu":"\\u0030"}'  # the same text, spelt with escapes
    for refresh in range(3):
        joiner.begin()
        joiner.add_raw(SAMPLE_TIME, [(plain, "1700000000")])
        joiner.add_raw("DCGM_FI_DEV_GPU_TEMP", [(plain, str(60 + refresh))])
        joiner.add_raw("DCGM_FI_DEV_POWER_USAGE", [(escaped, "300.5")])
        joined = joiner.finish()
    (gpu,) = joined.nodes["gpu01"].sample.gpus
    assert (gpu.index, gpu.temp_c, gpu.power_w) == (0, 62.0, 300.5)
    assert set(joiner._known_raw) == {plain, escaped}


def test_a_label_value_cannot_pose_as_a_value_or_another_label() -> None:
    hostile = '"},"value":[0,"99"]},{"metric":{"Hostname":"gpu02","gpu":"0'
    result = [
        {"metric": {"Hostname": "gpu01", "gpu": "0"}, "value": [0, "40"]},
        # a host name carrying JSON: one label's text, never a series of its own; not a host name
        {"metric": {"Hostname": hostile, "gpu": "0"}, "value": [0, "50"]},
        # a gpu label carrying another label
        {"metric": {"Hostname": "gpu03", "gpu": '0","Hostname":"gpu02'}, "value": [0, "60"]},
        {"metric": {"Hostname": "gpu04", "gpu": "1"}, "value": [0, "not a number"]},
        {"metric": {"Hostname": "gpu05", "gpu": 7}, "value": [0, "70"]},  # a label that is not text
    ]
    body = vector(result)
    read = read_vector(body)
    assert read is not None and len(read[0]) == 5 and read[0][1][1] == "50"
    digest = Digest(None, "http://store")
    digest.begin()
    digest.add("DCGM_FI_DEV_GPU_TEMP", body)
    digest.add(SAMPLE_TIME, body)
    nodes, notes = digest.finish()
    # gpu04's value is no number in either answer: it has no sample time, so it is not in the store
    assert {n.name: [g.temp_c for g in n.gpus] for n in nodes} == {"gpu01": [40.0]}
    assert notes == ("6 series had no host or GPU label and were left out",)  # 3 series, 2 answers


def test_an_answer_of_another_shape_is_read_leniently_series_by_series() -> None:
    result = [
        {"metric": {"Hostname": "gpu01", "gpu": "0"}, "value": [0, 41]},  # a number, not text
        {"metric": {"Hostname": "gpu02", "gpu": "0"}, "value": [0, "42"]},
        {"metric": {"Hostname": "gpu03", "gpu": "0"}},  # no value at all
    ]
    body = vector(result, warnings=["a storage node did not answer"])
    assert read_vector(body) is None
    assert read_vector(b'{"status":"error","errorType":"timeout","error":"query timed out"}') is None
    digest = Digest(None, "http://store")
    digest.begin()
    digest.add("DCGM_FI_DEV_GPU_TEMP", body)
    digest.add("DCGM_FI_DEV_POWER_USAGE", b'{"status":"error","errorType":"timeout","error":"slow"}')
    nodes, notes = digest.finish()
    assert {n.name: n.gpus[0].temp_c for n in nodes} == {"gpu01": 41.0, "gpu02": 42.0}
    assert "DCGM_FI_DEV_GPU_TEMP: partial answer (a storage node did not answer)" in notes
    assert "DCGM_FI_DEV_POWER_USAGE: the store answered timeout: slow" in notes
    # a partial answer of the usual shape says so too
    digest.begin()
    digest.add("DCGM_FI_DEV_GPU_TEMP", vector(result[1:2], warnings=["cut"]))
    assert digest.finish()[1] == ("DCGM_FI_DEV_GPU_TEMP: partial answer (cut)",)


def test_labels_that_change_every_refresh_do_not_grow_the_kept_texts_without_bound() -> None:
    joiner = DcgmJoiner()
    for refresh in range(300):
        joiner.begin()
        series = [
            (f'{{"Hostname":"gpu{n:02}","gpu":"0","pod":"job-{refresh}"}}'.encode(), "50") for n in range(20)
        ]
        joiner.add_raw("DCGM_FI_DEV_GPU_TEMP", series)
        joined = joiner.finish()
        assert len(joined.nodes) == 20
    assert len(joiner._known_raw) <= 4 * 20 + 4096 + 20


async def test_the_hour_read_at_start_joins_each_step_as_the_label_dicts_do() -> None:
    from gputop.sources.prometheus_history import READINGS, past_hour

    steps_s = [1000.0, 1060.0, 1120.0]
    places = [
        {"Hostname": "gpu01", "gpu": "0"},
        {"Hostname": "gpu01", "gpu": "1"},
        {"Hostname": "gpu02", "gpu": "0"},
    ]
    points: dict[str, list[tuple[dict[str, str], list[list[object]]]]] = {}
    for number, metric in enumerate(READINGS):
        points[metric] = [
            (
                labels,
                [
                    [at_s, str(10.0 * at + place + number)]
                    for at, at_s in enumerate(steps_s)
                    if (place, at) != (2, 1)
                ],
            )
            for place, labels in enumerate(places)
        ]
    points["DCGM_FI_DEV_SM_CLOCK"][0][1][0][1] = 1410  # a number, not text: that answer is read leniently

    async def post(form: dict[str, str], metric: str) -> bytes:
        if metric == "DCGM_FI_DEV_POWER_USAGE":
            return b'{"status":"error","errorType":"timeout","error":"slow"}'
        result = [{"metric": labels, "values": values} for labels, values in points[metric]]
        return orjson.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})

    past, said = await past_hour(post, 1200.0, 3, None)
    assert said == "history from the store: 3 steps of 60 s"  # (60 s: the shortest step)
    assert [at_s for at_s, _ in past] == steps_s
    for at_s, joined in past:
        answers: dict[str, list[tuple[dict[str, str], float]]] = {}
        for metric, series in points.items():
            if metric == "DCGM_FI_DEV_POWER_USAGE":
                continue
            for labels, values in series:
                for point_s, value in values:
                    if point_s == at_s:
                        answers.setdefault(metric, []).append((labels, float(value)))  # type: ignore[arg-type]
                        if metric == "DCGM_FI_DEV_FB_USED":
                            answers.setdefault(SAMPLE_TIME, []).append((labels, at_s))
        expected = join_answers(answers)
        assert joined.nodes == expected.nodes
    # gpu02 has no readings at the second step: it is not in that step
    assert set(past[1][1].nodes) == {"gpu01"} and set(past[2][1].nodes) == {"gpu01", "gpu02"}
    assert past[0][1].nodes["gpu01"].sample.gpus[0].sm_clock_mhz == 1410.0


def test_answers_read_as_columns_give_what_each_series_read_alone_gives() -> None:
    """`add_columns` (values read as numbers, written by loops in C) against `add` (a dict per series):
    blanks, NaN and negative values, a MIG instance, a series placed nowhere, a metric in two parts, and
    a GPU that loses a metric the next refresh; an answer holding "+Inf" is read as text instead."""
    place = [{"Hostname": f"gpu{n:02}", "gpu": str(g)} for n in range(4) for g in range(2)]
    mig = {"Hostname": "gpu00", "gpu": "1", "GPU_I_PROFILE": "1g.10gb", "GPU_I_ID": "3"}
    refreshes: list[dict[str, list[tuple[dict[str, str], float]]]] = [
        {
            SAMPLE_TIME: [(labels, 1.7e9) for labels in place],
            "DCGM_FI_DEV_GPU_TEMP": [(labels, 40.0 + at) for at, labels in enumerate(place)],
            "DCGM_FI_DEV_POWER_USAGE": [
                (place[0], float("nan")),
                (place[1], 9223372036854775794.0),  # DCGM_INT64_BLANK
                (place[2], -5.0),
                (place[3], 2147483632.0),  # DCGM_INT32_BLANK
                (place[4], 2147483632.5),  # not a blank: a reading
                (mig, 120.0),
                ({"gpu": "0"}, 1.0),  # no host: placed nowhere
            ],
            "DCGM_FI_DEV_SM_CLOCK": [(labels, 1410.0) for labels in place],
        },
        {
            SAMPLE_TIME: [(labels, 1.7e9 + 15) for labels in place],
            "DCGM_FI_DEV_GPU_TEMP": [(labels, 50.0) for labels in place[:5]],  # three GPUs lose it
            "DCGM_FI_DEV_POWER_USAGE": [(labels, float("inf")) for labels in place[:2]],
        },
    ]
    dicts = DcgmJoiner()
    digest = Digest(None, "http://store")
    for answers in refreshes:
        expected = dicts.update(answers)
        digest.begin()
        for metric, pairs in answers.items():
            half = len(pairs) // 2 or 1
            for part in (pairs[:half], pairs[half:]):  # each answer in two parts, as a sharded query
                if part:
                    digest.add(
                        metric, vector([{"metric": lab, "value": [1.7e9, _text(v)]} for lab, v in part])
                    )
        nodes, notes = digest.finish()
        assert {n.name: n for n in nodes} == {name: j.sample for name, j in expected.nodes.items()}
        assert notes == expected.notes
        if len(answers) == 4:  # the first refresh
            first = {n.name: n.gpus for n in nodes}
    assert first["gpu00"][1].mig_enabled and first["gpu02"][0].temp_c == 44.0
    power = [g.power_w for n in range(3) for g in first[f"gpu{n:02}"]]
    assert power == [None, 120.0, -5.0, None, 2147483632.5, None]
    assert read_columns(vector([{"metric": place[0], "value": [0, "+Inf"]}])) is None
    assert read_columns(vector([{"metric": place[0], "value": [0, "-Inf"]}])) is not None
    gpus = {n.name: n.gpus for n in nodes}
    assert [g.temp_c for g in gpus["gpu02"]] == [50.0, None]
    assert not gpus["gpu00"][1].mig_enabled and gpus["gpu00"][0].power_w is None  # +Inf: no reading


def _text(value: float) -> str:
    """A value as Prometheus writes it."""
    if value != value:
        return "NaN"
    if value in (float("inf"), float("-inf")):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def test_the_nodes_are_made_as_they_are_taken_and_are_those_finish_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The decoding process sends a frame of nodes as soon as they are made (not after all 10,000 at
    80,000 GPUs): the lazy finish makes a node's GPU samples only when that node is taken, and gives
    the very nodes and notes `finish` gives."""
    import gputop.core.dcgm_join as dcgm_join

    simulated = SimulatedCluster(nodes=5, gpus_per_node=8, seed=11, start_time_s=1_700_000_000.0)
    answers = answers_of_text(exposition(simulated.result().nodes, time_ms=1_700_000_000_000))
    answers[SAMPLE_TIME].append(({"gpu": "0"}, 1.7e9))  # no host: left out, and a note says so
    whole, whole_notes = digest_of(answers).finish()
    assert len(whole) == 5 and whole_notes == ("1 series had no host or GPU label and were left out",)

    made: list[int] = []
    sample = dcgm_join._sample

    def counted(gpu: dcgm_join._Gpu) -> GpuSample:
        made.append(gpu.index)
        return sample(gpu)

    monkeypatch.setattr(dcgm_join, "_sample", counted)
    nodes, notes = digest_of(answers).finish_lazily()
    assert made == [] and notes == whole_notes
    first = next(nodes)
    assert len(made) == 8  # the first node's GPUs alone
    assert [first, *nodes] == whole
    assert len(made) == 40
