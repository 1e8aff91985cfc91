"""What gputop runs on a node, as data: a site can override any entry in its config.

The metrics stream is one long-lived `nvidia-smi --query-gpu ... -lms` per node, read line by line; the
slow facts are separate commands on the same connection, each on its own cadence and with a timeout (run
in rounds by the node's fact shell: gputop.sources.fact_round).
Bare `nvidia-smi` is never run: on NVSwitch systems it can hang for 15-20 s.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from gputop.core.config import CommandOverride
from gputop.core.parsers.compute_apps import COMPUTE_APPS_FIELDS
from gputop.core.parsers.query_gpu import QUERY_GPU_FIELDS

__all__ = [
    "COMPUTE_APPS_FIELDS",
    "QUERY_GPU_FIELDS",
    "CommandSpec",
    "apply_overrides",
    "default_commands",
    "metrics_stream",
]


MEM_MOVE_MIB = 128.0


@dataclass(frozen=True, slots=True)
class CommandSpec:
    name: str
    argv: tuple[str, ...]
    parser: str  # a kind known to gputop.core.parsers (the same names `gputop parse` takes)
    interval_s: float  # how often it runs; for a stream, how often it prints
    timeout_s: float  # for a stream: how long without a line before the stream counts as dead
    stream: bool = False
    # When set, a run is skipped while no GPU's memory use has moved by MEM_MOVE_MIB since the last run,
    # for up to this long: every process holds GPU memory (a CUDA context alone is some 300 MiB), so the
    # process list cannot change without memory moving.
    quiet_every_s: float | None = None

    @property
    def command_line(self) -> str:
        """The argv as one remote command line, every word quoted (SSH runs a string in a shell)."""
        return shlex.join(self.argv)


# journalctl -g (a PCRE2 pattern, case-sensitive as it has capitals): the lines gputop.core.parsers.xid reads
XID_PATTERN: Final = "NVRM: (Xid|The NVIDIA GPU|.*fallen off the bus)"


def metrics_stream(interval_s: float) -> CommandSpec:
    interval_ms = max(100, round(interval_s * 1000))
    return CommandSpec(
        name="metrics",
        argv=(
            "nvidia-smi",
            f"--query-gpu={','.join(QUERY_GPU_FIELDS)}",
            "--format=csv,noheader,nounits",
            "-lms",
            str(interval_ms),
        ),
        parser="query-gpu",
        interval_s=interval_ms / 1000,
        timeout_s=max(5.0, 5 * interval_ms / 1000),
        stream=True,
    )


def default_commands(interval_s: float = 1.0, slow_interval_s: float = 60.0) -> dict[str, CommandSpec]:
    """Every command the SSH source runs, by name."""
    slow = slow_interval_s

    def once(
        name: str, argv: tuple[str, ...], parser: str, every_s: float, timeout_s: float = 10.0
    ) -> CommandSpec:
        return CommandSpec(name, argv, parser, every_s, timeout_s)

    commands = [
        metrics_stream(interval_s),
        once(
            "processes",
            (
                "nvidia-smi",
                f"--query-compute-apps={','.join(COMPUTE_APPS_FIELDS)}",
                "--format=csv,noheader,nounits",
            ),
            "compute-apps",
            10.0,
        ),
        once("gpu_list", ("nvidia-smi", "-L"), "nvidia-smi-L", 5 * slow),
        once("topology", ("nvidia-smi", "topo", "-m"), "topo", 5 * slow, 20.0),
        once("nvlink", ("nvidia-smi", "nvlink", "-s"), "nvlink", slow, 20.0),
        # Counters whose rate of change is the signal (PCIe replays, single-bit ECC, NVLink CRC/replay):
        # read every slow round, the rate measured between two reads (gputop.core.counter_rates)
        once("nvlink_errors", ("nvidia-smi", "nvlink", "-e"), "nvlink-errors", slow, 20.0),
        once(
            "counters",
            ("nvidia-smi", "-q", "-d", "PCIE,ECC,TEMPERATURE,PAGE_RETIREMENT,ROW_REMAPPER"),
            "nvidia-smi-q",
            slow,
            20.0,
        ),
        once("mig_gip", ("nvidia-smi", "mig", "-lgip"), "mig-lgip", 5 * slow),
        once("mig_gipp", ("nvidia-smi", "mig", "-lgipp"), "mig-lgipp", 5 * slow),
        once("mig_gi", ("nvidia-smi", "mig", "-lgi"), "mig-lgi", slow),
        once("mig_ci", ("nvidia-smi", "mig", "-lci"), "mig-lci", slow),
        once("ibstat", ("ibstat",), "ibstat", 30.0),
        once(
            "xid",
            # Xid lines, and the driver's fallen-off-the-bus message, which can come without an Xid
            ("journalctl", "-k", "--no-pager", "-o", "short-iso", "--since", "-1h", "-g", XID_PATTERN),
            "xid",
            30.0,
        ),
    ]
    table = {c.name: c for c in commands}
    processes = table["processes"]
    table["processes"] = dataclasses.replace(processes, quiet_every_s=6 * processes.interval_s)
    return table


def apply_overrides(
    commands: dict[str, CommandSpec], overrides: Iterable[CommandOverride]
) -> dict[str, CommandSpec]:
    """The command table with a site's changes (config ``clusters[].commands``) applied."""
    out = dict(commands)
    for change in overrides:
        spec = out.get(change.name)
        if spec is None:
            continue
        if not change.enabled:
            del out[change.name]
            continue
        out[change.name] = dataclasses.replace(
            spec,
            argv=change.argv if change.argv is not None else spec.argv,
            interval_s=change.interval_s if change.interval_s is not None else spec.interval_s,
            timeout_s=change.timeout_s if change.timeout_s is not None else spec.timeout_s,
        )
    return out


# Argv words: how a command line that runs nvidia-smi is told apart, behind `sudo` and its options (a site's
# command override may say `sudo -n nvidia-smi ...`). Real SSH and the simulators both ask.
NVIDIA_SMI = "nvidia-smi"
_SUDO_VALUE_OPTIONS = frozenset(
    ("-u", "-g", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "--user", "--group", "--prompt", "--chdir")
)


def strip_sudo(argv: Sequence[str]) -> tuple[str, ...]:
    """``argv`` without a leading ``sudo`` and its options (``sudo -n``, ``sudo -u root --``)."""
    words = tuple(argv)
    if not words or os.path.basename(words[0]) != "sudo":
        return words
    at = 1
    while at < len(words) and words[at].startswith("-"):
        if words[at] == "--":
            return words[at + 1 :]
        at += 2 if words[at] in _SUDO_VALUE_OPTIONS else 1
    return words[at:]


def is_nvidia_smi(argv: Sequence[str]) -> bool:
    return bool(argv) and os.path.basename(argv[0]) == NVIDIA_SMI
