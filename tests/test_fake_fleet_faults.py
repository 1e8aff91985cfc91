"""The fake node fleet's faults doing what they say, its command line, and its layouts byte for byte
against real captures."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import signal
import sys
import time
from pathlib import Path

import asyncssh
import pytest

from gputop.config_file import load_config
from gputop.core.models import GpuSample, IbPort
from gputop.core.parsers.nvlink import GpuLinks, Link, NvlinkStatus, parse_nvlink
from gputop.core.parsers.topo import parse_topo
from gputop.sim import mig_text as mig
from gputop.sim.fake_fleet import (
    Fault,
    Fleet,
    formats,
    parse_fault_spec,
    run_fleet,
)
from gputop.sim.fake_fleet.topology import GpuAffinity, format_topo, topology_text
from gputop.sim.hgx_board import board_nvlinks, board_topology
from gputop.sim.simulator import SimulatedCluster
from gputop.sources.ssh import SshSource
from tests.test_fake_fleet import (  # the helpers and the fleet fixture both files use
    COMMANDS,
    FAST_STREAM,
    connect,
    fleet,  # noqa: F401 - the fixture, registered by importing it
    healthy,
    incident,
    read_for,
    run,
)

# ---- faults --------------------------------------------------------------------------------------------


async def test_refuse_auth_denies_the_key(
    fleet: Fleet,  # noqa: F811
) -> None:
    fleet.faults.set("gpu005", Fault.REFUSE_AUTH)
    with pytest.raises(asyncssh.PermissionDenied):
        await connect(fleet, "gpu005")


async def test_stalled_and_unresponsive_nodes_never_finish_the_handshake(
    fleet: Fleet,  # noqa: F811
) -> None:
    fleet.faults.set("gpu005", Fault.STALL_HANDSHAKE)
    for node in ("gpu005", incident(fleet, "unresponsive")):
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(connect(fleet, node), 0.4)
    fleet.faults.clear("gpu005")
    assert (await run(fleet, "gpu005", "nvidia-smi -L")).exit_status == 0


async def test_stall_command_never_answers(
    fleet: Fleet,  # noqa: F811
) -> None:
    fleet.faults.set("gpu005", Fault.STALL_COMMAND)
    async with connect(fleet, "gpu005") as conn:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(conn.run("nvidia-smi -L"), 0.4)


async def test_die_midstream_cuts_the_stream_mid_line(
    fleet: Fleet,  # noqa: F811
) -> None:
    fleet.faults.set("gpu005", Fault.DIE_MIDSTREAM)  # after two intervals (the fixture's setting)
    async with connect(fleet, "gpu005") as conn:
        process = await conn.create_process(FAST_STREAM.command_line)
        text = await asyncio.wait_for(process.stdout.read(), 3)
        await process.wait_closed()
    assert text.count("\n") == 16 and text.endswith("\n0, GPU-") and process.exit_status is None


async def test_die_midstream_switched_on_under_a_running_stream(
    fleet: Fleet,  # noqa: F811
) -> None:
    async with connect(fleet, "gpu010") as conn:
        process = await conn.create_process(FAST_STREAM.command_line)
        await process.stdout.readline()
        fleet.faults.add("gpu010", Fault.DIE_MIDSTREAM)
        text = await asyncio.wait_for(process.stdout.read(), 3)
    assert text.endswith("0, GPU-")


async def test_garbage_is_not_utf8(
    fleet: Fleet,  # noqa: F811
) -> None:
    fleet.faults.set("gpu005", Fault.GARBAGE)
    async with connect(fleet, "gpu005") as conn:
        process = await conn.create_process(FAST_STREAM.command_line, encoding=None)
        streamed = await read_for(process, 0.3)
        process.close()
        listed = await conn.run("nvidia-smi -L", encoding=None)
    for data in (streamed, listed.stdout):
        assert isinstance(data, bytes) and data
        with pytest.raises(UnicodeDecodeError):
            data.decode("utf-8")


async def test_driver_error_fails_every_nvidia_smi_call(
    fleet: Fleet,  # noqa: F811
) -> None:
    fleet.faults.set("gpu005", Fault.DRIVER_ERROR)
    async with connect(fleet, "gpu005") as conn:
        listing = await conn.run("nvidia-smi -L")
        stream = await asyncio.wait_for(conn.run(FAST_STREAM.command_line), 3)
        ib = await conn.run("ibstat")
    expected = "Unable to determine the device handle for GPU0000:18:00.0: Unknown Error\n"
    for result in (listing, stream):
        assert (result.stdout, result.exit_status) == (expected, 15)
    assert ib.exit_status == 0


async def test_fallen_off_bus_hides_a_gpu_and_logs_xid_79(
    fleet: Fleet,  # noqa: F811
) -> None:
    fleet.faults.set("gpu005", Fault.FALLEN_OFF_BUS)
    async with connect(fleet, "gpu005") as conn:
        listing = str((await conn.run("nvidia-smi -L")).stdout).splitlines()
        journal = str((await conn.run(COMMANDS["xid"].command_line)).stdout)
        process = await conn.create_process(FAST_STREAM.command_line)
        indices = [(await process.stdout.readline()).split(", ")[0] for _ in range(8)]
    assert len(listing) == 7 and "GPU 7:" not in "".join(listing)
    assert "gpu005 kernel: NVRM: Xid (PCI:0000:db:00): 79, " in journal
    assert indices == ["0", "1", "2", "3", "4", "5", "6", "0"]


async def test_slow_answers_are_late(
    fleet: Fleet,  # noqa: F811
) -> None:
    fleet.faults.set("gpu005", Fault.SLOW)  # 1 s in the fixture
    async with connect(fleet, "gpu005") as conn:
        started = time.monotonic()
        result = await conn.run("nvidia-smi -L")
        elapsed = time.monotonic() - started
    assert result.exit_status == 0 and elapsed >= 1.0


async def test_no_nvidia_smi_is_command_not_found(
    fleet: Fleet,  # noqa: F811
) -> None:
    fleet.faults.set("gpu005", Fault.NO_NVIDIA_SMI)
    async with connect(fleet, "gpu005") as conn:
        listing = await conn.run("nvidia-smi -L")
        ib = await conn.run("ibstat")
    assert (listing.exit_status, listing.stderr) == (127, "bash: nvidia-smi: command not found\n")
    assert ib.exit_status == 0


def test_fault_specs_and_node_names_are_checked() -> None:
    assert parse_fault_spec("gpu003=garbage, slow") == ("gpu003", frozenset({Fault.GARBAGE, Fault.SLOW}))
    with pytest.raises(ValueError, match="unknown fault 'melt'"):
        parse_fault_spec("gpu003=melt")
    with pytest.raises(ValueError, match="NODE=FAULT"):
        parse_fault_spec("gpu003")


async def test_faults_for_unknown_nodes_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="gpu099"):
        async with run_fleet(nodes=2, port=0, state_dir=tmp_path, faults={"gpu099": [Fault.SLOW]}):
            pass


# ---- the command line ----------------------------------------------------------------------------------


async def test_main_serves_until_interrupted(tmp_path: Path) -> None:
    code = "import sys; from gputop.sim.fake_fleet.cli import main; sys.exit(main(sys.argv[1:]))"
    argv = ["--nodes", "3", "--port", "0", "--state-dir", str(tmp_path), "--fault", "gpu002=slow"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        code,
        *argv,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert proc.stdout is not None
    try:
        first = (await asyncio.wait_for(proc.stdout.readline(), 15)).decode()
        match = re.search(r"listening on 127\.0\.0\.1:(\d+)", first)
        assert match, first
        rest = (await asyncio.wait_for(proc.stdout.readuntil(b"Ctrl-C stops it.\n"), 5)).decode()
        assert f"gputop --config {tmp_path / 'gputop.yaml'}" in rest and "gpu002=slow" in rest
        config = str(tmp_path / "ssh_config")
        # gpu003 of three nodes is the simulator's silent one; gpu001 answers.
        login = asyncssh.connect("gpu001", config=[config], known_hosts=str(tmp_path / "known_hosts"))
        async with await asyncio.wait_for(login, 10) as conn:
            assert len(str((await conn.run("nvidia-smi -L")).stdout).splitlines()) == 8
        assert f"Port {match[1]}" in Path(config).read_text()
    finally:
        proc.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(proc.wait(), 10) == 0


# ---- layouts, byte for byte against real captures ------------------------------------------------------
# Each expected text below is a real capture from ../shared/fixtures/real (provenance in its PROVENANCE.md),
# reproduced by the fleet's formatters from the values it shows.

# nvidia-smi-mig/lgi/a30-24gb-4x1g.6gb.txt: Summer-Lo/Docker_configuration 000-MIG/README.md @ 4233c7bd
A30_LGI = """\
+-------------------------------------------------------+
| GPU instances:                                        |
| GPU   Name             Profile  Instance   Placement  |
|                          ID       ID       Start:Size |
|=======================================================|
|   0  MIG 1g.6gb          14        3          0:1     |
+-------------------------------------------------------+
|   0  MIG 1g.6gb          14        4          1:1     |
+-------------------------------------------------------+
|   0  MIG 1g.6gb          14        5          2:1     |
+-------------------------------------------------------+
|   0  MIG 1g.6gb          14        6          3:1     |
+-------------------------------------------------------+
"""

# nvidia-smi-mig/lgip/a30-24gb-me-profile-all-used.txt: same README
A30_LGIP = """\
+-----------------------------------------------------------------------------+
| GPU instance profiles:                                                      |
| GPU   Name             ID    Instances   Memory     P2P    SM    DEC   ENC  |
|                              Free/Total   GiB              CE    JPEG  OFA  |
|=============================================================================|
|   0  MIG 1g.6gb        14     0/4        5.81       No     14     1     0   |
|                                                             1     0     0   |
+-----------------------------------------------------------------------------+
|   0  MIG 1g.6gb+me     21     0/1        5.81       No     14     1     0   |
|                                                             1     1     1   |
+-----------------------------------------------------------------------------+
|   0  MIG 2g.12gb        5     0/2        11.69      No     28     2     0   |
|                                                             2     0     0   |
+-----------------------------------------------------------------------------+
|   0  MIG 4g.24gb        0     0/1        23.50      No     56     4     0   |
|                                                             4     1     1   |
+-----------------------------------------------------------------------------+
"""

# nvidia-smi-mig/lgipp/a30-24gb.txt: same README
A30_LGIPP = """\
GPU  0 Profile ID 14 Placements: {0,1,2,3}:1
GPU  0 Profile ID 21 Placements: {0,1,2,3}:1
GPU  0 Profile ID  5 Placements: {0,2}:2
GPU  0 Profile ID  0 Placement : {0}:4
"""

# nvidia-smi-mig/lci/rtx-pro-6000-blackwell-4x1g.24gb.txt: MIG hands-on article (index id 55594212068)
RTX_LCI = """\
+--------------------------------------------------------------------+
| Compute instances:                                                 |
| GPU     GPU       Name             Profile   Instance   Placement  |
|       Instance                       ID        ID       Start:Size |
|         ID                                                         |
|====================================================================|
|   0      3       MIG 1g.24gb          0         0          0:1     |
+--------------------------------------------------------------------+
|   0      4       MIG 1g.24gb          0         0          0:1     |
+--------------------------------------------------------------------+
|   0      5       MIG 1g.24gb          0         0          0:1     |
+--------------------------------------------------------------------+
|   0      6       MIG 1g.24gb          0         0          0:1     |
+--------------------------------------------------------------------+
"""

# nvidia-smi-L/a100-sxm4-80gb-mig-7x1g.10gb-new-MIG-uuid-datadog-pr33120.txt: DataDog/datadog-agent#33120
A100_MIG_L = """\
GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16)
  MIG 1g.10gb     Device  0: (UUID: MIG-feb88891-0321-5fef-9c87-d4af3b54259e)
  MIG 1g.10gb     Device  1: (UUID: MIG-a25704ba-3a06-5299-a795-fd7cf4d13973)
"""

# nvidia-smi-topo/v100-sxm2-32gb-x8-nv1-nv2-1nic-NIC-legend-drv580-double-tab-vastai.txt (index id
# 70440170784): driver 580's tabs, double tab before GPU NUMA ID, a NIC row ending in four tabs.
V100_TOPO = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV1\tNV1\tNV2\tNV2\tSYS\tSYS\tSYS\tNODE\t0-19,40-59\t0\t\tN/A\n"
    "GPU1\tNV1\t X \tNV2\tNV1\tSYS\tNV2\tSYS\tSYS\tNODE\t0-19,40-59\t0\t\tN/A\n"
    "GPU2\tNV1\tNV2\t X \tNV2\tSYS\tSYS\tNV1\tSYS\tNODE\t0-19,40-59\t0\t\tN/A\n"
    "GPU3\tNV2\tNV1\tNV2\t X \tSYS\tSYS\tSYS\tNV1\tNODE\t0-19,40-59\t0\t\tN/A\n"
    "GPU4\tNV2\tSYS\tSYS\tSYS\t X \tNV1\tNV1\tNV2\tSYS\t20-39,60-79\t1\t\tN/A\n"
    "GPU5\tSYS\tNV2\tSYS\tSYS\tNV1\t X \tNV2\tNV1\tSYS\t20-39,60-79\t1\t\tN/A\n"
    "GPU6\tSYS\tSYS\tNV1\tSYS\tNV1\tNV2\t X \tNV2\tSYS\t20-39,60-79\t1\t\tN/A\n"
    "GPU7\tSYS\tSYS\tSYS\tNV1\tNV2\tNV1\tNV2\t X \tSYS\t20-39,60-79\t1\t\tN/A\n"
    "NIC0\tNODE\tNODE\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\t X \t\t\t\t\n"
    "\n"
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA "
    "node\n"
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
    "  PIX  = Connection traversing at most a single PCIe bridge\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n"
    "\n"
    "NIC Legend:\n"
    "\n"
    "  NIC0: mlx5_2\n"
)

# ib/ibstat-h100-ndr-ib-cx7-plus-cx6-eth-12ca-eth-ports-DOWN-gpud.txt, its first CA:
# leptonai/gpud pkg/nvidia-query/infiniband/testdata/ibstat.47.0.h100.some.down.0 @ 4446606e
H100_IBSTAT_CA = (
    "CA 'mlx5_0'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.39.1002\n"
    "\tHardware version: 0\n\tNode GUID: 0x946dae0300cde72c\n\tSystem image GUID: 0x946dae0300cde72c\n"
    "\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tBase lid: 75\n\t\tLMC: 0\n"
    "\t\tSM lid: 334\n\t\tCapability mask: 0xa751e848\n\t\tPort GUID: 0x946dae0300cde72c\n"
    "\t\tLink layer: InfiniBand\n"
)


def test_layouts_reproduce_real_captures() -> None:
    profiles = [
        mig.ProfileRow(0, "1g.6gb", 14, 0, 4, 5.81, 14, 1, 0, 1, 0, 0),
        mig.ProfileRow(0, "1g.6gb+me", 21, 0, 1, 5.81, 14, 1, 0, 1, 1, 1),
        mig.ProfileRow(0, "2g.12gb", 5, 0, 2, 11.69, 28, 2, 0, 2, 0, 0),
        mig.ProfileRow(0, "4g.24gb", 0, 0, 1, 23.50, 56, 4, 0, 4, 1, 1),
    ]
    assert mig.format_lgip(profiles) == A30_LGIP
    placements = [
        mig.PlacementRow(0, 14, (0, 1, 2, 3), 1),
        mig.PlacementRow(0, 21, (0, 1, 2, 3), 1),
        mig.PlacementRow(0, 5, (0, 2), 2),
        mig.PlacementRow(0, 0, (0,), 4),
    ]
    assert mig.format_lgipp(placements) == A30_LGIPP
    assert mig.format_lgi([mig.InstanceRow(0, gi, "1g.6gb", 14, gi - 3, 1) for gi in (3, 4, 5, 6)]) == A30_LGI
    cis = [mig.InstanceRow(0, gi, "1g.24gb", 0, 0, 1, ci_id=0) for gi in (3, 4, 5, 6)]
    assert mig.format_lci(cis) == RTX_LCI

    rows = [line.split("\t") for line in V100_TOPO.split("\n\n")[0].splitlines()[1:]]
    cells = [[cell.strip() for cell in row[1:10]] for row in rows]
    affinity = [GpuAffinity(row[10], row[11], row[13]) for row in rows[:8]]
    assert format_topo([f"GPU{k}" for k in range(8)], ["mlx5_2"], cells, affinity) == V100_TOPO

    gpu = GpuSample(
        0, "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16", "NVIDIA A100-SXM4-80GB",
        None, None, None, None, None, None, None, None, None, None, None, True,
    )  # fmt: skip
    devices = {
        0: [
            ("1g.10gb", "MIG-feb88891-0321-5fef-9c87-d4af3b54259e"),
            ("1g.10gb", "MIG-a25704ba-3a06-5299-a795-fd7cf4d13973"),
        ]
    }
    assert mig.format_gpu_list([(gpu.index, gpu.name, gpu.uuid)], devices) == A100_MIG_L
    links = (Link(0, 26.562, True), Link(1, None, False), Link(2, 26.562, True))
    nvlink = formats.nvlink_status([GpuLinks(0, gpu.name, gpu.uuid, links)]).splitlines()
    assert nvlink == [
        "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16)",
        "\t Link 0: 26.562 GB/s",
        "\t Link 1: <inactive>",
        "\t Link 2: 26.562 GB/s",
    ]

    port = IbPort("mlx5_0", 1, "Active", "LinkUp", 400.0)
    assert formats.ibstat([port], 0x946DAE0300CDE72C, lid_base=75, sm_lid=334) == H100_IBSTAT_CA


def test_interconnect_answers_parse_back_to_the_simulators_facts() -> None:
    nics = [f"mlx5_{k}" for k in range(8)]
    board = board_topology(range(8), 8, nics, 18)
    assert parse_topo(topology_text(board)) == board
    # A GPU that fell off the bus leaves the matrix: what is left is the board without it.
    seen = {f"GPU{k}" for k in range(7)}
    assert parse_topo(topology_text(board, seen)) == board_topology(range(7), 8, nics, 18)

    cluster = SimulatedCluster(nodes=16, start_time_s=1_700_000_000.0)
    degraded = next(i.node for i in cluster.incidents if i.kind == "nvlink_degraded")
    status = cluster.result().nodes[cluster.node_names.index(degraded)].facts.nvlink.value
    assert isinstance(status, NvlinkStatus)
    text = formats.nvlink_status(status.gpus)
    assert text.count("<inactive>") == 6 and parse_nvlink(text) == status
    a100 = board_nvlinks([(0, "NVIDIA A100-SXM4-80GB", "GPU-0")], 12, 25.0, [(0, 11)])
    assert formats.nvlink_status(a100.gpus).splitlines()[1:] == [
        *(f"\t Link {k}: 25.000 GB/s" for k in range(11)),
        "\t Link 11: <inactive>",
    ]


async def test_old_driver_rejects_new_fields_and_the_ssh_source_streams_without_them(
    fleet: Fleet,  # noqa: F811
) -> None:
    node = healthy(fleet)
    fleet.faults.set(node, Fault.OLD_DRIVER)
    async with connect(fleet, node) as conn:
        refused = await conn.run(COMMANDS["metrics"].command_line)
    assert refused.exit_status != 0
    assert 'Field "remapped_rows.pending" is not a valid field to query.' in str(refused.stdout)

    config = load_config(fleet.config_path)
    poll = dataclasses.replace(config.poll, interval_s=0.2)
    source = SshSource(config.clusters[0], poll, time.time)
    await source.start()
    try:
        deadline = time.monotonic() + 20.0
        while True:
            sample = next(n for n in (await source.collect(time.time())).nodes if n.name == node)
            if len(sample.gpus) == 8:
                break
            assert time.monotonic() < deadline, sample.error
            await asyncio.sleep(0.1)
    finally:
        await source.close()
    # both remapped_rows fields dropped, one at a time; the rest still read
    assert all(g.remapped_rows_pending is None and g.remapped_rows_failure is None for g in sample.gpus)
    assert all(g.temp_c is not None and g.pcie_link_width_lanes == 16 for g in sample.gpus)
    assert sample.error is None
