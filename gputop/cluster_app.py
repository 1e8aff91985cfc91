"""Which sources watch a cluster (a configured one, or the demo's simulator), and the app built on them.

Nothing here imports Textual at module level: the headless commands (`gputop check`, `gputop snapshot`)
build their sources here too.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from gputop.core.config import ClusterConfig, Config
from gputop.core.metrics import Metric

if TYPE_CHECKING:
    from gputop.clock import Clock
    from gputop.sim.demo import SimulatorSource
    from gputop.sources.base import Source
    from gputop.tui.app import GputopApp

DEMO_CLUSTER_NAME = "demo"
# The demo's past, replayed at start so charts and trends have an hour behind them at the first frame.
DEMO_HISTORY_S = 3600.0
# ...for up to this many nodes: beyond, the hour shrinks in proportion, down to what the idle tracker
# needs, so that a large demo's first frame does not wait for long (simulating an hour of 1,000 nodes,
# one-second steps with a derived snapshot a minute, takes about 5 s here; 180 nodes take under one).
DEMO_HISTORY_FULL_NODES = 180


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
    """What watches ``cluster``: NVML, a Prometheus-compatible store or SSH for its GPUs, and Slurm where
    slurm.enabled. A node list
    that comes from Slurm (nodes_from_slurm) is read here, once, before anything starts."""
    sources: list[Source] = []
    if cluster.local:
        from gputop.sources.nvml import NvmlSource

        sources.append(NvmlSource(cluster.node_names[0]))
    else:
        if cluster.nodes_from_slurm is not None:
            cluster = with_nodes_from_slurm(cluster)
        if cluster.prometheus.enabled:
            from gputop.sources.prometheus import PrometheusSource

            sources.append(PrometheusSource(cluster, clock.now, config.poll))
        else:
            from gputop.sources.ssh import SshSource

            sources.append(SshSource(cluster, config.poll, clock.now))
    if cluster.slurm.enabled:
        from gputop.sources.slurm import SlurmSource

        sources.append(SlurmSource(cluster, clock.now, poll=config.poll))
    return sources


def demo_source(config: Config, clock: Clock) -> SimulatorSource:
    """The simulator for ``config.demo``, started an hour before now: its past is replayed to the poller,
    so the first frame has an hour of history behind its charts and trends, and GPUs held idle show as
    idle rather than after the configured minutes."""
    from gputop.sim.demo import SimulatorSource

    if TYPE_CHECKING:
        from gputop.sim.simulator import SimulatedCluster

    demo = config.demo
    shrunk_s = DEMO_HISTORY_S * min(1.0, DEMO_HISTORY_FULL_NODES / max(1, demo.nodes))
    # never less than the idle tracker needs to call a GPU idle at the first frame
    history_s = max(shrunk_s, config.thresholds.idle_minutes * 60.0 + 60.0)
    now_s = clock.now()

    def cluster() -> SimulatedCluster:
        # Imported here, in the source's start, off the event loop: the first frame need not wait for
        # the simulator and numpy to load.
        from gputop.sim.simulator import SimulatedCluster

        return SimulatedCluster(
            nodes=demo.nodes,
            gpus_per_node=demo.gpus_per_node,
            gpu_model=demo.gpu_model,
            seed=demo.seed,
            start_time_s=now_s - history_s,
            origin_s=now_s,  # the incidents as fresh at the first frame as they would be with no past
        )

    return SimulatorSource(cluster, history_s=history_s)


def with_nodes_from_slurm(cluster: ClusterConfig) -> ClusterConfig:
    """``cluster`` with the node names sinfo lists for its nodes_from_slurm; LaunchError when Slurm cannot
    say."""
    import dataclasses

    from gputop.core.nodeset import fold_nodes
    from gputop.sources.slurm import ReadFailed, nodes_from_slurm

    what = "every node" if cluster.nodes_from_slurm == "all" else f"partition {cluster.nodes_from_slurm!r}"
    try:
        names = _run_async(lambda: nodes_from_slurm(cluster))
    except ReadFailed as err:
        reason = " / ".join(line.strip() for line in str(err).splitlines() if line.strip())
        raise LaunchError(
            f"cluster {cluster.name!r}: cannot list the nodes of {what} from Slurm (nodes_from_slurm): "
            f"{reason}. Fix that, or list the nodes with `nodes:`"
        ) from None
    return dataclasses.replace(cluster, nodeset=fold_nodes(names), node_names=names)


_T = TypeVar("_T")


def _run_async(make: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Runs a coroutine to its end from synchronous code, also when called inside a running loop."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(make())).result()


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
        host_keys_unverified=not cluster.local and cluster.ssh.verify_host_keys is False,
    )
    return GputopApp(settings)
