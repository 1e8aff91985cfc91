"""A fleet of fake GPU nodes behind one SSH server, for tests, benchmarks and trying gputop without a
cluster: each node answers gputop's commands in the real tools' output formats, from a shared simulated
cluster, and can be made to fail in the ways real nodes do.

    async with run_fleet(nodes=8, port=0, state_dir=tmp_path) as fleet:
        fleet.faults.set("gpu003", Fault.GARBAGE)

From a shell: ``gputop fake-fleet --nodes 200`` (see `gputop.sim.fake_fleet.cli`).
"""

from gputop.sim.fake_fleet.faults import Fault, Faults, parse_fault_spec
from gputop.sim.fake_fleet.server import NODE_ENV, Fleet, run_fleet, start_fleet

__all__ = ["NODE_ENV", "Fault", "Faults", "Fleet", "parse_fault_spec", "run_fleet", "start_fleet"]
