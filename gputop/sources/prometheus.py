"""The fleet from a Prometheus-compatible store its dcgm-exporters feed: Prometheus, VictoriaMetrics
(single node or cluster), Thanos, Mimir.

Each refresh (every `prometheus.interval_s`) asks one aggregated instant query per dcgm-exporter metric,
all at once: `max by (<host, GPU and MIG labels>) (METRIC)`, so the server answers one series per GPU
rather than every label a site attaches (pods, namespaces, driver versions), plus one for the time of
each GPU's latest sample (its data age). Answers come gzip-compressed and are decoded with orjson; the
series are joined into samples by gputop.core.dcgm_join. Between refreshes `collect` hands back the last
result at once.

What goes wrong is said, and the rest keeps updating: the store down, slow or answering an error (the
source's error, in the header, with the last good data kept and aged), a metric's query failing or
coming back partial (a note naming it), a node the config lists but the store has no series for (that
node DOWN, saying so). Credentials come from files or the environment and never appear in a message:
errors name the store by its scheme, host and port alone.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import gc
import logging
import math
import os
import ssl
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

import aiohttp

from gputop.core.config import ClusterConfig, PollConfig, PrometheusConfig
from gputop.core.dcgm_fields import (
    FB_USED,
    GPU_UTIL,
    JOIN_LABELS,
    METRICS,
    PLACE_LABELS,
    PROFILE_UTIL,
    SLOW_METRICS,
)
from gputop.core.dcgm_join import HOST_NAME, MAX_GPUS_PER_NODE, SAMPLE_TIME
from gputop.core.facts import NO_FACTS, NodeFacts
from gputop.core.models import IbPort, NodeSample, Reachability, SourceResult, XidEvent
from gputop.core.node_exporter_ib import IB_METRICS, PHYSICAL_STATE, PORT_LABELS, STATE
from gputop.core.node_past import NodePast, chart_step_s, past_from_steps
from gputop.sources.digest_worker import DigestWorker, WorkerGone
from gputop.sources.prometheus_history import node_steps, past_hour
from gputop.sources.store_answers import MAX_RESPONSE_BYTES, Bare, Digest, StoreError, inflate, parse_vector

__all__ = ["PrometheusSource", "StoreError", "parse_vector"]

if TYPE_CHECKING:
    from gputop.sources.ssh import SshSource

log = logging.getLogger(__name__)

TIME_QUERY: Final = FB_USED  # in every dcgm-exporter default field list
TENANT_HEADERS: Final = {"thanos": "THANOS-TENANT", "mimir": "X-Scope-OrgID"}


def query_url(config: PrometheusConfig) -> str:
    """Where instant queries go, for the store's flavor (a user and password in the URL are taken out:
    they go as basic auth, `start` says)."""
    parts = urlsplit(config.url or "")
    netloc = parts.netloc.rsplit("@", 1)[-1]
    base = parts._replace(netloc=netloc).geturl().rstrip("/")
    if config.flavor == "victoriametrics-cluster":
        return f"{base}/select/{config.tenant}/prometheus/api/v1/query"
    return f"{base}/api/v1/query"


def store_name(config: PrometheusConfig) -> str:
    """The store as messages name it: scheme, host and port, never a user, password, path or query."""
    parts = urlsplit(config.url or "")
    host = parts.hostname or "?"
    return f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")


def aggregated(metric: str, selector: str = "") -> str:
    """One series per GPU (or MIG instance) with only the labels that place it; ``selector``: which GPUs
    (`gpu_shards`)."""
    query = f"max by ({','.join(PLACE_LABELS)}) ({metric}{selector})"
    if metric == PROFILE_UTIL:
        # The profiling utilization is read only where the device's has no reading (the join prefers
        # the device's): most sites export both, and this is a tenth of a refresh's series.
        # (a percentage: DCGM's blanks are far above 100)
        query += f" unless (max by ({','.join(PLACE_LABELS)}) ({GPU_UTIL}{selector}) <= 100)"
    return query


def sample_times(with_identity: bool, selector: str = "") -> str:
    """When each GPU was last sampled; with its identity labels (UUID, model, PCI bus) where asked."""
    labels = ",".join(JOIN_LABELS if with_identity else PLACE_LABELS)
    return f"max by ({labels}) (timestamp({TIME_QUERY}{selector}))"


# A large fleet's answers are asked in parts, by GPU index: at 80,000 GPUs one answer is some 6 MB of
# JSON whose decoding holds the interpreter for some 50 ms (orjson is C and does not let go), during which
# a key press waits. In parts of at most SHARD_GPUS GPUs each decode is a few milliseconds.
SHARD_GPUS: Final = 10_000
MAX_SHARDS: Final = 16


def gpu_shards(count: int) -> list[str]:
    """Label matchers that split the GPUs into ``count`` parts by index (index % count), every index a
    node can have in exactly one; [""] for one part."""
    if count <= 1:
        return [""]
    return [
        '{gpu=~"' + "|".join(str(i) for i in range(MAX_GPUS_PER_NODE) if i % count == part) + '"}'
        for part in range(count)
    ]


# A worker that fails this many refreshes running is given up: the answers are then read in this process.
MAX_WORKER_FAILURES: Final = 3

# The slow metrics (limits, row-remap state, clock-event reasons) and the GPUs' identity are asked every
# SLOW_EVERY refreshes: half the queries, and half the series to read, of most refreshes.
SLOW_EVERY: Final = 4


def read_secret(path: str | None, variable: str | None, what: str) -> str | None:
    """A secret from its file (first line) or environment variable; StoreError says which is missing."""
    if path is not None:
        try:
            text = Path(os.path.expanduser(path)).read_text(encoding="utf-8", errors="replace")
        except OSError as err:
            raise StoreError(f"cannot read the {what} file {path}: {err.strerror or err}") from None
        return text.splitlines()[0].strip() if text.strip() else ""
    if variable is not None:
        value = os.environ.get(variable)
        if value is None:
            raise StoreError(f"the {what} variable {variable} is not set")
        return value
    return None


def headers_for(config: PrometheusConfig) -> dict[str, str]:
    headers = {"Accept-Encoding": "gzip", "Accept": "application/json"}
    token = read_secret(config.bearer_token_file, config.bearer_token_env, "bearer token")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    tenant_header = TENANT_HEADERS.get(config.flavor)
    if tenant_header and config.tenant:
        headers[tenant_header] = config.tenant
    return headers


def tls_for(config: PrometheusConfig) -> ssl.SSLContext | None:
    if not (config.url or "").startswith("https://"):
        return None
    try:
        context = ssl.create_default_context(
            cafile=os.path.expanduser(config.ca_file) if config.ca_file else None
        )
        if config.cert_file:
            context.load_cert_chain(
                os.path.expanduser(config.cert_file),
                os.path.expanduser(config.key_file) if config.key_file else None,
            )
    except (OSError, ssl.SSLError) as err:
        raise StoreError(f"the TLS files cannot be used: {err}") from None
    return context


class PrometheusSource:
    name = "prometheus"

    def __init__(
        self, cluster: ClusterConfig, clock: Callable[[], float], poll: PollConfig | None = None
    ) -> None:
        self.cluster = cluster
        self.poll = poll or PollConfig()
        # the node whose screen is open, read over SSH as well for its deep facts (drill)
        self._deep: SshSource | None = None
        self._deep_node: str | None = None
        self._deep_tasks: set[asyncio.Task[None]] = set()
        self.config = cluster.prometheus
        self.clock = clock
        self.store = store_name(self.config)
        self._session: aiohttp.ClientSession | None = None
        self._last = SourceResult()
        self._last_refresh_s: float | None = None
        self._refreshing: asyncio.Task[SourceResult] | None = None
        self._refresh_lock = asyncio.Lock()
        # what the last refresh could not read (a query failing, a partial answer, series without a host):
        # the poller shows it beside the source's name while the rest keeps updating
        self.warnings: tuple[str, ...] = ()
        self.history_note = ""  # what the start filled from the store's past, or why not
        self.last_refresh_wall_s: float | None = None  # how long the last refresh took
        self.last_answers_wall_s: float | None = None  # of which, waiting for the store's answers
        # the first sight of each GPU's last Xid (dcgm-exporter keeps the value, not its time)
        self._xid_seen: dict[tuple[str, int, int], float] = {}
        self._names = {name.lower(): name for name in cluster.node_names}
        self._history: list[tuple[float, SourceResult]] = []
        # The answers are decoded and joined by a process of its own (gputop.sources.digest_worker);
        # where it cannot be started, by this one's Digest on a thread (and said in the warnings).
        self._worker: DigestWorker | None = None
        self._local: Digest | None = None
        self._local_why = ""  # why the answers are read in this process
        self.worker_cpu_s = 0.0  # the worker's CPU so far (its processes', this source's life)
        self.worker_peak_rss_mb = 0.0
        self._worker_cpu_before_s = 0.0  # of workers that ended
        self._worker_failures = 0  # in a row
        self._refreshes = 0
        self._shards = 1  # the parts each metric is asked in (gpu_shards), from the last refresh's GPUs
        self._profile_needed = True  # some GPU's utilization comes from the profiling field
        # A store's series are as old as the exporters' last scrape (15-30 s at most sites) plus this
        # source's own cadence: a node is stale only past two refreshes and a scrape, down past four.
        self.stale_after_s = 2 * self.config.interval_s + 30.0
        self.down_after_s = 4 * self.config.interval_s + 60.0

    async def start(self) -> None:
        headers = headers_for(self.config)
        context = tls_for(self.config)
        in_url = urlsplit(self.config.url or "")
        user, password = None, None
        if in_url.username is not None:
            if "Authorization" in headers or self.config.basic_auth_user:
                why = f"the URL of {self.store} holds a user and password, and other credentials are given"
                raise StoreError(f"{why}: keep one")
            user, password = in_url.username, in_url.password or ""
        if self.config.basic_auth_user:
            config = self.config
            user = config.basic_auth_user
            password = read_secret(
                config.basic_auth_password_file, config.basic_auth_password_env, "basic auth password"
            )
        if user is not None:
            pair = f"{user}:{password or ''}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        timeout = aiohttp.ClientTimeout(total=self.config.timeout_s)
        connector = aiohttp.TCPConnector(ssl=context if context is not None else True, limit=32)
        # answers are read compressed and inflated where they are decoded (`store_answers.inflate`)
        self._session = aiohttp.ClientSession(
            headers=headers, timeout=timeout, connector=connector, auto_decompress=False
        )
        try:
            self._history = await self._past_hour(self._session)
        except StoreError as err:
            self.history_note = f"no history from the store at start: {err}"
        # The first refresh starts now, not at the first collect: a headless round waits for it
        # (awaiting_first_answer) beyond the poller's deadline, which a large fleet's refresh outlasts.
        self._last_refresh_s = self.clock()
        self._refreshing = asyncio.create_task(self._refresh(self._last_refresh_s))

    @property
    def awaiting_first_answer(self) -> bool:
        """No refresh has answered yet, and one is under way."""
        return not self._last.nodes and self._refreshing is not None and not self._refreshing.done()

    async def _past_hour(self, session: aiohttp.ClientSession) -> list[tuple[float, SourceResult]]:
        """The store's last hour, for the charts and trends at the first frame (take_history)."""
        url = query_url(self.config)
        count_body = await self.post(session, url, {"query": f"count({TIME_QUERY})"}, "count")
        counted, _ = parse_vector(count_body, "count")
        gpus = int(counted[0][1]) if counted else 0
        if gpus == 0:
            return []
        now_s = self.clock()

        async def post(form: dict[str, str], what: str) -> bytes:
            return await self.post(session, url + "_range", form, what)

        past, said = await past_hour(post, now_s, gpus, self.config.host_label)
        self.history_note = said
        return [
            (
                at_s,
                SourceResult(
                    tuple(self._named(j.sample, at_s, j.sample.facts, ()) for j in joined.nodes.values())
                ),
            )
            for at_s, joined in past
        ]

    def take_history(self) -> list[tuple[float, SourceResult]]:
        history, self._history = self._history, []
        return history

    async def node_past(self, node: str, window_s: float) -> NodePast | None:
        """``node``'s readings over the last ``window_s`` as the store keeps them, for its chart where
        gputop's own history does not reach that far; None: not a node of this store's. StoreError
        says why the store could not answer."""
        session = self._session
        host = node.lower()
        if (
            session is None
            or not HOST_NAME.fullmatch(host)
            or not any(n.name == node for n in self._last.nodes)
        ):
            return None
        step_s = chart_step_s(window_s, self.config.interval_s)
        now_s = self.clock()
        url = query_url(self.config) + "_range"

        async def post(form: dict[str, str], what: str) -> bytes:
            return await self.post(session, url, form, f"{what} of {node}")

        steps = await node_steps(post, host, self.config.host_label, window_s, step_s, now_s)
        named = [(at_s, dataclasses.replace(j.nodes[host].sample, name=node)) for at_s, j in steps]
        return await asyncio.to_thread(past_from_steps, node, window_s, step_s, now_s, named)

    def drill(self, node: str | None) -> None:
        """Reads ``node`` over SSH too while its screen is open (None: no node): what the store lacks,
        topology, NVLink status, processes, MIG listings, comes from there; the connection closes when
        the screen is left. Off with prometheus.ssh_on_node_screen: false."""
        if not self.config.ssh_on_node_screen or node == self._deep_node:
            return
        if self._deep is not None:
            self._spawn(self._deep.close())
            self._deep, self._deep_node = None, None
        if node is None:
            return
        from gputop.sources.ssh import SshSource  # asyncssh: loaded when a node screen first asks

        cluster = dataclasses.replace(self.cluster, nodeset=node, node_names=(node,))
        self._deep, self._deep_node = SshSource(cluster, self.poll, self.clock), node
        self._spawn(self._deep.start())

    def _spawn(self, work: Awaitable[None]) -> None:
        async def run() -> None:
            try:
                await work
            except Exception:  # a node that cannot be reached says so in its sample; nothing else fails
                log.exception("SSH to the node on screen failed")

        task = asyncio.create_task(run())
        self._deep_tasks.add(task)
        task.add_done_callback(self._deep_tasks.discard)

    async def _with_deep(self, result: SourceResult, now_s: float) -> SourceResult:
        """The store's nodes, the one on screen as SSH reads it where SSH answers (fresher, and with the
        facts the store lacks), else as the store has it."""
        deep = self._deep
        if deep is None or not deep.links:
            return result
        (sample,) = (await deep.collect(now_s)).nodes or (None,)
        if sample is None or sample.reachability is not Reachability.OK or not sample.gpus:
            return result
        nodes = tuple(_deeper(n, sample) if n.name == sample.name else n for n in result.nodes)
        return SourceResult(nodes, result.slurm, result.span_s)

    async def collect(self, now_s: float) -> SourceResult:
        due = self._last_refresh_s is None or now_s - self._last_refresh_s >= self.config.interval_s
        if due and (self._refreshing is None or self._refreshing.done()):
            self._last_refresh_s = now_s
            self._refreshing = asyncio.create_task(self._refresh(now_s))
        refreshing = self._refreshing
        if refreshing is not None and refreshing.done():
            self._refreshing = None
            if refreshing.cancelled():
                raise StoreError(f"{self.store}: the refresh was stopped before it answered")
            self._last = refreshing.result()  # a StoreError goes to the poller, which says it, keeps the last
        elif refreshing is not None and not self._last.nodes:
            # The first answer is waited for, within the poller's deadline. Shielded: the deadline ends the
            # wait, not the refresh (at 80,000 GPUs a refresh takes longer than a deadline of 5 s), whose
            # answer the next tick takes.
            self._last = await asyncio.shield(refreshing)
            self._refreshing = None
        return await self._with_deep(self._last, now_s)

    async def _refresh(self, now_s: float) -> SourceResult:
        async with self._refresh_lock:  # one at a time: the worker reads one refresh's frames at a time
            return await self._refresh_alone(now_s)

    async def _refresh_alone(self, now_s: float) -> SourceResult:
        session = self._session
        if session is None:
            raise StoreError("the source was not started")
        started = time.monotonic()
        url = query_url(self.config)
        slow = self._refreshes % SLOW_EVERY == 0
        self._refreshes += 1
        queries: list[tuple[str, str]] = []  # (metric, query)
        # The profiling utilization costs the store a read of every GPU's device utilization (its
        # `unless`), some tenth of a refresh, and at most sites answers nothing: asked with the slow
        # metrics, and every time while a GPU needs it (MIG, a site without the device's)
        profile = slow or self._profile_needed
        for selector in gpu_shards(self._shards):
            queries += [
                (metric, aggregated(metric, selector))
                for metric in METRICS
                if (slow or metric not in SLOW_METRICS) and (profile or metric != PROFILE_UTIL)
            ]
            queries.append((SAMPLE_TIME, sample_times(slow, selector)))
        # node_exporter's InfiniBand ports, where the store has them: states every time, rates slowly
        for metric in IB_METRICS if slow else (STATE, PHYSICAL_STATE):
            queries.append((metric, f"max by ({','.join(PORT_LABELS)}) ({metric})"))
        profile_answers: list[bool] = []  # whether each part of the profiling utilization held a series

        def noting(
            answer: Callable[[str, bytes, str], Awaitable[None]],
        ) -> Callable[[str, bytes, str], Awaitable[None]]:
            async def noted(metric: str, body: bytes, encoding: str) -> None:
                if metric == PROFILE_UTIL:
                    profile_answers.append(not _empty_vector(body, encoding))
                await answer(metric, body, encoding)

            return noted

        worker = await self._worker_for_refresh()
        if worker is None:
            arrived: list[tuple[str, bytes | BaseException, str]] = []

            async def keep(metric: str, body: bytes, encoding: str) -> None:
                arrived.append((metric, body, encoding))

            async def keep_failure(metric: str, why: str) -> None:
                arrived.append((metric, StoreError(why), ""))

            await self._ask(session, url, queries, noting(keep), keep_failure)
            self.last_answers_wall_s = time.monotonic() - started
            # seconds of CPU at 80,000 GPUs: on a thread, the event loop keeping its turns
            nodes, warnings = await asyncio.to_thread(self._digest, arrived, now_s)
        else:
            try:
                await worker.begin()
                await self._ask(
                    session, url, queries, noting(worker.answer), lambda _metric, why: worker.failed(why)
                )
                self.last_answers_wall_s = time.monotonic() - started
                nodes, warnings = await self._read_back(worker, now_s)
            except BaseException as err:
                # the worker's state is the refresh's half: a new one, asked for every metric, next time
                self._worker = None
                self._refreshes = 0
                self._worker_cpu_before_s = self.worker_cpu_s
                await worker.stop()
                if isinstance(err, WorkerGone):
                    self._worker_failures += 1
                    if self._worker_failures >= MAX_WORKER_FAILURES:
                        self._local_why = f"answers read in gputop's own process ({err})"
                        self._local = Digest(self.config.host_label, self.store)
                raise
            self._worker_failures = 0
        if profile:
            # a part that failed or did not answer counts as needed: asked again next time
            parts = len(gpu_shards(self._shards))
            self._profile_needed = len(profile_answers) < parts or any(profile_answers)
        # the next refresh asks in as many parts as this one's GPUs call for
        gpus = sum(len(node.gpus) for node in nodes)
        self._shards = min(MAX_SHARDS, max(1, math.ceil(gpus / SHARD_GPUS)))
        self.warnings = warnings + ((self._local_why,) if self._local_why else ())
        self.last_refresh_wall_s = time.monotonic() - started
        return SourceResult(tuple(nodes))

    async def _worker_for_refresh(self) -> DigestWorker | None:
        """The worker, started where there is none; None: this process reads the answers."""
        if self._worker is not None or self._local is not None:
            return self._worker
        try:
            self._worker = await DigestWorker.start(self.config.host_label, self.store)
        except OSError as err:
            log.warning("the store's answers are read in gputop's own process: %s", err)
            self._local_why = f"answers read in gputop's own process (no worker: {err.strerror or err})"
            self._local = Digest(self.config.host_label, self.store)
        return self._worker

    async def _ask(
        self,
        session: aiohttp.ClientSession,
        url: str,
        queries: list[tuple[str, str]],
        answer: Callable[[str, bytes, str], Awaitable[None]],
        failed: Callable[[str, str], Awaitable[None]],
    ) -> None:
        """Every query at once, each answer handed on as it arrives, compressed, with its Content-Encoding
        (a StoreError as its words)."""

        async def ask(metric: str, query: str) -> None:
            try:
                body, encoding = await self.post_raw(session, url, {"query": query}, metric)
            except StoreError as err:
                await failed(metric, str(err))
                return
            await answer(metric, body, encoding)

        await asyncio.gather(*(ask(metric, query) for metric, query in queries))

    async def _read_back(
        self, worker: DigestWorker, now_s: float
    ) -> tuple[list[NodeSample], tuple[str, ...]]:
        """The worker's nodes, a frame of them at a time with the event loop running between."""
        nodes: list[NodeSample] = []
        async for items in worker.finish():
            with _collector_paused():
                for bare, _facts, _ports in items:
                    host = bare.name
                    facts = worker.facts.get(host, NO_FACTS)
                    nodes.append(self._named(bare, now_s, facts, worker.ports.get(host, ())))
            await asyncio.sleep(0)
        done = worker.done
        if done is not None:
            self.worker_cpu_s = self._worker_cpu_before_s + done.cpu_s
            self.worker_peak_rss_mb = max(self.worker_peak_rss_mb, done.peak_rss_mb)
        self._add_missing(nodes)
        return nodes, done.notes if done is not None else ()

    def _digest(
        self, arrived: list[tuple[str, bytes | BaseException, str]], now_s: float
    ) -> tuple[list[NodeSample], tuple[str, ...]]:
        """The answers (metric, body or its failure, Content-Encoding) decoded and joined in this process
        (its Digest is touched nowhere else)."""
        if self._local is None:
            self._local = Digest(self.config.host_label, self.store)
        digest = self._local
        with _collector_paused():
            digest.begin()
            for at, (name, body, encoding) in enumerate(arrived):
                arrived[at] = (name, b"", "")  # each answer let go once it is joined
                if isinstance(body, BaseException):
                    digest.failed(str(body))
                else:
                    digest.add(name, body, encoding)
                del body
            samples, notes = digest.finish()
        ports = digest.ib
        nodes = [self._named(s, now_s, s.facts, ports.get(s.name, ())) for s in samples]
        self._add_missing(nodes)
        return nodes, notes

    def _add_missing(self, nodes: list[NodeSample]) -> None:
        """The nodes the config lists and the store has no series for, DOWN and saying so."""
        seen = {n.name for n in nodes}
        for name in self.cluster.node_names:
            if name not in seen:
                why = f"no dcgm-exporter series for {name} in {self.store}"
                nodes.append(NodeSample(name, Reachability.DOWN, None, error=why))

    async def post(self, session: aiohttp.ClientSession, url: str, form: dict[str, str], what: str) -> bytes:
        """One API call's answer, whole, inflated and bounded; StoreError saying what went wrong, never a
        secret."""
        body, encoding = await self.post_raw(session, url, form, what)
        return inflate(body, encoding, what)

    async def post_raw(
        self, session: aiohttp.ClientSession, url: str, form: dict[str, str], what: str
    ) -> tuple[bytes, str]:
        """One API call's answer as it came, whole and bounded, and its Content-Encoding."""
        try:
            async with session.post(url, data=form) as response:
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.content.iter_chunked(1 << 20):
                    size += len(chunk)
                    if size > MAX_RESPONSE_BYTES:
                        limit_mib = MAX_RESPONSE_BYTES >> 20
                        raise StoreError(f"{what}: the answer is larger than {limit_mib} MiB")
                    chunks.append(chunk)
                body = b"".join(chunks)
                encoding = response.headers.get("Content-Encoding", "")
                if response.status in (401, 403):
                    raise StoreError(f"{self.store} refused the credentials ({response.status})")
                # an error's document says more than its status: kept where it is one (inflated: errors
                # are small)
                if response.status >= 400 and not inflate(body, encoding, what).startswith(b"{"):
                    raise StoreError(f"{self.store} answered HTTP {response.status} for {what}")
        except TimeoutError:
            raise StoreError(
                f"{what}: no answer from {self.store} within {self.config.timeout_s:g}s"
            ) from None
        except aiohttp.ClientSSLError as err:
            raise StoreError(f"TLS with {self.store} failed: {_reason(err)}") from None
        except aiohttp.ClientError as err:
            raise StoreError(f"cannot reach {self.store}: {_reason(err)}") from None
        return body, encoding

    def _named(
        self, sample: NodeSample | Bare, now_s: float, facts: NodeFacts, ports: tuple[IbPort, ...]
    ) -> NodeSample:
        """The store's host as the cluster names the node (case as configured), with its facts and IB
        ports, and each GPU's last Xid dated by its first sight."""
        name = self._names.get(sample.name, sample.name)
        xids = tuple(self._dated(name, e, now_s) for e in sample.xid_events)
        return NodeSample(
            name,
            sample.reachability,
            sample.sampled_at_s,
            sample.gpus,
            self.cluster.gpus_per_node,
            None,
            ports,
            xids,
            facts,
            not_exported=sample.not_exported,
        )

    def _dated(self, node: str, event: XidEvent, now_s: float) -> XidEvent:
        key = (node, event.gpu_index if event.gpu_index is not None else -1, event.code)
        first = self._xid_seen.setdefault(key, event.time_s or now_s)
        return XidEvent(first, event.code, event.pci_bus_id, event.gpu_index, event.message)

    async def close(self) -> None:
        if self._deep is not None:
            await self._deep.close()
        if self._refreshing is not None:
            self._refreshing.cancel()
            await asyncio.wait({self._refreshing})  # its worker stopped with it
            if not self._refreshing.cancelled():
                self._refreshing.exception()  # said by the poller, or moot at the end
        if self._worker is not None:
            await self._worker.stop()
            self._worker = None
        if self._session is not None:
            await self._session.close()


SMALL_ANSWER_BYTES: Final = 512


def _empty_vector(body: bytes, encoding: str) -> bool:
    """Whether an answer is a success with no series (small, so inflated here: an empty vector is some
    60 bytes, gzipped under 100; a GPU's series make it larger than SMALL_ANSWER_BYTES)."""
    if len(body) > SMALL_ANSWER_BYTES:
        return False
    try:
        text = inflate(body, encoding, PROFILE_UTIL)
    except StoreError:
        return False
    return b'"status":"success"' in text and b'"result":[]' in text


def _deeper(stored: NodeSample, deep: NodeSample) -> NodeSample:
    """The node as SSH reads it, with what SSH has not read yet taken from the store: each slow fact
    until SSH's own run of it answers, the IB ports and Xid events until ibstat and the kernel log
    have (SSH's first seconds would otherwise clear the store's problems and raise them again)."""
    facts = deep.facts
    merged: dict[str, Any] = {n: (r if r.heard else getattr(stored.facts, n)) for n, r in facts.readings()}
    return dataclasses.replace(
        deep,
        facts=NodeFacts(**merged),
        ib_ports=deep.ib_ports if facts.ibstat.heard else stored.ib_ports,
        xid_events=deep.xid_events if facts.xid.heard else stored.xid_events,
    )


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while an answer's million small objects are made: each of
    its passes would walk them all again (decoding took four times as long with it running)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _reason(err: BaseException) -> str:
    """An aiohttp error's words without the URL it carries (which may hold a user or a query)."""
    text = str(getattr(err, "strerror", None) or getattr(err, "os_error", None) or type(err).__name__)
    return text[:200]
