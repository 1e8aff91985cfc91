"""gputop on its demo, with the simulator's scontrol answering after GPUTOP_DEMO_SCONTROL_DELAY_S seconds,
so that a test can interrupt a drain while it runs. Run as a script: the same arguments as gputop."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping, Sequence

from gputop.cli import main
from gputop.sim import demo_actions
from gputop.sources.slurm_runner import Completed

_answer = demo_actions.SimulatedScontrol.run


async def _slow(
    self: demo_actions.SimulatedScontrol, argv: Sequence[str], env: Mapping[str, str], timeout_s: float
) -> Completed:
    await asyncio.sleep(float(os.environ.get("GPUTOP_DEMO_SCONTROL_DELAY_S", "4")))
    return await _answer(self, argv, env, timeout_s)


if __name__ == "__main__":
    demo_actions.SimulatedScontrol.run = _slow  # type: ignore[method-assign]
    sys.exit(main(sys.argv[1:]))
