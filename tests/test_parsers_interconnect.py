"""Topology, NVLink and InfiniBand parsers against real captured outputs (see fixtures/PROVENANCE.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop.core.models import IbPort
from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.ib import IbStat, parse_ibstat, parse_ibstatus, parse_ibv_devinfo
from gputop.core.parsers.nvlink import NvlinkStatus, parse_nvlink
from gputop.core.parsers.registry import registry
from gputop.core.parsers.topo import LinkClass, Topology, parse_topo

FIXTURES = Path(__file__).parent / "fixtures"
TOPO = FIXTURES / "nvidia-smi-topo"
NVLINK = FIXTURES / "nvidia-smi-nvlink"
IB = FIXTURES / "ib"
# IB samples are named after the tool that printed them.
IB_PARSERS = {"ibstat": parse_ibstat, "ibstatus": parse_ibstatus, "ibv_devinfo": parse_ibv_devinfo}


def _files(folder: Path) -> list[Path]:
    found = sorted(folder.iterdir())
    assert found, f"no samples in {folder}"
    return found


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _topo(name: str) -> Topology:
    result = parse_topo(_read(TOPO / name))
    assert isinstance(result, Topology), result
    return result


def _nvlink(name: str) -> NvlinkStatus:
    result = parse_nvlink(_read(NVLINK / name))
    assert isinstance(result, NvlinkStatus), result
    return result


def _ib(name: str) -> IbStat:
    result = IB_PARSERS[name.split("-")[0]](_read(IB / name))
    assert isinstance(result, IbStat), result
    return result


def _cut_points(text: str) -> list[int]:
    return sorted({*range(0, len(text), max(1, len(text) // 40)), len(text) - 1})


# --- every real sample parses --------------------------------------------------------------------


@pytest.mark.parametrize("path", _files(TOPO), ids=lambda p: p.name)
def test_every_real_topo_sample_parses(path: Path) -> None:
    # as gputop reads a node's output: through the registry, which takes terminal escapes out first
    result = registry()["topo"].parse(_read(path))
    assert isinstance(result, Topology)
    assert result.gpus
    for gpu in result.gpus:
        if (gpu, gpu) in result.links:
            assert result.link_class(gpu, gpu) is LinkClass.SELF


@pytest.mark.parametrize("path", _files(NVLINK), ids=lambda p: p.name)
def test_every_real_nvlink_sample_parses(path: Path) -> None:
    assert isinstance(parse_nvlink(_read(path)), NvlinkStatus)


@pytest.mark.parametrize("path", _files(IB), ids=lambda p: p.name)
def test_every_real_ib_sample_parses(path: Path) -> None:
    result = _ib(path.name)
    assert result.adapters
    for port in result.to_ports():
        assert isinstance(port, IbPort)


@pytest.mark.parametrize("path", [*_files(TOPO), *_files(NVLINK), *_files(IB)], ids=lambda p: p.name)
def test_cut_copies_never_raise(path: Path) -> None:
    """A copy cut anywhere still gives a value or a ParseFailure, never an exception."""
    text = _read(path)
    parse = {TOPO: parse_topo, NVLINK: parse_nvlink}.get(path.parent) or IB_PARSERS[path.name.split("-")[0]]
    for end in _cut_points(text):
        result: object = parse(text[:end])
        assert isinstance(result, (Topology, NvlinkStatus, IbStat, ParseFailure))


def test_registry_names_the_interconnect_kinds() -> None:
    kinds = registry()
    for kind in ("topo", "nvlink", "ibstat", "ibstatus", "ibv_devinfo"):
        assert kinds[kind].kind == kind


# --- topo -m -------------------------------------------------------------------------------------


def test_topo_a100_oci_nvswitch_and_18_nics() -> None:
    topo = _topo("a100-8gpu-nv12-18nic-oci-bm-gpu4.8-style.txt")
    assert topo.gpus == tuple(f"GPU{i}" for i in range(8))
    assert topo.nics == tuple(f"NIC{i}" for i in range(18))
    assert topo.link("GPU0", "GPU1") == "NV12"
    assert topo.link_class("GPU0", "GPU1") is LinkClass.NVLINK
    assert topo.nvlink_count("GPU0", "GPU1") == 12
    assert topo.link_class("GPU0", "NIC5") is LinkClass.PXB
    assert topo.link_class("GPU0", "NIC0") is LinkClass.SYS
    assert topo.link_class("NIC1", "NIC2") is LinkClass.PIX
    assert topo.nvlink_count("GPU0", "NIC5") is None
    assert topo.nic_names["NIC0"] == "mlx5_0"
    assert topo.nic_name("NIC17") == "mlx5_17"
    assert topo.cpu_affinity("GPU0") == "48-63"
    assert topo.numa_affinity("GPU0") == "3"
    assert topo.cpu_affinity("GPU4") == "112-127"
    assert topo.numa_affinity("GPU6") == "5"
    assert topo.gpu_numa_id("GPU0") is None  # printed N/A
    assert topo.notes == ()


def test_topo_v100_double_tabs_nv1_nv2_and_nic_legend() -> None:
    topo = _topo("v100-sxm2-32gb-x8-nv1-nv2-1nic-NIC-legend-drv580-double-tab-vastai.txt")
    assert topo.devices == (*(f"GPU{i}" for i in range(8)), "NIC0")
    assert topo.nvlink_count("GPU0", "GPU1") == 1
    assert topo.nvlink_count("GPU0", "GPU3") == 2
    assert topo.link_class("GPU0", "GPU5") is LinkClass.SYS
    assert topo.link_class("GPU0", "NIC0") is LinkClass.NODE
    assert topo.link_class("NIC0", "GPU7") is LinkClass.SYS
    assert topo.nic_names == {"NIC0": "mlx5_2"}
    assert topo.cpu_affinity("GPU0") == "0-19,40-59"
    assert topo.numa_affinity("GPU4") == "1"
    assert topo.gpu_numa_id("GPU4") is None
    assert "NIC0" not in topo.affinity
    assert topo.notes == ()


def test_topo_single_h200_in_a_vm() -> None:
    topo = _topo("h200-single-gpu-vm-tabs-drv580-nvge-capture.txt")
    assert topo.devices == ("GPU0",)
    assert topo.link_class("GPU0", "GPU0") is LinkClass.SELF
    assert topo.cpu_affinity("GPU0") == "0-23"
    assert topo.numa_affinity("GPU0") == "0"
    assert topo.nic_names == {}


def test_topo_rtx3090_numa_affinity_not_available() -> None:
    topo = _topo("rtx3090-x2-SYS-numa-affinity-NA-tabs-TRUNCATED-club3090-178.txt")
    assert topo.link_class("GPU0", "GPU1") is LinkClass.SYS
    assert topo.cpu_affinity("GPU0") == "0-7,16-23"
    assert topo.numa_affinity("GPU0") is None
    assert topo.gpu_numa_id("GPU0") is None
    assert topo.numa_affinity("GPU1") == "1"


def test_topo_rtx5090_phb() -> None:
    topo = _topo("rtx5090-x2-PHB-tabs-club3090-1229.txt")
    assert topo.link_class("GPU1", "GPU0") is LinkClass.PHB
    assert topo.cpu_affinity("GPU1") == "0-63"


def test_topo_gb200_space_expanded_and_cut_in_the_legend() -> None:
    topo = _topo("gb200-4gpu-nv18-no-nic-grace-numa-space-expanded-TRUNCATED-k8s-test-infra-371.txt")
    assert topo.devices == ("GPU0", "GPU1", "GPU2", "GPU3")
    assert topo.nvlink_count("GPU2", "GPU3") == 18
    assert topo.cpu_affinity("GPU2") == "72-143"
    assert topo.numa_affinity("GPU3") == "1"


def test_topo_h100_pix_nics_without_legend_are_noted() -> None:
    topo = _topo("h100-4gpu-nv6-4nic-pix-legend-TRUNCATED-nccl-1617.txt")
    assert topo.nvlink_count("GPU0", "GPU3") == 6
    assert topo.link_class("GPU1", "NIC1") is LinkClass.PIX
    assert topo.link_class("GPU1", "NIC2") is LinkClass.SYS
    assert topo.cpu_affinity("GPU0") == "6,14,22,30"
    assert topo.numa_affinity("GPU2") == "7"
    assert topo.nic_names == {}
    assert topo.nic_name("NIC2") == "NIC2"
    assert any("NIC Legend" in note for note in topo.notes)


def test_topo_h800_copy_damage_is_noted_not_trusted() -> None:
    topo = _topo("h800-8gpu-nv8-4nic-COPY-DAMAGED-columns-clipped-llm-action.txt")
    assert topo.nvlink_count("GPU0", "GPU7") == 8
    # NIC columns were clipped off the header: the NIC rows still say how NICs reach GPUs.
    assert topo.nics == ("NIC0", "NIC1", "NIC2", "NIC3")
    assert topo.link_class("GPU1", "NIC0") is LinkClass.PIX
    assert topo.link_class("NIC2", "GPU4") is LinkClass.NODE
    assert topo.nic_names["NIC3"] == "mlx5_3"
    assert topo.cpu_affinity("GPU0") is None  # "-31,64-95" lost its first digit
    assert topo.numa_affinity("GPU0") == "0"
    assert topo.cpu_affinity("GPU4") == "32-63,96-127"
    assert any("GPU0: CPU Affinity" in note for note in topo.notes)
    assert any("NIC0" in note for note in topo.notes)


def test_topo_older_layout_with_soc_and_named_nic_columns() -> None:
    # A constructed minimal matrix in the pre-NIC-legend layout (CPU Affinity only, SOC, NIC named mlx5_0).
    text = "\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\nGPU0\t X \tSOC\tPHB\t0-9\nGPU1\tSOC\t X \tSOC\t10-19\n"
    text += "mlx5_0\tPHB\tSOC\t X \t\n\nLegend:\n\n  X   = Self\n"
    topo = parse_topo(text)
    assert isinstance(topo, Topology)
    assert topo.devices == ("GPU0", "GPU1", "mlx5_0")
    assert topo.link_class("GPU0", "GPU1") is LinkClass.SYS
    assert topo.link_class("mlx5_0", "GPU0") is LinkClass.PHB
    assert topo.cpu_affinity("GPU1") == "10-19"
    assert topo.numa_affinity("GPU1") is None
    assert topo.notes == ()


def test_topo_hopeless_input_is_a_failure() -> None:
    assert isinstance(parse_topo(""), ParseFailure)
    failure = parse_topo("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
    assert isinstance(failure, ParseFailure)
    assert failure.kind == "topo"
    assert "NVIDIA-SMI has failed" in failure.excerpt


# --- nvlink -s -----------------------------------------------------------------------------------


def test_nvlink_v100_inactive_links() -> None:
    status = _nvlink("v100-sxm2-32gb-7gpu-6links-INACTIVE-links-azhpc.txt")
    assert [g.index for g in status.gpus] == list(range(7))
    gpu3 = status.gpu(3)
    assert gpu3 is not None
    assert gpu3.name == "Tesla V100-SXM2-32GB"
    assert gpu3.uuid == "GPU-50b1bd2e-77ee-2731-fd2f-17c44103b7b9"
    assert gpu3.inactive_links == (3, 5)
    assert gpu3.links[3].speed_gbps is None and not gpu3.links[3].active
    assert gpu3.links[0].speed_gbps == pytest.approx(25.781)
    assert gpu3.active_count == 4
    assert {g.index: g.inactive_links for g in status.gpus if g.inactive_links} == {
        3: (3, 5),
        4: (1,),
        5: (0, 4),
        6: (1,),
    }
    assert status.gpus[0].total_speed_gbps == pytest.approx(6 * 25.781)


def test_nvlink_h100_eighteen_links() -> None:
    status = _nvlink("h100-80gb-hbm3-1gpu-18links-drv590-nvge-capture.txt")
    (gpu,) = status.gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert len(gpu.links) == 18
    assert {link.speed_gbps for link in gpu.links} == {26.562}
    assert all(link.active for link in gpu.links)
    assert status.notes == ()


def test_nvlink_v100_eight_gpus() -> None:
    status = _nvlink("v100-sxm2-32gb-8gpu-6links-25.781GBs-nvlink-s-drv580-vastai.txt")
    assert len(status.gpus) == 8
    assert all(g.active_count == 6 for g in status.gpus)


def test_nvlink_gb200_elided_output_is_noted() -> None:
    status = _nvlink("gb200-18links-53.125GBs-nvlink-s-ELIDED-space-expanded-k8s-test-infra-371.txt")
    assert [len(g.links) for g in status.gpus] == [18, 2]
    assert status.gpus[0].links[17].speed_gbps == pytest.approx(53.125)
    assert any("elided" in note for note in status.notes)


def test_nvlink_empty_output_is_an_empty_answer() -> None:
    status = _nvlink("h200-mig-vm-drv580-EMPTY-output-nvge-capture.txt")
    assert status.gpus == ()
    assert status.notes


def test_nvlink_odd_lines_become_notes_and_garbage_a_failure() -> None:
    text = "GPU 0: NVIDIA A10 (UUID: GPU-1)\n"
    text += "NVML: Unable to retrieve NVLink information as all links are inActive\n"
    status = parse_nvlink(text + "\t Link 0: weird\n")
    assert isinstance(status, NvlinkStatus)
    assert status.gpus[0].links[0].speed_gbps is None
    assert len(status.notes) == 2
    assert isinstance(
        parse_nvlink("Failed to initialize NVML: Driver/library version mismatch\n"), ParseFailure
    )


# --- ibstat / ibstatus / ibv_devinfo -------------------------------------------------------------


def test_ibstat_h100_ndr_with_down_ethernet_ports() -> None:
    stat = _ib("ibstat-h100-ndr-ib-cx7-plus-cx6-eth-12ca-eth-ports-DOWN-gpud.txt")
    assert len(stat.adapters) == 12
    first = stat.adapters[0]
    assert (first.name, first.ca_type, first.num_ports) == ("mlx5_0", "MT4129", 1)
    assert first.firmware == "28.39.1002"
    assert first.node_guid == "0x946dae0300cde72c"
    port = first.ports[0]
    assert (port.number, port.state, port.physical_state) == (1, "Active", "LinkUp")
    assert port.rate_gbps == 400.0
    assert (port.base_lid, port.sm_lid, port.lmc) == (75, 334, 0)
    assert port.link_layer == "InfiniBand"
    assert port.port_guid == "0x946dae0300cde72c"
    down = [p for p in stat.to_ports() if not p.is_up]
    assert [p.ca_name for p in down] == ["mlx5_2", "mlx5_7", "mlx5_8"]
    assert {(p.state, p.physical_state, p.rate_gbps, p.link_layer) for p in down} == {
        ("Down", "Disabled", 40.0, "Ethernet")
    }
    by_name = {a.name: a for a in stat.adapters}
    assert by_name["mlx5_9"].ports[0].base_lid == 771
    assert by_name["mlx5_1"].ports[0].rate_gbps == 100.0
    assert stat.notes == ()


def test_ibstatus_hdr_rate_and_hex_lids() -> None:
    stat = _ib("ibstatus-azure-mlx5_an0-ethernet-mlx5_ib0-hdr-azhpc.txt")
    assert [a.name for a in stat.adapters] == ["mlx5_an0", "mlx5_ib0"]
    ib0 = stat.adapters[1].ports[0]
    assert (ib0.state, ib0.physical_state) == ("Active", "LinkUp")
    assert ib0.rate_gbps == 200.0
    assert ib0.rate_detail == "4X HDR"
    assert (ib0.base_lid, ib0.sm_lid) == (0x96, 0x11C)
    assert ib0.link_layer == "InfiniBand"
    assert ib0.default_gid == "fe80:0000:0000:0000:0015:5dff:fd33:ff0b"
    an0 = stat.adapters[0].ports[0]
    assert (an0.rate_gbps, an0.rate_detail, an0.link_layer) == (40.0, "4X QDR", "Ethernet")
    assert an0.default_gid is None  # printed "unknown"
    assert stat.to_ports()[1] == IbPort("mlx5_ib0", 1, "Active", "LinkUp", 200.0, "InfiniBand")


def test_ibv_devinfo_port_down_and_verbose_rate() -> None:
    stat = _ib("ibv_devinfo-connectx3-mlx4-2hca-port2-PORT_DOWN-mlnx-ofed4-heioy-books.txt")
    assert [(p.ca_name, p.port, p.state) for p in stat.to_ports()] == [
        ("mlx4_1", 1, "Active"),
        ("mlx4_1", 2, "Down"),
        ("mlx4_0", 1, "Active"),
        ("mlx4_0", 2, "Down"),
    ]
    assert stat.adapters[0].ports[0].base_lid == 22
    assert stat.adapters[0].ports[0].rate_gbps is None  # only -v prints width and speed
    verbose = _ib("ibv_devinfo-v-verbose-connectx3-mlx4_1-port2-PORT_DOWN-POLLING-mlnx-ofed4-heioy-books.txt")
    (port,) = verbose.adapters[0].ports
    assert (port.number, port.state, port.physical_state) == (2, "Down", "Polling")
    assert port.rate_gbps == 10.0  # 4X x 2.5 Gbps
    assert verbose.adapters[0].num_ports == 2
    assert verbose.notes  # one of two ports listed


def test_ibv_devinfo_cut_short_adapters_are_noted() -> None:
    stat = _ib("ibv_devinfo-h20-node-cx6dx-eth-PORT_DOWN-plus-cx6-hdr-ib-TRUNCATED-deepep-223.txt")
    assert [a.name for a in stat.adapters] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert stat.adapters[1].ports[0].state == "Down"
    assert stat.adapters[2].ports[0].link_layer == "InfiniBand"
    assert stat.adapters[3].ports == ()
    assert any("mlx5_3" in note for note in stat.notes)
    bond = _ib("ibv_devinfo-h20-roce-cx7-mlx5_bond-LAG-space-indented-TRUNCATED-deepep-137.txt")
    assert bond.adapters[0].name == "mlx5_bond_0"
    assert bond.adapters[0].ports[0].link_layer == "Ethernet"
    assert bond.adapters[0].firmware == "28.39.1002"


def test_ib_state_spellings_are_normalised() -> None:
    text = (
        "CA 'mlx5_0'\n\tCA type: MT4123\n\tNumber of ports: 1\n\tPort 1:\n\t\tState: Initializing\n"
        "\t\tPhysical state: LinkUp\n\t\tRate: 200\n"
    )
    stat = parse_ibstat(text)
    assert isinstance(stat, IbStat)
    assert stat.to_ports() == (IbPort("mlx5_0", 1, "Init", "LinkUp", 200.0, "InfiniBand"),)
    status = parse_ibstatus(
        "Infiniband device 'mlx5_0' port 1 status:\n\tstate: 1: DOWN\n\tphys state: 3: Disabled\n"
    )
    assert isinstance(status, IbStat)
    assert status.to_ports()[0].state == "Down"
    assert status.to_ports()[0].physical_state == "Disabled"
    devinfo = parse_ibv_devinfo("hca_id:\tmlx5_0\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ARMED (3)\n")
    assert isinstance(devinfo, IbStat)
    assert devinfo.to_ports()[0].state == "Armed"
    assert devinfo.to_ports()[0].physical_state == "Unknown"


def test_ib_no_adapters_and_garbage() -> None:
    empty = parse_ibstat("")
    assert isinstance(empty, IbStat) and empty.adapters == ()
    assert isinstance(parse_ibstat("ibpanic: [1234] main: stat of IB device 'mlx5_0' failed\n"), ParseFailure)
    assert isinstance(parse_ibstatus("Fatal error: device '*': sys files not found\n"), ParseFailure)
