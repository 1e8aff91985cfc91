"""The Prometheus source against real stores on 127.0.0.1: VictoriaMetrics loaded through its import path,
Prometheus scraping exporters that speak dcgm-exporter's format (both label spellings, a site without
the device utilization field). Bad input gets a reason: the store down, an error answer, credentials
that never show in a message."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import gzip
import os
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gputop.core.config import ClusterConfig, PrometheusConfig, Thresholds
from gputop.core.models import ClusterSnapshot, Reachability
from gputop.core.nodeset import expand_nodeset
from gputop.core.view import ViewStage
from gputop.sim.dcgm_text import ExporterStyle, exposition, node_exporter_ib
from gputop.sim.simulator import SimulatedCluster
from gputop.sources import store_answers
from gputop.sources.prometheus import PrometheusSource, StoreError, parse_vector
from gputop.sources.store_answers import inflate
from tests.infra.procnet import free_ports
from tests.infra.stores import PROMETHEUS, VICTORIA_METRICS, prometheus, victoria_metrics, vm_import

needs_vm = pytest.mark.skipif(
    not os.path.exists(VICTORIA_METRICS),
    reason="VictoriaMetrics is not installed (Debian package victoria-metrics)",
)
needs_prometheus = pytest.mark.skipif(
    not os.path.exists(PROMETHEUS), reason="Prometheus is not installed (Debian package prometheus)"
)
SITE_A = ExporterStyle()  # Hostname, UUID, the device utilization
SITE_B = ExporterStyle(host_label="hostname", uuid_label="uuid", device_util=False, profiling=True)


def cluster_config(url: str, nodes: str, **prometheus: object) -> ClusterConfig:
    return ClusterConfig(
        name="prom",
        nodeset=nodes,
        node_names=expand_nodeset(nodes),
        prometheus=PrometheusConfig(url=url, **prometheus),  # type: ignore[arg-type]
    )


def fleet(now_s: float, nodes: int = 16) -> SimulatedCluster:
    cluster = SimulatedCluster(nodes=nodes, gpus_per_node=8, seed=42, start_time_s=now_s - 5)
    cluster.advance_to(now_s)
    return cluster


async def collect_once(config: ClusterConfig, now_s: float) -> tuple[PrometheusSource, object]:
    source = PrometheusSource(config, lambda: now_s)
    await source.start()
    try:
        return source, await source.collect(now_s)
    finally:
        await source.close()


@needs_vm
async def test_victoriametrics_holds_two_sites_styles_and_a_missing_node(tmp_path: Path) -> None:
    now_s = time.time()
    sim = fleet(now_s, nodes=300)  # answers of several hundred kilobytes: read whole, not a first chunk
    nodes = sim.result().nodes
    answering = [n for n in nodes if n.reachability is Reachability.OK and n.sampled_at_s == sim.now_s]
    time_ms = int(now_s * 1000)
    text = exposition(answering[:8], SITE_A, time_ms) + exposition(answering[8:], SITE_B, time_ms)
    text += node_exporter_ib(answering, time_ms)  # the hosts' node_exporters, named by instance
    with victoria_metrics(tmp_path) as store:
        vm_import(store, text)
        config = cluster_config(store.url, "gpu[001-010],gpu999", flavor="victoriametrics")
        source, result = await collect_once(config, now_s + 1)
    by_name = {n.name: n for n in result.nodes}  # type: ignore[attr-defined]
    up = [n for n in by_name.values() if n.reachability is Reachability.OK]
    assert len(up) == len(answering) and all(len(n.gpus) == len(by_name[n.name].gpus) for n in answering)
    first, later = answering[0], answering[9]
    got = by_name[first.name]
    assert got.reachability is Reachability.OK and len(got.gpus) == 8
    assert [g.temp_c for g in got.gpus] == [round(g.temp_c, 6) for g in first.gpus]  # type: ignore[arg-type]
    assert got.gpus[0].uuid == first.gpus[0].uuid and got.gpus[0].name == first.gpus[0].name
    assert got.sampled_at_s == pytest.approx(time_ms / 1000.0)
    # the site without DCGM_FI_DEV_GPU_UTIL: utilization from the profiling field; uuid spelt low
    other = by_name[later.name]
    assert other.gpus[0].uuid == later.gpus[0].uuid
    assert other.gpus[0].util_pct == pytest.approx(later.gpus[0].util_pct, abs=0.01)
    # the node the config lists and the store lacks: down, saying why
    missing = by_name["gpu999"]
    assert missing.reachability is Reachability.DOWN and "no dcgm-exporter series for gpu999" in (
        missing.error or ""
    )
    # through the same view stage as every source: the simulator's hot GPU is a problem here too
    stage = ViewStage(Thresholds(), interval_s=1.0, judge_at_once=True)
    view = stage.derive(ClusterSnapshot.build("prom", now_s + 1, tuple(result.nodes), None))  # type: ignore[attr-defined]
    hot = next(i.node for i in sim.incidents if i.kind == "hot_gpu")
    assert "temp" in {p.kind for p in view.rows[hot].problems}
    # InfiniBand from node_exporter: every port, and the simulator's port that is down is a problem
    assert [p.ca_name for p in got.ib_ports] == [p.ca_name for p in first.ib_ports]
    assert got.ib_ports[0].rate_gbps == first.ib_ports[0].rate_gbps and got.ib_ports[0].is_up
    ib_down = next(i.node for i in sim.incidents if i.kind == "ib_down")
    assert any(not p.is_up for p in by_name[ib_down].ib_ports)
    assert "ib" in {p.kind for p in view.rows[ib_down].problems}
    assert source.last_refresh_wall_s is not None and source.last_refresh_wall_s < 5.0


async def test_a_store_that_is_down_or_answers_an_error_gets_a_reason_without_secrets(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    secret_file = tmp_path / "token"
    secret_file.write_text("s3cret-token\n")
    for url, extra in (
        (f"http://reader:pa55word@127.0.0.1:{port}/prefix?key=hidden", {}),
        (f"http://127.0.0.1:{port}/prefix?key=hidden", {"bearer_token_file": str(secret_file)}),
    ):
        config = cluster_config(url, "gpu[001-002]", timeout_s=2.0, **extra)
        with pytest.raises(StoreError) as caught:
            await collect_once(config, time.time())
        words = str(caught.value)
        assert f"http://127.0.0.1:{port}" in words and "no query answered" in words
        for secret in ("pa55word", "reader", "s3cret", "hidden", "prefix"):
            assert secret not in words
    both = cluster_config(f"http://u:p@127.0.0.1:{port}", "gpu001", bearer_token_file=str(secret_file))
    with pytest.raises(StoreError, match="keep one"):
        await collect_once(both, time.time())
    # an error answer, and a partial one
    with pytest.raises(StoreError, match="bad_data: parse error"):
        parse_vector(b'{"status":"error","errorType":"bad_data","error":"parse error at char 3"}', "X")
    found, note = parse_vector(
        b'{"status":"success","warnings":["store-gateway down"],"data":{"resultType":"vector","result":'
        b'[{"metric":{"Hostname":"a","gpu":"0"},"value":[1700000000,"42"]},{"metric":"junk"}]}}',
        "DCGM_FI_DEV_GPU_UTIL",
    )
    assert found == [({"Hostname": "a", "gpu": "0"}, 42.0)] and note is not None
    assert "partial answer (store-gateway down)" in note
    # a token file that cannot be read is said before anything is asked
    missing = dataclasses.replace(
        config, prometheus=dataclasses.replace(config.prometheus, bearer_token_file=str(tmp_path / "nope"))
    )
    with pytest.raises(StoreError, match="cannot read the bearer token file"):
        await collect_once(missing, time.time())


@needs_prometheus
async def test_prometheus_scraping_exporters_in_both_spellings(tmp_path: Path) -> None:
    from aiohttp import web

    now_s = time.time()
    sim = fleet(now_s)
    nodes = [n for n in sim.result().nodes if n.reachability is Reachability.OK][:4]
    texts = [exposition(nodes[:2], SITE_A), exposition(nodes[2:], SITE_B)]
    runners = []
    ports = free_ports(2)
    for text, port in zip(texts, ports, strict=True):

        async def metrics(_request: web.Request, body: str = text) -> web.Response:
            return web.Response(text=body, content_type="text/plain")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        runners.append(runner)
    try:
        with prometheus(tmp_path, [f"127.0.0.1:{p}" for p in ports]) as store:
            config = cluster_config(store.url, ",".join(n.name for n in nodes))
            deadline = time.monotonic() + 40
            while True:
                _source, result = await collect_once(config, time.time())
                up = [n for n in result.nodes if n.reachability is Reachability.OK]  # type: ignore[attr-defined]
                if len(up) == 4 or time.monotonic() > deadline:
                    break
                await asyncio.sleep(1.0)
            # a node's past, asked of Prometheus by its host label's pattern (a PromQL string and an RE2
            # regex that Prometheus reads as VictoriaMetrics does)
            source = PrometheusSource(config, time.time)
            await source.start()
            try:
                await source.collect(time.time())
                pasts = [await source.node_past(node.name, 300.0) for node in (nodes[0], nodes[2])]
            finally:
                await source.close()
    finally:
        for runner in runners:
            await runner.cleanup()
    assert sorted(n.name for n in up) == sorted(n.name for n in nodes)
    by_name = {n.name: n for n in up}
    for node in nodes:
        assert [g.uuid for g in by_name[node.name].gpus] == [g.uuid for g in node.gpus]
        assert [g.power_w for g in by_name[node.name].gpus] == pytest.approx([g.power_w for g in node.gpus])
    for node, past in zip((nodes[0], nodes[2]), pasts, strict=True):  # Hostname, hostname
        assert past is not None and past.history.node_gpus(node.name) == [g.index for g in node.gpus]


@needs_vm
async def test_the_last_hour_comes_from_the_store_at_start(tmp_path: Path) -> None:
    """Range queries fill the charts' past at start: the store's readings of the last hour, as steps the
    poller replays through the view stage, as the demo's past is."""
    now_s = time.time()
    sim = SimulatedCluster(nodes=8, gpus_per_node=8, seed=42, start_time_s=now_s - 3000)
    with victoria_metrics(tmp_path) as store:
        for ago_s in (3000, 2000, 1000, 0):
            sim.advance_to(now_s - ago_s)
            answering = [n for n in sim.result().nodes if n.reachability is Reachability.OK]
            vm_import(store, exposition(answering, SITE_A, int((now_s - ago_s) * 1000)))
        source = PrometheusSource(cluster_config(store.url, "gpu[001-008]"), lambda: now_s)
        await source.start()
        try:
            past = source.take_history()
            assert source.take_history() == []  # handed out once
        finally:
            await source.close()
    times = [t for t, _ in past]
    assert times == sorted(times) and times[0] <= now_s - 2900 and times[-1] < now_s
    # a step within five minutes of an imported reading has it: the store's own lookback
    first = past[0][1]
    node = next(n for n in first.nodes if n.name == "gpu001")
    assert len(node.gpus) == 8 and all(g.temp_c is not None for g in node.gpus)
    assert source.history_note.startswith("history from the store")


@needs_vm
async def test_a_node_screen_reads_its_node_over_ssh_for_what_the_store_lacks(tmp_path: Path) -> None:
    """The fake fleet over SSH and its readings in VictoriaMetrics: the fleet comes from the store; the
    node whose screen is open is read over SSH too (topology, processes), and the SSH link closes when
    the screen is left."""
    from gputop.config_file import load_config
    from gputop.sim.fake_fleet import run_fleet

    async with run_fleet(nodes=4, port=0, state_dir=tmp_path / "fleet") as fleet:
        now_s = time.time()
        nodes = [n for n in fleet.cluster.result().nodes if n.reachability is Reachability.OK]
        with victoria_metrics(tmp_path) as store:
            vm_import(store, exposition(nodes, SITE_A, int(now_s * 1000)))
            base = load_config(fleet.config_path).clusters[0]
            cluster = dataclasses.replace(base, prometheus=PrometheusConfig(url=store.url))
            source = PrometheusSource(cluster, time.time)
            await source.start()
            try:
                first = await source.collect(time.time())
                stored = next(n for n in first.nodes if n.name == "gpu001")
                assert stored.facts.topology.value is None  # not in the store
                source.drill("gpu001")
                deadline = time.monotonic() + 40
                while True:
                    result = await source.collect(time.time())
                    deep = next(n for n in result.nodes if n.name == "gpu001")
                    if deep.facts.topology.value is not None or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(0.5)
                assert deep.facts.topology.value is not None and len(deep.gpus) == 8
                assert any(g.processes for g in deep.gpus)  # the store has no processes
                others = [n for n in result.nodes if n.name != "gpu001"]
                assert all(n.facts.topology.value is None for n in others)  # the rest from the store
                source.drill(None)
                await asyncio.sleep(0.5)
                left = await source.collect(time.time())
                assert next(n for n in left.nodes if n.name == "gpu001").facts.topology.value is None
            finally:
                await source.close()


@needs_prometheus
async def test_prometheus_scraping_the_fake_fleets_exporters(tmp_path: Path) -> None:
    """`gputop fake-fleet --exporters-port`: its dcgm-exporter (even nodes as dcgm-exporter labels by
    default, odd ones relabelled with profiling fields only) and node_exporter's InfiniBand ports, scraped
    by a real Prometheus; the store then holds the whole fleet."""
    from gputop.sim.fake_fleet import run_fleet
    from gputop.sim.fake_fleet.exporters import serve_exporters

    async with run_fleet(nodes=4, port=0, state_dir=tmp_path / "fleet") as fleet:
        exporters = await serve_exporters(fleet.cluster, time.time)
        sim = fleet.cluster
        sim.advance_to(time.time())
        # the fleet's silent node (its incident) answers nothing, over SSH or HTTP
        expected = sorted(n.name for n in sim.result().nodes if n.sampled_at_s == sim.now_s)
        try:
            address = f"127.0.0.1:{exporters.port}"
            with prometheus(tmp_path, [address, f"{address}/node_exporter/metrics"]) as store:
                config = cluster_config(store.url, "gpu[001-004]")
                deadline = time.monotonic() + 40
                while True:
                    _source, result = await collect_once(config, time.time())
                    up = {n.name: n for n in result.nodes if n.reachability is Reachability.OK}  # type: ignore[attr-defined]
                    done = sorted(up) == expected and all(n.ib_ports for n in up.values())
                    if done or time.monotonic() > deadline:
                        break
                    await asyncio.sleep(1.0)
        finally:
            await exporters.close()
    assert sorted(up) == expected and len(expected) == 3
    silent = next(n for n in result.nodes if n.name not in expected)  # type: ignore[attr-defined]
    assert silent.reachability is Reachability.DOWN and "no dcgm-exporter series" in (silent.error or "")
    live = {n.name: n for n in fleet.cluster.result().nodes}
    for name, node in up.items():
        assert [g.uuid for g in node.gpus] == [g.uuid for g in live[name].gpus]  # UUID and uuid alike
        assert node.gpus[0].util_pct is not None  # the device field, or the profiling one
        assert len(node.ib_ports) == len(live[name].ib_ports)


def test_a_refresh_without_the_port_rates_keeps_the_last_ones_and_names_what_failed() -> None:
    """The ports' rates are asked every fourth refresh; the ones between keep them. A query that fails
    is named in the source's warnings, the other answers still read."""
    import orjson

    source = PrometheusSource(cluster_config("http://127.0.0.1:1", "gpu001"), time.time)
    place = {"Hostname": "gpu001", "gpu": "0"}
    port = {"instance": "gpu001:9100", "device": "mlx5_0", "port": "1"}

    def answer(*series: tuple[dict[str, str], float]) -> bytes:
        result = [{"metric": labels, "value": [1, str(value)]} for labels, value in series]
        return orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})

    full = {
        "@time": answer((place, 1_800_000_000.0)),
        "DCGM_FI_DEV_GPU_UTIL": answer((place, 50.0)),
        "node_infiniband_state_id": answer((port, 4.0)),
        "node_infiniband_physical_state_id": answer((port, 5.0)),
        "node_infiniband_rate_bytes_per_second": answer((port, 5e10)),
    }
    nodes, warnings = source._digest([(m, body, "") for m, body in full.items()], 1_800_000_000.0)
    assert nodes[0].ib_ports[0].rate_gbps == 400.0 and warnings == ()
    fast = {
        "@time": answer((place, 1_800_000_015.0)),
        "DCGM_FI_DEV_GPU_UTIL": StoreError("DCGM_FI_DEV_GPU_UTIL: no answer within 10s"),
        "node_infiniband_state_id": answer((port, 1.0)),
        "node_infiniband_physical_state_id": answer((port, 3.0)),
    }
    arrived: list[tuple[str, bytes | BaseException, str]] = [(m, body, "") for m, body in fast.items()]
    nodes, warnings = source._digest(arrived, 1_800_000_015.0)
    (ib,) = nodes[0].ib_ports
    assert (ib.state, ib.physical_state, ib.rate_gbps) == ("Down", "Disabled", 400.0)
    assert warnings == ("DCGM_FI_DEV_GPU_UTIL: no answer within 10s",)


def test_answers_are_inflated_where_they_are_decoded_and_never_past_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    document = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
    assert inflate(document, "", "X") == inflate(document, "identity", "X") == document
    assert inflate(gzip.compress(document), "gzip", "X") == document
    assert inflate(zlib.compress(document), "Deflate", "X") == document  # HTTP's deflate: zlib's header
    with pytest.raises(StoreError, match="encoded as 'br', which gputop does not read"):
        inflate(document, "br", "X")
    with pytest.raises(StoreError, match="X: the gzip answer does not inflate"):
        inflate(b"\x1f\x8b\x08garbage", "gzip", "X")
    # a small answer that inflates past the limit (a bomb, or a store gone wrong) stops at the limit
    monkeypatch.setattr(store_answers, "MAX_RESPONSE_BYTES", 1 << 20)
    with pytest.raises(StoreError, match="larger than 1 MiB"):
        inflate(gzip.compress(b" " * (4 << 20)), "gzip", "X")
    # the worker and the thread read an answer that does not inflate as a note, and go on
    digest = store_answers.Digest(None, "store")
    digest.begin()
    digest.add("DCGM_FI_DEV_GPU_UTIL", b"not gzip", "gzip")
    digest.add("@time", gzip.compress(document), "gzip")
    _samples, notes = digest.finish()
    assert notes == ("DCGM_FI_DEV_GPU_UTIL: the gzip answer does not inflate",)


def test_ssh_on_the_node_screen_does_not_drop_what_the_store_had_until_ssh_has_read_it() -> None:
    """SSH's first seconds have no ibstat or counters yet: the store's ports and facts stay meanwhile,
    so a port that is down does not clear and come back when the screen opens."""
    from gputop.core.facts import NO_FACTS, NodeFacts, Reading
    from gputop.core.models import IbPort
    from gputop.sources.prometheus import _deeper
    from tests.factories import node_sample

    down = (IbPort("mlx5_3", 1, "Down", "Disabled", 400.0),)
    counters = Reading("store counters", 1.0)  # type: ignore[arg-type]
    stored = node_sample("gpu014", 8, ib_ports=down, facts=NodeFacts(counters=counters))  # type: ignore[arg-type]
    early = _deeper(stored, node_sample("gpu014", 8, facts=NO_FACTS))
    assert early.ib_ports == down and early.facts.counters is counters
    up = (IbPort("mlx5_3", 1, "Active", "LinkUp", 400.0),)
    read = NodeFacts(ibstat=Reading("ibstat", 2.0), counters=Reading("ssh counters", 2.0))  # type: ignore[arg-type]
    later = _deeper(stored, node_sample("gpu014", 8, ib_ports=up, facts=read))
    assert later.ib_ports == up and later.facts.counters.value == "ssh counters"


@contextlib.asynccontextmanager
async def slow_store(answer_after_s: float) -> AsyncIterator[str]:
    """A store on loopback whose instant queries answer after ``answer_after_s`` (one GPU of gpu001 at
    50 %, sampled as it answers), with no past; yields its URL."""
    from aiohttp import web

    async def query(request: web.Request) -> web.Response:
        form = await request.post()
        if str(form.get("query", "")).startswith("count("):  # the start's look at the past: nothing
            result: list[object] = []
        else:
            await asyncio.sleep(answer_after_s)
            labels = {"Hostname": "gpu001", "gpu": "0", "UUID": "GPU-1"}
            value = str(time.time()) if "timestamp(" in str(form.get("query")) else "50"  # sampled now
            result = [{"metric": labels, "value": [time.time(), value]}]
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": result}})

    app = web.Application()
    app.router.add_post("/api/v1/query", query)
    runner = web.AppRunner(app)
    await runner.setup()
    (port,) = free_ports(1)
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_a_first_refresh_slower_than_the_deadline_is_not_lost() -> None:
    # At 80,000 GPUs the first refresh takes longer than the poller's 5 s deadline: the deadline ends
    # the wait, the refresh goes on, and the next tick has its answer. Were the refresh cancelled with
    # the wait, the next tick would raise its CancelledError into the poller and no data would ever show.
    answer_after_s = 0.6
    async with slow_store(answer_after_s) as url:
        source = PrometheusSource(cluster_config(url, "gpu001"), time.time)
        try:
            await source.start()
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(
                    source.collect(time.time()), answer_after_s / 3
                )  # the poller's deadline
            await asyncio.sleep(answer_after_s * 2)
            result = await source.collect(time.time())  # not due again: the first refresh's answer
            (node,) = result.nodes
            assert node.name == "gpu001" and node.reachability is Reachability.OK
            assert node.gpus[0].util_pct == 50.0
        finally:
            await source.close()


async def test_a_headless_round_waits_for_the_store_s_first_refresh_past_the_poll_deadline() -> None:
    """`gputop snapshot` and `check` on a large fleet: the store's first refresh outlasts the poller's
    deadline (5 s), and the round, which has one tick, waits for it within its own timeout."""
    from gputop.clock import SystemClock
    from gputop.core.config import Config, PollConfig
    from gputop.headless.round import collect_round

    async with slow_store(0.8) as url:
        cluster = cluster_config(url, "gpu001")
        config = dataclasses.replace(
            Config.default(), clusters=(cluster,), poll=PollConfig(node_deadline_s=0.2)
        )
        source = PrometheusSource(cluster, time.time, config.poll)
        done = await collect_round(
            cluster="prom", sources=[source], config=config, clock=SystemClock(), timeout_s=10.0
        )
    assert done.source_errors == ()
    (node,) = done.view.snapshot.nodes
    assert node.reachability is Reachability.OK and node.gpus[0].util_pct == 50.0
    assert 0.8 < done.elapsed_s < 10.0


def test_gpu_shards_put_every_index_a_node_can_have_in_exactly_one_part() -> None:
    import re

    from gputop.core.dcgm_join import MAX_GPUS_PER_NODE
    from gputop.sources.prometheus import gpu_shards

    assert gpu_shards(1) == [""]
    for count in range(2, 17):
        parts = [re.fullmatch(r'\{gpu=~"([0-9|]+)"\}', shard) for shard in gpu_shards(count)]
        assert len(parts) == count and all(parts)
        indices = sorted(int(i) for part in parts for i in part.group(1).split("|"))  # type: ignore[union-attr]
        assert indices == list(range(MAX_GPUS_PER_NODE))


@needs_vm
async def test_a_refresh_asked_in_parts_joins_as_one_asked_whole(tmp_path: Path) -> None:
    # a large fleet's answers come in parts by GPU index, so that no one answer holds the interpreter
    # long while it is decoded: the parts join into the same nodes, MIG, identity and ages included
    now_s = time.time()
    sim = fleet(now_s, nodes=24)
    answering = [n for n in sim.result().nodes if n.reachability is Reachability.OK]
    with victoria_metrics(tmp_path) as store:
        vm_import(store, exposition(answering, SITE_A, int(now_s * 1000)))
        config = cluster_config(store.url, "gpu[001-024]", flavor="victoriametrics")
        _whole, whole = await collect_once(config, now_s + 1)
        parted = PrometheusSource(config, lambda: now_s + 1)
        parted._shards = 3
        await parted.start()
        try:
            queried: list[str] = []
            post_raw = parted.post_raw

            async def counting(
                session: object, url: str, form: dict[str, str], what: str
            ) -> tuple[bytes, str]:
                queried.append(form["query"])
                return await post_raw(session, url, form, what)  # type: ignore[arg-type]

            parted.post_raw = counting  # type: ignore[method-assign]
            in_parts = await parted.collect(now_s + 1)
        finally:
            await parted.close()
    assert sum('gpu=~"0|3|6' in q for q in queried) > 5  # asked in parts
    assert {n.name: n for n in in_parts.nodes} == {n.name: n for n in whole.nodes}  # type: ignore[attr-defined]
    assert sum(len(n.gpus) for n in in_parts.nodes) == sum(len(n.gpus) for n in answering)
    assert parted._shards == 1  # 192 GPUs: the next refresh asks whole again


@needs_vm
async def test_the_profiling_utilization_is_asked_only_where_the_device_s_is_missing(tmp_path: Path) -> None:
    """Most sites export both utilizations: the store answers the profiling one only for the GPUs
    without a device reading, and every GPU still has its utilization."""
    now_s = time.time()
    sim = fleet(now_s, nodes=8)
    answering = [n for n in sim.result().nodes if n.reachability is Reachability.OK]
    both = ExporterStyle(profiling=True)
    time_ms = int(now_s * 1000)
    text_both, text_b = exposition(answering[:4], both, time_ms), exposition(answering[4:], SITE_B, time_ms)
    text = text_both + text_b
    with victoria_metrics(tmp_path) as store:
        vm_import(store, text)
        config = cluster_config(store.url, "gpu[001-008]", flavor="victoriametrics")
        source = PrometheusSource(config, lambda: now_s + 1)
        await source.start()
        try:
            counts: dict[str, int] = {}
            post_raw = source.post_raw

            async def counting(
                session: object, url: str, form: dict[str, str], what: str
            ) -> tuple[bytes, str]:
                body, encoding = await post_raw(session, url, form, what)  # type: ignore[arg-type]
                assert encoding == "gzip"  # as asked: inflated where it is decoded
                counts[what] = counts.get(what, 0) + len(parse_vector(inflate(body, encoding, what), what)[0])
                return body, encoding

            source.post_raw = counting  # type: ignore[method-assign]
            result = await source.collect(now_s + 1)
        finally:
            await source.close()

    def profiling_series(text: str) -> int:
        return sum(line.startswith("DCGM_FI_PROF_GR_ENGINE_ACTIVE{") for line in text.splitlines())

    assert profiling_series(text_both) > 0  # in the store, and not asked for:
    assert counts["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] == profiling_series(text_b) > 0
    by_name = {n.name: n for n in result.nodes}
    for node in answering:
        got = by_name[node.name].gpus
        assert [g.util_pct for g in got] == pytest.approx([g.util_pct for g in node.gpus], abs=0.01)


@needs_vm
async def test_the_profiling_utilization_is_asked_with_the_slow_metrics_where_no_gpu_needs_it(
    tmp_path: Path,
) -> None:
    """Asking for it costs the store a read of every GPU's device utilization: where every GPU has that,
    it is asked every SLOW_EVERY refreshes; where a GPU needs it, every refresh."""
    from gputop.sources.prometheus import SLOW_EVERY

    now_s = time.time()
    sim = fleet(now_s, nodes=8)
    answering = [n for n in sim.result().nodes if n.reachability is Reachability.OK]
    time_ms = int(now_s * 1000)
    sites = {
        "every GPU has the device's": exposition(answering, ExporterStyle(profiling=True), time_ms),
        "a node without it": exposition(answering[:4], ExporterStyle(profiling=True), time_ms)
        + exposition(answering[4:], SITE_B, time_ms),
    }
    asked: dict[str, list[int]] = {}
    utils: dict[str, list[float | None]] = {}
    first_utils: dict[str, list[float | None]] = {}
    for site, text in sites.items():
        workdir = tmp_path / str(len(asked))
        workdir.mkdir()
        with victoria_metrics(workdir) as store:
            vm_import(store, text)
            source = PrometheusSource(cluster_config(store.url, "gpu[001-008]"), lambda: now_s + 1)
            await source.start()
            try:
                first = await source.collect(now_s + 1)  # the first refresh: every metric
                first_utils[site] = [g.util_pct for n in first.nodes for g in n.gpus]
                times: list[int] = []
                source.post_raw = _counting(source.post_raw, times)  # type: ignore[method-assign]
                for _ in range(SLOW_EVERY):
                    times.append(0)
                    result = await source._refresh(now_s + 1)
                asked[site] = times
                utils[site] = [g.util_pct for n in result.nodes for g in n.gpus]
            finally:
                await source.close()
    assert asked["every GPU has the device's"] == [0] * (SLOW_EVERY - 1) + [1]
    assert asked["a node without it"] == [1] * SLOW_EVERY
    for site in sites:  # every GPU keeps the utilization the first refresh, asked for everything, gave
        assert utils[site] == first_utils[site] and sum(u is not None for u in utils[site]) > 8 * 6


def _counting(post_raw: Any, times: list[int]) -> Any:
    """``post_raw``, counting the profiling utilization's queries into ``times[-1]``."""

    async def counting(session: object, url: str, form: dict[str, str], what: str) -> tuple[bytes, str]:
        times[-1] += what == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
        result: tuple[bytes, str] = await post_raw(session, url, form, what)
        return result

    return counting
