"""`gputop check` and `gputop snapshot --json`: the arguments, what to watch, and the exit status.

Both take the dashboard's source options, run one round (round.py) and print. `check` exits with the
monitoring plugin statuses (verdict.py): 0 ok, 1 warn, 2 crit, 3 could not check. `snapshot` exits 0
when it printed a snapshot and 3 when it could not take one; the snapshot carries the check's status.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from gputop.cli import (
    add_source_arguments,
    check_demo_args,
    demo_config,
    load_args_config,
    local_config,
    no_config_help,
)
from gputop.clock import Clock, SystemClock
from gputop.cluster_app import DEMO_CLUSTER_NAME, LaunchError, choose_cluster, demo_source, sources_for
from gputop.config_file import default_config_path
from gputop.core.config import ClusterConfig, Config, ConfigError
from gputop.core.safe_text import safe_block, safe_line
from gputop.headless.report import check_document, check_lines, failure_document, no_pipe
from gputop.headless.round import collect_round, run_bounded
from gputop.headless.snapshot_json import snapshot_document
from gputop.headless.verdict import ExitStatus, judge
from gputop.sources.base import Source

MAX_TIMEOUT_S = 3600.0


class CannotCheck(Exception):
    """Why there is nothing to run a round on: the message for stderr (starting "gputop:"), and a
    one-line summary for the stdout that monitoring systems show (default: the message's first line)."""

    def __init__(self, message: str, summary: str | None = None) -> None:
        super().__init__(message)
        self.summary = summary or message.splitlines()[0].removeprefix("gputop: ")


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 3 (UNKNOWN), not argparse's 2, which a monitoring system would read as CRIT;
    `check` says UNKNOWN on stdout too, as the line or the JSON document asked for (``stdout_json``: the
    arguments held --json, read before they are parsed, since parsing is what failed)."""

    stdout_json: bool | None = None  # None: print nothing on stdout (snapshot)

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        if self.stdout_json is not None:
            _say_unknown(self.stdout_json, f"bad options: {message}", f"{self.prog}: {message}")
        self.exit(int(ExitStatus.UNKNOWN), f"{self.prog}: error: {message}\n")


def build_parser(command: str) -> argparse.ArgumentParser:
    if command == "check":
        parser = _Parser(
            prog="gputop check",
            description="One collection round: print the problems, worst first, and exit 0 (ok), 1 (warn), "
            "2 (crit) or 3 (could not check), for cron and monitoring systems.",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON document instead of lines")
    else:
        parser = _Parser(
            prog="gputop snapshot",
            description="One collection round, printed as one JSON document: every node and GPU, Slurm's "
            "nodes and jobs, and the problems.",
        )
        parser.add_argument("--json", action="store_true", required=True, help="print JSON (the only format)")
    add_source_arguments(parser)
    parser.add_argument(
        "--timeout",
        type=_seconds,
        metavar="SECONDS",
        help="give up on what has not answered after this long and report it (default: an SSH node's "
        "ssh.connect_timeout_s plus poll.node_deadline_s, Slurm's command timeout, or twice a store's "
        "prometheus.timeout_s plus poll.node_deadline_s, whichever is longest)",
    )
    return parser


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"{text}: must be more than 0 and at most {MAX_TIMEOUT_S:g}")
    return value


@dataclass(frozen=True, slots=True)
class Target:
    """What one round watches, with what."""

    cluster_name: str
    config: Config
    sources: tuple[Source, ...]
    clock: Clock
    timeout_s: float
    is_demo: bool
    host_keys_verified: bool | None = None  # None: nothing reached over SSH


def main(command: str, argv: Sequence[str]) -> int:
    parser = build_parser(command)
    if isinstance(parser, _Parser) and command == "check":
        parser.stdout_json = any(len(word) > 3 and "--json".startswith(word) for word in argv)  # --js too
    args = parser.parse_args(argv)
    try:
        target = choose_target(args)
    except CannotCheck as err:
        return _cannot_check(command, args.json, err)
    try:
        round_, worker_stuck = run_bounded(
            lambda: collect_round(
                cluster=target.cluster_name,
                sources=target.sources,
                config=target.config,
                clock=target.clock,
                timeout_s=target.timeout_s,
                is_demo=target.is_demo,
                host_keys_verified=target.host_keys_verified,
            )
        )
    except Exception as err:  # a bug: say UNKNOWN rather than Python's exit status 1, which reads as WARN
        traceback.print_exc()
        return _cannot_check(command, args.json, CannotCheck(f"gputop: internal error: {err!r}"))
    verdict = judge(round_)
    if command == "check":
        if args.json:
            _print_json(check_document(round_, verdict))
        else:
            print("\n".join(check_lines(round_, verdict)))
        status = verdict.status
    else:
        _print_json(snapshot_document(round_, verdict))
        status = ExitStatus.UNKNOWN if verdict.status is ExitStatus.UNKNOWN else ExitStatus.OK
    if worker_stuck:
        # A thread blocked in the driver (NVML) cannot be stopped, and the interpreter would wait for it
        # at exit: the output is written, so leave without it.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(status))
    return int(status)


def choose_target(args: argparse.Namespace) -> Target:
    """The config, cluster and sources the options name; CannotCheck when they name nothing usable. The
    sources are built here, before the round, so a node list read from Slurm that fails is exit 3."""
    clock = SystemClock()
    try:
        config = load_args_config(args)
    except ConfigError as err:
        first = str(err).splitlines()[0] if str(err) else ""
        raise CannotCheck(f"gputop: bad config\n{err}", f"bad config: {first}") from None
    if args.demo:
        problem = check_demo_args(args)
        if problem:
            raise CannotCheck(f"gputop: {problem}")
        config = demo_config(config or Config.default(), args)
        timeout_s = args.timeout if args.timeout is not None else default_timeout_s(config, None)
        return Target(
            DEMO_CLUSTER_NAME, config, (demo_source(config, clock),), clock, timeout_s, is_demo=True
        )
    if args.local:
        config = local_config(config or Config.default())
    if config is None:
        raise CannotCheck(no_config_help(default_config_path(os.environ)))
    try:
        cluster = choose_cluster(config, args.cluster)
        sources = tuple(sources_for(cluster, config, clock))
    except LaunchError as err:
        raise CannotCheck(f"gputop: {err}") from None
    timeout_s = args.timeout if args.timeout is not None else default_timeout_s(config, cluster)
    over_ssh = not cluster.local or (cluster.slurm.enabled and cluster.slurm.run_on != "local")
    verified = cluster.ssh.verify_host_keys is not False if over_ssh else None
    return Target(cluster.name, config, sources, clock, timeout_s, is_demo=False, host_keys_verified=verified)


def default_timeout_s(config: Config, cluster: ClusterConfig | None) -> float:
    """Long enough for each part of the round to answer or fail on its own terms (a handshake that times
    out says so): the poll deadline; for SSH nodes their connect timeout on top; for Slurm its command
    timeout, plus a connect when it runs on a login node; for a store two of its query timeouts on top."""
    deadline_s = config.poll.node_deadline_s
    if cluster is None:
        return deadline_s
    parts = [deadline_s]
    connect_s = cluster.ssh.connect_timeout_s
    if not cluster.local:
        parts.append(connect_s + deadline_s)
    if cluster.slurm.enabled:
        parts.append(
            cluster.slurm.command_timeout_s + (connect_s if cluster.slurm.run_on != "local" else 0.0)
        )
    if cluster.prometheus.url:
        # the start's look at the last hour, then the first refresh: each of its queries within the
        # store's timeout, and the answers' decoding
        parts.append(2 * cluster.prometheus.timeout_s + deadline_s)
    return max(parts)


def _cannot_check(command: str, as_json: bool, err: CannotCheck) -> int:
    message = str(err)
    print(safe_block(message), file=sys.stderr)
    if command == "check":
        _say_unknown(as_json, err.summary, message.removeprefix("gputop: "))
    return int(ExitStatus.UNKNOWN)


def _say_unknown(as_json: bool, summary: str, error: str) -> None:
    """Monitoring systems read stdout: UNKNOWN there too, in the format asked for."""
    if as_json:
        _print_json(failure_document(error))
    else:
        print(no_pipe(safe_line(f"gputop check: UNKNOWN: {summary}")))


def _print_json(document: dict[str, Any]) -> None:
    print(json.dumps(document, allow_nan=False))
