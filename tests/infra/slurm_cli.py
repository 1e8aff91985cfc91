"""`python -m tests.infra.slurm_cli up|down [DIR]`: a real Slurm on 127.0.0.1 (as root) to try gputop
against by hand, started or stopped."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tests.infra.slurm import SlurmUnavailable, ctld_alive, start_slurm, stop_slurm


def main(argv: Sequence[str] | None = None) -> int:
    default_dir = Path(tempfile.gettempdir()) / "gputop-slurm"
    parser = argparse.ArgumentParser(
        prog="python -m tests.infra.slurm_cli",
        description="Start or stop a real Slurm on 127.0.0.1 (as root) to try gputop against by hand.",
    )
    parser.add_argument("command", choices=("up", "down"))
    parser.add_argument("dir", nargs="?", type=Path, default=default_dir, help=f"default {default_dir}")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--gpu-type", default="h100")
    parser.add_argument("--slurmd-timeout", type=int, default=30, help="seconds until a dead node is down")
    args = parser.parse_args(argv)
    base_dir: Path = args.dir.resolve()
    if args.command == "down":
        stop_slurm(base_dir)
        print(f"stopped the Slurm in {base_dir}", file=sys.stderr)
        return 0
    conf = base_dir / "etc" / "slurm.conf"
    answering = (
        ctld_alive(base_dir)
        and (
            subprocess.run(["sinfo", "-h"], env={**os.environ, "SLURM_CONF": str(conf)}, capture_output=True)
        ).returncode
        == 0
    )
    if answering:
        print(f"already running in {base_dir}", file=sys.stderr)
        print(f"export SLURM_CONF={conf}")
        return 0
    started = time.monotonic()
    try:
        slurm = start_slurm(
            base_dir,
            nodes=args.nodes,
            gpus=args.gpus,
            gpu_type=args.gpu_type,
            slurmd_timeout_s=args.slurmd_timeout,
            detach=True,
        )
    except SlurmUnavailable as err:
        print(f"cannot start Slurm: {err}", file=sys.stderr)
        return 2
    print(
        f"{len(slurm.nodes)} nodes idle after {time.monotonic() - started:.2f}s in {base_dir} "
        f"(slurmctld 127.0.0.1:{slurm.ctld_port}); stop: python -m tests.infra.slurm_cli down {base_dir}",
        file=sys.stderr,
    )
    print(f"export SLURM_CONF={slurm.conf_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
