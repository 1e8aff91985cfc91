"""The process that decodes and joins a store's answers: its nodes are the ones gputop's own process
would join from the same answers, refresh after refresh (the facts and IB ports that travel only when
they change included); a worker that dies or cannot start gets a reason, and the next refresh goes on."""

from __future__ import annotations

import asyncio
import gzip
import os
import signal
import sys
import time
from pathlib import Path

import orjson
import pytest

from gputop.core.dcgm_join import SAMPLE_TIME, series_of_text
from gputop.core.facts import NO_FACTS
from gputop.core.models import GpuSample, NodeSample, Reachability
from gputop.core.parsers.prom_text import parse_prom_text
from gputop.sim.dcgm_text import exposition, node_exporter_ib
from gputop.sim.simulator import SimulatedCluster
from gputop.sources.digest_worker import WORKER_NICE, DigestWorker, WorkerGone
from gputop.sources.prometheus import PrometheusSource, StoreError
from tests.infra.stores import victoria_metrics, vm_import
from tests.test_prometheus_source import cluster_config, needs_vm


def answers(nodes: list[NodeSample], time_ms: int, replays: int | None = None) -> dict[str, bytes]:
    """Each metric's answer as a store gives an aggregated instant query (and the sample times), with
    a PCIe replay counter on every GPU where ``replays`` is given (that on the first node's, 0 elsewhere:
    a refresh that asks the slow metrics)."""
    text = exposition(nodes, time_ms=time_ms) + node_exporter_ib(nodes, time_ms)
    samples = parse_prom_text(text).samples
    by_metric: dict[str, list[dict[str, object]]] = {}
    for one in series_of_text(samples):
        by_metric.setdefault(one.metric, []).append(
            {"metric": dict(one.labels), "value": [0, str(one.value)]}
        )
        if one.metric == "DCGM_FI_DEV_FB_USED":
            by_metric.setdefault(SAMPLE_TIME, []).append(
                {"metric": dict(one.labels), "value": [0, str(time_ms / 1000)]}
            )
    for node in nodes if replays is not None else ():
        for gpu in node.gpus:
            count = replays if node is nodes[0] else 0
            labels = {"Hostname": node.name, "gpu": str(gpu.index)}
            by_metric.setdefault("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", []).append(
                {"metric": labels, "value": [0, str(count)]}
            )
    for one in samples:
        if one.name.startswith("node_infiniband"):
            by_metric.setdefault(one.name, []).append(
                {"metric": dict(one.labels), "value": [0, str(one.value)]}
            )
    return {
        metric: orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})
        for metric, result in by_metric.items()
    }


async def by_worker(
    worker: DigestWorker, source: PrometheusSource, bodies: dict[str, bytes], now_s: float
) -> tuple[list[NodeSample], int]:
    """One refresh's answers through the worker, read back as the source reads them; and how many
    nodes' facts came with it."""
    await worker.begin()
    for metric, body in bodies.items():
        await worker.answer(metric, gzip.compress(body), "gzip")  # as the store sends them
    nodes = []
    facts_sent = 0
    async for items in worker.finish():
        for bare, sent, _ports in items:
            facts_sent += sent is not None
            facts = worker.facts.get(bare.name, NO_FACTS)
            nodes.append(source._named(bare, now_s, facts, worker.ports.get(bare.name, ())))
    return nodes, facts_sent


async def test_the_worker_joins_what_this_process_would_refresh_after_refresh() -> None:
    now_s = 1_800_000_000.0
    sim = SimulatedCluster(nodes=40, gpus_per_node=8, seed=7, start_time_s=now_s - 5)
    source = PrometheusSource(cluster_config("http://127.0.0.1:1", "gpu[001-040]"), time.time)
    worker = await DigestWorker.start(None, source.store)
    try:
        for step in range(3):  # slow, fast, slow
            at_s = now_s + 15 * step
            sim.advance_to(at_s)
            up = [n for n in sim.result().nodes if n.reachability is Reachability.OK]
            bodies = answers(up, int(at_s * 1000), replays=(0, None, 40)[step])
            here, _notes = source._digest([(metric, body, "") for metric, body in bodies.items()], at_s)
            there, facts_sent = await by_worker(worker, source, bodies, at_s)
            # the counters' facts are read at each slow refresh (their time moves), kept between
            assert facts_sent == (len(up), 0, len(up))[step]
            assert len(there) == len(up) > 30
            assert {n.name: n for n in there} == {
                n.name: n for n in here if n.reachability is Reachability.OK
            }
            assert any(n.ib_ports for n in there) and any(n.facts.counters.heard for n in there)
            # the GPUs travel as plain tuples and are GpuSamples again on this side
            assert {type(gpu) for n in there for gpu in n.gpus} == {GpuSample}
            assert any(not p.is_up for n in there for p in n.ib_ports)  # the simulator's port down
        assert worker.done is not None and worker.done.cpu_s > 0 and worker.done.peak_rss_mb > 10
    finally:
        await worker.stop()
    assert not worker.alive


async def test_a_worker_that_dies_is_a_reason_and_the_next_refresh_starts_another() -> None:
    source = PrometheusSource(cluster_config("http://127.0.0.1:1", "gpu001"), time.time)
    worker = await DigestWorker.start(None, source.store)
    os.kill(worker._process.pid, signal.SIGKILL)
    with pytest.raises(WorkerGone, match="stopped"):
        await worker.begin()
        async for _items in worker.finish():
            pass
    assert not worker.alive


async def test_the_worker_runs_below_the_dashboard_s_priority() -> None:
    # where the CPUs are busy, the event loop answering keys goes before the decoding
    source = PrometheusSource(cluster_config("http://127.0.0.1:1", "gpu001"), time.time)
    worker = await DigestWorker.start(None, source.store)
    try:
        wanted = min(19, os.getpriority(os.PRIO_PROCESS, 0) + WORKER_NICE)
        deadline = time.monotonic() + 10  # it lowers its priority once its imports are done
        while os.getpriority(os.PRIO_PROCESS, worker._process.pid) != wanted and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert os.getpriority(os.PRIO_PROCESS, worker._process.pid) == wanted
    finally:
        await worker.stop()


async def test_no_answer_at_all_is_the_store_s_error_and_the_worker_goes_on() -> None:
    source = PrometheusSource(cluster_config("http://127.0.0.1:1", "gpu001"), time.time)
    worker = await DigestWorker.start(None, source.store)
    try:
        await worker.begin()
        await worker.failed("DCGM_FI_DEV_GPU_UTIL: no answer within 10s")
        await worker.answer("DCGM_FI_DEV_GPU_TEMP", b"<html>proxy error</html>", "")
        with pytest.raises(StoreError, match=r"no query answered .*no answer within 10s") as caught:
            async for _items in worker.finish():
                pass
        assert not isinstance(caught.value, WorkerGone)
        bodies = answers(
            SimulatedCluster(nodes=2, gpus_per_node=8, seed=1, start_time_s=1_800_000_000.0).result().nodes,
            1_800_000_000_000,
        )
        nodes, _facts_sent = await by_worker(worker, source, bodies, 1_800_000_000.0)
        assert len(nodes) == 2
    finally:
        await worker.stop()


@needs_vm
async def test_the_source_restarts_a_killed_worker_and_reads_in_its_own_process_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    now_s = time.time()
    sim = SimulatedCluster(nodes=4, gpus_per_node=8, seed=3, start_time_s=now_s - 5)
    sim.advance_to(now_s)
    with victoria_metrics(tmp_path) as store:
        vm_import(store, exposition(sim.result().nodes, time_ms=int(now_s * 1000)))
        source = PrometheusSource(
            cluster_config(store.url, "gpu[001-004]", flavor="victoriametrics"), time.time
        )
        await source.start()
        try:
            assert source.awaiting_first_answer  # the start began the first refresh
            first = await source._refreshing  # type: ignore[misc]
            assert not source.awaiting_first_answer
            assert sum(n.reachability is Reachability.OK for n in first.nodes) >= 3
            worker = source._worker
            assert worker is not None and worker.alive and source.warnings == ()
            os.kill(worker._process.pid, signal.SIGKILL)
            await asyncio.sleep(0.2)
            with pytest.raises(StoreError, match="process decoding the store's answers stopped"):
                await source._refresh(now_s + 2)
            again = await source._refresh(now_s + 3)  # a new worker, asked for every metric
            assert source._worker is not None and source._worker is not worker
            assert [n.name for n in again.nodes] == [n.name for n in first.nodes]
            assert again.nodes[0].gpus[0].mem_util_pct is not None  # a slow metric, asked again
        finally:
            await source.close()
        assert source._worker is None
        # a Python that cannot be started: the answers read here, and the warnings say so
        monkeypatch.setattr(sys, "executable", str(tmp_path / "no-python"))
        source = PrometheusSource(
            cluster_config(store.url, "gpu[001-004]", flavor="victoriametrics"), time.time
        )
        await source.start()
        try:
            result = await source._refresh(now_s + 1)
        finally:
            await source.close()
        assert [n.name for n in result.nodes] == [n.name for n in first.nodes]
        assert any("gputop's own process" in w for w in source.warnings)
