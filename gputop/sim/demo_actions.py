"""``scontrol update`` for the simulated cluster, so drain and resume work in ``--demo`` as on a real one.

`SimulatedScontrol` is a `Runner` (`gputop.sources.slurm_runner`) that takes the argv gputop would give the
real scontrol, parses it the way scontrol does, applies it to the simulator and answers with scontrol's
exit status and messages, copied from Slurm 22.05:

- words are ``Tag=value``; tags are case-insensitive and may be shortened (``NodeName`` to 3 letters,
  ``State`` and ``Reason`` to 1); a later tag overrides an earlier one; states are case-insensitive and may
  be shortened to 3 letters (``drain``, ``Res``);
- ``Reason=`` loses one ``"`` at its start and one at its end (each on its own), nothing else;
- a name that is not a node fails the command (exit 1), yet the named nodes that exist are changed;
  resuming a node that is not drained (nor down) fails the same way, the drained ones resumed all the
  same; with both, the unknown name is the one reported;
- drain, resume and an already drained node drained again (new reason) print nothing and exit 0.

Only ``scontrol update NodeName=... State=DRAIN Reason=...`` and ``State=RESUME`` are simulated; other
valid scontrol commands, tags and states exit 1 saying so, and invalid ones get scontrol's own message.

`SimulatedNodeRunner` is the `Runner` of one simulated node, for MIG: it runs the nvidia-smi command lines
gputop's planner gives (``sudo -n`` prefix and all) on the simulator's MIG state, with nvidia-smi's exit
statuses and lines (`SimulatedCluster.nvidia_smi`); any other program is refused.
"""

from __future__ import annotations

import getpass
import math
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final

from gputop.core.nodeset import expand_nodeset
from gputop.sources.commands import is_nvidia_smi, strip_sudo
from gputop.sources.slurm_runner import Completed, RunFailed

if TYPE_CHECKING:
    from gputop.sim.simulator import SimulatedCluster

WHERE: Final = "demo"

# Slurm 22.05's words, byte for byte.
INVALID_NODE_NAME: Final = "slurm_update error: Invalid node name specified\n"
INVALID_NODE_STATE: Final = "slurm_update error: Invalid node state specified\n"
REASON_REQUIRED: Final = "You must specify a reason when DOWNING or DRAINING a node. Request denied\n"
NO_CHANGES: Final = "No changes specified\n"
TOO_FEW_ARGUMENTS: Final = "too few arguments for update keyword\n"
NO_ENTITY: Final = (
    "No valid entity in update command\n"
    'Input line must include "NodeName", "PartitionName", "Reservation", "JobId", or "SlurmctldDebug"\n'
)


def _invalid_word(word: str) -> str:
    return f"scontrol: error: Invalid input: {word}  Request aborted\nslurm_update error: No error\n"


def _invalid_state(word: str) -> str:
    return (
        f"Invalid input: {word}\nRequest aborted\n"
        "Valid states are: NoResp DRAIN FAIL FUTURE RESUME POWER_DOWN POWER_UP UNDRAIN\n"
        "Not all states are valid given a node's prior state\n"
    )


def _unsupported(word: str) -> str:
    return f"Update of this parameter is not supported: {word}\nRequest aborted\n"


def _not_simulated(what: str) -> str:
    return (
        f"scontrol (gputop demo): {what} is not simulated; only "
        "scontrol update NodeName=... State=DRAIN Reason=... and State=RESUME are\n"
    )


# States scontrol takes that the demo does not act on, and the tags of a node update besides NodeName,
# State and Reason: answered as not simulated rather than as invalid, which they are not.
_OTHER_STATES: Final = (
    "NORESP",
    "FAIL",
    "FUTURE",
    "POWER_DOWN",
    "POWER_DOWN_ASAP",
    "POWER_DOWN_FORCE",
    "POWER_UP",
    "UNDRAIN",
    "DOWN",
    "IDLE",
    "CANCEL_REBOOT",
)
_REASON_STATES: Final = ("DOWN", "FAIL")  # like DRAIN, refused without a reason
_OTHER_NODE_TAGS: Final = frozenset(
    tag.lower()
    for tag in (
        "ActiveFeatures",
        "AvailableFeatures",
        "Features",
        "Comment",
        "CpuBind",
        "Extra",
        "Gres",
        "InstanceId",
        "InstanceType",
        "NodeAddr",
        "NodeHostname",
        "ResumeAfter",
        "Weight",
    )
)
_OTHER_ENTITIES: Final = frozenset(
    tag.lower()
    for tag in (
        "PartitionName",
        "Reservation",
        "ReservationName",
        "JobId",
        "JobName",
        "StepId",
        "FrontendName",
    )
)


def _abbreviates(word: str, full: str, least: int) -> bool:
    """scontrol's match: ``word`` is ``full`` or a start of it at least ``least`` long, in any case."""
    return least <= len(word) <= len(full) and full.lower().startswith(word.lower())


def _strip_quotes(value: str) -> str:
    """What scontrol does to ``Reason=``: one ``"`` off the start, then one off the end."""
    value = value.removeprefix('"')
    return value.removesuffix('"')


def _local_user() -> str:
    """Who Slurm would record as the reason's user: the account gputop runs as."""
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name and no passwd entry (a bare container)
        return str(os.getuid())


class SimulatedScontrol:
    """A `Runner` whose only command is ``scontrol update`` of the simulated cluster's nodes.

    ``cluster`` returns the simulator (``lambda: source.cluster``, as it is built when the source starts).
    ``user`` is recorded as the reason's user (default: the account gputop runs as, as Slurm would);
    the reason's time is the simulator's current time, in whole seconds as Slurm keeps it.
    """

    where = WHERE

    def __init__(self, cluster: Callable[[], SimulatedCluster], *, user: str | None = None) -> None:
        self._cluster = cluster
        self._user = user

    async def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> Completed:
        args = tuple(argv)
        if not args or os.path.basename(args[0]) != "scontrol":
            shown = args[0] if args else "an empty command"
            raise RunFailed(
                f"{shown} is not simulated in the demo: only scontrol update runs there", retry=False
            )
        try:
            cluster = self._cluster()
        except RuntimeError as err:  # the source has not built it yet
            raise RunFailed(f"the demo cluster is not ready: {err}") from None
        status, stderr = self._scontrol(cluster, args[1:])
        return Completed(args, status, "", stderr)

    def refresh(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def answer(self, words: Sequence[str]) -> tuple[int, str]:
        """(exit status, stderr) of ``scontrol`` with these arguments (the fake fleet's login node)."""
        return self._scontrol(self._cluster(), words)

    # ------------------------------------------------------------------ scontrol

    def _scontrol(self, cluster: SimulatedCluster, words: Sequence[str]) -> tuple[int, str]:
        if not words:
            return 1, _not_simulated("interactive scontrol")
        keyword = words[0]
        if not _abbreviates(keyword, "update", 1):
            return 1, _not_simulated(f"scontrol {keyword}")
        rest = words[1:]
        if not rest:
            return 1, TOO_FEW_ARGUMENTS
        tags = [word.partition("=")[0] for word in rest if "=" in word]
        if not any(_abbreviates(tag, "NodeName", 3) for tag in tags):
            other = next((tag for tag in tags if tag.lower() in _OTHER_ENTITIES), None)
            return 1, (_not_simulated(f"scontrol update {other}=...") if other else NO_ENTITY)
        return self._update_node(cluster, rest)

    def _update_node(self, cluster: SimulatedCluster, words: Sequence[str]) -> tuple[int, str]:
        names: str | None = None
        state: str | None = None
        reason: str | None = None
        for word in words:
            tag, equals, value = word.partition("=")
            if not equals:
                return 1, _invalid_word(word)
            if _abbreviates(tag, "NodeName", 3):
                names = value
            elif _abbreviates(tag, "Reason", 1):
                reason = _strip_quotes(value)
            elif _abbreviates(tag, "State", 1):
                state = _state(value)
                if state is None:
                    return 1, _invalid_state(word)
            elif tag.lower() in _OTHER_NODE_TAGS:
                return 1, _not_simulated(f"scontrol update {tag}=")
            else:
                return 1, _unsupported(word)
        if state in ("DRAIN", *_REASON_STATES) and not reason:
            return 1, REASON_REQUIRED
        if state is None:
            return 1, (_not_simulated("a reason without State=DRAIN") if reason is not None else NO_CHANGES)
        if state not in ("DRAIN", "RESUME"):
            return 1, _not_simulated(f"State={state}")
        return self._apply(cluster, names or "", state, reason or "")

    def _apply(self, cluster: SimulatedCluster, names: str, state: str, reason: str) -> tuple[int, str]:
        """slurmctld's side: every named node that exists is changed, whatever else fails."""
        if names.upper() == "ALL":
            wanted: tuple[str, ...] = cluster.node_names
        else:
            try:
                wanted = expand_nodeset(names)
            except ValueError:
                return 1, INVALID_NODE_NAME
        known = set(cluster.node_names)
        nodes = [name for name in wanted if name in known]
        unknown = len(nodes) < len(wanted)
        now_s = float(math.floor(cluster.now_s))  # Slurm keeps whole seconds
        refused: tuple[str, ...] = ()
        if state == "DRAIN":
            cluster.drain(nodes, reason, self._user if self._user is not None else _local_user(), now_s)
        else:
            refused = cluster.resume(nodes, now_s)
        if unknown:
            return 1, INVALID_NODE_NAME
        if refused:
            return 1, INVALID_NODE_STATE
        return 0, ""


def _state(value: str) -> str | None:
    """The state ``value`` names (scontrol matches 3 letters or more, in any case), or None: not one."""
    for state in ("DRAIN", "RESUME", *_OTHER_STATES):
        if _abbreviates(value, state, 3):
            return state
    return None


class SimulatedNodeRunner:
    """A `Runner` that runs nvidia-smi on ``node`` of the simulated cluster.

    ``cluster`` returns the simulator (``lambda: source.cluster``, as it is built when the source starts).
    The demo's silent node does not answer, as over SSH it would not.
    """

    where = WHERE

    def __init__(self, cluster: Callable[[], SimulatedCluster], node: str) -> None:
        self._cluster = cluster
        self.node = node

    async def run(self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float) -> Completed:
        args = tuple(argv)
        program = strip_sudo(args)
        if not is_nvidia_smi(program):
            shown = program[0] if program else "an empty command"
            raise RunFailed(
                f"{shown} is not simulated in the demo: only nvidia-smi runs on its nodes", retry=False
            )
        try:
            cluster = self._cluster()
        except RuntimeError as err:  # the source has not built it yet
            raise RunFailed(f"the demo cluster is not ready: {err}") from None
        if any(inc.kind == "unresponsive" and inc.node == self.node for inc in cluster.incidents):
            raise RunFailed(f"{self.node} does not answer (the demo's silent node)")
        try:
            status, stdout, stderr = cluster.nvidia_smi(self.node, args)
        except ValueError as unknown:
            raise RunFailed(str(unknown), retry=False) from None
        return Completed(args, status, stdout, stderr)

    def refresh(self) -> None:
        return None

    async def close(self) -> None:
        return None
