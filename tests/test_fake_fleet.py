"""The fake node fleet: a real asyncssh server on 127.0.0.1 answering gputop's commands in the real tools'
formats, reached through the ssh_config and known_hosts it writes (its faults: test_fake_fleet_faults.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import shlex
import shutil
import stat
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncssh
import pytest

from gputop.config_file import load_config
from gputop.core.config import parse_config
from gputop.core.mig_layout import MigGpu, mig_gpu
from gputop.core.mig_plan import MigPlan, mig_gpu_from_node, plan_matches, plan_repartition
from gputop.core.models import NodeSample
from gputop.core.parsers.mig import (
    MigComputeInstances,
    MigGpuInstances,
    MigPlacements,
    MigProfiles,
    parse_lci,
    parse_lgi,
)
from gputop.sim.fake_fleet import (
    NODE_ENV,
    Faults,
    Fleet,
    run_fleet,
)
from gputop.sources.commands import QUERY_GPU_FIELDS, CommandSpec, default_commands, metrics_stream
from gputop.sources.slurm_runner import SshRunner
from gputop.sources.ssh import SshSource, link_settings

NODES = 10  # enough for every scripted incident, with gpu005 and gpu010 left healthy
COMMANDS = default_commands()
FAST_STREAM = metrics_stream(0.2)
UUID = r"[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}"
GPU_LINE = re.compile(r"GPU (\d+): NVIDIA H100 80GB HBM3 \(UUID: GPU-" + UUID + r"\)")


@pytest.fixture
async def fleet(tmp_path: Path) -> AsyncIterator[Fleet]:
    faults = Faults(slow_delay_s=1.0, die_after_intervals=2)
    async with run_fleet(nodes=NODES, port=0, state_dir=tmp_path / "fleet", faults=faults) as running:
        yield running


def incident(fleet: Fleet, kind: str) -> str:
    return next(inc.node for inc in fleet.cluster.incidents if inc.kind == kind)


def healthy(fleet: Fleet) -> str:
    busy = {inc.node for inc in fleet.cluster.incidents}
    return next(name for name in fleet.node_names if name not in busy)


def connect(fleet: Fleet, node: str, **options: Any) -> Any:
    return asyncssh.connect(
        node, config=[str(fleet.ssh_config_path)], known_hosts=str(fleet.known_hosts_path), **options
    )


async def run(fleet: Fleet, node: str, command: str, **options: Any) -> asyncssh.SSHCompletedProcess:
    async with connect(fleet, node) as conn:
        return await conn.run(command, **options)


async def read_for(process: asyncssh.SSHClientProcess[bytes], seconds: float) -> bytes:
    """Whatever the process prints within ``seconds`` (less if it closes first)."""
    out = b""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        try:
            chunk = await asyncio.wait_for(process.stdout.read(65536), left)
        except TimeoutError:
            break
        if not chunk:
            break
        out += chunk
    return out


def parsed_gpu_count(value: Any) -> int | None:
    for attr in ("gpus", "rows", "samples", "devices"):
        inner = getattr(value, attr, None)
        if isinstance(inner, tuple | list):
            return len(inner)
    return len(value) if isinstance(value, tuple | list) else None


def check_parses(spec: CommandSpec, text: str, gpus: int | None) -> None:
    """When gputop has a parser for this command's output, it must read what the fleet prints."""
    from gputop.core.parsers.common import ParseFailure
    from gputop.core.parsers.registry import registry

    info = registry().get(spec.parser)
    if info is None:
        return  # that parser family is not built yet
    value = info.parse(text)
    assert not isinstance(value, ParseFailure), (spec.name, value)
    if gpus is not None and spec.parser in ("query-gpu", "nvidia-smi-L"):
        count = parsed_gpu_count(value)
        if count is not None:
            assert count == gpus, (spec.name, count)


# ---- the state directory -------------------------------------------------------------------------------


async def test_state_dir_holds_keys_and_a_gputop_config_that_parses(fleet: Fleet) -> None:
    config = parse_config(fleet.config_path.read_text(), str(fleet.config_path))
    cluster = config.clusters[0]
    assert config.default_cluster == cluster.name == "fake-fleet"
    assert cluster.node_names == fleet.node_names
    assert cluster.gpus_per_node == 8
    assert cluster.ssh.config_file == str(fleet.ssh_config_path)
    assert cluster.ssh.known_hosts == str(fleet.known_hosts_path)
    assert cluster.slurm.enabled is True and cluster.slurm.run_on == "fake-fleet-login"
    ssh_config = fleet.ssh_config_path.read_text()
    assert ssh_config.count("\nHost ") == NODES + 1  # and the Slurm login node
    assert f"Host gpu010\n    HostName 127.0.0.1\n    Port {fleet.port}\n    User gpu010\n" in ssh_config
    assert fleet.known_hosts_path.read_text().startswith(f"[127.0.0.1]:{fleet.port} ssh-ed25519 ")
    assert stat.S_IMODE(fleet.client_key_path.stat().st_mode) == 0o600


async def test_host_key_is_verified_and_kept_across_restarts(tmp_path: Path) -> None:
    state = tmp_path / "fleet"
    async with run_fleet(nodes=2, port=0, state_dir=state) as first:
        key = first.known_hosts_path.read_text().split(" ", 1)[1]
        result = await run(first, "gpu001", "nvidia-smi -L")
        assert result.exit_status == 0
        stranger = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
        wrong = tmp_path / "wrong_known_hosts"
        wrong.write_text(f"[127.0.0.1]:{first.port} {stranger}")
        with pytest.raises(asyncssh.HostKeyNotVerifiable):
            await asyncssh.connect("gpu001", config=[str(first.ssh_config_path)], known_hosts=str(wrong))
    async with run_fleet(nodes=2, port=0, state_dir=state) as second:
        assert second.known_hosts_path.read_text().split(" ", 1)[1] == key
        assert (await run(second, "gpu002", "nvidia-smi -L")).exit_status == 0


async def test_openssh_client_reaches_a_node_through_the_generated_config(fleet: Fleet) -> None:
    ssh = shutil.which("ssh")
    if ssh is None:
        pytest.skip("needs the OpenSSH client (ssh), which this machine lacks")
    proc = await asyncio.create_subprocess_exec(
        ssh, "-F", str(fleet.ssh_config_path), "-o", "BatchMode=yes", "gpu005", "nvidia-smi", "-L",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 15)
    assert proc.returncode == 0, err
    assert len(out.decode().splitlines()) == 8


# ---- what a node answers -------------------------------------------------------------------------------


async def test_every_command_answers_in_the_real_layout(fleet: Fleet) -> None:
    node = healthy(fleet)
    async with connect(fleet, node) as conn:
        results = {
            name: await conn.run(spec.command_line) for name, spec in COMMANDS.items() if not spec.stream
        }
    out = {name: str(r.stdout) for name, r in results.items()}
    status = {name: r.exit_status for name, r in results.items()}

    for line in out["processes"].splitlines():
        uuid, pid, name, used = line.split(", ")
        assert uuid.startswith("GPU-") and pid.isdigit() and name == "python" and used.isdigit()
    listed = [GPU_LINE.fullmatch(line) for line in out["gpu_list"].splitlines()]
    assert [int(m[1]) if m else None for m in listed] == list(range(8))

    topo = out["topology"].splitlines()
    assert topo[0] == "\t" + "\t".join([*(f"GPU{k}" for k in range(8)), *(f"NIC{k}" for k in range(8))]) + (
        "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    )
    gpu_rows = [row.split("\t") for row in topo[1:9]]
    assert all(
        row.count("NV18") == 7 and row[1 + k] == " X " and row[9 + k] == "PIX"
        for k, row in enumerate(gpu_rows)
    )
    assert [row[-4:] for row in gpu_rows[:1]] == [["0-55,112-167", "0", "", "N/A"]]
    assert topo[9].startswith("NIC0\tPIX\t") and topo[9].endswith("\t\t\t\t")
    assert "NIC Legend:" in topo and topo[-1] == "  NIC7: mlx5_7"

    nvlink = out["nvlink"].splitlines()
    assert (
        len(nvlink) == 8 * 19 and nvlink[18] == "\t Link 17: 26.562 GB/s" and GPU_LINE.fullmatch(nvlink[19])
    )

    for name in ("mig_gip", "mig_gipp", "mig_gi", "mig_ci"):
        assert (out[name], status[name]) == ("No MIG-enabled devices found.\n", 6)
    assert out["ibstat"].count("CA 'mlx5_") == 8 and out["ibstat"].count("State: Active") == 8
    assert (out["xid"], status["xid"]) == ("-- No entries --\n", 1)
    assert all(status[name] == 0 for name in ("processes", "gpu_list", "topology", "nvlink", "ibstat"))
    for name, text in out.items():
        if status[name] == 0:  # a failed command's message is the source's to handle, not a parser's
            check_parses(COMMANDS[name], text, 8)


async def test_incident_nodes_show_their_incidents(fleet: Fleet) -> None:
    mig_node = incident(fleet, "mig")
    async with connect(fleet, mig_node) as conn:
        listing = str((await conn.run("nvidia-smi -L")).stdout).splitlines()
        tables = {
            n: str((await conn.run(COMMANDS[n].command_line)).stdout)
            for n in ("mig_gi", "mig_ci", "mig_gip", "mig_gipp")
        }
    assert re.fullmatch(r"  MIG 1g\.10gb     Device  0: \(UUID: MIG-" + UUID + r"\)", listing[8])
    assert sum(1 for line in listing if line.startswith("  MIG 1g.10gb     Device ")) == 7
    assert tables["mig_gi"].count("|   7  MIG 1g.10gb         19 ") == 7
    assert len(re.findall(r"^\|   7 +\d+ +MIG 1g\.10gb +0 +0 +0:1 +\|$", tables["mig_ci"], re.M)) == 7
    assert "|   7  MIG 7g.80gb        0     0/1        " in tables["mig_gip"]
    assert tables["mig_gipp"].splitlines()[0] == "GPU  7 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1"
    for name, text in tables.items():
        check_parses(COMMANDS[name], text, None)

    ib = (await run(fleet, incident(fleet, "ib_down"), "ibstat")).stdout
    assert (
        "CA 'mlx5_3'" in str(ib)
        and str(ib).count("State: Down") == 1
        and "Physical state: Disabled" in str(ib)
    )

    xid = await run(fleet, incident(fleet, "ecc_xid"), COMMANDS["xid"].command_line)
    lines = str(xid.stdout).splitlines()
    assert xid.exit_status == 0 and len(lines) == 2
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+0000 gpu002 kernel: NVRM: Xid \(PCI:0000:9a:00\): 48, .*", lines[0]
    )
    assert ": 79, " in lines[1] and lines[1].endswith("GPU has fallen off the bus.")
    check_parses(COMMANDS["xid"], str(xid.stdout), None)
    check_parses(COMMANDS["ibstat"], str(ib), None)

    missing = await run(fleet, incident(fleet, "missing_gpu"), "nvidia-smi -L")
    assert len(str(missing.stdout).splitlines()) == 7


async def test_stream_prints_a_line_per_gpu_per_interval_until_closed(fleet: Fleet) -> None:
    async with connect(fleet, incident(fleet, "mig")) as conn:
        process = await conn.create_process(FAST_STREAM.command_line, encoding=None)
        text = (await read_for(process, 1.05)).decode()
        process.close()
        await process.wait_closed()
    lines = text.splitlines()
    assert text.endswith("\n") and len(lines) % 8 == 0
    assert 5 <= len(lines) // 8 <= 7  # the first sample at once, then one every 0.2 s
    rows = [line.split(", ") for line in lines]
    assert all(len(row) == len(QUERY_GPU_FIELDS) for row in rows)
    assert [int(row[0]) for row in rows[:8]] == list(range(8))
    mig_row = rows[7]
    assert mig_row[4:6] == ["[N/A]", "[N/A]"] and mig_row[14] == "Enabled"
    assert rows[0][14] == "Disabled" and re.fullmatch(r"0x[0-9a-f]{16}", rows[0][15])
    assert rows[0][10] == "700.00" and re.fullmatch(r"\d+\.\d\d", rows[0][9])
    check_parses(FAST_STREAM, "".join(line + "\n" for line in lines[:8]), 8)
    for _ in range(50):
        if fleet.open_sessions == 0:
            break
        await asyncio.sleep(0.02)
    assert fleet.open_sessions == 0


async def test_missing_gpu_node_streams_seven_lines(fleet: Fleet) -> None:
    async with connect(fleet, incident(fleet, "missing_gpu")) as conn:
        process = await conn.create_process(FAST_STREAM.command_line)
        first = [(await process.stdout.readline()).split(", ")[0] for _ in range(8)]
    assert first == ["0", "1", "2", "3", "4", "6", "7", "0"]


async def test_node_picked_by_environment_when_the_user_is_no_node(fleet: Fleet) -> None:
    mig_node = incident(fleet, "mig")
    async with connect(fleet, "gpu001", username="operator") as conn:
        picked = await conn.run("nvidia-smi -L", env={NODE_ENV: mig_node})
        nowhere = await conn.run("nvidia-smi -L")
    assert picked.exit_status == 0 and "MIG 1g.10gb" in str(picked.stdout)
    assert nowhere.exit_status == 1 and NODE_ENV in str(nowhere.stderr)


async def test_unknown_command_is_not_found(fleet: Fleet) -> None:
    result = await run(fleet, healthy(fleet), "uptime")
    assert (result.exit_status, result.stdout, result.stderr) == (127, "", "sh: 1: uptime: not found\n")
    under_sudo = await run(fleet, healthy(fleet), "sudo -n reboot")
    assert (under_sudo.exit_status, under_sudo.stderr) == (1, "sudo: reboot: command not found\n")


async def test_the_fact_shell_answers_each_round_and_sh_c_frames_a_script_alike(fleet: Fleet) -> None:
    from gputop.sources.fact_round import SHELL_COMMAND, new_nonce, round_script, split_round_output

    argvs = [("ibstat",), ("nvidia-smi", "-L"), ("uptime",)]
    async with connect(fleet, healthy(fleet)) as conn:
        process = await conn.create_process(SHELL_COMMAND, encoding=None)
        for _ in range(2):  # rounds, one after another, on the one shell
            nonce = new_nonce()
            process.stdin.write(round_script(argvs, nonce).encode())
            out = await process.stdout.readuntil(f"{nonce} end 2 127\n".encode())
            err = await process.stderr.readuntil(f"{nonce} end 2\n".encode())
            steps = split_round_output(out, err, nonce, len(argvs))
            assert [step.status for step in steps] == [0, 0, 127]
            assert steps[0].stdout.startswith(b"CA 'mlx5_0'") and steps[1].stdout.startswith(b"GPU 0: ")
            assert steps[2].stderr == b"sh: 1: uptime: not found\n"
        process.stdin.write_eof()  # sh exits once its input ends
        assert (await asyncio.wait_for(process.wait(), 5.0)).exit_status == 0

        nonce = new_nonce()
        once = await conn.run(shlex.join(("sh", "-c", round_script(argvs, nonce))), encoding=None)
        again = split_round_output(once.stdout, once.stderr, nonce, len(argvs))
        assert [step.status for step in again] == [0, 0, 127]
        assert [step.stdout for step in again] == [step.stdout for step in steps]


# ---- MIG over SSH --------------------------------------------------------------------------------------


async def mig_facts_over_ssh(fleet: Fleet, name: str, timeout_s: float = 20.0) -> NodeSample:
    """``name`` as the SSH source reads it, once its MIG listings are in."""
    config = load_config(fleet.config_path)
    poll = dataclasses.replace(config.poll, interval_s=0.2, slow_facts_interval_s=0.4)  # -lgip every 2 s
    source = SshSource(config.clusters[0], poll, time.time)
    await source.start()
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            sample = next(n for n in (await source.collect(time.time())).nodes if n.name == name)
            facts = sample.facts
            if all(r.value is not None for r in (facts.mig_gip, facts.mig_gipp, facts.mig_gi, facts.mig_ci)):
                return sample
            assert time.monotonic() < deadline, sample.facts.errors()
            await asyncio.sleep(0.1)
    finally:
        await source.close()


async def run_plan(runner: SshRunner, plan: MigPlan) -> tuple[MigGpuInstances, MigComputeInstances]:
    """Each step in turn, as gputop runs them; then the listings read again."""
    for step in plan.steps:
        done = await runner.run(step.argv, {}, 10.0)
        assert (done.exit_status, done.stderr) == (0, ""), (step.command_line, done.stdout)
    lgi = parse_lgi((await runner.run(("nvidia-smi", "mig", "-lgi"), {}, 10.0)).stdout)
    lci = parse_lci((await runner.run(("nvidia-smi", "mig", "-lci"), {}, 10.0)).stdout)
    assert isinstance(lgi, MigGpuInstances) and isinstance(lci, MigComputeInstances)
    return lgi, lci


async def test_a_planned_repartition_runs_over_ssh(fleet: Fleet) -> None:
    name = incident(fleet, "drained")  # its GPU 0: MIG on, empty, idle
    sample = await mig_facts_over_ssh(fleet, name)
    gpu = mig_gpu_from_node(sample, 0)
    assert isinstance(gpu, MigGpu) and not gpu.gpu_instances
    plan = plan_repartition([gpu], "3x2g.20gb+1x1g.10gb", ("sudo", "-n"))
    assert isinstance(plan, MigPlan) and len(plan.steps) == 4
    config = load_config(fleet.config_path)
    runner = SshRunner(name, link_settings(config.clusters[0], config.poll))  # as gputop runs MIG steps
    try:
        lgi, lci = await run_plan(runner, plan)
        assert plan_matches(plan, {name: lgi}, {name: lci}).matches
        # Again from what the GPU holds now: the compute instances go, then their GPU instances.
        lgip, lgipp = sample.facts.mig_gip.value, sample.facts.mig_gipp.value
        assert isinstance(lgip, MigProfiles) and isinstance(lgipp, MigPlacements)
        now = mig_gpu(name, 0, gpu.model, lgip, lgipp, lgi, lci)
        whole = plan_repartition([now], "1x7g.80gb", ("sudo", "-n"))
        assert isinstance(whole, MigPlan)
        assert [s.argv[5:] for s in whole.steps[:2]] == [
            ("0", "-gi", "3", "-ci", "0", "-dci"),
            ("0", "-gi", "3", "-dgi"),
        ]
        lgi, lci = await run_plan(runner, whole)
        assert plan_matches(whole, {name: lgi}, {name: lci}).matches
        # A busy GPU refuses, in nvidia-smi's words.
        busy = SshRunner(incident(fleet, "mig"), runner.settings)
        try:
            refused = await busy.run(("sudo", "-n", "nvidia-smi", "mig", "-i", "7", "-dgi"), {}, 10.0)
        finally:
            await busy.close()
        assert refused.exit_status == 255
        assert refused.stdout.endswith("Failed to destroy GPU instances: In use by another client\n")
    finally:
        await runner.close()
    # The fleet's own state moved with it: what the simulator shows is what the plan left.
    truth = fleet.cluster.result().nodes[fleet.node_names.index(name)].facts.mig_gi.value
    assert truth == lgi
