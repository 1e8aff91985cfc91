"""Building the app for a configured cluster: which sources watch it, and how the UI is told about them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputop.core.config import ClusterConfig, Config
from gputop.core.metrics import Metric

if TYPE_CHECKING:
    from gputop.clock import Clock
    from gputop.sources.base import Source
    from gputop.tui.app import GputopApp


class LaunchError(Exception):
    """The config names something gputop cannot watch; the message says what to do."""


def choose_cluster(config: Config, name: str | None) -> ClusterConfig:
    if not config.clusters:
        raise LaunchError(f"{config.source_name} lists no clusters; add one or run gputop --demo")
    wanted = name or config.default_cluster
    if wanted is None:
        return config.clusters[0]
    found = config.cluster(wanted)
    if found is None:
        known = ", ".join(c.name for c in config.clusters)
        raise LaunchError(f"no cluster named {wanted!r} in {config.source_name} (clusters: {known})")
    return found


def sources_for(cluster: ClusterConfig, config: Config, clock: Clock) -> list[Source]:
    if cluster.local:
        from gputop.sources.nvml import NvmlSource

        return [NvmlSource(cluster.node_names[0])]
    if cluster.nodes_from_slurm is not None:
        raise LaunchError(
            f"cluster {cluster.name!r}: taking the node list from Slurm (nodes_from_slurm) is not "
            "available yet; list the nodes with `nodes:`"
        )
    from gputop.sources.ssh import SshSource

    return [SshSource(cluster, config.poll, clock.now)]


def build_cluster_app(
    config: Config,
    cluster: ClusterConfig,
    *,
    theme: str | None = None,
    read_only: bool = False,
    metric: Metric | None = None,
    clock: Clock | None = None,
) -> GputopApp:
    from gputop.clock import SystemClock
    from gputop.tui.app import AppSettings, GputopApp

    real_clock: Clock = clock if clock is not None else SystemClock()
    settings = AppSettings(
        config=config,
        cluster_name=cluster.name,
        sources=sources_for(cluster, config, real_clock),
        clock=real_clock,
        theme=theme,
        read_only=read_only,
        metric=metric,
        host_keys_unverified=not cluster.local and not cluster.ssh.verify_host_keys,
    )
    return GputopApp(settings)
