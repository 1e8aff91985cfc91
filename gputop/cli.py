"""The `gputop` command: arguments, config discovery, and clear messages instead of tracebacks."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from gputop import __version__
from gputop.core.config import Config, ConfigError
from gputop.core.metrics import Metric
from gputop.core.safe_text import safe_block
from gputop.pipe_safe import guard_stdout

if TYPE_CHECKING:
    from gputop.clock import Clock
    from gputop.tui.app import GputopApp

NO_CONFIG_HELP = """\
gputop: no config found. Try the built-in demo cluster:  gputop --demo
To watch your cluster, start from the annotated example and edit it:
  mkdir -p {directory} && gputop config-example > {path}
or pass --config FILE."""


def no_config_help(path: Path) -> str:
    """What to do without a config: the demo, or the example written where gputop looks (shell-quoted)."""
    return NO_CONFIG_HELP.format(path=shlex.quote(str(path)), directory=shlex.quote(str(path.parent)))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gputop",
        description="A terminal dashboard for GPU clusters: every GPU on one screen, Slurm and InfiniBand "
        "beside it, and safe actions from the keyboard.",
        epilog="Other commands (each takes --help): gputop check and gputop snapshot --json (one round "
        "without the UI, for cron and monitoring), gputop watch (the auto-drain policy, headless), "
        "gputop record FILE, gputop replay FILE and gputop export FILE (history for later), "
        "gputop parse, gputop fake-fleet, gputop config-example "
        "(the annotated example config), gputop completion bash|zsh|fish.",
    )
    parser.add_argument("--version", action="version", version=f"gputop {__version__}")
    add_source_arguments(parser)
    parser.add_argument(
        "--theme",
        metavar="NAME",
        help="colour theme (gputop-dark, gputop-light, gputop-high-contrast, or one of yours)",
    )
    parser.add_argument(
        "--metric", choices=[m.value for m in Metric], help="what the cluster map shows first"
    )
    parser.add_argument("--read-only", action="store_true", help="no actions that change the cluster")
    parser.add_argument(
        "--record", metavar="FILE", help="also record what the dashboard sees, for gputop replay and export"
    )
    return parser


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """What to watch: the options the dashboard and the headless commands share."""
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="config file (default: $GPUTOP_CONFIG, then $XDG_CONFIG_HOME/gputop/config.yaml)",
    )
    parser.add_argument("--cluster", metavar="NAME", help="which cluster of the config to watch")
    parser.add_argument("--demo", action="store_true", help="a simulated cluster (no config needed)")
    parser.add_argument("--demo-nodes", type=int, metavar="N", help="demo cluster size (default 32)")
    parser.add_argument(
        "--demo-gpu", metavar="MODEL", help="demo GPU model: H100, H200, A100-80GB, A100-40GB, B200"
    )
    parser.add_argument("--seed", type=int, help="demo random seed (same seed, same cluster)")
    parser.add_argument("--local", action="store_true", help="this machine's GPUs, read through NVML")


def load_args_config(args: argparse.Namespace) -> Config | None:
    from gputop.config_file import find_config_path, load_config

    path = find_config_path(args.config, os.environ)
    if path is None:
        return None
    return load_config(path)


def demo_config(config: Config, args: argparse.Namespace) -> Config:
    import dataclasses

    demo = config.demo
    changes: dict[str, Any] = {}
    if args.demo_nodes is not None:
        changes["nodes"] = args.demo_nodes
    if args.demo_gpu is not None:
        changes["gpu_model"] = args.demo_gpu
    if args.seed is not None:
        changes["seed"] = args.seed
    return dataclasses.replace(config, demo=dataclasses.replace(demo, **changes))


DEMO_RACK_PATTERN = r"^gpu(\d*)\d$"


def check_demo_args(args: argparse.Namespace) -> str | None:
    from gputop.sim.gpu_models import GPU_MODELS

    if args.demo_nodes is not None and not 1 <= args.demo_nodes <= 10000:
        return f"--demo-nodes {args.demo_nodes}: must be between 1 and 10000"
    if args.demo_gpu is not None and args.demo_gpu not in GPU_MODELS:
        return f"--demo-gpu {args.demo_gpu!r}: must be one of {', '.join(GPU_MODELS)}"
    return None


NO_TERMINAL_HELP = """\
gputop: {why}: the dashboard needs a terminal to draw in and keys to read.
Without one (cron, nohup, systemd, a pipe) run one round instead:
  gputop check           one line per problem and a summary; exit status for monitoring
  gputop snapshot --json everything gputop sees, as JSON"""


def terminal_problem(environ: Mapping[str, str], streams: Sequence[IO[Any]]) -> str | None:
    """Why the dashboard cannot run here (None: it can). Started without a terminal it would draw into
    a file or a pipe without end, at full speed; TERM=dumb cannot move the cursor at all. Under `textual
    serve` the app speaks to a browser through Textual's web driver over pipes: no terminal is needed."""
    if environ.get("TEXTUAL_DRIVER", "").endswith(":WebDriver"):
        return None
    for stream in streams:
        try:
            if not stream.isatty():
                name = getattr(stream, "name", "a stream")
                return f"{name} is not a terminal"
        except (AttributeError, ValueError):  # closed, or no stream at all
            return "no terminal"
    term = environ.get("TERM", "")
    if term in ("", "dumb", "unknown"):
        return f"TERM={term or '(unset)'} cannot draw a full-screen program (set TERM, e.g. xterm-256color)"
    return None


def _run_app(app: GputopApp, record_to: str | None = None) -> int:
    app.settings.record_to = record_to
    problem = terminal_problem(os.environ, (sys.stdin, sys.stdout, sys.stderr))
    if problem is not None:
        print(NO_TERMINAL_HELP.format(why=problem), file=sys.stderr)
        return 2
    app.run()
    return app.return_code or 0  # 128 + the signal when SIGTERM or SIGHUP ended it


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] in (
        ["parse"],
        ["fake-fleet"],
        ["check"],
        ["snapshot"],
        ["config-example"],
        ["completion"],
        ["watch"],
        ["record"],
        ["export"],
    ):
        guard_stdout()  # `gputop check --json | head -c 10`: the status it had, and no traceback
    if words[:1] == ["parse"]:  # subcommands beside the dashboard's flags, which stay as they were
        from gputop.parse_command import main as parse_main

        return parse_main(words[1:])
    if words[:1] == ["fake-fleet"]:
        from gputop.sim.fake_fleet.cli import main as fleet_main

        return fleet_main(words[1:])
    if words[:1] == ["config-example"]:
        from gputop.config_example import main as example_main

        return example_main(words[1:])
    if words[:1] == ["completion"]:
        from gputop.completion import main as completion_main

        return completion_main(words[1:])
    if words[:1] == ["replay"]:
        return _run_replay(words[1:])
    if words[:1] == ["record"]:
        from gputop.headless.record import main as record_main

        return record_main(words[1:])
    if words[:1] == ["export"]:
        from gputop.headless.export import main as export_main

        return export_main(words[1:])
    if words[:1] == ["watch"]:
        from gputop.headless.watch import main as watch_main

        return watch_main(words[1:])
    if words[:1] in (["check"], ["snapshot"]):
        from gputop.headless.command import main as headless_main

        return headless_main(words[0], words[1:])
    args = build_parser().parse_args(words)
    try:
        config = load_args_config(args)
    except ConfigError as err:
        print(f"gputop: bad config\n{safe_block(str(err))}", file=sys.stderr)
        return 2
    if args.local and not args.demo:
        config = local_config(config or Config.default())
    if not args.demo:
        if config is None:
            from gputop.config_file import default_config_path

            path = default_config_path(os.environ)
            print(no_config_help(path), file=sys.stderr)
            return 2
        return _run_cluster(config, args)
    problem = check_demo_args(args)
    if problem:
        print(f"gputop: {problem}", file=sys.stderr)
        return 2
    config = demo_config(config or Config.default(), args)
    app = build_demo_app(
        config,
        theme=args.theme,
        read_only=args.read_only,
        metric=Metric(args.metric) if args.metric else None,
    )
    return _run_app(app, args.record)


def _run_replay(argv: Sequence[str]) -> int:
    """`gputop replay FILE`: the dashboard on a recording, read-only, with a time bar."""
    import dataclasses

    from gputop.core.recording import RecordingError
    from gputop.sources.recording_file import read_recording
    from gputop.sources.replay import ReplayClock, ReplaySource
    from gputop.tui import app as tui_app

    parser = argparse.ArgumentParser(
        prog="gputop replay",
        description="Open the dashboard on a recording (gputop record, --record), read-only. Keys: p "
        "pause/play, . and , step a tick, + and - speed (0.25x to 64x), n next problem or action, "
        "T jump to a time.",
    )
    parser.add_argument("file", metavar="FILE")
    parser.add_argument("--config", metavar="FILE", help="config whose thresholds and theme to use")
    parser.add_argument("--theme", metavar="NAME")
    args = parser.parse_args(argv)
    try:
        config = load_args_config(argparse.Namespace(config=args.config)) or Config.default()
        recording = read_recording(args.file)
    except ConfigError as err:
        print(f"gputop: bad config\n{safe_block(str(err))}", file=sys.stderr)
        return 2
    except (OSError, RecordingError) as err:
        print(
            safe_block(f"gputop replay: {args.file}: {getattr(err, 'strerror', None) or err}"),
            file=sys.stderr,
        )
        return 2
    source = ReplaySource(recording)
    if not source.frames:
        print(safe_block(f"gputop replay: {args.file}: no ticks recorded"), file=sys.stderr)
        return 2
    interval_s = float(recording.meta.get("interval_s") or config.poll.interval_s)
    if 0.1 <= interval_s <= 3600:
        config = dataclasses.replace(config, poll=dataclasses.replace(config.poll, interval_s=interval_s))
    clock = ReplayClock(source.start_s, source.end_s)
    settings = tui_app.AppSettings(
        config=config,
        cluster_name=source.cluster,
        sources=[source],
        clock=clock,
        theme=args.theme,
        read_only=True,
        replay=source,
    )
    app = tui_app.GputopApp(settings)
    if source.stopped:
        app.startup_warnings.append(f"the recording ends early: {source.stopped}")
    return _run_app(app)


def local_config(config: Config) -> Config:
    """This machine alone, read through NVML: `gputop --local` on a GPU node needs no config."""
    import dataclasses
    import socket

    from gputop.core.config import ClusterConfig

    host = socket.gethostname().split(".")[0] or "localhost"
    local = ClusterConfig(name="local", nodeset=host, node_names=(host,), local=True)
    return dataclasses.replace(config, clusters=(local, *config.clusters), default_cluster="local")


def _run_cluster(config: Config, args: argparse.Namespace) -> int:
    from gputop.cluster_app import LaunchError, build_cluster_app, choose_cluster

    try:
        cluster = choose_cluster(config, args.cluster)
        app = build_cluster_app(
            config,
            cluster,
            theme=args.theme,
            read_only=args.read_only,
            metric=Metric(args.metric) if args.metric else None,
        )
    except LaunchError as err:
        print(safe_block(f"gputop: {err}"), file=sys.stderr)
        return 2
    return _run_app(app, args.record)


def build_demo_app(
    config: Config,
    *,
    theme: str | None = None,
    read_only: bool = False,
    metric: Metric | None = None,
    clock: Clock | None = None,
) -> GputopApp:
    """The app on the simulator. Tests and screenshot scripts pass a frozen clock."""
    import dataclasses

    from gputop.clock import SystemClock
    from gputop.cluster_app import DEMO_CLUSTER_NAME, demo_source
    from gputop.tui import app as tui_app

    real_clock: Clock = clock if clock is not None else SystemClock()
    if config.ui.rack_pattern is None:
        # the demo's racks: ten nodes each, by the name's digits but the last (gpu0012x), so that the map's
        # group zoom has racks to show besides the partitions
        ui = dataclasses.replace(config.ui, rack_pattern=DEMO_RACK_PATTERN)
        config = dataclasses.replace(config, ui=ui)
    settings = tui_app.AppSettings(
        config=config,
        cluster_name=DEMO_CLUSTER_NAME,
        sources=[demo_source(config, real_clock)],
        clock=real_clock,
        is_demo=True,
        theme=theme,
        read_only=read_only,
        metric=metric,
    )
    return tui_app.GputopApp(settings)
