"""What ``nvidia-smi`` does with MIG command lines on simulated GPUs: the listings gputop reads
(``mig -lgip``, ``-lgipp``, ``-lgi``, ``-lci``, ``-L``) and the changes its planner sends (``mig -cgi
ID[:START],... [-C]``, ``mig -dci``, ``mig -dgi``, with ``-i``, ``-gi``, ``-ci``; ``-i N -mig 0|1``), with
nvidia-smi's lines and exit statuses. Long option names and ``--option=value`` are taken too.

The lines are those of real runs: NVIDIA's MIG User Guide and the real sessions named in
``gputop.sim.mig_tables`` (creating, destroying, "Insufficient Resources"), the RTX PRO 6000 hands-on
article of tests/fixtures/PROVENANCE.md (``-dgi`` while compute instances remain: "In use by another
client"), gpu-operator#118 and the MIG guide (the mode change a busy GPU leaves pending). Cases without a
capture use the nearest real line, each saying so. nvidia-smi prints them on standard output, as every
capture shows them inline.

Exit statuses are those nvidia-smi(1) documents: 2 a bad argument, 6 nothing found, 255 any other error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from gputop.sim.mig_state import (
    IN_USE,
    INSUFFICIENT_RESOURCES,
    INVALID_ARGUMENT,
    NOT_FOUND,
    GpuInstance,
    GpuMig,
)
from gputop.sim.mig_text import (
    NO_COMPUTE_INSTANCES,
    NO_GPU_INSTANCES,
    NO_MIG_DEVICES,
    format_gpu_list,
    format_lci,
    format_lgi,
    format_lgip,
    format_lgipp,
)

OK: Final = 0
BAD_ARGUMENT_STATUS: Final = 2
NOT_FOUND_STATUS: Final = 6
OTHER_ERROR_STATUS: Final = 255
_STATUS: Final = {
    INVALID_ARGUMENT: BAD_ARGUMENT_STATUS,
    NOT_FOUND: NOT_FOUND_STATUS,
    INSUFFICIENT_RESOURCES: OTHER_ERROR_STATUS,
    IN_USE: OTHER_ERROR_STATUS,
}

NO_DEVICES: Final = "No devices were found\n"  # an -i that names no GPU
INVALID_COMBINATION: Final = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
ALL_DONE: Final = "All done.\n"

# Option word -> (key, takes a value).
_OPTIONS: Final = {
    "-i": ("i", True),
    "--id": ("i", True),
    "-L": ("L", False),
    "--list-gpus": ("L", False),
    "-mig": ("mig", True),
    "--multi-instance-gpu": ("mig", True),
    "-gi": ("gi", True),
    "--gpu-instance-id": ("gi", True),
    "-ci": ("ci", True),
    "--compute-instance-id": ("ci", True),
    "-C": ("C", False),
    "--default-compute-instance": ("C", False),
    "-lgip": ("lgip", False),
    "--list-gpu-instance-profiles": ("lgip", False),
    "-lgipp": ("lgipp", False),
    "--list-gpu-instance-possible-placements": ("lgipp", False),
    "-lgi": ("lgi", False),
    "--list-gpu-instances": ("lgi", False),
    "-lci": ("lci", False),
    "--list-compute-instances": ("lci", False),
    "-cgi": ("cgi", True),
    "--create-gpu-instance": ("cgi", True),
    "-dgi": ("dgi", False),
    "--destroy-gpu-instance": ("dgi", False),
    "-dci": ("dci", False),
    "--destroy-compute-instance": ("dci", False),
}
_TOP_KEYS: Final = frozenset(("i", "L", "mig"))
_TOP_ACTIONS: Final = ("L", "mig")
_MIG_KEYS: Final = frozenset(("i", "gi", "ci", "C", "lgip", "lgipp", "lgi", "lci", "cgi", "dgi", "dci"))
_MIG_ACTIONS: Final = ("lgip", "lgipp", "lgi", "lci", "cgi", "dgi", "dci")


@dataclass(frozen=True, slots=True)
class SmiGpu:
    """One GPU as nvidia-smi sees it."""

    index: int
    name: str
    uuid: str
    pci_bus_id: str
    busy: bool  # a process runs on it: its compute instances and its mode cannot change
    mig: GpuMig


@dataclass(frozen=True, slots=True)
class SmiRun:
    exit_status: int
    stdout: str
    stderr: str = ""
    changed: bool = False  # a GPU's MIG mode or instances changed


def simulates(args: Sequence[str]) -> bool:
    """Whether ``args`` (the words after ``nvidia-smi``) are a command line `run_nvidia_smi` plays: the
    ``mig`` subcommand, ``-mig``, ``-L``."""
    if list(args[:1]) == ["mig"]:
        return True
    options = (_OPTIONS.get(word.partition("=")[0]) for word in args)
    return any(option is not None and option[0] in _TOP_ACTIONS for option in options)


def _not_simulated(words: Sequence[str]) -> SmiRun:
    shown = " ".join(words) or "nvidia-smi without arguments"
    message = (
        f"nvidia-smi (gputop simulator): {shown!r} is not simulated; only -L, -i N -mig 0|1 and mig "
        "-lgip, -lgipp, -lgi, -lci, -cgi, -dgi, -dci are\n"
    )
    return SmiRun(BAD_ARGUMENT_STATUS, "", message)


def run_nvidia_smi(args: Sequence[str], gpus: Sequence[SmiGpu]) -> SmiRun:
    """nvidia-smi with ``args`` (the words after ``nvidia-smi``) on a node whose GPUs are ``gpus``."""
    subcommand = bool(args) and args[0] == "mig"
    words = args[1:] if subcommand else args
    keys, actions = (_MIG_KEYS, _MIG_ACTIONS) if subcommand else (_TOP_KEYS, _TOP_ACTIONS)
    values: dict[str, str] = {}
    at = 0
    while at < len(words):
        word, equals, inline = words[at].partition("=")
        option = _OPTIONS.get(word)
        if option is None or option[0] not in keys:
            return _not_simulated(args)
        key, takes_value = option
        if key in values or (bool(equals) and not takes_value):
            return SmiRun(BAD_ARGUMENT_STATUS, INVALID_COMBINATION)
        if takes_value and not equals:
            at += 1
            if at == len(words):
                return SmiRun(BAD_ARGUMENT_STATUS, INVALID_COMBINATION)
            inline = words[at]
        values[key] = inline
        at += 1
    chosen = [action for action in actions if action in values]
    if len(chosen) != 1:
        return SmiRun(BAD_ARGUMENT_STATUS, INVALID_COMBINATION) if chosen or words else _not_simulated(args)
    targets = _select(values.get("i"), gpus)
    if targets is None:
        return SmiRun(NOT_FOUND_STATUS, NO_DEVICES)
    action = chosen[0]
    if action == "L":
        listed = [(g.index, g.name, g.uuid) for g in targets]
        devices = {g.index: g.mig.devices() for g in targets if g.mig.enabled}
        return SmiRun(OK, format_gpu_list(listed, devices))
    if action == "mig":
        return _set_mode(values["mig"], targets)
    mig_gpus = [g for g in targets if g.mig.enabled]
    if not mig_gpus:
        # nvidia-smi mig works on MIG-enabled GPUs only; no capture of a change asked of a GPU without MIG
        # was found, so it answers as the listings do there.
        return SmiRun(NOT_FOUND_STATUS, NO_MIG_DEVICES)
    ids = {key: _ids(values[key]) for key in ("gi", "ci") if key in values}
    if any(found is None for found in ids.values()):
        return SmiRun(BAD_ARGUMENT_STATUS, INVALID_COMBINATION)
    gi_ids, ci_ids = ids.get("gi"), ids.get("ci")
    if action == "cgi":
        return _create(values["cgi"], "C" in values, mig_gpus)
    if action == "dci":
        return _destroy_compute(mig_gpus, gi_ids, ci_ids)
    if action == "dgi":
        return _destroy_gpu_instances(mig_gpus, gi_ids)
    return _listing(action, mig_gpus, gi_ids, ci_ids)


def _select(wanted: str | None, gpus: Sequence[SmiGpu]) -> list[SmiGpu] | None:
    """The GPUs ``-i`` names (indices, UUIDs or PCI bus ids, comma separated), all without it; None when
    one names no GPU."""
    if wanted is None:
        return list(gpus)
    chosen: list[SmiGpu] = []
    for word in wanted.split(","):
        gpu = next((g for g in gpus if word.strip() in (str(g.index), g.uuid, g.pci_bus_id)), None)
        if gpu is None:
            return None
        chosen.append(gpu)
    return chosen


def _ids(text: str) -> list[int] | None:
    words = [w.strip() for w in text.split(",")]
    return [int(w) for w in words] if all(w.isdigit() for w in words) else None


def _listing(
    action: str, gpus: Sequence[SmiGpu], gi_ids: list[int] | None, ci_ids: list[int] | None
) -> SmiRun:
    if action == "lgip":
        return SmiRun(OK, format_lgip([row for g in gpus for row in g.mig.profile_rows()]))
    if action == "lgipp":
        return SmiRun(OK, format_lgipp([row for g in gpus for row in g.mig.placement_rows()]))
    if action == "lgi":
        rows = [r for g in gpus for r in g.mig.gpu_instance_rows() if gi_ids is None or r.gi_id in gi_ids]
        return SmiRun(OK, format_lgi(rows)) if rows else SmiRun(NOT_FOUND_STATUS, NO_GPU_INSTANCES)
    rows = [
        r
        for g in gpus
        for r in g.mig.compute_instance_rows()
        if (gi_ids is None or r.gi_id in gi_ids) and (ci_ids is None or r.ci_id in ci_ids)
    ]
    return SmiRun(OK, format_lci(rows)) if rows else SmiRun(NOT_FOUND_STATUS, NO_COMPUTE_INSTANCES)


class _Lines:
    """Output built line by line; the first failure ends the command, as nvidia-smi stops there."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.changed = False

    def ok(self, line: str) -> None:
        self.lines.append(line + "\n")
        self.changed = True

    def failed(self, lines: Sequence[str], error: str) -> SmiRun:
        self.lines.extend(line + "\n" for line in lines)
        return SmiRun(_STATUS[error], "".join(self.lines), changed=self.changed)

    def done(self) -> SmiRun:
        return SmiRun(OK, "".join(self.lines), changed=self.changed)


def _create(spec: str, with_compute: bool, gpus: Sequence[SmiGpu]) -> SmiRun:
    """``-cgi 9,19:3,3g.40gb [-C]`` on each GPU in turn (MIG guide: "Successfully created GPU instance ID  2
    on GPU  0 using profile MIG 3g.20gb (ID  9)", and on a full GPU "Unable to create a GPU instance on GPU
    0 using profile 9: Insufficient Resources" / "Failed to create GPU instances: Insufficient Resources")."""
    out = _Lines()
    for gpu in gpus:
        for word in spec.split(","):
            name, colon, start = word.partition(":")
            profile = gpu.mig.profile(name)
            created: GpuInstance | str
            if profile is None or (colon and not start.isdigit()):
                # A profile the GPU does not offer: "Unable to create a GPU instance on GPU  0 using profile
                # 7g.40gb: Invalid Argument" in a real capture. A malformed start is taken the same way.
                created = INVALID_ARGUMENT
            else:
                created = gpu.mig.create_gpu_instance(profile, int(start) if colon else None)
            if isinstance(created, str):
                where = f"GPU {gpu.index:2d} using profile {name}"
                return out.failed(
                    (
                        f"Unable to create a GPU instance on {where}: {created}",
                        f"Failed to create GPU instances: {created}",
                    ),
                    created,
                )
            p = created.profile
            out.ok(
                f"Successfully created GPU instance ID {created.gi_id:2d} on GPU {gpu.index:2d} "
                f"using profile MIG {p.name} (ID {p.profile_id:2d})"
            )
            if with_compute:
                ci = gpu.mig.create_compute_instance(created.gi_id)
                if isinstance(ci, str):
                    return out.failed((f"Failed to create compute instances: {ci}",), ci)
                out.ok(
                    f"Successfully created compute instance ID {ci.ci_id:2d} on GPU {gpu.index:2d} "
                    f"GPU instance ID {created.gi_id:2d} using profile MIG {p.name} (ID {ci.profile_id:2d})"
                )
    return out.done()


def _chosen_instances(gpu: SmiGpu, gi_ids: list[int] | None) -> list[int]:
    return sorted(gpu.mig.instances) if gi_ids is None else gi_ids


def _destroy_compute(gpus: Sequence[SmiGpu], gi_ids: list[int] | None, ci_ids: list[int] | None) -> SmiRun:
    """``-dci [-gi X,...] [-ci a,...]`` (MIG guide: "Successfully destroyed compute instance ID  0 from GPU  0
    GPU instance ID  1"; DCGM#95: "Unable to destroy compute instance ID  0 from GPU  0 GPU instance ID  3:
    In use by another client" / "Failed to destroy compute instances: In use by another client")."""
    out = _Lines()
    for gpu in gpus:
        for gi_id in _chosen_instances(gpu, gi_ids):
            gi = gpu.mig.instances.get(gi_id)
            if gi is None:
                # No capture of an unknown -gi here: NVML's "Not Found" in nvidia-smi's failure line.
                return out.failed((f"Failed to destroy compute instances: {NOT_FOUND}",), NOT_FOUND)
            for ci_id in sorted(ci.ci_id for ci in gi.compute) if ci_ids is None else ci_ids:
                where = f"compute instance ID {ci_id:2d} from GPU {gpu.index:2d} GPU instance ID {gi_id:2d}"
                if all(ci.ci_id != ci_id for ci in gi.compute):
                    error: str | None = NOT_FOUND
                else:
                    error = IN_USE if gpu.busy else gpu.mig.destroy_compute_instance(gi_id, ci_id)
                if error is not None:
                    failure = f"Failed to destroy compute instances: {error}"
                    return out.failed((f"Unable to destroy {where}: {error}", failure), error)
                out.ok(f"Successfully destroyed {where}")
    # Nothing there to destroy: said as -lci says it.
    return out.done() if out.lines else SmiRun(NOT_FOUND_STATUS, NO_COMPUTE_INSTANCES)


def _destroy_gpu_instances(gpus: Sequence[SmiGpu], gi_ids: list[int] | None) -> SmiRun:
    """``-dgi [-gi X,...]`` (MIG guide: "Successfully destroyed GPU instance ID  1 from GPU  0"; the RTX PRO
    6000 article, with a compute instance left: "Unable to destroy GPU instance ID  3 from GPU  0: In use by
    another client" / "Failed to destroy GPU instances: In use by another client")."""
    out = _Lines()
    for gpu in gpus:
        for gi_id in _chosen_instances(gpu, gi_ids):
            where = f"GPU instance ID {gi_id:2d} from GPU {gpu.index:2d}"
            error = gpu.mig.destroy_gpu_instance(gi_id)
            if error is not None:
                failure = f"Failed to destroy GPU instances: {error}"
                return out.failed((f"Unable to destroy {where}: {error}", failure), error)
            out.ok(f"Successfully destroyed {where}")
    return out.done() if out.lines else SmiRun(NOT_FOUND_STATUS, NO_GPU_INSTANCES)


def _pending(state: str, bus: str) -> str:
    """What nvidia-smi prints when the GPU is busy and the mode change waits for a reset
    (gpu-operator#118)."""
    return (
        f"Warning: MIG mode is in pending {state} state for GPU {bus}:{IN_USE}\n"
        f"{bus} is currently being used by one or more other processes (e.g. CUDA application or a "
        "monitoring application such as another instance of nvidia-smi). Please first kill all processes "
        "using the device and retry the command or reboot the system to make MIG mode effective.\n"
    )


def _set_mode(value: str, gpus: Sequence[SmiGpu]) -> SmiRun:
    """``-i N -mig 1|0`` (MIG guide: "Enabled MIG Mode for GPU 00000000:36:00.0" then "All done.").

    A busy GPU, or one that still holds GPU instances, keeps its mode: nvidia-smi then warns that the change
    is pending until the GPU is reset, which the simulator does not play, and which a real -mig run leaves
    to the caller to notice; the simulator exits 255 so the step reads as not done."""
    if value not in ("0", "1"):
        return SmiRun(BAD_ARGUMENT_STATUS, INVALID_COMBINATION)
    on = value == "1"
    lines: list[str] = []
    changed = pending = False
    for gpu in gpus:
        bus = gpu.pci_bus_id
        if gpu.mig.enabled != on and (gpu.busy or gpu.mig.instances):
            lines.append(_pending("enable" if on else "disable", bus))
            pending = True
            continue
        changed = changed or gpu.mig.enabled != on
        gpu.mig.enabled = on
        lines.append(f"{'Enabled' if on else 'Disabled'} MIG Mode for GPU {bus}\n")
    lines.append(ALL_DONE)
    return SmiRun(OTHER_ERROR_STATUS if pending else OK, "".join(lines), changed=changed)
