"""`gputop watch`: the auto-drain policy without the UI, on the same sources and config as the dashboard.

It polls as the dashboard does, runs the policy (gputop.core.drain_policy) on every view through
`gputop.actions.policy_runner`, and prints one line per decision and per notice on stdout (for a
terminal, a log file or the journal). Dry-run unless the config's ``policy.dry_run`` is false; `--dry-run`
forces it whatever the config says. One policy acts on a cluster at a time (a lock beside its state file).

SIGTERM, SIGINT or SIGHUP stop it: a drain in flight gets its "unknown" outcome in the audit log, the
state and history files are saved, and it exits 128 + the signal. `--reset-breaker` closes the circuit
breaker: at once when no policy runs, else through a request the running one takes at its next tick.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import getpass
import logging
import os
import sys
import time
from collections.abc import Sequence

from gputop.actions.actor import actor_for
from gputop.actions.audit import AuditError, AuditLog, audit_log_path
from gputop.actions.history_keeper import HistoryKeeper
from gputop.actions.policy_runner import PolicyRunner
from gputop.actions.state_file import history_path, policy_path
from gputop.actions.webhook import webhook_for
from gputop.cli import add_source_arguments
from gputop.core.drain_policy import DrainPolicy
from gputop.core.event_history import EventHistory
from gputop.core.safe_text import safe_block, safe_line
from gputop.core.summary import ClusterView
from gputop.headless.command import CannotCheck, Target, choose_target
from gputop.headless.views_loop import Stopped, run_views


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gputop watch",
        description="Run the auto-drain policy without the UI: drain nodes whose problems call for it "
        "(policy.drain_classes), within the guardrails of the config's policy section, and record every "
        "decision in the audit log. Dry-run unless policy.dry_run is false.",
    )
    add_source_arguments(parser)
    parser.add_argument(
        "--dry-run", action="store_true", help="decide and record, never act (whatever the config says)"
    )
    parser.add_argument(
        "--reset-breaker",
        action="store_true",
        help="close the policy's circuit breaker (recorded with your user name) and exit",
    )
    parser.set_defaults(timeout=None)  # choose_target's round deadline: a watch has none
    return parser


def say(text: str) -> None:
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    print(f"{stamp} {safe_line(text, 2000)}", flush=True)


class _SafeLines(logging.Formatter):
    """The sources' warnings (a Slurm form refused, a node's error) as the decisions' lines: stamped, on
    stdout, one line each, made safe: they quote what Slurm and the nodes printed."""

    def format(self, record: logging.LogRecord) -> str:
        return safe_line(super().format(record), 2000)


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(argv)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_SafeLines("%(asctime)s %(message)s", "%Y-%m-%d %H:%M:%S"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    try:
        target = choose_target(args)
    except CannotCheck as err:
        print(safe_block(str(err)), file=sys.stderr)
        return 2
    config = target.config
    policy_config = config.policy
    if args.dry_run and not policy_config.dry_run:
        policy_config = dataclasses.replace(policy_config, dry_run=True)
    state_path = policy_path(policy_config.state_file, target.cluster_name, os.environ, demo=target.is_demo)
    audit = AuditLog(
        audit_log_path(config.audit_log, os.environ, demo=target.is_demo),
        cluster=target.cluster_name,
        demo=target.is_demo,
    )
    history = EventHistory()
    policy = DrainPolicy(policy_config, history=history)
    webhook = webhook_for(policy_config, target.cluster_name)
    runner = PolicyRunner(
        policy, actor=actor_for(target.sources), audit=audit, state_path=state_path, webhook=webhook, say=say
    )
    if args.reset_breaker:
        return _reset_breaker(runner)
    problem = runner.start()
    if problem is not None:
        print(safe_line(f"gputop watch: {problem}"), file=sys.stderr)
        return 2
    # the demo's past is simulated afresh at each start: its history stays in memory
    keeper = None
    if not target.is_demo:
        keeper = HistoryKeeper(history_path(target.cluster_name, os.environ), history, say)
        keeper.load()
    return asyncio.run(_watch(target, runner, history, keeper))


def _reset_breaker(runner: PolicyRunner) -> int:
    user = _user()
    if runner.start() is None:  # no policy runs: reset the saved state here
        try:
            print(safe_line(runner.reset_breaker(user)))
        except AuditError as err:
            print(safe_line(f"gputop watch: the reset was not recorded, so not made: {err}"), file=sys.stderr)
            return 2
        finally:
            runner.lock.release()
        return 0
    try:
        runner.reset_request_path.write_text(user, encoding="utf-8")
    except OSError as err:
        print(safe_line(f"gputop watch: cannot ask the running policy: {err}"), file=sys.stderr)
        return 2
    print(
        f"asked the running policy to reset its circuit breaker (as {safe_line(user)}); "
        "it does at its next tick"
    )
    return 0


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())


async def _watch(
    target: Target, runner: PolicyRunner, history: EventHistory, keeper: HistoryKeeper | None
) -> int:
    policy = runner.policy.config
    mode = "dry run: deciding and recording, not acting" if policy.dry_run else "acting"
    say(
        f"gputop watch on {target.cluster_name}: {mode}; drains on {', '.join(policy.drain_classes)}; "
        f"at most {policy.max_drains_per_hour} drains an hour and "
        f"{policy.max_partition_pct:g}% of a partition; "
        + (
            f"resumes its drains after {policy.resume_after_clear_min:g} min clear"
            if policy.resume_after_clear_min is not None
            else "never resumes"
        )
    )
    if runner.policy.state.breaker_open:
        say(
            f"circuit breaker open: {runner.policy.state.breaker_why}; "
            "reset with gputop watch --reset-breaker"
        )

    async def step(view: ClusterView) -> None:
        now_s = target.clock.now()
        await runner.step(view, now_s)
        if keeper is not None:
            keeper.maybe_save(now_s)

    try:
        runner.audit.decision({"action": "policy", "decision": "started", "dry_run": policy.dry_run})
        await run_views(target, step, history=history)
    except Stopped as stopped:
        say(f"stopped by {stopped}")
        return 128 + stopped.signum
    except AuditError as err:
        say(f"stopping: {err}")
        return 2
    finally:
        await runner.close()
        if keeper is not None:
            keeper.maybe_save(target.clock.now(), force=True)
        with contextlib.suppress(AuditError):
            runner.audit.decision({"action": "policy", "decision": "stopped"})
    return 0
