"""``gputop fake-fleet``: serve a fleet of fake GPU nodes until Ctrl-C, and say how to point gputop at it."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from gputop.core.nodeset import fold_nodes
from gputop.sim.fake_fleet.faults import Fault, Faults, parse_fault_spec
from gputop.sim.fake_fleet.server import NODE_ENV, Fleet, start_fleet
from gputop.sim.fake_fleet.state_dir import LOGIN_HOST
from gputop.sim.gpu_models import GPU_MODELS


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gputop fake-fleet",
        description="Serve N fake GPU nodes over SSH on one port, playing a simulated cluster, so gputop "
        "can be tried, tested and benchmarked without one.",
    )
    parser.add_argument("--nodes", type=int, default=200, metavar="N", help="how many nodes (default 200)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=2222, help="port to listen on; 0 picks a free one (default 2222)"
    )
    parser.add_argument("--gpus-per-node", type=int, default=8, metavar="N", help="GPUs per node (default 8)")
    parser.add_argument(
        "--gpu-model", default="H100", choices=list(GPU_MODELS), help="GPU model (default H100)"
    )
    parser.add_argument(
        "--seed", type=int, default=42, help="simulation seed: same seed, same cluster (default 42)"
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help="where keys, known_hosts, ssh_config and gputop.yaml go; keys made here are reused next time "
        "(default: a temporary directory, removed on exit)",
    )
    parser.add_argument(
        "--fault",
        action="append",
        default=[],
        metavar="NODE=FAULT[,FAULT...]",
        help=f"make a node misbehave; repeatable. Faults: {', '.join(f.value for f in Fault)}",
    )
    parser.add_argument(
        "--exporters-port",
        type=int,
        metavar="PORT",
        help="also serve dcgm-exporter's and node_exporter's /metrics over HTTP on PORT (0: a free one), "
        "for a Prometheus to scrape",
    )
    parser.add_argument(
        "--authorized-key",
        action="append",
        default=[],
        type=Path,
        metavar="FILE",
        help="also accept the public key(s) in FILE (an authorized_keys or .pub file); repeatable",
    )
    return parser


def _faults(parser: argparse.ArgumentParser, specs: Sequence[str]) -> dict[str, set[Fault]]:
    wanted: dict[str, set[Fault]] = {}
    for spec in specs:
        try:
            node, faults = parse_fault_spec(spec)
        except ValueError as err:
            parser.error(str(err))
        wanted.setdefault(node, set()).update(faults)
    return wanted


def _describe(fleet: Fleet, faults: Faults) -> str:
    nodes = fleet.node_names
    model = fleet.cluster.model
    config = fleet.config_path
    lines = [
        f"gputop fake fleet listening on {fleet.host}:{fleet.port}",
        f"  nodes:     {len(nodes)} ({fold_nodes(nodes)}), {fleet.cluster.gpus_per_node} x {model.name} each",
        f"  state dir: {fleet.state_dir}",
        f"  run:       gputop --config {config}",
        f"  one node:  ssh -F {fleet.ssh_config_path} {nodes[0]} nvidia-smi -L",
        f"  (or log in as any user and send {NODE_ENV}=<node>)",
        f"  slurm:     Slurm 22.05's squeue, sinfo and scontrol on {LOGIN_HOST}: "
        f"ssh -F {fleet.ssh_config_path} {LOGIN_HOST} squeue --json",
        "  incidents:",
        *(f"    {inc.node}: {inc.description}" for inc in fleet.cluster.incidents),
        f"  faults:    {faults.describe()}",
        "Ctrl-C stops it.",
    ]
    return "\n".join(lines)


async def _serve(args: argparse.Namespace, faults: dict[str, set[Fault]], keys: list[str]) -> int:
    fleet = await start_fleet(
        nodes=args.nodes,
        gpus_per_node=args.gpus_per_node,
        gpu_model=args.gpu_model,
        seed=args.seed,
        host=args.host,
        port=args.port,
        state_dir=args.state_dir,
        faults=faults,
        authorized_keys=keys,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    exporters = None
    try:
        print(_describe(fleet, fleet.faults), flush=True)
        if args.exporters_port is not None:
            from gputop.sim.fake_fleet.exporters import serve_exporters

            exporters = await serve_exporters(fleet.cluster, time.time, args.host, args.exporters_port)
            print(
                f"  exporters: dcgm-exporter {exporters.url}/metrics (every node; one node: "
                f"/nodes/<node>/metrics), node_exporter's InfiniBand {exporters.url}/node_exporter/metrics",
                flush=True,
            )
        await stop.wait()
    finally:
        if exporters is not None:
            await exporters.close()
        await fleet.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.nodes < 1:
        parser.error("--nodes must be at least 1")
    if args.gpus_per_node < 1:
        parser.error("--gpus-per-node must be at least 1")
    if not 0 <= args.port <= 65535:
        parser.error("--port must be between 0 and 65535")
    if args.exporters_port is not None and not 0 <= args.exporters_port <= 65535:
        parser.error("--exporters-port must be between 0 and 65535")
    faults = _faults(parser, args.fault)
    keys: list[str] = []
    for path in args.authorized_key:
        try:
            keys.extend(path.read_text(encoding="utf-8").splitlines())
        except OSError as err:
            parser.error(f"--authorized-key {path}: {err.strerror}")
    # A thousand clients coming and going would otherwise log a line each at INFO.
    logging.getLogger("asyncssh").setLevel(logging.WARNING)
    try:
        return asyncio.run(_serve(args, faults, keys))
    except ValueError as err:  # a fault naming a node the fleet does not have
        print(f"gputop fake-fleet: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        print(f"gputop fake-fleet: cannot listen on {args.host}:{args.port}: {err.strerror}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
