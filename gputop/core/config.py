"""gputop's configuration schema as frozen dataclasses; `parse_config` reads YAML text into it.

Pure: text in, ``Config`` out, or one ``ConfigError`` listing every problem found, each as
``file:line: key.path: why``. Reading the file is ``gputop.config_file``'s job; the strict reader itself
is ``gputop.core.config_reader``.

Strict on purpose: an unknown key, a quoted number or a value out of range is an error rather than a
silently ignored setting, because a dashboard that quietly polls with the wrong threshold is worse than
one that refuses to start and says which line to fix.

The YAML key of a field is its name unless ``metadata["key"]`` says otherwise; bounds, units and text
rules live in ``metadata`` too, so one generic walker validates every section.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeVar

Metric = Literal["util", "mem", "temp", "power"]
GpuModel = Literal["H100", "H200", "A100-80GB", "A100-40GB", "B200"]

DEFAULT_SOURCE_NAME: Final = "<defaults>"

_T = TypeVar("_T")


class ConfigError(Exception):
    """Everything wrong with a configuration, one readable line per problem (never a traceback)."""

    def __init__(self, messages: Iterable[str] | str) -> None:
        self.messages: list[str] = [messages] if isinstance(messages, str) else list(messages)
        super().__init__("\n".join(self.messages))

    def __str__(self) -> str:
        return "\n".join(self.messages)


def _rules(
    *,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    unit: str = "",
    nonempty: bool = False,
    pattern: str | None = None,
    pattern_hint: str = "",
    key: str | None = None,
    in_yaml: bool = True,
    parse: str | None = None,  # a parser of the reader's (config_reader.PARSERS), by name
) -> dict[str, Any]:
    """A field's metadata: what the walker checks (bounds are inclusive unless lo_open) and its YAML key."""
    return {
        "lo": lo,
        "hi": hi,
        "lo_open": lo_open,
        "unit": unit,
        "nonempty": nonempty,
        "pattern": re.compile(pattern) if pattern else None,
        "pattern_hint": pattern_hint,
        "key": key,
        "in_yaml": in_yaml,
        "parse": parse,
    }


def _opt(default: _T, **rules: Any) -> _T:
    """An optional field: its default and its rules (see _rules)."""
    return field(default=default, metadata=_rules(**rules))


_NAME_PATTERN = r"[A-Za-z0-9._-]+"
_NAME_HINT = "use letters, digits, '.', '_' and '-'"


@dataclass(frozen=True, slots=True)
class SshConfig:
    user: str | None = _opt(None, nonempty=True)  # None: ssh config's User, else the local user
    port: int | None = _opt(None, lo=1, hi=65535)  # None: ssh config's Port, else 22
    config_file: str = _opt("~/.ssh/config", nonempty=True)
    # None: as ssh reads them, the ssh_config's UserKnownHostsFile and GlobalKnownHostsFile for the node,
    # else ~/.ssh/known_hosts and /etc/ssh/ssh_known_hosts (gputop.sources.known_hosts).
    known_hosts: str | None = _opt(None, nonempty=True)
    # True: a node's key must be in known_hosts. "accept-new": a node with no key there yet is trusted on
    # first use and its key recorded; a changed key is refused. False: not verified (flagged everywhere).
    verify_host_keys: bool | Literal["accept-new"] = True
    identity_files: tuple[str, ...] = _opt((), nonempty=True)
    jump_host: str | None = _opt(None, nonempty=True)  # ProxyJump: [user@]host[:port]
    connect_timeout_s: float = _opt(10.0, lo=0, lo_open=True, hi=300, unit="seconds")
    # Caps simultaneous key exchanges so a 1,000-node start does not trip sshd's MaxStartups.
    max_concurrent_handshakes: int = _opt(64, lo=1, hi=4096)


@dataclass(frozen=True, slots=True)
class SlurmConfig:
    enabled: bool = True
    run_on: str = _opt("local", nonempty=True)  # "local", or an ssh host that has the Slurm commands
    poll_interval_s: float = _opt(10.0, lo=0, lo_open=True, unit="seconds")
    command_timeout_s: float = _opt(10.0, lo=0, lo_open=True, unit="seconds")
    # Variables every Slurm command gets, as NAME=value: SLURM_CONF where the client configuration is not
    # in /etc/slurm (a login node serving several clusters). Passed in the argv (`env NAME=value ...`),
    # never through a shell.
    env: tuple[str, ...] = ()

    @property
    def env_vars(self) -> dict[str, str]:
        return dict(item.split("=", 1) for item in self.env)


PromFlavor = Literal["prometheus", "victoriametrics", "victoriametrics-cluster", "thanos", "mimir"]


@dataclass(frozen=True, slots=True)
class PrometheusConfig:
    """A Prometheus-compatible store holding the fleet's dcgm-exporter series (gputop.sources.prometheus).
    Secrets are named by where they are (a file, an environment variable), never written here."""

    url: str | None = _opt(None, pattern=r"https?://[^\s]+", pattern_hint="give an http:// or https:// URL")
    # How the store's query API is reached: VictoriaMetrics cluster's /select/<tenant>/prometheus, and
    # the tenant header of Thanos (THANOS-TENANT) and Mimir (X-Scope-OrgID)
    flavor: PromFlavor = "prometheus"
    tenant: str | None = _opt(None, nonempty=True, pattern=r"[A-Za-z0-9._:-]+", pattern_hint=_NAME_HINT)
    bearer_token_file: str | None = _opt(None, nonempty=True)
    bearer_token_env: str | None = _opt(None, nonempty=True, pattern=r"[A-Za-z_][A-Za-z0-9_]*")
    basic_auth_user: str | None = _opt(None, nonempty=True)
    basic_auth_password_file: str | None = _opt(None, nonempty=True)
    basic_auth_password_env: str | None = _opt(None, nonempty=True, pattern=r"[A-Za-z_][A-Za-z0-9_]*")
    ca_file: str | None = _opt(None, nonempty=True)  # None: the system's CAs
    cert_file: str | None = _opt(None, nonempty=True)  # a client certificate (with key_file, or holding it)
    key_file: str | None = _opt(None, nonempty=True)
    timeout_s: float = _opt(10.0, lo=0, lo_open=True, hi=300, unit="seconds")
    # The store's series change as often as the exporters are scraped (15-30 s at most sites)
    interval_s: float = _opt(15.0, lo=1, hi=3600, unit="seconds")
    # The label naming the host, where a site relabels (None: Hostname, hostname, then instance)
    host_label: str | None = _opt(None, nonempty=True, pattern=r"[A-Za-z_][A-Za-z0-9_]*")
    # Opening a node's screen connects to that node over SSH (the cluster's ssh settings) for what the
    # store does not hold: topology, NVLink status, processes, MIG listings; closed when the screen is
    # left. False: a site where SSH to the nodes is not allowed.
    ssh_on_node_screen: bool = True

    @property
    def enabled(self) -> bool:
        return self.url is not None


# The commands gputop runs on each node (gputop.sources.commands.default_commands names them).
CommandName = Literal[
    "metrics",
    "processes",
    "gpu_list",
    "topology",
    "nvlink",
    "mig_gip",
    "mig_gipp",
    "mig_gi",
    "mig_ci",
    "ibstat",
    "xid",
    "counters",
    "nvlink_errors",
]


@dataclass(frozen=True, slots=True)
class CommandOverride:
    """A site's change to one command: another argv (a full path, sudo, another log reader), another
    cadence or timeout, or switched off. The output must still be what that command's parser reads."""

    name: CommandName
    argv: tuple[str, ...] | None = _opt(None, nonempty=True)  # run without a shell, each word as given
    interval_s: float | None = _opt(None, lo=0, lo_open=True, hi=86400, unit="seconds")
    timeout_s: float | None = _opt(None, lo=0, lo_open=True, hi=3600, unit="seconds")
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    name: str = field(metadata=_rules(nonempty=True, pattern=_NAME_PATTERN, pattern_hint=_NAME_HINT))
    # YAML ``nodes:`` (text or list) arrives here folded; node_names holds the expansion in natural order.
    nodeset: str = _opt("", key="nodes", parse="nodes")
    node_names: tuple[str, ...] = _opt((), in_yaml=False)
    nodes_from_slurm: str | None = _opt(None, nonempty=True)  # a partition name, or "all"
    # Expected GPUs per node, so a GPU that fell off the bus shows as missing instead of the node looking
    # smaller. None: learn it from Slurm GRES or the first good sample.
    gpus_per_node: int | None = _opt(None, lo=1, hi=64, unit="GPUs")
    local: bool = False
    ssh: SshConfig = field(default_factory=SshConfig)
    slurm: SlurmConfig = field(default_factory=SlurmConfig)
    # the fleet's readings from a Prometheus-compatible store instead of SSH (a node's screen still
    # opens SSH to it for its deep facts where ssh is configured)
    prometheus: PrometheusConfig = field(default_factory=PrometheusConfig)
    commands: tuple[CommandOverride, ...] = ()


@dataclass(frozen=True, slots=True)
class PollConfig:
    interval_s: float = _opt(1.0, lo=0.1, hi=3600, unit="seconds")
    node_deadline_s: float = _opt(5.0, lo=0, lo_open=True, unit="seconds")
    stale_after_s: float = _opt(10.0, lo=0, lo_open=True, unit="seconds")
    down_after_s: float = _opt(60.0, lo=0, lo_open=True, unit="seconds")
    # Facts that change slowly: NVLink state and MIG instances; five times this for the GPU list,
    # topology and MIG profiles. IB ports and the Xid log run every 30 s of their own (sources.commands).
    slow_facts_interval_s: float = _opt(60.0, lo=0, lo_open=True, unit="seconds")
    backoff_initial_s: float = _opt(1.0, lo=0, lo_open=True, unit="seconds")
    backoff_max_s: float = _opt(60.0, lo=0, lo_open=True, unit="seconds")


@dataclass(frozen=True, slots=True)
class Thresholds:
    # Bounded so a typo such as 850 is caught; no datacentre GPU runs anywhere near 150 C.
    temp_warn_c: float = _opt(85.0, lo=0, hi=150, unit="degrees Celsius")
    temp_crit_c: float = _opt(90.0, lo=0, hi=150, unit="degrees Celsius")
    mem_warn_pct: float = _opt(95.0, lo=0, hi=100, unit="percent")
    power_warn_pct: float = _opt(100.0, lo=0, hi=200, unit="percent of the power limit")
    idle_util_pct: float = _opt(5.0, lo=0, hi=100, unit="percent")
    idle_minutes: float = _opt(10.0, lo=0, lo_open=True, unit="minutes")
    # A temperature must stay over its threshold this long before it is reported (0: at once), so a
    # short spike under a burst of work pages nobody.
    temp_sustain_s: float = _opt(30.0, lo=0, hi=3600, unit="seconds")
    # A reported temperature clears only once it falls this far below its threshold, so a GPU hovering
    # at 84-86 C against 85 does not flap in and out of the alerts.
    hysteresis_c: float = _opt(3.0, lo=0, hi=20, unit="degrees Celsius")
    # Likewise for memory: reported from mem_warn_pct, cleared this many points below it.
    mem_hysteresis_pct: float = _opt(2.0, lo=0, hi=20, unit="percentage points")
    # A PCIe generation below the maximum counts only while the GPU works harder than this: idle GPUs
    # lower the link speed to save power. It must last temp_sustain_s too.
    pcie_busy_util_pct: float = _opt(20.0, lo=0, hi=100, unit="percent")
    # The same Xid on the same GPU this many times within xid_repeat_window_min makes the GPU a hardware
    # suspect, whatever one event alone would say (NVIDIA's and other fleet tools' analysers do the same).
    xid_repeat_count: int = _opt(3, lo=2, hi=1000, unit="events")
    xid_repeat_window_min: float = _opt(60.0, lo=0, lo_open=True, hi=10080, unit="minutes")
    # An IB port back up within this long of going down has flapped; while it has flapped within
    # ib_flap_window_min it is "flapping" (WARN), and a drop within the grace is not a new CRIT.
    ib_flap_grace_s: float = _opt(120.0, lo=0, lo_open=True, hi=3600, unit="seconds")
    ib_flap_window_min: float = _opt(30.0, lo=0, lo_open=True, hi=1440, unit="minutes")
    # Counter rates, measured between two reads of `nvidia-smi -q` / `nvidia-smi nvlink -e`. The defaults
    # are DCGM's limits (DcgmGpuHardwareLimits.h): 8 PCIe replays a minute "the maximum recommended", 100
    # NVLink CRC errors a second ("CRC errors only matter at rates of 100+ per second"), any NVLink replay
    # or recovery error, and 10 single-bit ECC errors (DCGM calls its own figure a placeholder; here a
    # minute).
    pcie_replay_per_min: float = _opt(8.0, lo=0, lo_open=True, unit="replays per minute")
    nvlink_crc_per_s: float = _opt(100.0, lo=0, lo_open=True, unit="CRC errors per second")
    nvlink_error_count: int = _opt(1, lo=1, hi=1_000_000, unit="replay or recovery errors between reads")
    sbe_per_min: float = _opt(10.0, lo=0, lo_open=True, unit="single-bit ECC errors per minute")
    # Retired pages (GPUs before Ampere): DCGM warns from its soft limit and fails the GPU at its limit.
    retired_pages_warn: int = _opt(15, lo=1, hi=10_000, unit="pages")
    retired_pages_crit: int = _opt(63, lo=1, hi=10_000, unit="pages")
    # HBM within this many degrees of the memory's own limit ("Memory Max Operating Temp", where the
    # driver slows memory down) warns; at or over the limit is critical.
    hbm_temp_margin_c: float = _opt(5.0, lo=0, hi=50, unit="degrees Celsius")


@dataclass(frozen=True, slots=True)
class UiConfig:
    theme: str = _opt("gputop-dark", nonempty=True)
    metric: Metric = "util"
    refresh_age_warn_s: float = _opt(5.0, lo=0, lo_open=True, unit="seconds")
    # A regular expression that finds a node's rack in its name, for the map's group zoom: its group named
    # "rack", else its first group, else the whole match ("^(r\\d+)-", "(?P<rack>rack\\d+)"). None: the
    # map groups nodes by Slurm partition only.
    rack_pattern: str | None = _opt(None, nonempty=True)


@dataclass(frozen=True, slots=True)
class DemoConfig:
    nodes: int = _opt(32, lo=1, hi=10_000, unit="nodes")
    gpus_per_node: int = _opt(8, lo=1, hi=16, unit="GPUs")
    gpu_model: GpuModel = "H100"
    seed: int = 42


# Layouts for the A100/H100 80GB profile names, the GPUs most MIG sites run; the dialog offers only those
# that fit the chosen GPU, so a site with other models lists its own.
DEFAULT_MIG_PRESETS: Final = (
    "7x1g.10gb",
    "3x2g.20gb+1x1g.10gb",
    "2x3g.40gb",
    "1x4g.40gb+1x3g.40gb",
    "1x7g.80gb",
)


@dataclass(frozen=True, slots=True)
class AlertsConfig:
    # A new CRIT alert (not acknowledged, not silenced) rings the terminal bell / shows a notice.
    bell: bool = False
    notify: bool = True
    silence_minutes: float = _opt(60.0, lo=0, lo_open=True, hi=7 * 24 * 60, unit="minutes")


@dataclass(frozen=True, slots=True)
class MigConfig:
    # Layouts the repartition dialog offers, in the syntax of gputop.core.mig_layout; checked when read.
    presets: tuple[str, ...] = _opt(DEFAULT_MIG_PRESETS, nonempty=True)
    # Goes before every nvidia-smi MIG command: those need root, and -n makes sudo fail at once rather
    # than wait for a password nobody can type. Empty: the SSH user is root.
    command_prefix: tuple[str, ...] = _opt(("sudo", "-n"), nonempty=True)
    step_timeout_s: float = _opt(30.0, lo=0, lo_open=True, hi=3600, unit="seconds")


@dataclass(frozen=True, slots=True)
class HistoryConfig:
    """What the dashboard remembers of every GPU (gputop.core.history_store): every tick for the last
    fine_minutes, then per-minute mean and max for the last coarse_hours, within memory_mb (a fleet too
    large for both windows in it keeps shorter ones, and the charts say so)."""

    fine_minutes: float = _opt(15.0, lo=1, hi=240, unit="minutes")
    coarse_hours: float = _opt(24.0, lo=1, hi=24 * 14, unit="hours")
    # None: OWN_HISTORY_MB, or STORE_HISTORY_MB where the GPUs come from a Prometheus-compatible store,
    # which keeps their past itself: the node's chart reads it from there where gputop's rows end
    memory_mb: float | None = _opt(None, lo=16, hi=65536, unit="MB")

    def budget_mb(self, from_store: bool) -> float:
        """The history's memory bound: memory_mb where set, else by where the GPUs come from."""
        if self.memory_mb is not None:
            return self.memory_mb
        return STORE_HISTORY_MB if from_store else OWN_HISTORY_MB


# a thousand 8-GPU nodes keep 15 minutes of ticks and a day of minutes in 208 MB
OWN_HISTORY_MB: Final = 256.0
# 80,000 GPUs from a store: about 9 minutes of refreshes and 36 minutes of minutes, and gputop's RSS near
# 420 MB with them (256 would take it near 550 MB); a longer chart is read from the store
STORE_HISTORY_MB: Final = 96.0


ActionClass = Literal["reset", "reboot", "support", "inspect", "job", "update"]
WebhookFormat = Literal["json", "alertmanager"]


@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """The auto-drain policy (gputop.core.drain_policy): `gputop watch` runs it, the dashboard's P key
    switches it on. Its guardrails are the point: read them before turning dry_run off."""

    # The dashboard starts with the policy on (`gputop watch` always runs it).
    enabled: bool = False
    # Decide and record, never act: what it would do goes to the audit log and the webhook.
    dry_run: bool = True
    # Problems whose action is of one of these classes drain their node (xid_codes.ACTION_CLASSES).
    drain_classes: tuple[ActionClass, ...] = _opt(("reset", "reboot", "support"), nonempty=True)
    # Circuit breaker: past either limit the policy stops acting until a person resets it.
    max_drains_per_hour: int = _opt(3, lo=1, hi=10_000, unit="nodes")
    max_partition_pct: float = _opt(10.0, lo=0, lo_open=True, hi=100, unit="percent of a partition's nodes")
    # Resume the policy's own drains once the node has had no such problem for this long; None: never.
    resume_after_clear_min: float | None = _opt(None, lo=0, lo_open=True, hi=10_080, unit="minutes")
    # A JSON POST per decision; None: no webhook.
    webhook_url: str | None = _opt(None, pattern=r"https?://\S+", pattern_hint="an http:// or https:// URL")
    webhook_format: WebhookFormat = "json"
    webhook_timeout_s: float = _opt(5.0, lo=0, lo_open=True, hi=60, unit="seconds")
    # None: $XDG_STATE_HOME/gputop/policy-<cluster>.json
    state_file: str | None = _opt(None, nonempty=True)


@dataclass(frozen=True, slots=True)
class Config:
    # May be empty: demo mode needs no cluster, and whoever starts the poller decides whether it must.
    clusters: tuple[ClusterConfig, ...] = ()
    default_cluster: str | None = _opt(None, nonempty=True)
    read_only: bool = False  # removes drain/resume and other dangerous actions from the UI
    # None: $XDG_STATE_HOME/gputop/audit.jsonl (gputop.actions.audit.audit_log_path)
    audit_log: str | None = _opt(None, nonempty=True)
    poll: PollConfig = field(default_factory=PollConfig)
    thresholds: Thresholds = field(default_factory=Thresholds)
    ui: UiConfig = field(default_factory=UiConfig)
    demo: DemoConfig = field(default_factory=DemoConfig)
    mig: MigConfig = field(default_factory=MigConfig)
    alerts: AlertsConfig = field(default_factory=AlertsConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    history: HistoryConfig = field(default_factory=HistoryConfig)
    source_name: str = _opt(DEFAULT_SOURCE_NAME, in_yaml=False)  # where it came from, for messages

    @staticmethod
    def default() -> Config:
        return Config()

    def cluster(self, name: str) -> ClusterConfig | None:
        for cluster in self.clusters:
            if cluster.name == name:
                return cluster
        return None

    @property
    def cluster_names(self) -> tuple[str, ...]:
        return tuple(cluster.name for cluster in self.clusters)


def parse_config(text: str, source_name: str = "<config>") -> Config:
    """The configuration in ``text``; ``ConfigError`` listing every problem if there is any."""
    # The reader builds the classes above, so it imports this module: it is imported when first used.
    from gputop.core.config_reader import read_config

    return read_config(text, source_name)


def schema_key_paths() -> tuple[str, ...]:
    """Every YAML key path the schema accepts, lists written as ``[]``: "clusters[].ssh.port", ..."""
    from gputop.core.config_reader import key_paths

    return tuple(key_paths(Config, ""))
