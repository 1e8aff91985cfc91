"""ibstat that lists some adapters and then fails on one (``stat of IB device 'mlx5_8' failed``, exit 255)
reported the others as if all were well: the failing adapter is now a CRIT problem on the node."""

from __future__ import annotations

import json
from pathlib import Path

from gputop.core.config import Thresholds
from gputop.core.health import assess_node
from gputop.core.models import IbFailure, NodeSample, Reachability, Severity
from gputop.core.parsers.common import ParseFailure
from gputop.core.parsers.ib import IbStat, ibstat_failures, parse_ibstat, with_failures
from gputop.sim.fake_fleet import Fault, run_fleet
from tests.test_headless import gputop_async, subset_config

FIXTURES = Path(__file__).parent / "fixtures"
# real: a node's 12 adapters (gpud's test data), and ibstat's stderr when it cannot read one
LISTING = (FIXTURES / "ib" / "ibstat-h100-ndr-ib-cx7-plus-cx6-eth-12ca-eth-ports-DOWN-gpud.txt").read_text()
PANIC = (
    FIXTURES / "ib-errors" / "ibstat-stderr-ibpanic-stat-failed-mthca0-no-ib-devices-singularity-doc.txt"
).read_text()
SAID = "stat of IB device 'mthca0' failed: No such file or directory"


def test_the_panic_line_names_the_adapter_in_ibstats_own_words() -> None:
    assert ibstat_failures(PANIC, 255) == (IbFailure("mthca0", SAID),)
    assert ibstat_failures(PANIC, 0) == (), "exit 0: nothing failed, whatever stderr says"
    assert ibstat_failures("", 255) == (IbFailure(None, "exit status 255, and nothing said"),)
    unnamed = ibstat_failures("ibpanic: [7] main: can't init UMAD library: No such file or directory\n", 255)
    assert unnamed == (IbFailure(None, "can't init UMAD library: No such file or directory"),)


def test_the_adapters_read_stay_and_the_failing_one_is_added() -> None:
    listed = parse_ibstat(LISTING)
    assert isinstance(listed, IbStat)
    read = with_failures(listed, PANIC, 255)
    assert isinstance(read, IbStat)
    assert read.adapters == listed.adapters and read.failed == (IbFailure("mthca0", SAID),)
    # the first adapter failed: nothing on stdout, and that is the adapter's failure, not the parse's
    alone = with_failures(parse_ibstat(""), PANIC, 255)
    assert isinstance(alone, IbStat) and not alone.adapters and alone.failed[0].adapter == "mthca0"
    # no adapter listed, none named (no IB driver loaded): ibstat failed as a command, no adapter is broken
    umad = "ibpanic: [7] main: can't init UMAD library: No such file or directory\n"
    failed = with_failures(parse_ibstat(""), umad, 255)
    assert isinstance(failed, ParseFailure) and failed.reason.startswith("can't init UMAD library")


def test_a_node_with_an_unreadable_adapter_has_a_crit_problem() -> None:
    listed = parse_ibstat(LISTING)
    assert isinstance(listed, IbStat)
    node = NodeSample(
        "gpu001",
        Reachability.OK,
        1.0,
        ib_ports=listed.to_ports(),
        ib_failures=(IbFailure("mthca0", SAID),),
    )
    problems = assess_node(node, None, Thresholds(), 1.0)
    (failed,) = [p for p in problems if "unreadable" in p.message]
    assert failed.severity is Severity.CRIT and failed.kind == "ib"
    assert failed.message == f"mthca0 unreadable: {SAID}"


async def test_over_ssh_the_fleets_failing_adapter_is_a_problem_and_in_the_snapshot(tmp_path: Path) -> None:
    async with run_fleet(nodes=16, port=0, state_dir=tmp_path / "fleet") as fleet:
        troubled = {i.node for i in fleet.cluster.incidents} | set(fleet.unresponsive_nodes)
        healthy = [n for n in fleet.node_names if n not in troubled][:3]
        victim = healthy[0]
        fleet.faults.set(victim, Fault.IB_ADAPTER_FAILS)
        config = subset_config(fleet, tmp_path / "subset.yaml", healthy)
        status, out, err, _ = await gputop_async(tmp_path, "check", "--config", str(config))
        assert status == 2, out + err
        lines = out.splitlines()
        assert f"CRIT {victim} mlx5_7 unreadable: stat of IB device 'mlx5_7' failed: No such device" in lines
        assert not any("mlx5_7 port 1 missing" in line for line in lines), "said once, not again as missing"
        status, out, err, _ = await gputop_async(tmp_path, "snapshot", "--json", "--config", str(config))
        nodes = {node["name"]: node for node in json.loads(out)["nodes"]}
        assert nodes[victim]["ib_failures"] == [
            {"adapter": "mlx5_7", "reason": "stat of IB device 'mlx5_7' failed: No such device"}
        ]
        assert {port["ca_name"] for port in nodes[victim]["ib_ports"]} == {f"mlx5_{i}" for i in range(7)}
        assert nodes[healthy[1]]["ib_failures"] == []
