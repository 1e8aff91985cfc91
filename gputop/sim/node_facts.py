"""A simulated node's slow facts: InfiniBand ports, the Xid log, topology and NVLink, and MIG state with
its nvidia-smi listings, kept as the SSH source would hold them. Functions of the `SimulatedCluster`
whose state they share (declared on the class).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from gputop.core.fact_table import node_facts
from gputop.core.facts import NodeFacts
from gputop.core.models import (
    GpuProcess,
    GpuSample,
    IbPort,
    XidEvent,
)
from gputop.core.parsers.gpu_list import parse_gpu_list
from gputop.core.parsers.mig import parse_lci, parse_lgi, parse_lgip, parse_lgipp
from gputop.core.parsers.topo import Topology
from gputop.sim.hgx_board import board_nvlinks, board_topology
from gputop.sim.incidents import incident_gpu
from gputop.sim.mig_commands import SmiGpu, SmiRun, run_nvidia_smi
from gputop.sim.mig_state import GpuMig
from gputop.sim.mig_tables import MIG_TABLES
from gputop.sim.mig_text import NO_MIG_DEVICES
from gputop.sim.scheduler import rebucket
from gputop.sim.workload import random_stream

if TYPE_CHECKING:
    from gputop.sim.simulator import SimulatedCluster


MIG_INSTANCE_USE: Final = (0.82, 0.64, 0.0, 0.91, 0.35, 0.0, 0.77)  # share of each 1g slice in use

# The drained node's GPU with MIG on and no instances yet: one the demo can repartition at once.
DRAINED_MIG_GPU: Final = 0

# The MIG listings a node's facts hold, by the command names of gputop.sources.commands, with the
# nvidia-smi words that print them and their parsers: what the SSH source would read and make of them.
MIG_LISTINGS: Final = (
    ("mig_gip", ("mig", "-lgip"), parse_lgip),
    ("mig_gipp", ("mig", "-lgipp"), parse_lgipp),
    ("mig_gi", ("mig", "-lgi"), parse_lgi),
    ("mig_ci", ("mig", "-lci"), parse_lci),
)

# On a node with a MIG GPU, also `nvidia-smi -L`: the UUIDs of its MIG devices.
GPU_LIST: Final = ("gpu_list", ("-L",), parse_gpu_list)


def setup_static_node_data(sim: SimulatedCluster) -> None:
    model = sim.model
    up = tuple(IbPort(f"mlx5_{k}", 1, "Active", "LinkUp", model.ib_rate_gbps) for k in range(8))
    sim._ib = [up] * sim._n
    sim._xids = [()] * sim._n
    sim._fixups = {}
    sim._missing_gpu = {}
    # What a MIG GPU's sample shows beyond "no utilization", by (node, GPU index).
    sim._mig_sample_fields = {}
    at = sim._incident_at
    t0 = sim.origin_s  # the incidents' Xids are timed from it
    if "ib_down" in at:
        ports = list(up)
        ports[3] = IbPort("mlx5_3", 1, "Down", "Disabled", None)
        sim._ib[at["ib_down"]] = tuple(ports)
    if "ib_slow" in at:
        ports = list(up)
        ports[3] = IbPort("mlx5_3", 1, "Active", "LinkUp", model.ib_rate_gbps / 2)  # trained a step lower
        sim._ib[at["ib_slow"]] = tuple(ports)
    if "ecc_xid" in at:
        k = incident_gpu(sim, "ecc_xid")
        bus = sim._pci[k]
        kernel_bus = bus[4:-2].lower()  # "00000000:9A:00.0" -> "0000:9a:00", as NVRM prints it
        sim._xids[at["ecc_xid"]] = (
            XidEvent(
                t0 - 372.0,
                48,
                bus,
                k,
                f"NVRM: Xid (PCI:{kernel_bus}): 48, pid=2211873, name=python, An uncorrectable double "
                "bit error (DBE) has been detected on GPU in the framebuffer at partition 6, "
                "subpartition 0.",
            ),
            XidEvent(
                t0 - 251.0,
                79,
                bus,
                k,
                f"NVRM: Xid (PCI:{kernel_bus}): 79, pid='<unknown>', name=<unknown>, "
                "GPU has fallen off the bus.",
            ),
        )
    _xid_class_events(sim, t0)
    if "mig" in at:
        node = at["mig"]
        k = incident_gpu(sim, "mig")
        slice_mib = model.mig_slice_mib
        used = [int(slice_mib * share) for share in MIG_INSTANCE_USE]
        g = node * sim.gpus_per_node + k
        mig_mem = float(sum(used) + sim._idle_mem[g])
        job = sim._gjob[g]
        procs = tuple(
            GpuProcess(job.pid_base + j, "python", float(mib), job.user)
            for j, mib in enumerate(used)
            if mib > 0
        )
        sim._mig_sample_fields[(node, k)] = {"mem_used_mib": mig_mem, "processes": procs}
    if "missing_gpu" in at:
        sim._missing_gpu[at["missing_gpu"]] = incident_gpu(sim, "missing_gpu")
    sim._facts = interconnect_facts(sim)
    # by node: the typed record a sample carries, with the facts it was made from
    sim._node_facts = [None] * sim._n
    setup_mig(sim)


def _xid_line(sim: SimulatedCluster, k: int, code: int, words: str, pid: str = "'<unknown>'") -> str:
    kernel_bus = sim._pci[k][4:-2].lower()  # "00000000:9A:00.0" -> "0000:9a:00", as NVRM prints it
    name = "python" if pid != "'<unknown>'" else "<unknown>"
    return f"NVRM: Xid (PCI:{kernel_bus}): {code}, pid={pid}, name={name}, {words}"


def _xid_class_events(sim: SimulatedCluster, t0: float) -> None:
    """Xid events of the catalogue's action classes: the job's (13 on two GPUs of one job), none (63),
    a GPU reset (119, then 154 naming the reset), and a repeat that makes a hardware suspect (95)."""
    at = sim._incident_at
    pci = sim._pci
    if "xid_job" in at and sim.gpus_per_node >= 3:
        fault = "Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): Out Of Range Address"
        remapped = "Row Remapper: New row marked for remapping"
        sim._xids[at["xid_job"]] = (
            XidEvent(t0 - 420.0, 13, pci[0], 0, _xid_line(sim, 0, 13, fault, "3104417")),
            XidEvent(t0 - 419.0, 13, pci[1], 1, _xid_line(sim, 1, 13, fault, "3104418")),
            XidEvent(t0 - 900.0, 63, pci[2], 2, _xid_line(sim, 2, 63, remapped)),
        )
    if "xid_reset" in at:
        k = incident_gpu(sim, "xid_reset")
        timeout = (
            f"Timeout after 6s of waiting for RPC response from GPU{k} GSP! "
            "Expected function 76 (GSP_RM_CONTROL)"
        )
        recovery = "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)"
        sim._xids[at["xid_reset"]] = (
            XidEvent(t0 - 300.0, 119, pci[k], k, _xid_line(sim, k, 119, timeout)),
            XidEvent(t0 - 299.0, 154, pci[k], k, _xid_line(sim, k, 154, recovery)),
        )
    if "xid_repeat" in at:
        k = incident_gpu(sim, "xid_repeat")
        words = "Uncontained: FBHUB. RST: Yes, D-RST: No"
        sim._xids[at["xid_repeat"]] = tuple(
            XidEvent(t0 - ago, 95, pci[k], k, _xid_line(sim, k, 95, words)) for ago in (1800.0, 1200.0, 300.0)
        )


FLAP_PERIOD_S: Final = 240.0  # the flapping port is down for the first FLAP_DOWN_S of every period
FLAP_DOWN_S: Final = 60.0


def flap_ib(sim: SimulatedCluster, t: float) -> None:
    """The flapping node's mlx5_5 drops for a minute every four, each time back within the grace."""
    i = sim._incident_at.get("ib_flapping")
    if i is None or len(sim._ib[i]) < 6:
        return
    # timed from the origin: at the demo's first frame the port has been back for two minutes
    down = (t - sim.origin_s - FLAP_DOWN_S) % FLAP_PERIOD_S < FLAP_DOWN_S
    ports = sim._ib[i]
    if (not ports[5].is_up) == down:
        return
    changed = list(ports)
    up = ports[0]
    changed[5] = (
        IbPort("mlx5_5", 1, "Down", "Polling", None)
        if down
        else IbPort("mlx5_5", 1, up.state, up.physical_state, up.rate_gbps)
    )
    sim._ib[i] = tuple(changed)


def setup_mig(sim: SimulatedCluster) -> None:
    """MIG as the incidents need it: the "mig" GPU split into seven of its smallest instances, each with
    its compute instance, serving inference; the drained node's GPU 0 with MIG on and nothing on it.
    Every node's facts hold the MIG listings, as over SSH."""
    sim._mig_table = MIG_TABLES[sim.model.key]
    sim._mig = {}  # by node, by GPU index: the GPUs with MIG on
    sim._mig_withheld = set()  # GPUs MIG mode took from Slurm's free list
    # By node: each listing's last text and what it parsed to.
    sim._mig_memo = {}
    # A node without a MIG GPU answers every listing so; parsed once, shared as the parse cache shares it.
    sim._no_mig_facts = {name: parse(NO_MIG_DEVICES) for name, _words, parse in MIG_LISTINGS}
    for facts in sim._facts:
        facts.update(sim._no_mig_facts)
    at = sim._incident_at
    if "mig" in at:
        node, k = at["mig"], incident_gpu(sim, "mig")
        uuid = sim._uuid[node * sim.gpus_per_node + k]
        # On from the start: its serving job holds it, and a busy GPU's mode cannot change.
        sim._mig[node] = {k: GpuMig(k, uuid, sim._mig_table, enabled=True)}
        smallest = sim._mig_table.profiles[0]
        layout = ",".join(f"{smallest.profile_id}:{start}" for start in smallest.starts)
        run_smi_on_node(sim, node, ("mig", "-i", str(k), "-cgi", layout, "-C"))
    if "drained" in at:
        k = min(DRAINED_MIG_GPU, sim.gpus_per_node - 1)
        run_smi_on_node(sim, at["drained"], ("-i", str(k), "-mig", "1"))
    for node in sim._missing_gpu:
        set_fixup(sim, node)


def smi_gpus(sim: SimulatedCluster, i: int) -> list[SmiGpu]:
    """Node i's GPUs as nvidia-smi sees them; one without MIG gets a fresh state, kept once MIG is on."""
    g_per = sim.gpus_per_node
    states = sim._mig.get(i, {})
    gone = sim._missing_gpu.get(i)
    gpus = []
    for k in range(g_per):
        if k == gone:
            continue
        g = i * g_per + k
        state = states.get(k) or GpuMig(k, sim._uuid[g], sim._mig_table)
        # A GPU a job holds runs its processes.
        busy = sim._gjob[g] is not sim._idle_job
        gpus.append(SmiGpu(k, sim.model.name, sim._uuid[g], sim._pci[k], busy, state))
    return gpus


def run_smi_on_node(sim: SimulatedCluster, i: int, args: Sequence[str]) -> SmiRun:
    gpus = smi_gpus(sim, i)
    before = {k: state.enabled for k, state in sim._mig.get(i, {}).items()}
    run = run_nvidia_smi(args, gpus)
    if run.changed:
        sim._mig[i] = {g.index: g.mig for g in gpus if g.mig.enabled}
        for g in gpus:
            if g.mig.enabled != before.get(g.index, False):
                (withhold if g.mig.enabled else give_back)(sim, i, g.index)
        if not sim._mig[i]:
            del sim._mig[i]
        set_fixup(sim, i)
        refresh_mig_facts(sim, i)
        sim._result = None
    return run


def withhold(sim: SimulatedCluster, i: int, k: int) -> None:
    """A GPU in MIG mode is no whole GPU for Slurm to hand out: off the node's free list it goes."""
    free = sim._node_free[i]
    if k in free:
        before = len(free)
        free.remove(k)
        rebucket(sim, i, before)
        sim._mig_withheld.add(i * sim.gpus_per_node + k)


def give_back(sim: SimulatedCluster, i: int, k: int) -> None:
    g = i * sim.gpus_per_node + k
    if g not in sim._mig_withheld:
        return
    sim._mig_withheld.discard(g)
    free = sim._node_free[i]
    before = len(free)
    free.append(k)
    free.sort()
    rebucket(sim, i, before)
    sim._resumed = True  # a GPU came back: the scheduler looks at the queue at the next step


def set_fixup(sim: SimulatedCluster, i: int) -> None:
    """How node i's GPU samples differ from the plain ones: MIG GPUs report no utilization (and the
    MIG incident's memory and processes per instance); a missing GPU is left out."""
    mig = {
        k: sim._mig_sample_fields.get((i, k), {}) for k, state in sim._mig.get(i, {}).items() if state.enabled
    }
    gone = sim._missing_gpu.get(i)
    if not mig and gone is None:
        sim._fixups.pop(i, None)
        return

    def fixup(gpus: list[GpuSample]) -> list[GpuSample]:
        for k, fields in mig.items():
            gpus[k] = gpus[k]._replace(util_pct=None, mem_util_pct=None, mig_enabled=True, **fields)
        return gpus if gone is None else [s for s in gpus if s.index != gone]

    sim._fixups[i] = fixup


def refresh_mig_facts(sim: SimulatedCluster, i: int) -> None:
    """Node i's MIG facts as the SSH source would hold them: each listing printed from the state and
    parsed, a listing whose text did not change keeping its value; -L only where a GPU has MIG on."""
    base = {name: value for name, value in sim._facts[i].items() if name not in sim._no_mig_facts}
    base.pop(GPU_LIST[0], None)
    if i not in sim._mig:
        sim._mig_memo.pop(i, None)
        sim._facts[i] = {**base, **sim._no_mig_facts}
        return
    memo = sim._mig_memo.setdefault(i, {})
    gpus = smi_gpus(sim, i)
    for name, words, parse in (*MIG_LISTINGS, GPU_LIST):
        text = run_nvidia_smi(words, gpus).stdout
        known = memo.get(name)
        if known is None or known[0] != text:
            known = memo[name] = (text, parse(text))
        base[name] = known[1]
    sim._facts[i] = base


def interconnect_facts(sim: SimulatedCluster) -> list[dict[str, object]]:
    """Each node's `topo -m` and `nvlink -s` facts, made once and reused by every sample, as the SSH
    source reuses parsed facts until a command's output changes. Nodes that show the same board share
    one topology object, as the SSH source's parse cache makes them share one."""
    model = sim.model
    g_per = sim.gpus_per_node
    at = sim._incident_at
    missing = {at["missing_gpu"]: incident_gpu(sim, "missing_gpu")} if "missing_gpu" in at else {}
    inactive: dict[int, list[tuple[int, int]]] = {}
    if "nvlink_degraded" in at:
        total = model.nvlinks_per_gpu
        down = random_stream(sim.seed, "nvlink").sample(range(total), total // 3)  # a third failed to train
        inactive[at["nvlink_degraded"]] = [(incident_gpu(sim, "nvlink_degraded"), k) for k in down]
    boards: dict[tuple[tuple[int, ...], tuple[str, ...]], Topology] = {}
    facts: list[dict[str, object]] = []
    links, speed = model.nvlinks_per_gpu, model.nvlink_speed_gbyte_s
    for i in range(sim._n):
        indices = tuple(k for k in range(g_per) if k != missing.get(i))
        nics = tuple(port.ca_name for port in sim._ib[i])
        topology = boards.get((indices, nics))
        if topology is None:
            topology = boards[(indices, nics)] = board_topology(indices, g_per, nics, links)
        gpus = [(k, model.name, sim._uuid[i * g_per + k]) for k in indices]
        nvlink = board_nvlinks(gpus, links, speed, inactive.get(i, ()))
        facts.append({"topology": topology, "nvlink": nvlink})
    return facts


def typed_facts(sim: SimulatedCluster, i: int, t: float) -> NodeFacts:
    """Node i's facts as a sample carries them, made again only when its facts were replaced (read at
    that tick), as the SSH source keeps them until a command's output changes."""
    facts = sim._facts[i]
    made = sim._node_facts[i]
    if made is None or made[0] is not facts:
        made = sim._node_facts[i] = (facts, node_facts(facts, dict.fromkeys(facts, t), {}))
    return made[1]
