"""Interconnect summaries from real captures, and each node against the usual interconnect of its peers.

Fleets are a real node (V100 x8 `topo -m` and `nvlink -s` from one Vast.ai machine, an H100 node's
`ibstat`) copied N times, with one copy's text changed the way a real fault changes it, then parsed.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from gputop.core.facts import NodeFacts
from gputop.core.interconnect import GpuNvlinks, Nic, link_matrix, node_interconnect
from gputop.core.interconnect_deviations import (
    ABSENT,
    Aspect,
    Deviation,
    FleetInterconnect,
    InterconnectTracker,
    PeerGroup,
    UsualInterconnect,
    fleet_interconnect,
)
from gputop.core.models import GpuSample, IbPort, NodeSample, Reachability, Severity
from gputop.core.parsers.topo import LinkClass
from tests.factories import facts_of, gpu_sample
from tests.topology_samples import ibstat, nvlink, topo

FIXTURES = Path(__file__).parent / "fixtures"


def fixture(path: str) -> str:
    return (FIXTURES / path).read_text(encoding="utf-8")


V100_TOPO = fixture("nvidia-smi-topo/v100-sxm2-32gb-x8-nv1-nv2-1nic-NIC-legend-drv580-double-tab-vastai.txt")
V100_NVLINK = fixture("nvidia-smi-nvlink/v100-sxm2-32gb-8gpu-6links-25.781GBs-nvlink-s-drv580-vastai.txt")
V100_INACTIVE = fixture("nvidia-smi-nvlink/v100-sxm2-32gb-7gpu-6links-INACTIVE-links-azhpc.txt")
H100_IBSTAT = fixture("ib/ibstat-h100-ndr-ib-cx7-plus-cx6-eth-12ca-eth-ports-DOWN-gpud.txt")
A100_TOPO = fixture("nvidia-smi-topo/a100-8gpu-nv12-18nic-oci-bm-gpu4.8-style.txt")
V100 = "Tesla V100-SXM2-32GB"


def gpu(index: int, name: str = V100) -> GpuSample:
    return gpu_sample(
        index, name=name, mem_total_mib=32768.0, power_w=200.0, power_limit_w=300.0,
        sm_clock_mhz=None, sm_clock_max_mhz=None,
    )  # fmt: skip


def node(
    name: str,
    *,
    topology: str | None = V100_TOPO,
    links: str | None = V100_NVLINK,
    ports: str | None = H100_IBSTAT,
    gpus: int = 8,
    model: str = V100,
) -> NodeSample:
    facts: dict[str, object] = {}
    if topology is not None:
        facts["topology"] = topo(topology)
    if links is not None:
        facts["nvlink"] = nvlink(links)
    return NodeSample(
        name,
        Reachability.OK,
        1.0,
        tuple(gpu(k, model) for k in range(gpus)),
        gpus,
        ib_ports=ibstat(ports).to_ports() if ports is not None else (),
        facts=facts_of(facts),
    )


def fleet(*odd: NodeSample, size: int = 5) -> tuple[NodeSample, ...]:
    """``size`` nodes node01.., the healthy copy wherever no odd node takes the name."""
    by_name = {n.name: n for n in odd}
    names = [f"node{k:02d}" for k in range(1, size + 1)]
    return tuple(by_name.get(name) or node(name) for name in names)


def messages(result: FleetInterconnect) -> dict[str, list[str]]:
    return {name: [d.message for d in devs] for name, devs in result.deviations.items()}


def usual(result: FleetInterconnect, name: str) -> UsualInterconnect:
    found = result.usual_for(name)
    assert found is not None
    return found


# ---- text edits a fault makes -------------------------------------------------------------------------


def set_topo_cell(text: str, a: str, b: str, cell: str) -> str:
    """The matrix with the (a, b) and (b, a) cells set, rows rewritten tab-separated."""
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["GPU0"])
    columns = lines[header].split("CPU Affinity")[0].split()
    for i, line in enumerate(lines[header + 1 :], header + 1):
        words = line.split()
        if not words or words[0] not in columns:
            break
        for row, column in ((a, b), (b, a)):
            if words[0] == row:
                words[1 + columns.index(column)] = cell
                lines[i] = "\t".join(words)
    return "\n".join(lines) + "\n"


def set_nvlink(text: str, gpu_index: int, link: int, value: str) -> str:
    blocks = re.split(r"(?m)^(?=GPU \d+:)", text)
    k = next(i for i, b in enumerate(blocks) if b.startswith(f"GPU {gpu_index}:"))
    blocks[k] = re.sub(rf"(?m)^(\s*Link {link}: ).*$", rf"\g<1>{value}", blocks[k])
    return "".join(blocks)


def edit_ca(text: str, ca: str, change: Callable[[str], str]) -> str:
    blocks = re.split(r"(?m)^(?=CA ')", text)
    return "".join(change(b) if b.startswith(f"CA '{ca}'") else b for b in blocks)


def set_port(text: str, ca: str, **fields: str) -> str:
    def change(block: str) -> str:
        for key, value in fields.items():
            block = re.sub(rf"(?m)^(\s*{key}: ).*$", rf"\g<1>{value}", block)
        return block

    return edit_ca(text, ca, change)


# ---- one node's summary, hand-checked against the captures -----------------------------------------------


def test_a100_matrix_with_18_nics() -> None:
    matrix = link_matrix(topo(A100_TOPO))
    assert matrix.gpus == tuple(f"GPU{k}" for k in range(8))
    assert matrix.nics[0] == Nic("NIC0", "mlx5_0") and matrix.nics[17] == Nic("NIC17", "mlx5_17")
    assert len(matrix.cells) == 28 + 8 * 18  # each GPU pair once, every GPU x NIC pair
    pair = matrix.cell("GPU1", "GPU0")  # either order
    assert pair is not None and (pair.cell, pair.link_class) == ("NV12", LinkClass.NVLINK)
    assert matrix.link_class("GPU0", "NIC5") is LinkClass.PXB
    assert matrix.link_class("GPU0", "NIC0") is LinkClass.SYS
    assert matrix.link_class("GPU7", "NIC9") is LinkClass.PXB
    assert matrix.cell("NIC1", "NIC2") is None  # NIC pairs carry no GPU traffic
    assert matrix.nic_name("NIC12") == "mlx5_12"


def test_nvlink_counts_and_speed_from_the_inactive_links_capture() -> None:
    links = node_interconnect(node("n", links=V100_INACTIVE, gpus=7)).nvlinks
    assert links is not None and len(links) == 7
    assert links[0] == GpuNvlinks(0, 6, 6, 25.781)
    assert links[3] == GpuNvlinks(3, 4, 6, 25.781)  # links 3 and 5 inactive
    assert [g.active_links for g in links] == [6, 6, 6, 4, 5, 4, 5]


def test_ib_ports_from_the_h100_ibstat_with_ports_down() -> None:
    summary = node_interconnect(node("n"))
    ports = {p.ca_name: p for p in summary.ib_ports or ()}
    assert len(ports) == 12
    assert [name for name, p in ports.items() if not p.is_up] == ["mlx5_2", "mlx5_7", "mlx5_8"]
    assert (ports["mlx5_0"].rate_gbps, ports["mlx5_1"].rate_gbps, ports["mlx5_1"].link_layer) == (
        400.0,
        100.0,
        "Ethernet",
    )
    assert summary.gpu_model == V100 and summary.gpu_count == 8
    assert summary.nics == (Nic("NIC0", "mlx5_2"),)


def test_missing_facts_are_none_not_empty() -> None:
    summary = node_interconnect(node("n", topology=None, links=None, ports=None))
    assert (summary.matrix, summary.nvlinks, summary.ib_ports) == (None, None, None)
    assert summary.nics == () and summary.nvlink(0) is None


# ---- the fleet: one node changed, exactly one message ------------------------------------------------


def test_a_healthy_fleet_has_no_deviations_and_a_usual_interconnect() -> None:
    result = fleet_interconnect(fleet())
    assert result.deviations == {} and result.all() == ()
    assert all(result.severity(n) is Severity.OK for n in result.summaries)
    usual = result.usual_for("node01")
    assert usual is not None and usual.peers == 5
    assert result.groups["node03"] == PeerGroup(V100, 8)
    assert usual.cells[("GPU0", "GPU3")].cell == "NV2" and usual.cells[("GPU0", "NIC0")].cell == "NODE"
    assert usual.active_links[5] == 6 and usual.link_speed_gbyte_s[5] == 25.781
    assert usual.port_states[("mlx5_0", 1)] == "Active" and usual.port_states[("mlx5_2", 1)] == "Down"
    assert usual.port_rates_gbps[("mlx5_0", 1)] == 400.0


def test_one_inactive_nvlink() -> None:
    odd = node("node03", links=set_nvlink(V100_NVLINK, 5, 2, "<inactive>"))
    result = fleet_interconnect(fleet(odd))
    assert result.of("node03") == (
        Deviation(Severity.CRIT, "node03", 5, "GPU5 has 5 of 6 NVLinks active", Aspect.NVLINKS_ACTIVE),
    )
    assert result.of("node03")[0].text == "node03: GPU5 has 5 of 6 NVLinks active"
    assert result.of("node03")[0].kind == "interconnect"
    assert set(result.deviations) == {"node03"}


def test_slower_nvlinks() -> None:
    slow = V100_NVLINK
    for link in range(6):
        slow = set_nvlink(slow, 0, link, "12.890 GB/s")
    result = fleet_interconnect(fleet(node("node02", links=slow)))
    assert messages(result) == {"node02": ["GPU0 NVLinks at 12.89 GB/s, peers at 25.781"]}
    assert result.of("node02")[0].severity is Severity.WARN


def test_a_port_at_a_lower_rate() -> None:
    odd = node("node04", ports=set_port(H100_IBSTAT, "mlx5_3", Rate="200"))
    result = fleet_interconnect(fleet(odd))
    assert result.of("node04") == (
        Deviation(
            Severity.WARN, "node04", None, "mlx5_3 at 200 Gb/s, peers at 400", Aspect.PORT_RATE, "mlx5_3", 1
        ),
    )


def test_a_port_down() -> None:
    odd = node(
        "node01", ports=set_port(H100_IBSTAT, "mlx5_4", State="Down", **{"Physical state": "Disabled"})
    )
    result = fleet_interconnect(fleet(odd))
    assert result.of("node01") == (
        Deviation(Severity.CRIT, "node01", None, "mlx5_4 port 1 Down", Aspect.PORT_STATE, "mlx5_4", 1),
    )
    assert result.severity("node01") is Severity.CRIT


def test_a_missing_adapter() -> None:
    without = edit_ca(H100_IBSTAT, "mlx5_9", lambda block: "")
    result = fleet_interconnect(fleet(node("node05", ports=without)))
    assert messages(result) == {"node05": ["mlx5_9 port 1 missing"]}
    assert usual(result, "node05").port_states[("mlx5_9", 1)] == "Active"


def test_ports_down_on_every_peer_are_not_deviations_and_an_extra_port_is_none_either() -> None:
    up_here = set_port(H100_IBSTAT, "mlx5_7", State="Active", Rate="400")
    result = fleet_interconnect(fleet(node("node02", ports=up_here)))
    assert result.deviations == {}


def test_a_different_pcie_class() -> None:
    odd = node("node02", topology=set_topo_cell(V100_TOPO, "GPU2", "NIC0", "SYS"))
    result = fleet_interconnect(fleet(odd))
    assert result.of("node02") == (
        Deviation(Severity.WARN, "node02", 2, "GPU2-NIC0 SYS, peers NODE", Aspect.LINK_CLASS, "mlx5_2"),
    )


def test_a_gpu_pair_without_its_nvlink_is_critical() -> None:
    odd = node("node05", topology=set_topo_cell(V100_TOPO, "GPU0", "GPU1", "SYS"))
    result = fleet_interconnect(fleet(odd))
    assert result.of("node05") == (
        Deviation(Severity.CRIT, "node05", 0, "GPU0-GPU1 SYS, peers NV1", Aspect.LINK_CLASS),
    )


def test_a_different_nvlink_count_in_the_matrix_is_the_same_class() -> None:
    # NV2 instead of NV1 is still NVLink; how many links are up is nvlink -s's to say.
    odd = node("node05", topology=set_topo_cell(V100_TOPO, "GPU0", "GPU1", "NV2"))
    assert fleet_interconnect(fleet(odd)).deviations == {}


def test_several_faults_on_one_node_worst_first() -> None:
    odd = node(
        "node03",
        topology=set_topo_cell(V100_TOPO, "GPU6", "NIC0", "PHB"),
        links=set_nvlink(set_nvlink(V100_NVLINK, 1, 0, "<inactive>"), 1, 4, "<inactive>"),
        ports=set_port(set_port(H100_IBSTAT, "mlx5_5", Rate="200"), "mlx5_6", State="Init"),
    )
    assert messages(fleet_interconnect(fleet(odd, size=7))) == {
        "node03": [
            "GPU1 has 4 of 6 NVLinks active",
            "mlx5_6 port 1 Init",
            "GPU6-NIC0 PHB, peers SYS",
            "mlx5_5 at 200 Gb/s, peers at 400",
        ]
    }


# ---- who is compared with whom ------------------------------------------------------------------------


def test_one_or_two_nodes_have_no_majority() -> None:
    odd = node("node02", ports=set_port(H100_IBSTAT, "mlx5_0", State="Down"))
    assert fleet_interconnect(fleet(odd, size=2)).deviations == {}
    assert fleet_interconnect(fleet(size=1)).deviations == {}
    assert messages(fleet_interconnect(fleet(odd, size=3))) == {"node02": ["mlx5_0 port 1 Down"]}


def test_an_even_split_has_no_majority() -> None:
    down = set_port(H100_IBSTAT, "mlx5_0", State="Down")
    nodes = fleet(node("node01", ports=down), node("node02", ports=down), size=4)
    assert fleet_interconnect(nodes).deviations == {}


def test_models_and_gpu_counts_are_not_compared_across() -> None:
    h100 = "NVIDIA H100 80GB HBM3"
    other = [node(f"h{k}", model=h100, ports=set_port(H100_IBSTAT, "mlx5_0", Rate="200")) for k in range(3)]
    seven = node("node09", gpus=7, links=V100_INACTIVE)
    result = fleet_interconnect((*fleet(), *other, seven))
    assert result.deviations == {}
    assert result.groups["h0"] == PeerGroup(h100, 8) and result.groups["node09"] == PeerGroup(V100, 7)
    assert usual(result, "h1").port_rates_gbps[("mlx5_0", 1)] == 200.0


def test_nodes_without_facts_are_not_compared_and_do_not_vote() -> None:
    slow = set_port(H100_IBSTAT, "mlx5_3", Rate="200")
    # Two healthy voters and one odd: the odd one is outvoted; the silent nodes neither vote nor show.
    nodes = (
        node("a", ports=None),
        node("b", ports=None),
        node("c"),
        node("d"),
        node("e", ports=slow),
        node("f", topology=None, links=None, ports=None),
        node("g", gpus=0),
    )
    result = fleet_interconnect(nodes)
    assert messages(result) == {"e": ["mlx5_3 at 200 Gb/s, peers at 400"]}
    assert "g" not in result.groups and result.summaries["g"].gpu_model is None
    # With one healthy voter left the slow port has no majority against it.
    assert fleet_interconnect(node for node in nodes if node.name != "d").deviations == {}


def test_a_port_absent_on_most_nodes_is_usually_absent() -> None:
    extra = (
        H100_IBSTAT + "\nCA 'mlx5_12'\n\tPort 1:\n\t\tState: Active\n\t\tRate: 400\n"
    )  # the capture ends mid-line
    result = fleet_interconnect(fleet(node("node01", ports=extra), node("node02", ports=extra)))
    assert result.deviations == {}
    assert usual(result, "node03").port_states[("mlx5_12", 1)] == ABSENT


# ---- the tracker -------------------------------------------------------------------------------------


def next_tick(
    sample: NodeSample, facts: NodeFacts | None = None, ib_ports: tuple[IbPort, ...] | None = None
) -> NodeSample:
    """The same node a tick later: new GPU samples, the same fact objects unless replaced."""
    return NodeSample(
        sample.name,
        sample.reachability,
        (sample.sampled_at_s or 0.0) + 1.0,
        tuple(g._replace(util_pct=(g.util_pct or 0.0) + 1.0) for g in sample.gpus),
        sample.expected_gpu_count,
        ib_ports=ib_ports if ib_ports is not None else sample.ib_ports,
        facts=facts if facts is not None else sample.facts,
    )


def test_tracker_returns_the_same_result_while_facts_stay_the_same() -> None:
    nodes = fleet(node("node02", ports=set_port(H100_IBSTAT, "mlx5_3", State="Down")))
    tracker = InterconnectTracker()
    first = tracker.update(nodes)
    again = tracker.update(tuple(next_tick(n) for n in nodes))
    assert again is first and messages(first) == {"node02": ["mlx5_3 port 1 Down"]}
    # A new but equal fact object (a re-parse) changes nothing either.
    reparsed = tuple(
        next_tick(n, facts=facts_of({"topology": topo(V100_TOPO), "nvlink": nvlink(V100_NVLINK)}))
        for n in nodes
    )
    assert tracker.update(reparsed) is first


def test_tracker_follows_a_fault_coming_and_going() -> None:
    tracker = InterconnectTracker()
    nodes = list(fleet())
    assert tracker.update(nodes).deviations == {}
    broken = ibstat(set_port(H100_IBSTAT, "mlx5_1", State="Down")).to_ports()
    nodes[3] = next_tick(nodes[3], ib_ports=broken)
    assert messages(tracker.update(nodes)) == {"node04": ["mlx5_1 port 1 Down"]}
    nodes[3] = next_tick(nodes[3], ib_ports=ibstat(H100_IBSTAT).to_ports())
    assert tracker.update(nodes).deviations == {}


def test_tracker_forgets_removed_nodes_and_recounts_the_majority() -> None:
    tracker = InterconnectTracker()
    slow = set_port(H100_IBSTAT, "mlx5_3", Rate="200")
    nodes = [node("node01"), node("node02"), node("node03", ports=slow)]
    assert messages(tracker.update(nodes)) == {"node03": ["mlx5_3 at 200 Gb/s, peers at 400"]}
    after = tracker.update(nodes[1:])  # node01 left: two nodes have no majority
    assert after.deviations == {} and set(after.summaries) == {"node02", "node03"}
    assert tracker.update([*nodes[1:], node("node04")]).of("node03")[0].message.startswith("mlx5_3 at 200")


def test_tracker_moves_a_node_that_changes_group() -> None:
    tracker = InterconnectTracker()
    nodes = list(fleet(node("node01", ports=set_port(H100_IBSTAT, "mlx5_0", State="Down"))))
    assert set(tracker.update(nodes).deviations) == {"node01"}
    nodes[0] = node(
        "node01", gpus=7, links=V100_INACTIVE, ports=set_port(H100_IBSTAT, "mlx5_0", State="Down")
    )
    result = tracker.update(nodes)
    assert result.deviations == {} and result.groups["node01"] == PeerGroup(V100, 7)


@pytest.mark.parametrize("seed", range(5))
def test_tracker_agrees_with_a_fresh_comparison_tick_after_tick(seed: int) -> None:
    rng = random.Random(seed)
    variants = [
        node("x"),
        node("x", ports=set_port(H100_IBSTAT, "mlx5_3", Rate="200")),
        node("x", links=set_nvlink(V100_NVLINK, 2, 1, "<inactive>")),
        node("x", topology=set_topo_cell(V100_TOPO, "GPU4", "NIC0", "PXB")),
        node("x", topology=None),
        node("x", gpus=7, links=V100_INACTIVE),
    ]
    tracker = InterconnectTracker()
    nodes = {f"n{k}": variants[0] for k in range(8)}
    for _ in range(30):
        name = rng.choice(sorted(nodes))
        if rng.random() < 0.1:
            del nodes[name]
        else:
            nodes[name] = variants[rng.randrange(len(variants))]
        samples = [
            next_tick(NodeSample(name, Reachability.OK, 1.0, v.gpus, 8, ib_ports=v.ib_ports, facts=v.facts))
            for name, v in sorted(nodes.items())
        ]
        tracked = tracker.update(samples)
        fresh = fleet_interconnect(samples)
        assert dict(tracked.deviations) == dict(fresh.deviations)
        assert dict(tracked.usual) == dict(fresh.usual)
        assert dict(tracked.groups) == dict(fresh.groups)
