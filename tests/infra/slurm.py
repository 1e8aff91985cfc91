"""A real Slurm cluster on 127.0.0.1: munged, slurmctld and one slurmd per fake GPU node.

    slurm = start_slurm(base_dir, nodes=4, gpus=8)      # or the session fixture `real_slurm`
    slurm.run(["sinfo", "-N"]); job = slurm.submit(gpus=2)
    stop_slurm(slurm)

By hand, as root, from the repository root (the daemons outlive the command):

    python -m tests.infra.slurm_cli up [DIR]    # prints: export SLURM_CONF=DIR/etc/slurm.conf
    python -m tests.infra.slurm_cli down [DIR]

Every node (node01, ...) advertises ``gpu:<type>:<gpus>`` GRES whose "devices" are symlinks to /dev/null, in
one partition (``gpu``). Each start chooses free ports and begins from empty state. Needs root and Debian's
``slurmctld slurmd slurm-client munge`` (Slurm 22.05).

What Slurm insists on, learnt the hard way:

- Debian's build runs several slurmd on one host: each ``slurmd -N nodeNN`` reads its own NodeName line,
  which gives it its own Port; all share NodeHostname and NodeAddr=127.0.0.1.
- Without ``CommunicationParameters=NoInAddrAny,NoCtldInAddrAny`` every daemon binds 0.0.0.0. With it they
  bind to what gethostname() resolves to (slurm_setup_addr), so that must be 127.x. Where it is not, the
  daemons get a private UTS namespace whose host name is ``localhost`` (root, and namespaces allowed: not in
  Docker's default seccomp profile); failing that, ``GPUTOP_SLURM_FIX_HOSTS=1`` lets this module prepend
  ``127.0.0.1 <hostname>`` to /etc/hosts, and otherwise the fixture skips and says so. Clients (sinfo,
  sbatch) reach slurmctld at the address in ``SlurmctldHost=host(127.0.0.1)`` whatever the host name; srun
  listens too and would bind where the host name points.
- No cgroups or systemd in containers: proctrack/linuxproc, task/none, jobacct_gather/none.
- ``SlurmdParameters=config_overrides`` lets a node claim 64 CPUs and 8 GPUs on a small box; without it the
  node is drained as INVAL.
- munged refuses a socket below a directory that is not a+x (pytest's temporary directories are 0700),
  and a socket path has 108 bytes at most: the socket gets a short directory of its own in /tmp.
- GRES ``File=`` must be a character device: symlinks to /dev/null do, plain files are refused.
- A killed slurmd: slurmctld pings every SlurmdTimeout/3 seconds; the first failed ping marks the node not
  responding (``idle*``), SlurmdTimeout after its last answer it is ``down*``. ReturnToService=2 brings it
  back when its slurmd registers again.
- Draining a busy node shows ``draining``, an idle one ``drained`` (``State=RESUME`` undoes both). In
  ``sinfo --json`` (openapi v0.0.38 in 22.05) DRAIN is in ``state_flags``, not ``state``. scontrol strips
  one double quote at each end of ``Reason=``, and keeps everything else as given.
- A job is RUNNING about 1 s after sbatch (3 s for a new cluster's first job, whatever SchedulerParameters
  say). sinfo may then call its node ``allocated`` (``%C`` 0/64 in use) for a second or for many, where
  scontrol already says MIXED (CPUAlloc=1).
- ``AccountingStorageTRES=gres/gpu`` (GPUs in AllocTRES/TRES) is fatal without slurmdbd, so this cluster's
  TRES are cpu, mem, node, billing only; GPUs show in GRES and ``gres_detail``.
- slurmstepd (one per running job) is double-forked and outlives slurmd, so jobs are cancelled first; what
  remains is found as a slurm process holding a file under the cluster's directory, plus its descendants.
- The container's init reaps late: a killed daemon that is not our child stays a zombie for seconds and
  ``kill -0`` still succeeds on it; /proc/PID/stat tells.
- Clients need ``SLURM_CONF`` in their environment (``RealSlurm.env``), also for commands run over SSH.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

from tests.infra import procs
from tests.infra.private_hostname import (
    PRIVATE_HOSTNAME,
    can_have_private_hostname,
    enter_private_hostname,
    ipv4,
)
from tests.infra.procnet import (
    free_ports,
    is_loopback,
    listeners_of,
    listening_ports,
    read_text,
    socket_inodes,
)

T = TypeVar("T")

INSTALL_HINT = "apt-get install slurmctld slurmd slurm-client munge"
PROGRAMS = ("munged", "slurmctld", "slurmd", "sinfo", "squeue", "scontrol", "sbatch", "scancel")
DAEMON_COMMS = ("munged", "slurmctld", "slurmd", "slurmstepd")
FIX_HOSTS_VAR = "GPUTOP_SLURM_FIX_HOSTS"
HOSTS_FILE = Path("/etc/hosts")
SLURMD_TIMEOUT_S = 5  # Slurm takes any positive number (1 works); 0 means "never mark a node down"
MESSAGE_TIMEOUT_S = 3  # bounds how long a ping to a dead slurmd takes to fail (default 10)
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
CLIENT_TIMEOUT_S = 30.0
EXTRA_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
PR_SET_PDEATHSIG = 1  # linux/prctl.h


class SlurmUnavailable(Exception):
    """This machine cannot run the test cluster; the message names what is missing."""


@dataclass
class RealSlurm:
    """A running cluster and what a client needs to use it."""

    base_dir: Path  # etc/ (slurm.conf), log/, run/ (pid files), state/, spool/, munge/, dev/, jobs/
    conf_path: Path
    nodes: tuple[str, ...]
    partition: str
    gpu_type: str
    gpus_per_node: int
    ctld_port: int
    node_ports: dict[str, int]
    slurmd_timeout_s: int
    message_timeout_s: int
    hostname: str  # the host name the daemons see (NodeHostname, SlurmctldHost)
    private_hostname: bool  # the daemons run in a UTS namespace of their own
    env: dict[str, str]  # what a client adds to its environment: SLURM_CONF
    munge_socket: Path  # in a directory of its own under the temporary directory (see _munge_socket)
    processes: dict[str, subprocess.Popen[bytes]] = field(repr=False)  # "munged", "slurmctld", "node01"
    programs: dict[str, str] = field(repr=False)
    detached: bool = field(default=False, repr=False)

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(p.pid for p in self.processes.values())

    @property
    def log_dir(self) -> Path:
        return self.base_dir / "log"

    @property
    def dead_node_noticed_within_s(self) -> float:
        """How long after its slurmd dies a node may take to show ``*`` (not responding): the next ping
        (every SlurmdTimeout/3 s) plus MessageTimeout for it to fail, with room for a busy machine.
        Measured: 5 to 8 s with SlurmdTimeout=5, MessageTimeout=3."""
        return self.slurmd_timeout_s + 2 * self.message_timeout_s + 5

    # ---- clients ----

    def run(
        self, argv: Sequence[str], *, check: bool = True, timeout_s: float = CLIENT_TIMEOUT_S
    ) -> subprocess.CompletedProcess[str]:
        """Runs a Slurm client (``["sinfo", "-N"]``) against this cluster; check: raise on a non-zero
        exit, with its output in the message."""
        argv = list(argv)
        if argv and argv[0] in self.programs:
            argv[0] = self.programs[argv[0]]
        result = subprocess.run(
            argv,
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=timeout_s,
            check=False,
        )
        if check and result.returncode != 0:
            raise RuntimeError(
                f"{argv} exited {result.returncode}\nstdout: {result.stdout}\nstderr: {result.stderr}"
            )
        return result

    def node_states(self) -> dict[str, str]:
        """sinfo's long state of every node: idle, mixed, allocated, drained, draining, idle*, down*..."""
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %T"]).stdout
        return dict(line.split(None, 1) for line in out.splitlines() if line.strip())

    def node_state(self, node: str) -> str:
        return self.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"]).stdout.strip()

    def job_state(self, job_id: str) -> str:
        """RUNNING, PENDING, COMPLETING...; "" once the job has left the queue."""
        result = self.run(["squeue", "-h", "-j", job_id, "-o", "%T"], check=False)
        return result.stdout.strip() if result.returncode == 0 else ""

    def submit(
        self,
        gpus: int = 1,
        nodes: int = 1,
        seconds: float = 300,
        name: str = "gputop-test",
        nodelist: str | None = None,
    ) -> str:
        """Submits a batch job that sleeps ``seconds`` holding ``gpus`` GPUs on each of ``nodes`` nodes;
        returns its id."""
        argv = ["sbatch", "--parsable", f"--nodes={nodes}", f"--job-name={name}"]
        if gpus:
            argv.append(f"--gres=gpu:{gpus}")
        if nodelist:
            argv.append(f"--nodelist={nodelist}")
        argv += [f"--output={self.base_dir / 'jobs' / 'slurm-%j.out'}", f"--wrap=exec sleep {seconds:g}"]
        return self.run(argv).stdout.strip().split(";")[0]

    def cancel_all(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Cancels every job and waits until the queue is empty."""
        jobs = self.run(["squeue", "-h", "-o", "%i"]).stdout.split()
        if jobs:
            self.run(["scancel", *jobs], check=False)
            self.wait_for(lambda: not self.run(["squeue", "-h", "-o", "%i"]).stdout.split(), timeout_s)

    # ---- nodes ----

    def slurmd_alive(self, node: str) -> bool:
        process = self.processes.get(node)
        return process is not None and process.poll() is None

    def kill_slurmd(self, node: str, sig: int = signal.SIGKILL) -> None:
        """Kills ``node``'s slurmd (SIGKILL: a node that died, not one shut down) and reaps it."""
        process = self.processes.pop(node)
        if process.poll() is None:
            process.send_signal(sig)
        process.wait(STOP_TIMEOUT_S)

    def start_slurmd(self, node: str) -> None:
        """Starts ``node``'s slurmd again; slurmctld sees it once it registers (see wait_for)."""
        if self.slurmd_alive(node):
            raise RuntimeError(f"{node}'s slurmd is running")
        self.processes[node] = _spawn(
            self, [self.programs["slurmd"], "-D", "-N", node, "-f", str(self.conf_path)], f"slurmd-{node}"
        )

    def reset(self, timeout_s: float = 30.0) -> None:
        """Back to the state after start: no jobs, every slurmd running, every node idle."""
        self.cancel_all()
        for node in self.nodes:
            if not self.slurmd_alive(node):
                self.processes.pop(node, None)
                self.start_slurmd(node)
        drained = [n for n, s in self.node_states().items() if s.startswith("drain")]
        if drained:
            self.run(["scontrol", "update", f"NodeName={','.join(drained)}", "State=RESUME"])
        self.wait_idle(timeout_s=timeout_s)

    def wait_idle(self, nodes: Sequence[str] | None = None, timeout_s: float = 30.0) -> None:
        wanted = list(nodes or self.nodes)
        self.wait_for(
            lambda: all(self.node_states().get(n) == "idle" for n in wanted),
            timeout_s,
            what=f"{wanted} idle",
            show=self.node_states,
        )

    @staticmethod
    def wait_for(
        predicate: Callable[[], T],
        timeout_s: float,
        *,
        interval_s: float = 0.1,
        what: str = "",
        show: Callable[[], object] | None = None,
    ) -> T:
        """Polls ``predicate`` until it returns something true and returns that; TimeoutError after
        ``timeout_s`` (with ``show()`` in the message, else the last value)."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = predicate()
            if value:
                return value
            if time.monotonic() >= deadline:
                seen = show() if show else value
                raise TimeoutError(f"not true after {timeout_s:g}s: {what or predicate}; seen: {seen!r}")
            time.sleep(interval_s)

    # ---- inspection ----

    def non_loopback_listeners(self) -> list[str]:
        """What this cluster's daemons listen on outside loopback ("0.0.0.0:6817"); should be nothing."""
        return [addr for addr in listeners_of(socket_inodes(self.pids)) if not is_loopback(addr)]

    def listeners(self) -> list[str]:
        return listeners_of(socket_inodes(self.pids))

    def log_text(self, lines: int = 30) -> str:
        parts = []
        for path in sorted(self.log_dir.glob("*")):
            tail = read_text(path).splitlines()[-lines:]
            parts.append(f"--- {path}\n" + "\n".join(tail))
        return "\n".join(parts)


# ---- starting and stopping ------------------------------------------------------------------------------


def start_slurm(
    base_dir: Path | None = None,
    *,
    nodes: int = 4,
    gpus: int = 8,
    gpu_type: str = "h100",
    cpus: int = 64,
    mem_mb: int = 512000,
    partition: str = "gpu",
    cluster: str = "gputest",
    slurmd_timeout_s: int = SLURMD_TIMEOUT_S,
    extra_conf: Sequence[str] = (),
    private_hostname: bool | None = None,
    detach: bool = False,
    timeout_s: float = START_TIMEOUT_S,
) -> RealSlurm:
    """Starts munged, slurmctld and ``nodes`` slurmd (node01, ...) and returns once every node is idle.

    private_hostname: None runs the daemons in a UTS namespace named ``localhost`` only when this host's
    name does not resolve to 127.x; True always (SlurmUnavailable where namespaces are not allowed).
    detach: the daemons outlive this process (no parent-death signal), for the command line.
    SlurmUnavailable when this machine cannot run Slurm; RuntimeError when Slurm fails for another reason.
    """
    programs = _programs()
    if os.geteuid() != 0:
        raise SlurmUnavailable("must run as root (slurmd runs jobs as their users; SlurmUser=root)")
    hostname, private = _choose_hostname(private_hostname)
    if base_dir is None:
        base_dir = Path(tempfile.mkdtemp(prefix="gputop-slurm-"))
    base_dir = base_dir.resolve()
    width = max(2, len(str(nodes)))
    names = tuple(f"node{i:0{width}d}" for i in range(1, nodes + 1))
    why = ""
    for _attempt in range(3):  # a port taken between choosing it and the daemon binding it: choose again
        stop_slurm(base_dir)  # leftovers of an earlier start in this directory
        ports = free_ports(nodes + 1)
        slurm = RealSlurm(
            base_dir=base_dir,
            conf_path=base_dir / "etc" / "slurm.conf",
            nodes=names,
            partition=partition,
            gpu_type=gpu_type,
            gpus_per_node=gpus,
            ctld_port=ports[0],
            node_ports=dict(zip(names, ports[1:], strict=True)),
            slurmd_timeout_s=slurmd_timeout_s,
            message_timeout_s=MESSAGE_TIMEOUT_S,
            hostname=hostname,
            private_hostname=private,
            env={"SLURM_CONF": str(base_dir / "etc" / "slurm.conf")},
            munge_socket=_munge_socket(base_dir),
            processes={},
            programs=programs,
            detached=detach,
        )
        _prepare(slurm, cluster=cluster, cpus=cpus, mem_mb=mem_mb, extra_conf=extra_conf)
        try:
            why = _launch(slurm, timeout_s)
        except BaseException:
            stop_slurm(slurm)
            raise
        if not why:
            return slurm
        stop_slurm(slurm)
        if "Address already in use" not in why:
            break
    raise RuntimeError(f"Slurm did not start: {why}")


def stop_slurm(slurm: RealSlurm | Path) -> None:
    """Stops a cluster: cancels its jobs, then stops every process of it (its slurmd, the slurmstepd of its
    jobs and what they run, slurmctld, munged) and waits until none is left. Given a directory (a cluster
    started by another process, e.g. ``up``), the processes are found by the files they hold open there."""
    if isinstance(slurm, RealSlurm):
        base_dir, children = slurm.base_dir, dict(slurm.processes)
        client: RealSlurm | None = slurm
    else:
        base_dir, children, client = slurm.resolve(), {}, None
    if not base_dir.is_dir():
        return
    if client is None and (base_dir / "etc" / "slurm.conf").is_file():
        with contextlib.suppress(Exception):
            client = _client_for(base_dir)
    if client is not None and ctld_alive(base_dir):
        with contextlib.suppress(Exception):
            client.cancel_all(timeout_s=5.0)
    found = _cluster_pids(base_dir) | {p.pid for p in children.values() if p.poll() is None}
    comms = {pid: procs.comm(pid) for pid in found}
    # slurmd, slurmstepd and the jobs first; slurmctld stops its slurmscriptd itself (which ignores
    # SIGTERM), then whatever is left, then munged, which the others use until they exit
    procs.terminate(
        {pid for pid, comm in comms.items() if comm not in ("slurmctld", "slurmscriptd", "munged")},
        STOP_TIMEOUT_S,
    )
    procs.terminate({pid for pid, comm in comms.items() if comm == "slurmctld"}, STOP_TIMEOUT_S)
    procs.terminate(
        {pid for pid, comm in comms.items() if comm != "munged" and procs.alive(pid)}, STOP_TIMEOUT_S
    )
    procs.terminate({pid for pid, comm in comms.items() if comm == "munged"}, STOP_TIMEOUT_S)
    for process in children.values():  # reap our own children (their pids may be zombies until then)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(1.0)
    if isinstance(slurm, RealSlurm):
        slurm.processes.clear()
    shutil.rmtree(_munge_socket(base_dir).parent, ignore_errors=True)
    left = [pid for pid in found if procs.alive(pid)]
    if left:
        raise RuntimeError(f"Slurm processes still running after stop: {left}")


@pytest.fixture(scope="session")
def real_slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealSlurm]:
    """A real Slurm on 127.0.0.1 with node01..node04 of 8 H100 GRES each, partition ``gpu``; skips where
    Slurm, munge or root is missing, or the host name does not resolve to loopback."""
    try:
        slurm = start_slurm(tmp_path_factory.mktemp("slurm"), nodes=4)
    except SlurmUnavailable as err:
        pytest.skip(str(err))
    try:
        yield slurm
    finally:
        stop_slurm(slurm)


@pytest.fixture
def slurm_client_conf(real_slurm: RealSlurm) -> Iterator[Path]:
    """slurm.conf where an sshd's login user can read it (pytest's temporary directories are root's
    0700); the munge socket already sits in a directory of its own that everyone may enter."""
    directory = Path(tempfile.mkdtemp(prefix="gputop-slurm-client-"))
    try:
        directory.chmod(0o755)
        conf = directory / "slurm.conf"
        shutil.copyfile(real_slurm.conf_path, conf)
        conf.chmod(0o644)
        yield conf
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# ---- the pieces -------------------------------------------------------------------------------------------


def _programs() -> dict[str, str]:
    path = os.pathsep.join([os.environ.get("PATH", ""), *EXTRA_PATH])
    found = {name: shutil.which(name, path=path) for name in PROGRAMS}
    missing = [name for name, where in found.items() if where is None]
    if missing:
        raise SlurmUnavailable(f"{', '.join(missing)} not installed ({INSTALL_HINT})")
    return {name: where for name, where in found.items() if where}


def _choose_hostname(private: bool | None) -> tuple[str, bool]:
    """(the host name the daemons see, whether they need a UTS namespace for it)."""
    real = socket.gethostname()
    address = ipv4(real)
    if private is not True and address.startswith("127."):
        return real.split(".")[0], False
    if private is not False and ipv4(PRIVATE_HOSTNAME).startswith("127.") and can_have_private_hostname():
        return PRIVATE_HOSTNAME, True
    if private is True:
        raise SlurmUnavailable("cannot run the daemons in a UTS namespace of their own (unshare refused)")
    if os.environ.get(FIX_HOSTS_VAR) == "1":
        _prepend_hosts_line(real)
        address = ipv4(real)
        if address.startswith("127."):
            return real.split(".")[0], False
    why = "not asked for" if private is False else "unshare refused"
    raise SlurmUnavailable(
        f"host name {real!r} resolves to {address or 'nothing'}, not loopback, and Slurm's NoInAddrAny "
        f"binds there (a private host name for the daemons: {why}). Add '127.0.0.1 {real}' to /etc/hosts, "
        f"or set {FIX_HOSTS_VAR}=1 to let the tests prepend it"
    )


def _prepend_hosts_line(hostname: str) -> None:
    """Prepends ``127.0.0.1 hostname`` to /etc/hosts (first match wins); rewritten in place because Docker
    bind-mounts the file. Only on request (GPUTOP_SLURM_FIX_HOSTS=1), and said out loud."""
    text = HOSTS_FILE.read_text(encoding="utf-8")
    line = f"127.0.0.1 {hostname} {hostname.split('.')[0]}  # added by gputop's tests/infra/slurm.py\n"
    with HOSTS_FILE.open("w", encoding="utf-8") as f:
        f.write(line + text)
    warnings.warn(f"{FIX_HOSTS_VAR}=1: prepended {line.strip()!r} to {HOSTS_FILE}", stacklevel=2)


def _munge_socket(base_dir: Path) -> Path:
    """munged wants every directory above its socket a+x, which pytest's temporary directories (0700) are
    not, and a socket path fits in 108 bytes: so a short directory of its own, named after base_dir."""
    digest = hashlib.sha256(str(base_dir).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"gputop-munge-{digest}" / "munge.socket"


def _slurm_conf(slurm: RealSlurm, *, cluster: str, cpus: int, mem_mb: int) -> str:
    base, host = slurm.base_dir, slurm.hostname
    node_lines = "".join(
        f"NodeName={node} NodeHostname={host} NodeAddr=127.0.0.1 Port={port} CPUs={cpus} "
        f"RealMemory={mem_mb} Gres=gpu:{slurm.gpu_type}:{slurm.gpus_per_node} State=UNKNOWN\n"
        for node, port in slurm.node_ports.items()
    )
    return f"""# generated by gputop's tests/infra/slurm.py
ClusterName={cluster}
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={slurm.munge_socket}
SlurmctldPort={slurm.ctld_port}
SlurmdPort={next(iter(slurm.node_ports.values()))}
# bind every daemon to what the host name resolves to (127.x) instead of 0.0.0.0
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
StateSaveLocation={base}/state
SlurmdSpoolDir={base}/spool/%n
SlurmctldPidFile={base}/run/slurmctld.pid
SlurmdPidFile={base}/run/slurmd-%n.pid
SlurmctldLogFile={base}/log/slurmctld.log
SlurmdLogFile={base}/log/slurmd-%n.log
# no cgroups, no systemd
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MailProg=/bin/true
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
# trust the node lines below whatever this box has
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=60
KillWait=2
SlurmdTimeout={slurm.slurmd_timeout_s}
# a ping of a dead slurmd fails after about this long (the default, 10, makes that 15 s)
MessageTimeout={slurm.message_timeout_s}
GresTypes=gpu
{node_lines}PartitionName={slurm.partition} Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def _prepare(slurm: RealSlurm, *, cluster: str, cpus: int, mem_mb: int, extra_conf: Sequence[str]) -> None:
    """Fresh directories, munge key, fake GPU devices and the three config files."""
    base = slurm.base_dir
    for sub in ("etc", "log", "run", "state", "spool", "munge", "dev", "jobs"):
        shutil.rmtree(base / sub, ignore_errors=True)
    for sub in ("etc", "log", "run", "state", "dev", "jobs", *(f"spool/{n}" for n in slurm.nodes)):
        (base / sub).mkdir(parents=True)
    munge = base / "munge"
    munge.mkdir(mode=0o700)  # munged: the key's directory private
    socket_dir = slurm.munge_socket.parent
    shutil.rmtree(socket_dir, ignore_errors=True)
    socket_dir.mkdir(mode=0o755)  # ...and every directory above the socket a+x
    fd = os.open(munge / "munge.key", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(1024))
    for i in range(slurm.gpus_per_node):  # gres File= must be a character device
        (base / "dev" / f"nvidia{i}").symlink_to("/dev/null")
    etc = base / "etc"
    conf = _slurm_conf(slurm, cluster=cluster, cpus=cpus, mem_mb=mem_mb)
    (etc / "slurm.conf").write_text(conf + "".join(f"{line}\n" for line in extra_conf))
    devices = f"{base}/dev/nvidia[0-{slurm.gpus_per_node - 1}]"
    gres_lines = "".join(
        f"NodeName={node} Name=gpu Type={slurm.gpu_type} File={devices}\n" for node in slurm.nodes
    )
    (etc / "gres.conf").write_text("AutoDetect=off\n" + gres_lines)
    (etc / "cgroup.conf").write_text("CgroupPlugin=autodetect\nIgnoreSystemd=yes\n")


def _daemon_setup(private_hostname: bool, detached: bool) -> Callable[[], None]:
    def setup() -> None:  # in the child, before exec
        if not detached:
            # SIGTERM when the process that started it dies: a test run that is killed leaves no daemon
            with contextlib.suppress(Exception):
                ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if private_hostname:
            enter_private_hostname()

    return setup


def _spawn(slurm: RealSlurm, argv: list[str], name: str) -> subprocess.Popen[bytes]:
    """Starts one daemon in the foreground; what it prints before its log file opens goes to log/NAME.out."""
    out = open(slurm.log_dir / f"{name}.out", "ab")  # noqa: SIM115 - the child holds it, we close our copy
    try:
        return subprocess.Popen(
            argv,
            env={"PATH": os.pathsep.join(EXTRA_PATH), "LANG": "C.UTF-8", **slurm.env},
            cwd=slurm.base_dir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,  # a Ctrl-C in the terminal is for pytest, not for the daemons
            preexec_fn=_daemon_setup(slurm.private_hostname, slurm.detached),
        )
    finally:
        out.close()


def _launch(slurm: RealSlurm, timeout_s: float) -> str:
    """Starts the daemons and waits for every node idle; "" when it is, else why not."""
    base, conf = slurm.base_dir, str(slurm.conf_path)
    munge = base / "munge"
    slurm.processes["munged"] = _spawn(
        slurm,
        [
            slurm.programs["munged"],
            "--foreground",
            f"--socket={slurm.munge_socket}",
            f"--key-file={munge}/munge.key",
            f"--log-file={base}/log/munged.log",
            f"--pid-file={base}/run/munged.pid",
            f"--seed-file={munge}/munged.seed",
        ],
        "munged",
    )
    deadline = time.monotonic() + timeout_s
    why = _wait(slurm, deadline, slurm.munge_socket.exists, "munged's socket")
    if why:
        return why
    slurm.processes["slurmctld"] = _spawn(slurm, [slurm.programs["slurmctld"], "-D", "-f", conf], "slurmctld")
    why = _wait(slurm, deadline, lambda: slurm.ctld_port in (listening_ports() or {}), "slurmctld listening")
    if why:
        return why
    for node in slurm.nodes:
        slurm.start_slurmd(node)

    def all_idle() -> bool:
        states = slurm.node_states()
        return all(states.get(node) == "idle" for node in slurm.nodes)

    why = _wait(slurm, deadline, all_idle, "every node idle")
    if why:
        return why
    outside = slurm.non_loopback_listeners()
    if outside:
        raise RuntimeError(f"Slurm daemons listen outside loopback: {outside}")
    return ""


def _wait(slurm: RealSlurm, deadline: float, ready: Callable[[], bool], what: str) -> str:
    """Polls ``ready`` until the deadline; stops early (with the logs) when a daemon exits or one of the
    chosen ports is held by another process."""
    ports = {slurm.ctld_port, *slurm.node_ports.values()}
    while True:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            if ready():
                return ""
        exited = [name for name, p in slurm.processes.items() if p.poll() is not None]
        ours = socket_inodes(slurm.pids)
        taken = sorted(
            p for p, inode in (listening_ports() or {}).items() if p in ports and inode not in ours
        )
        if exited or taken or time.monotonic() > deadline:
            if taken:
                reason = f"Address already in use: ports {taken} are held by another process"
            elif exited:
                reason = f"{', '.join(exited)} exited"
            else:
                reason = "timed out"
            return f"waiting for {what}: {reason}\n{slurm.log_text()}"
        time.sleep(0.05)


def _client_for(base_dir: Path) -> RealSlurm:
    """Enough of a RealSlurm to run clients against the cluster in ``base_dir`` (for ``down``)."""
    return RealSlurm(
        base_dir=base_dir,
        conf_path=base_dir / "etc" / "slurm.conf",
        nodes=(),
        partition="",
        gpu_type="",
        gpus_per_node=0,
        ctld_port=0,
        node_ports={},
        slurmd_timeout_s=0,
        message_timeout_s=0,
        hostname="",
        private_hostname=False,
        env={"SLURM_CONF": str(base_dir / "etc" / "slurm.conf")},
        munge_socket=_munge_socket(base_dir),
        processes={},
        programs=_programs(),
    )


# ---- this cluster's processes ----------------------------------------------------------------------------


def _cluster_pids(base_dir: Path) -> set[int]:
    """The running Slurm and munge processes that hold a file (their log) under ``base_dir``, and every
    descendant of them (the jobs of its slurmstepd)."""
    pids = [pid for pid in procs.pids() if procs.alive(pid)]
    ours = {pid for pid in pids if procs.comm(pid) in DAEMON_COMMS and procs.holds_file_under(pid, base_dir)}
    parents = {pid: int(fields[1]) for pid in pids if len(fields := procs.stat_fields(pid)) > 1}
    grew = True
    while grew:
        more = {pid for pid, ppid in parents.items() if ppid in ours and pid not in ours}
        ours |= more
        grew = bool(more)
    return ours


def ctld_alive(base_dir: Path) -> bool:
    text = read_text(base_dir / "run" / "slurmctld.pid").strip()
    return text.isdigit() and procs.alive(int(text)) and procs.comm(int(text)) == "slurmctld"
