"""The topology pane's derivations on real samples: nearest NIC, NVLink peers and counts, ports matched to
NICs, and the sentences for missing facts."""

from __future__ import annotations

from gputop.core.models import IbPort, Severity
from gputop.core.parsers.nvlink import GpuLinks, Link
from gputop.core.topology_view import (
    NvlinkSummary,
    compress_labels,
    format_rate_gbps,
    legend_name,
    match_ports,
    nearest_nic,
    nvlink_peers,
    nvlink_summary,
    port_severity,
    port_state_text,
    short_label,
    topology_view,
)
from tests.topology_samples import (
    dgx_node,
    dgx_topo_text,
    fixture,
    h100_nvlink_text,
    ibstat,
    node_sample,
    nvlink,
    topo,
)


def test_nearest_nic_is_the_best_link_class_and_the_lowest_index_on_a_tie() -> None:
    a100 = topo(fixture("nvidia-smi-topo", "a100"))
    # GPU0 reaches NIC5-NIC8 through PCIe switches (PXB) and every other NIC across the sockets (SYS)
    assert [nearest_nic(a100, f"GPU{i}") for i in range(8)] == [
        "NIC5", "NIC5", "NIC1", "NIC1", "NIC14", "NIC14", "NIC9", "NIC9",
    ]  # fmt: skip
    h100 = topo(fixture("nvidia-smi-topo", "h100-4gpu"))
    assert [nearest_nic(h100, f"GPU{i}") for i in range(4)] == ["NIC0", "NIC1", "NIC2", "NIC3"]
    v100 = topo(fixture("nvidia-smi-topo", "v100"))
    # one NIC: NODE for the GPUs of its socket, SYS for the others, nearest either way
    assert {nearest_nic(v100, f"GPU{i}") for i in range(8)} == {"NIC0"}


def test_nearest_nic_is_none_without_nics() -> None:
    for sample in ("gb200", "h200-single", "rtx5090"):
        topology = topo(fixture("nvidia-smi-topo", sample))
        assert nearest_nic(topology, "GPU0") is None, sample


def test_nvlink_peers_follow_the_matrix() -> None:
    v100 = topo(fixture("nvidia-smi-topo", "v100"))  # the DGX-1 hybrid cube mesh: four peers each
    assert nvlink_peers(v100, "GPU0") == ("GPU1", "GPU2", "GPU3", "GPU4")
    assert nvlink_peers(v100, "GPU5") == ("GPU1", "GPU4", "GPU6", "GPU7")
    assert nvlink_peers(topo(fixture("nvidia-smi-topo", "rtx5090")), "GPU0") == ()  # PHB only
    assert nvlink_peers(topo(fixture("nvidia-smi-topo", "h200-single")), "GPU0") == ()


def test_nvlink_summary_counts_inactive_links_and_names_the_speed() -> None:
    bad = nvlink(fixture("nvidia-smi-nvlink", "v100-sxm2-32gb-7gpu"))
    gpu3 = bad.gpu(3)
    assert gpu3 is not None
    summary = nvlink_summary(gpu3)
    assert (summary.active, summary.total, summary.text) == (4, 6, "4/6 x 25.8")
    assert summary.severity is Severity.WARN
    h100 = nvlink(fixture("nvidia-smi-nvlink", "h100"))
    gpu0 = h100.gpu(0)
    assert gpu0 is not None
    full = nvlink_summary(gpu0)
    assert full.text == "18/18 x 26.6" and full.severity is None


def test_nvlink_summary_edge_cases() -> None:
    dead = GpuLinks(0, "x", None, (Link(0, None, False), Link(1, None, False)))
    assert nvlink_summary(dead) == NvlinkSummary(0, 2, ())
    assert nvlink_summary(dead).severity is Severity.CRIT and nvlink_summary(dead).text == "0/2"
    mixed = GpuLinks(0, "x", None, (Link(0, 26.562, True), Link(1, 25.781, True)))
    assert nvlink_summary(mixed).text == "2/2 x 25.8-26.6"
    assert nvlink_summary(GpuLinks(0, "x", None, ())).text == "none"


def test_ports_match_nics_by_the_nic_legend_name() -> None:
    topology = topo(dgx_topo_text())
    ports = ibstat(fixture("ib", "ibstat-h100")).to_ports()
    by_nic, other = match_ports(topology, ports)
    assert [p.ca_name for p in by_nic["NIC0"]] == ["mlx5_0"]
    assert [p.ca_name for p in by_nic["NIC6"]] == ["mlx5_10"]
    assert len(by_nic) == 8
    # the storage Ethernet CAs are not in this matrix; listed in natural order, not ibstat's
    assert [p.ca_name for p in other] == ["mlx5_1", "mlx5_2", "mlx5_7", "mlx5_8"]


def test_without_a_nic_legend_no_port_can_be_matched() -> None:
    topology = topo(fixture("nvidia-smi-topo", "h100-4gpu"))  # legend cut off in the capture
    assert legend_name(topology, "NIC0") is None
    ports = (IbPort("mlx5_0", 1, "Active", "LinkUp", 400.0),)
    assert match_ports(topology, ports) == ({}, ports)


def test_legend_names_and_short_labels() -> None:
    v100 = topo(fixture("nvidia-smi-topo", "v100"))
    assert legend_name(v100, "NIC0") == "mlx5_2"
    # matrices from old drivers name the NIC itself
    assert legend_name(v100, "mlx5_0") == "mlx5_0"
    assert (short_label("GPU3", 3), short_label("NIC12", 12), short_label("mlx5_4", 2)) == ("G3", "N12", "N2")


def test_port_words() -> None:
    down = IbPort("mlx5_2", 1, "Down", "Disabled", 40.0, "Ethernet")
    assert port_state_text(down) == "Down/Disabled" and port_severity(down) is Severity.CRIT
    up = IbPort("mlx5_0", 1, "Active", "LinkUp", 400.0)
    assert port_state_text(up) == "Active" and port_severity(up) is None
    assert port_severity(IbPort("mlx5_0", 1, "Init", "LinkUp", 400.0)) is Severity.WARN
    assert (format_rate_gbps(400.0), format_rate_gbps(2.5), format_rate_gbps(None)) == ("400", "2.5", "n/a")


def test_compress_labels() -> None:
    assert compress_labels(["G0", "G1", "G3", "G4", "G5", "G6", "G7"]) == "G0 G1 G3-G7"
    assert compress_labels(["G1", "N2", "N3", "N4"]) == "G1 N2-N4"
    assert compress_labels([]) == ""


def test_view_of_a_dgx_like_node() -> None:
    view = topology_view(dgx_node())
    assert view.missing == () and view.notes == ()
    assert [g.label for g in view.gpus] == [f"G{i}" for i in range(8)]
    gpu5 = view.gpu(5)
    assert gpu5 is not None
    assert (gpu5.cpu_affinity, gpu5.numa_affinity, gpu5.nearest_nic) == ("56-111,168-223", "1", "NIC5")
    assert gpu5.nvlink is not None and gpu5.nvlink.text == "18/18 x 26.6"
    assert len(gpu5.peers) == 7
    nic5 = view.nic("NIC5")
    assert nic5 is not None and nic5.name == "mlx5_9" and [p.rate_gbps for p in nic5.ports] == [400.0]


def test_missing_facts_are_said_in_words() -> None:
    failed = node_sample(
        "gpu009",
        fact_errors={
            "topology": "topology: no topology matrix header (a line naming GPU0...)",
            "ibstat": "ibstat not installed",
        },
    )
    view = topology_view(failed)
    assert view.missing == (
        "`nvidia-smi topo -m` failed: no topology matrix header (a line naming GPU0...)",
        "`nvidia-smi nvlink -s`: no output yet (or this source does not collect it)",
        "`ibstat` failed: ibstat not installed",
    )
    assert view.gpus == () and view.nics == ()


def test_no_ports_is_worth_a_word_only_when_the_matrix_has_nics() -> None:
    with_nics = topology_view(node_sample("a", topology=dgx_topo_text(), nvlink_s=h100_nvlink_text()))
    assert with_nics.missing == ("`ibstat`: no IB ports yet (or this source does not collect it)",)
    vm = topology_view(
        node_sample("b", topology=fixture("nvidia-smi-topo", "h200-single"), nvlink_s="", gpus=1)
    )
    assert vm.missing == ()
    assert vm.notes == ("nvidia-smi nvlink -s: no output: no NVLink reported (no NVLink, MIG guest or VM)",)


def test_without_a_matrix_the_nvlink_gpus_still_get_their_counts() -> None:
    view = topology_view(node_sample("c", nvlink_s=fixture("nvidia-smi-nvlink", "v100-sxm2-32gb-7gpu")))
    assert [g.label for g in view.gpus] == [f"G{i}" for i in range(7)]
    gpu5 = view.gpu(5)
    assert gpu5 is not None and gpu5.nvlink is not None and gpu5.nvlink.text == "4/6 x 25.8"
    assert gpu5.nearest_nic is None and gpu5.peers == ()
