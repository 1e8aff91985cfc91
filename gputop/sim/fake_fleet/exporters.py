"""The fake fleet's exporters over HTTP, for a real Prometheus to scrape: dcgm-exporter's /metrics for
every node (as one target: `/metrics`, or one per node: `/nodes/<node>/metrics`), and node_exporter's
InfiniBand ports (`/node_exporter/metrics`). Sites differ, and so do the nodes here: even-numbered nodes
label as dcgm-exporter does by default (`Hostname`, `UUID`, the device utilization, no profiling fields),
odd-numbered ones as a relabelled site with profiling fields only (`hostname`, `uuid`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from gputop.core.models import NodeSample, Reachability
from gputop.sim.dcgm_text import ExporterStyle, exposition, node_exporter_ib
from gputop.sim.simulator import SimulatedCluster

DEFAULT_STYLE = ExporterStyle()
RELABELLED_STYLE = ExporterStyle(host_label="hostname", uuid_label="uuid", device_util=False, profiling=True)


@dataclass
class Exporters:
    host: str
    port: int
    runner: web.AppRunner

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def close(self) -> None:
        await self.runner.cleanup()


def style_of(cluster: SimulatedCluster, node: str) -> ExporterStyle:
    return DEFAULT_STYLE if cluster.node_names.index(node) % 2 == 0 else RELABELLED_STYLE


async def serve_exporters(
    cluster: SimulatedCluster, clock: Callable[[], float], host: str = "127.0.0.1", port: int = 0
) -> Exporters:
    def answering() -> list[NodeSample]:
        cluster.advance_to(clock())
        # a node that stopped answering stops being scraped too
        return [
            n
            for n in cluster.result().nodes
            if n.reachability is Reachability.OK and n.sampled_at_s == cluster.now_s
        ]

    async def every_node(_request: web.Request) -> web.Response:
        nodes = answering()
        text = "".join(exposition([n], style_of(cluster, n.name)) for n in nodes)
        return web.Response(text=text, content_type="text/plain")

    async def one_node(request: web.Request) -> web.Response:
        name = request.match_info["node"]
        node = next((n for n in answering() if n.name == name), None)
        if node is None:
            raise web.HTTPNotFound(text=f"no node {name[:64]!r} answering\n")
        return web.Response(text=exposition([node], style_of(cluster, name)), content_type="text/plain")

    async def infiniband(_request: web.Request) -> web.Response:
        return web.Response(text=node_exporter_ib(answering()), content_type="text/plain")

    app = web.Application()
    app.router.add_get("/metrics", every_node)
    app.router.add_get("/nodes/{node}/metrics", one_node)
    app.router.add_get("/node_exporter/metrics", infiniband)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1] if runner.addresses else port  # the port the system picked for 0
    return Exporters(host, bound, runner)
