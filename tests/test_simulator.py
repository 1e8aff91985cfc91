"""The simulated cluster: deterministic, physically plausible, and showing every scripted incident."""

from __future__ import annotations

import asyncio
import re
import statistics

import pytest

from gputop.core.interconnect_deviations import fleet_interconnect
from gputop.core.models import GpuSample, NodeSample, SlurmBaseState, SourceResult
from gputop.core.parsers.nvlink import NvlinkStatus
from gputop.core.parsers.topo import Topology
from gputop.sim.gpu_models import GPU_MODELS, gpu_model
from gputop.sim.incidents import INCIDENT_KINDS, incident_node_indices
from gputop.sim.simulator import SILENT_BEFORE_START_S, SimulatedCluster
from gputop.sim.workload import MAX_CATCH_UP_STEPS

T0 = 1_700_000_000.0


@pytest.fixture(scope="module")
def cluster() -> SimulatedCluster:
    return SimulatedCluster(start_time_s=T0)


@pytest.fixture(scope="module")
def first(cluster: SimulatedCluster) -> SourceResult:
    return cluster.result()


def by_name(result: SourceResult) -> dict[str, NodeSample]:
    return {node.name: node for node in result.nodes}


def incident_node(cluster: SimulatedCluster, kind: str) -> str:
    return next(inc.node for inc in cluster.incidents if inc.kind == kind)


def incident_gpu(cluster: SimulatedCluster, kind: str) -> GpuSample:
    inc = next(inc for inc in cluster.incidents if inc.kind == kind)
    node = by_name(cluster.result())[inc.node]
    return next(gpu for gpu in node.gpus if gpu.index == inc.gpu_index)


def run(cluster: SimulatedCluster, steps: int, start: float = T0) -> None:
    for k in range(1, steps + 1):
        cluster.advance_to(start + k)


# ---------------------------------------------------------------- shape


def test_nodes_names_and_gpu_counts(cluster: SimulatedCluster, first: SourceResult) -> None:
    assert cluster.node_names[0] == "gpu001"
    assert cluster.node_names[-1] == "gpu032"
    assert [node.name for node in first.nodes] == list(cluster.node_names)
    missing = incident_node(cluster, "missing_gpu")
    for node in first.nodes:
        assert node.expected_gpu_count == 8
        assert len(node.gpus) == (7 if node.name == missing else 8)
    assert first.slurm is not None
    assert set(first.slurm.nodes) == set(cluster.node_names)


def test_node_names_widen_past_999() -> None:
    names = SimulatedCluster(nodes=1200, start_time_s=T0).node_names
    assert names[0] == "gpu0001"
    assert names[-1] == "gpu1200"


def test_gpu_identity_fields(first: SourceResult) -> None:
    uuids = [gpu.uuid for node in first.nodes for gpu in node.gpus]
    assert len(set(uuids)) == len(uuids)
    hexdigit = "[0-9a-f]"
    pattern = re.compile(
        rf"GPU-{hexdigit}{{8}}-{hexdigit}{{4}}-{hexdigit}{{4}}-{hexdigit}{{4}}-{hexdigit}{{12}}"
    )
    assert all(pattern.fullmatch(u) for u in uuids)
    node = first.nodes[0]
    assert [gpu.pci_bus_id for gpu in node.gpus] == [
        f"00000000:{bus}:00.0" for bus in ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")
    ]
    assert all(gpu.name == "NVIDIA H100 80GB HBM3" for gpu in node.gpus)
    assert all(gpu.mem_total_mib == 81559 and gpu.power_limit_w == 700 for gpu in node.gpus)


def test_ib_ports(cluster: SimulatedCluster, first: SourceResult) -> None:
    down = incident_node(cluster, "ib_down")
    node = next(n for n in first.nodes if n.name != down)
    assert [p.ca_name for p in node.ib_ports] == [f"mlx5_{k}" for k in range(8)]
    assert all(p.port == 1 and p.is_up and p.physical_state == "LinkUp" for p in node.ib_ports)
    assert all(p.rate_gbps == 400 for p in node.ib_ports)
    a100 = SimulatedCluster(nodes=8, gpu_model="A100-80GB", start_time_s=T0).result()
    assert a100.nodes[0].ib_ports[0].rate_gbps == 200


def test_gpu_model_table() -> None:
    assert set(GPU_MODELS) == {"H100", "H200", "A100-80GB", "A100-40GB", "B200"}
    assert gpu_model("B200").name == "NVIDIA B200"
    assert gpu_model("H200").mem_total_mib == 143771
    with pytest.raises(ValueError, match="known models"):
        gpu_model("V100")
    with pytest.raises(ValueError):
        SimulatedCluster(gpu_model="K80", start_time_s=T0)


@pytest.mark.parametrize("model", sorted(GPU_MODELS))
def test_every_model_runs(model: str) -> None:
    cluster = SimulatedCluster(nodes=8, gpu_model=model, start_time_s=T0)
    run(cluster, 30)
    total = GPU_MODELS[model].mem_total_mib
    for node in cluster.result().nodes:
        for gpu in node.gpus:
            assert gpu.mem_total_mib == total
            assert gpu.mem_used_mib is not None and gpu.mem_used_mib <= total


# ---------------------------------------------------------------- determinism and time


def test_same_seed_same_data_other_seed_differs() -> None:
    a = SimulatedCluster(seed=7, start_time_s=T0)
    b = SimulatedCluster(seed=7, start_time_s=T0)
    c = SimulatedCluster(seed=8, start_time_s=T0)
    assert a.result() == b.result()
    for k in (1, 2, 5, 9, 30, 31):
        for sim in (a, b, c):
            sim.advance_to(T0 + k)
        assert a.result() == b.result()
    assert a.result() != c.result()
    assert [g.uuid for g in a.result().nodes[0].gpus] != [g.uuid for g in c.result().nodes[0].gpus]


def test_evolution_does_not_depend_on_call_frequency() -> None:
    often = SimulatedCluster(start_time_s=T0)
    rarely = SimulatedCluster(start_time_s=T0)
    for k in range(1, 91):
        often.advance_to(T0 + k * 0.5)  # half-second calls: every other one runs a step
    rarely.advance_to(T0 + 45.7)
    assert often.now_s == rarely.now_s == T0 + 45
    assert often.result() == rarely.result()


def test_async_advance_matches_sync() -> None:
    sync = SimulatedCluster(nodes=64, start_time_s=T0)
    chunked = SimulatedCluster(nodes=64, start_time_s=T0)
    sync.advance_to(T0 + 20)
    asyncio.run(chunked.advance_and_yield(T0 + 20, chunk_nodes=7))
    assert sync.result() == chunked.result()


def test_result_built_in_slices_matches_result_and_is_reused() -> None:
    whole = SimulatedCluster(nodes=64, start_time_s=T0)
    sliced = SimulatedCluster(nodes=64, start_time_s=T0)
    whole.advance_to(T0 + 12)
    sliced.advance_to(T0 + 12)
    built = asyncio.run(sliced.result_and_yield(chunk_nodes=7))
    assert built == whole.result()
    assert sliced.result() is built  # no step since: the same objects come back


def test_advance_and_yield_hands_back_the_loop() -> None:
    sim = SimulatedCluster(nodes=300, start_time_s=T0)
    ticks = 0

    async def other() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    async def main() -> None:
        task = asyncio.create_task(other())
        await sim.advance_and_yield(T0 + 2, chunk_nodes=50)
        task.cancel()

    asyncio.run(main())
    assert ticks >= 2 * 300 // 50 - 1


def test_cancelled_advance_leaves_whole_steps() -> None:
    sim = SimulatedCluster(nodes=64, start_time_s=T0)

    async def main() -> None:
        task = asyncio.create_task(sim.advance_and_yield(T0 + 10, chunk_nodes=5))
        for _ in range(30):  # two and a bit steps of 13 chunks
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert T0 < sim.now_s < T0 + 10
    reference = SimulatedCluster(nodes=64, start_time_s=T0)
    reference.advance_to(sim.now_s)
    assert sim.result() == reference.result()
    sim.advance_to(T0 + 10)
    reference.advance_to(T0 + 10)
    assert sim.result() == reference.result()


def test_same_or_earlier_time_changes_nothing(cluster: SimulatedCluster) -> None:
    sim = SimulatedCluster(start_time_s=T0)
    sim.advance_to(T0 + 5)
    before = sim.result()
    sim.advance_to(T0 + 5)
    sim.advance_to(T0 + 3)
    sim.advance_to(T0 + 5.9)
    assert sim.result() is before
    assert all(a is b for a, b in zip(before.nodes, sim.result().nodes, strict=True))


def test_long_pause_is_capped_not_replayed() -> None:
    sim = SimulatedCluster(start_time_s=T0)
    before = sim.steps_run
    sim.advance_to(T0 + 86_400)
    assert sim.steps_run - before == MAX_CATCH_UP_STEPS
    assert sim.now_s == T0 + 86_400
    node = sim.result().nodes[0]
    assert node.sampled_at_s == T0 + 86_400


def test_result_reuses_unchanged_nodes() -> None:
    sim = SimulatedCluster(start_time_s=T0)
    frozen_name = incident_node(sim, "unresponsive")
    first = sim.result()
    assert sim.result() is first
    sim.advance_to(T0 + 1)
    second = sim.result()
    old, new = by_name(first), by_name(second)
    assert new[frozen_name] is old[frozen_name]  # it never reports again
    live = [name for name in sim.node_names if name != frozen_name]
    assert all(new[name] is not old[name] for name in live)  # fresh sample time
    assert all(new[name].sampled_at_s == T0 + 1 for name in live)


# ---------------------------------------------------------------- incidents


def test_incident_placement_is_fixed_and_spread() -> None:
    assert incident_node_indices(32) == {
        "hot_gpu": 2,
        "ecc_xid": 6,
        "unresponsive": 10,
        "idle_job": 14,
        "drained": 18,
        "mig": 22,
        "ib_down": 26,
        "missing_gpu": 30,
        "nvlink_degraded": 4,
        "ib_slow": 8,
        "pcie_degraded": 12,
        "remap_pending": 16,
        "pcie_replays": 3,
        "nvlink_crc": 7,
        "hbm_hot": 11,
        "memory_wear": 15,
        "sbe_storm": 19,
        "ib_flapping": 23,
        "xid_job": 1,
        "xid_reset": 5,
        "xid_repeat": 9,
    }
    for n in (8, 9, 15, 16, 17, 31, 32, 33, 100, 1000, 4096):
        placed = incident_node_indices(n)
        kinds = 8 if n < 16 else 12 if n < 32 else len(INCIDENT_KINDS)
        assert list(placed) == list(INCIDENT_KINDS[:kinds])
        spots = list(placed.values())
        assert len(set(spots)) == len(spots)
        assert all(0 <= s < n for s in spots)
    assert list(incident_node_indices(3)) == list(INCIDENT_KINDS[:3])
    a = SimulatedCluster(seed=1, start_time_s=T0).incidents
    b = SimulatedCluster(seed=2, start_time_s=T0).incidents
    assert [(i.kind, i.node, i.gpu_index) for i in a] == [(i.kind, i.node, i.gpu_index) for i in b]
    assert [i.kind for i in a] == list(INCIDENT_KINDS)


@pytest.mark.parametrize("nodes", [1, 2, 5, 7, 8, 9])
def test_small_clusters_place_what_fits(nodes: int) -> None:
    sim = SimulatedCluster(nodes=nodes, start_time_s=T0)
    assert [i.kind for i in sim.incidents] == list(INCIDENT_KINDS[: min(nodes, 8)])
    assert len({i.node for i in sim.incidents}) == len(sim.incidents)
    run(sim, 20)
    assert len(sim.result().nodes) == nodes


def test_small_nodes_work() -> None:
    sim = SimulatedCluster(nodes=16, gpus_per_node=4, start_time_s=T0)
    run(sim, 20)
    result = sim.result()
    assert all(node.expected_gpu_count == 4 for node in result.nodes)
    assert result.slurm is not None
    for job in result.slurm.jobs:
        assert all(max(idxs) < 4 for idxs in job.gpus_by_node.values())


def test_hot_gpu(cluster: SimulatedCluster) -> None:
    sim = SimulatedCluster(start_time_s=T0)
    for step in (0, 60, 300):
        run(sim, step - int(sim.now_s - T0), start=sim.now_s)
        gpu = incident_gpu(sim, "hot_gpu")
        assert gpu.temp_c is not None and 86 <= gpu.temp_c <= 93
        assert "sw_thermal_slowdown" in gpu.throttle_reasons
        assert gpu.sm_clock_mhz is not None and gpu.sm_clock_max_mhz is not None
        assert gpu.sm_clock_mhz < gpu.sm_clock_max_mhz - 150


def test_ecc_and_xid(cluster: SimulatedCluster, first: SourceResult) -> None:
    inc = next(i for i in cluster.incidents if i.kind == "ecc_xid")
    node = by_name(first)[inc.node]
    gpu = next(g for g in node.gpus if g.index == inc.gpu_index)
    assert gpu.ecc_uncorrected == 2
    assert [x.code for x in node.xid_events] == [48, 79]
    assert all(x.pci_bus_id == gpu.pci_bus_id and x.gpu_index == gpu.index for x in node.xid_events)
    assert all(T0 - 600 < x.time_s < T0 for x in node.xid_events)
    assert node.xid_events[0].time_s < node.xid_events[1].time_s
    assert "double bit error" in node.xid_events[0].message
    assert "fallen off the bus" in node.xid_events[1].message
    assert "PCI:0000:9a:00" in node.xid_events[1].message
    xid_nodes = {i.node for i in cluster.incidents if i.kind.startswith("xid_")}
    others = [n for n in first.nodes if n.name != inc.node and n.name not in xid_nodes]
    assert not any(n.xid_events for n in others)


def test_unresponsive_node_is_frozen() -> None:
    sim = SimulatedCluster(start_time_s=T0)
    name = incident_node(sim, "unresponsive")
    before = by_name(sim.result())[name]
    assert before.sampled_at_s == T0 - SILENT_BEFORE_START_S
    run(sim, 50)
    result = sim.result()
    after = by_name(result)[name]
    assert after is before
    assert after.sampled_at_s == T0 - SILENT_BEFORE_START_S
    assert result.slurm is not None
    slurm_node = result.slurm.nodes[name]
    assert "NOT_RESPONDING" in slurm_node.flags
    assert slurm_node.base_state is SlurmBaseState.ALLOCATED
    assert any(name in job.gpus_by_node for job in result.slurm.jobs if job.state == "RUNNING")


def test_idle_job(cluster: SimulatedCluster, first: SourceResult) -> None:
    name = incident_node(cluster, "idle_job")
    assert first.slurm is not None
    jobs = [job for job in first.slurm.jobs if name in job.gpus_by_node]
    assert len(jobs) == 1
    job = jobs[0]
    assert job.gpus_by_node[name] == tuple(range(8))
    assert job.start_time_s == T0 - 3 * 3600
    for gpu in by_name(first)[name].gpus:
        assert gpu.util_pct == 0
        assert gpu.mem_used_mib is not None and 29_000 <= gpu.mem_used_mib <= 32_500
        assert gpu.processes and gpu.processes[0].user == job.user


def test_drained_node(cluster: SimulatedCluster, first: SourceResult) -> None:
    name = incident_node(cluster, "drained")
    assert first.slurm is not None
    node = first.slurm.nodes[name]
    assert node.drained and node.label == "drained"
    assert node.reason == "Xid 48 DBE on GPU2, RMA requested (OPS-4411)"
    assert node.reason_user == "root"
    assert node.reason_time_s == T0 - 2 * 86400
    sim = SimulatedCluster(start_time_s=T0)
    run(sim, 300)
    result = sim.result()
    assert result.slurm is not None
    assert not any(name in job.gpus_by_node for job in result.slurm.jobs)
    gpus = by_name(result)[name].gpus
    # GPU 0 waits in MIG mode, empty, for a repartition: the driver reports no utilization for it.
    assert [(g.index, g.util_pct, g.processes) for g in gpus if g.mig_enabled] == [(0, None, ())]
    assert all(gpu.util_pct == 0 for gpu in gpus if not gpu.mig_enabled)


def test_mig_gpu(cluster: SimulatedCluster) -> None:
    gpu = incident_gpu(cluster, "mig")
    assert gpu.mig_enabled is True
    assert gpu.util_pct is None and gpu.mem_util_pct is None
    assert gpu.mem_used_mib is not None and gpu.mem_used_mib > 10_000
    assert gpu.processes
    assert sum(p.used_mib or 0 for p in gpu.processes) < gpu.mem_used_mib
    drained = incident_node(cluster, "drained")
    others = [g for n in cluster.result().nodes for g in n.gpus if g is not gpu]
    assert [(n.name, g.index) for n in cluster.result().nodes for g in n.gpus if g.mig_enabled] == [
        (drained, 0),
        (incident_node(cluster, "mig"), 7),
    ]
    assert all(g.util_pct is not None for g in others if not g.mig_enabled)


def test_ib_down(cluster: SimulatedCluster, first: SourceResult) -> None:
    node = by_name(first)[incident_node(cluster, "ib_down")]
    down = [p for p in node.ib_ports if not p.is_up]
    assert [(p.ca_name, p.port, p.state, p.physical_state, p.rate_gbps) for p in down] == [
        ("mlx5_3", 1, "Down", "Disabled", None)
    ]
    assert len(node.ib_ports) == 8


def test_missing_gpu(cluster: SimulatedCluster, first: SourceResult) -> None:
    node = by_name(first)[incident_node(cluster, "missing_gpu")]
    assert [gpu.index for gpu in node.gpus] == [0, 1, 2, 3, 4, 6, 7]
    assert node.missing_gpu_count == 1
    assert first.slurm is not None
    held = [i for job in first.slurm.jobs for i in job.gpus_by_node.get(node.name, ())]
    assert 5 not in held


def facts(node: NodeSample) -> tuple[Topology, NvlinkStatus]:
    topology, nvlink = node.facts.topology.value, node.facts.nvlink.value
    assert isinstance(topology, Topology) and isinstance(nvlink, NvlinkStatus)
    return topology, nvlink


def test_dgx_h100_like_interconnect(cluster: SimulatedCluster, first: SourceResult) -> None:
    node = by_name(first)["gpu001"]
    topology, nvlink = facts(node)
    assert topology.gpus == tuple(f"GPU{k}" for k in range(8))
    assert [topology.nic_name(nic) for nic in topology.nics] == [f"mlx5_{k}" for k in range(8)]
    assert all(topology.link(f"GPU{a}", f"GPU{b}") == "NV18" for a in range(8) for b in range(8) if a != b)
    assert [topology.link(f"GPU{k}", f"NIC{k}") for k in range(8)] == ["PIX"] * 8
    assert (topology.link("GPU0", "NIC1"), topology.link("GPU0", "NIC4"), topology.link("NIC5", "NIC7")) == (
        "NODE",
        "SYS",
        "NODE",
    )
    assert (topology.cpu_affinity("GPU3"), topology.numa_affinity("GPU3")) == ("0-55,112-167", "0")
    assert (topology.cpu_affinity("GPU4"), topology.numa_affinity("GPU4")) == ("56-111,168-223", "1")
    assert [(g.index, g.uuid) for g in nvlink.gpus] == [(g.index, g.uuid) for g in node.gpus]
    assert all(g.active_count == 18 and g.total_speed_gbps == pytest.approx(18 * 26.562) for g in nvlink.gpus)


def test_interconnect_facts_are_made_once_and_shared(cluster: SimulatedCluster, first: SourceResult) -> None:
    sim = SimulatedCluster(start_time_s=T0)
    before = sim.result()
    run(sim, 3)
    after = sim.result()
    assert all(a.facts is b.facts for a, b in zip(before.nodes, after.nodes, strict=True))
    boards = {id(facts(node)[0]) for node in first.nodes}
    assert len(boards) == 2  # every node shares one board, but the one that lost a GPU
    missing = facts(by_name(first)[incident_node(cluster, "missing_gpu")])
    assert "GPU5" not in missing[0].gpus and [g.index for g in missing[1].gpus] == [0, 1, 2, 3, 4, 6, 7]


def test_nvlink_degraded(cluster: SimulatedCluster, first: SourceResult) -> None:
    inc = next(i for i in cluster.incidents if i.kind == "nvlink_degraded")
    assert (inc.node, inc.gpu_index, inc.description) == ("gpu005", 5, "GPU5 has 12 of 18 NVLinks active")
    _, nvlink = facts(by_name(first)[inc.node])
    assert [(g.index, g.active_count, len(g.links)) for g in nvlink.gpus if g.active_count < 18] == [
        (5, 12, 18)
    ]
    again = facts(SimulatedCluster(start_time_s=T0).result().nodes[4])[1]
    assert again.gpus[5].inactive_links == nvlink.gpus[5].inactive_links  # the seed picks the links


def test_ib_slow(cluster: SimulatedCluster, first: SourceResult) -> None:
    node = by_name(first)[incident_node(cluster, "ib_slow")]
    assert node.name == "gpu009"
    assert [(p.ca_name, p.state, p.rate_gbps) for p in node.ib_ports if p.rate_gbps != 400] == [
        ("mlx5_3", "Active", 200.0)
    ]


def test_interconnect_incidents_are_the_fleets_only_deviations(first: SourceResult) -> None:
    found = fleet_interconnect(first.nodes)
    assert [d.text for d in found.all()] == [
        "gpu005: GPU5 has 12 of 18 NVLinks active",
        "gpu027: mlx5_3 port 1 Down",
        "gpu009: mlx5_3 at 200 Gb/s, peers at 400",
    ]


def test_a100_boards_have_nv12() -> None:
    node = SimulatedCluster(nodes=8, gpu_model="A100-80GB", start_time_s=T0).result().nodes[0]
    topology, nvlink = facts(node)
    assert topology.link("GPU0", "GPU7") == "NV12"
    assert {(len(g.links), g.links[0].speed_gbps) for g in nvlink.gpus} == {(12, 25.0)}


# ---------------------------------------------------------------- Slurm


def test_slurm_jobs_are_consistent_with_gpus(first: SourceResult) -> None:
    assert first.slurm is not None
    held: dict[tuple[str, int], str] = {}
    for job in first.slurm.jobs:
        if job.state == "PENDING":
            assert job.pending_reason and not job.gpus_by_node and job.start_time_s is None
            continue
        assert job.state == "RUNNING"
        assert job.start_time_s is not None and job.start_time_s <= T0
        assert job.time_limit_s is not None and job.start_time_s + job.time_limit_s > T0
        assert job.gpu_count in (1, 2, 4, 8) or (job.gpu_count % 8 == 0 and len(job.gpus_by_node) > 1)
        for node, idxs in job.gpus_by_node.items():
            for idx in idxs:
                assert (node, idx) not in held  # one job per GPU
                held[(node, idx)] = job.user
    for node in first.nodes:
        for gpu in node.gpus:
            user = held.get((node.name, gpu.index))
            if user is None:
                assert not gpu.processes
            else:
                assert gpu.processes and gpu.processes[0].user == user
    ids = [int(job.job_id) for job in first.slurm.jobs]
    assert len(set(ids)) == len(ids)


def test_slurm_partitions_users_reasons(first: SourceResult) -> None:
    assert first.slurm is not None
    parts = [node.partitions[0] for node in first.slurm.nodes.values()]
    assert parts.count("train") > parts.count("infer") > 0
    assert parts.count("debug") > 0
    reasons = {job.pending_reason for job in first.slurm.jobs if job.state == "PENDING"}
    assert {"Resources", "Priority", "QOSMaxGpuPerUser"} <= reasons
    users = {job.user for job in first.slurm.jobs}
    assert len(users) >= 6
    assert any(len(job.gpus_by_node) > 1 for job in first.slurm.jobs)


def test_slurm_base_state_follows_allocation(first: SourceResult) -> None:
    assert first.slurm is not None
    held: dict[str, int] = {}
    for job in first.slurm.jobs:
        for node, idxs in job.gpus_by_node.items():
            held[node] = held.get(node, 0) + len(idxs)
    for name, node in first.slurm.nodes.items():
        count = held.get(name, 0)
        expected = (
            SlurmBaseState.IDLE
            if count == 0
            else SlurmBaseState.ALLOCATED
            if count == 8
            else SlurmBaseState.MIXED
        )
        assert node.base_state is expected, name
    states = {node.base_state for node in first.slurm.nodes.values()}
    assert {SlurmBaseState.IDLE, SlurmBaseState.MIXED, SlurmBaseState.ALLOCATED} <= states


def test_jobs_finish_and_start_over_time() -> None:
    sim = SimulatedCluster(start_time_s=T0)
    first = sim.result().slurm
    run(sim, 900)
    later = sim.result().slurm
    assert first is not None and later is not None
    before = {job.job_id for job in first.jobs if job.state == "RUNNING"}
    after = {job.job_id for job in later.jobs if job.state == "RUNNING"}
    assert before - after, "some jobs finished"
    started = after - before
    assert started, "some jobs started"
    newest = max(started, key=int)
    job = next(job for job in later.jobs if job.job_id == newest)
    assert job.start_time_s is not None and T0 < job.start_time_s <= T0 + 900


# ---------------------------------------------------------------- physics


def busy_and_idle(result: SourceResult) -> tuple[list[GpuSample], list[GpuSample]]:
    assert result.slurm is not None
    held = {(n, i) for job in result.slurm.jobs for n, idxs in job.gpus_by_node.items() for i in idxs}
    busy, idle = [], []
    for node in result.nodes:
        for gpu in node.gpus:
            if gpu.util_pct is None or gpu.ecc_uncorrected:
                continue
            if gpu.util_pct >= 80:
                busy.append(gpu)
            elif (node.name, gpu.index) not in held and gpu.util_pct == 0:
                idle.append(gpu)
    return busy, idle


def test_busy_gpus_are_hotter_and_draw_more(first: SourceResult) -> None:
    busy, idle = busy_and_idle(first)
    assert len(busy) > 50 and len(idle) > 5
    hot_busy = statistics.median(g.temp_c or 0 for g in busy)
    assert 60 <= hot_busy <= 80
    assert all(30 <= (g.temp_c or 0) <= 36 for g in idle)
    assert statistics.median(g.power_w or 0 for g in busy) > 4 * statistics.median(
        g.power_w or 0 for g in idle
    )
    assert all(abs((g.power_w or 0) - 70) < 10 for g in idle)
    assert all(g.sm_clock_mhz == 345 for g in idle)
    assert all(
        g.sm_clock_mhz and g.sm_clock_mhz >= 1800 for g in busy if "thermal" not in str(g.throttle_reasons)
    )
    assert all(400 <= (g.mem_used_mib or 0) <= 600 for g in idle)
    assert statistics.median(g.mem_util_pct or 0 for g in busy) > 20
    assert all(g.mem_util_pct == 0 for g in idle)


def test_temperature_follows_power_with_a_lag() -> None:
    sim = SimulatedCluster(nodes=256, start_time_s=T0)
    # Watch GPUs whose load steps up and stays up (a job leaving its start-up phase): power follows at
    # once, temperature climbs over tens of seconds.
    series: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for k in range(1, 241):
        sim.advance_to(T0 + k)
        for node in sim.result().nodes:
            for gpu in node.gpus:
                series.setdefault((node.name, gpu.index), []).append((gpu.power_w or 0.0, gpu.temp_c or 0.0))
    stepped = 0
    for values in series.values():
        for i in range(1, len(values) - 30):
            if values[i - 1][0] < 200 and min(p for p, _ in values[i + 2 : i + 31]) > 400:
                cold = values[i - 1][1]
                assert values[i + 1][1] - cold <= 3  # not at once
                assert cold + 3 < values[i + 10][1] < values[i + 30][1]
                assert values[i + 30][1] > cold + 15  # but it does follow
                stepped += 1
                break
    assert stepped >= 3


def test_values_move_smoothly() -> None:
    sim = SimulatedCluster(start_time_s=T0)
    run(sim, 5)
    previous = by_name(sim.result())
    for k in range(6, 66):
        sim.advance_to(T0 + k)
        current = by_name(sim.result())
        for name, node in current.items():
            for old, new in zip(previous[name].gpus, node.gpus, strict=True):
                if old.processes and new.processes and old.util_pct is not None:
                    assert abs((new.temp_c or 0) - (old.temp_c or 0)) <= 3
        previous = current


def test_values_stay_physical_over_600_steps() -> None:
    sim = SimulatedCluster(seed=3, start_time_s=T0)
    for k in range(1, 601):
        sim.advance_to(T0 + k)
        if k % 5:
            continue
        for node in sim.result().nodes:
            for gpu in node.gpus:
                if gpu.util_pct is not None:
                    assert 0 <= gpu.util_pct <= 100
                if gpu.mem_util_pct is not None:
                    assert 0 <= gpu.mem_util_pct <= 100
                assert gpu.mem_used_mib is not None and gpu.mem_total_mib is not None
                assert 0 < gpu.mem_used_mib <= gpu.mem_total_mib
                assert gpu.temp_c is not None and 20 <= gpu.temp_c <= 100
                assert gpu.power_w is not None and gpu.power_limit_w is not None
                assert 0 < gpu.power_w <= gpu.power_limit_w * 1.1
                assert gpu.sm_clock_mhz is not None and gpu.sm_clock_max_mhz is not None
                assert 0 < gpu.sm_clock_mhz <= gpu.sm_clock_max_mhz


# ---------------------------------------------------------------- scale


def test_thousand_node_cluster() -> None:
    sim = SimulatedCluster(nodes=1000, start_time_s=T0)
    result = sim.result()
    assert len(result.nodes) == 1000
    assert sum(len(node.gpus) for node in result.nodes) == 8000 - 1
    assert len(sim.incidents) == len(INCIDENT_KINDS)
    sim.advance_to(T0 + 3)
    assert sim.result().nodes[0].sampled_at_s == T0 + 3


def test_a_past_before_the_origin_sees_the_incidents_happen_at_their_times() -> None:
    """The demo's replayed hour: started an hour before its origin, the cluster's incidents are timed
    from the origin. An Xid is in the kernel log only from its time on; the silent node answers until
    45 s before the origin; at the origin, everything is as it is for a cluster started there."""
    origin_s = T0 + 3600.0
    sim = SimulatedCluster(start_time_s=T0, origin_s=origin_s)
    plain = SimulatedCluster(start_time_s=origin_s)
    ecc = incident_node(sim, "ecc_xid")
    silent = incident_node(sim, "unresponsive")
    early = by_name(sim.result())
    assert early[ecc].xid_events == ()  # its Xid 48 is logged 372 s before the origin
    assert early[silent].sampled_at_s == T0  # answering, with its last readings
    sim.advance_to(origin_s - 300.0)
    middle = by_name(sim.result())
    assert [e.code for e in middle[ecc].xid_events] == [48]  # 79 follows 251 s before the origin
    assert middle[silent].sampled_at_s == origin_s - 300.0
    sim.advance_to(origin_s)
    late = by_name(sim.result())
    expected = by_name(plain.result())
    assert late[ecc].xid_events == expected[ecc].xid_events
    assert late[ecc].xid_events is sim.result().nodes[incident_index(sim, "ecc_xid")].xid_events  # kept
    assert late[silent].sampled_at_s == origin_s - SILENT_BEFORE_START_S == expected[silent].sampled_at_s
    for kind in ("xid_job", "xid_reset", "xid_repeat"):
        name = incident_node(sim, kind)
        assert late[name].xid_events == expected[name].xid_events, kind


def incident_index(cluster: SimulatedCluster, kind: str) -> int:
    return cluster.node_names.index(incident_node(cluster, kind))
