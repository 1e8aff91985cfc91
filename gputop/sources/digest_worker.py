"""The store's answers decoded and joined in a process of its own, beside gputop's.

At 80,000 GPUs a refresh is some million series: two seconds of CPU to decode and join. On a thread of
gputop's own process that work holds the interpreter in turns with the event loop, and every system call
the loop makes (reading a key, writing a frame) can wait a switch interval (5 ms) to get it back: keys
pressed during a refresh waited tens of milliseconds. Here the work runs on another core, or at least
under the kernel's scheduler rather than the interpreter's lock, and gputop's process only reads back the
nodes, a few hundred at a time, between which the event loop runs.

The source sends each answer as soon as it arrives (the process decodes while the rest are still being
asked), then asks for the nodes. Between the two processes, frames on the worker's stdin and stdout: a
kind byte, a payload length, the payload. What the worker sends back is pickled by it and read only by
the process that started it. A node's facts (counters, NVLink errors) and IB ports, which change seldom,
travel only when they changed since the worker last sent that node's: a fresh worker sends them all.

If the worker dies or stops answering, the refresh fails with a StoreError saying so (the last good data
stays, aged) and the next refresh starts another.

    python -m gputop.sources.digest_worker     (started by the source, never by hand)
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import pickle
import resource
import struct
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from functools import partial
from itertools import islice
from pathlib import Path
from typing import IO, Final

from gputop.core.facts import NO_FACTS, NodeFacts
from gputop.core.models import GpuSample, IbPort, NodeSample, Reachability, XidEvent, new_gpu_sample
from gputop.sources.store_answers import Bare, Digest, StoreError

FRAME: Final = struct.Struct(">cI")  # kind, payload length
# to the worker
SETUP, BEGIN, ANSWER, FAILED, FINISH = b"S", b"B", b"A", b"E", b"F"
# from the worker
NODES, DONE, BROKEN = b"N", b"D", b"X"
CHUNK_NODES: Final = 200  # nodes a frame: unpickled in some 5 ms at 8 GPUs a node here
MAX_FRAME_BYTES: Final = 512 * 1024 * 1024
FINISH_WITHIN_S: Final = 120.0  # the worker's join and its nodes, after the last answer
WORKER_NICE: Final = 10  # below the dashboard: its event loop answers keys while answers are decoded


# One node as the source reads it: the sample's own fields, and its facts and IB ports each only when
# they changed since the worker last sent that node's (None: as before).
Item = tuple[Bare, NodeFacts | None, tuple[IbPort, ...] | None]
# The same as the worker pickles it: the Bare's fields and each GpuSample as plain tuples. A NamedTuple
# is pickled through a call of its Python method `__getnewargs__`, 80,000 of them a refresh: plain
# tuples pickle in two fifths of the time and unpickle in half, and the source makes the NamedTuples
# again by loops in C (`_items_of`).
_PlainBare = tuple[
    str, Reachability, float | None, tuple[tuple[object, ...], ...], tuple[XidEvent, ...], frozenset[str]
]
_PlainItem = tuple[_PlainBare, NodeFacts | None, tuple[IbPort, ...] | None]
_AS_GPU: Final = partial(new_gpu_sample, GpuSample)


@dataclass(frozen=True, slots=True)
class Done:
    notes: tuple[str, ...]
    cpu_s: float  # the worker's CPU since it started
    peak_rss_mb: float  # its peak resident memory


class WorkerGone(StoreError):
    """The worker died, stopped answering or broke its frames: it is stopped; the next refresh starts
    another."""


# ---- the worker's side


def serve(inp: IO[bytes], out: IO[bytes]) -> None:
    """Frames in, frames out, until the source closes the worker's stdin."""
    digest: Digest | None = None
    sent_facts: dict[str, NodeFacts] = {}
    sent_ports: dict[str, tuple[IbPort, ...]] = {}
    while True:
        header = inp.read(FRAME.size)
        if len(header) < FRAME.size:
            return
        kind, size = FRAME.unpack(header)
        payload = inp.read(size)
        if len(payload) < size:
            return
        if kind == SETUP:
            host_label, store = pickle.loads(payload)  # noqa: S301 - from the process that started this one
            digest = Digest(host_label, store)
            continue
        if digest is None:
            _send(out, BROKEN, b"the worker was not set up")
            continue
        if kind == BEGIN:
            gc.disable()  # each of its passes would walk the answers' million objects again
            digest.begin()
        elif kind == ANSWER:
            name, _, rest = payload.partition(b"\0")
            encoding, _, body = rest.partition(b"\0")
            del payload, rest
            digest.add(name.decode("utf-8", "replace"), body, encoding.decode("ascii", "replace"))
        elif kind == FAILED:
            digest.failed(payload.decode("utf-8", "replace"))
        elif kind == FINISH:
            try:
                nodes, notes = digest.finish_lazily()
                # each frame sent as soon as its nodes are made: the source reads one while the next is made
                sent_facts, sent_ports = _send_nodes(out, nodes, digest, sent_facts, sent_ports)
            except StoreError as err:
                _send(out, BROKEN, str(err).encode())
                continue
            finally:
                gc.enable()
            _send(out, DONE, pickle.dumps((notes, time.process_time(), _peak_rss_mb())))


def _send_nodes(
    out: IO[bytes],
    nodes: Iterator[NodeSample],
    digest: Digest,
    sent_facts: dict[str, NodeFacts],
    sent_ports: dict[str, tuple[IbPort, ...]],
) -> tuple[dict[str, NodeFacts], dict[str, tuple[IbPort, ...]]]:
    """The nodes in frames of CHUNK_NODES; returns what the source now holds of each node's facts and
    ports (those of nodes gone from the store are dropped on both sides)."""
    now_facts: dict[str, NodeFacts] = {}
    now_ports: dict[str, tuple[IbPort, ...]] = {}
    ib = digest.ib
    while True:
        items: list[_PlainItem] = []
        for sample in islice(nodes, CHUNK_NODES):
            host = sample.name
            facts, ports = sample.facts, ib.get(host, ())
            now_facts[host], now_ports[host] = facts, ports
            earlier_facts, earlier_ports = sent_facts.get(host), sent_ports.get(host)
            new_facts = (
                None
                if earlier_facts is not None and (facts is earlier_facts or facts == earlier_facts)
                else facts
            )
            new_ports = None if earlier_ports is not None and ports == earlier_ports else ports
            reachability, sampled_at_s = sample.reachability, sample.sampled_at_s
            gpus = tuple(map(tuple, sample.gpus))
            bare = (host, reachability, sampled_at_s, gpus, sample.xid_events, sample.not_exported)
            items.append((bare, new_facts, new_ports))
        if not items:
            return now_facts, now_ports
        _send(out, NODES, pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL))


def _peak_rss_mb() -> float:
    """This process's own peak (VmHWM: ru_maxrss would count gputop's, which it had when it started)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _send(out: IO[bytes], kind: bytes, payload: bytes) -> None:
    out.write(FRAME.pack(kind, len(payload)))
    out.write(payload)
    out.flush()


def main() -> None:
    # stdout carries the frames alone: anything printed goes to stderr instead
    out = os.fdopen(os.dup(1), "wb", buffering=1 << 20)
    os.dup2(2, 1)
    inp = os.fdopen(0, "rb", buffering=1 << 20)
    gc.freeze()  # what the imports made is never garbage
    # The decoding is background work: where the CPUs are busy (a small VM, a store on the same machine),
    # the dashboard's event loop goes first and a refresh takes a little longer.
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICE)
    with contextlib.suppress(BrokenPipeError, KeyboardInterrupt):
        serve(inp, out)


# ---- the source's side


def _items_of(plain: list[_PlainItem]) -> list[Item]:
    return [
        (Bare(name, reachability, at_s, tuple(map(_AS_GPU, gpus)), xids, unread), facts, ports)
        for (name, reachability, at_s, gpus, xids, unread), facts, ports in plain
    ]


class DigestWorker:
    """The worker process, as the source drives it: `start`, then per refresh `begin`, `answer` or
    `failed` per query, and `finish` for the nodes; `close` at the end. Any failure of the worker is a
    WorkerGone, after which this object is spent."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        if process.stdin is None or process.stdout is None:
            raise OSError("the worker was started without its pipes")
        self._process = process
        self._stdin, self._stdout = process.stdin, process.stdout
        self.facts: dict[str, NodeFacts] = {}  # by host: what the worker last sent
        self.ports: dict[str, tuple[IbPort, ...]] = {}
        self.done: Done | None = None  # the last refresh's end

    @classmethod
    async def start(cls, host_label: str | None, store: str) -> DigestWorker:
        """The worker started (OSError when it cannot be)."""
        package_root = str(Path(__file__).resolve().parents[2])
        path = os.environ.get("PYTHONPATH")
        env = {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gputop.sources.digest_worker",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # the terminal's signals are gputop's to handle, not the worker's
        )
        worker = cls(process)
        await worker._send(SETUP, pickle.dumps((host_label, store)))
        return worker

    @property
    def alive(self) -> bool:
        return self._process.returncode is None

    async def begin(self) -> None:
        await self._send(BEGIN, b"")

    async def answer(self, metric: str, body: bytes, encoding: str) -> None:
        """One query's answer as it came (compressed: it is inflated here, in the worker)."""
        await self._send(ANSWER, metric.encode() + b"\0" + encoding.encode("ascii", "replace") + b"\0", body)

    async def failed(self, why: str) -> None:
        await self._send(FAILED, why.encode())

    async def finish(self) -> AsyncIterator[list[Item]]:
        """The nodes, a frame at a time (the event loop runs between them); `done` holds the end.
        StoreError when no query answered; WorkerGone when the worker failed."""
        await self._send(FINISH, b"")
        deadline = asyncio.get_running_loop().time() + FINISH_WITHIN_S
        while True:
            kind, payload = await self._receive(deadline)
            if kind == NODES:
                items = _items_of(pickle.loads(payload))  # noqa: S301 - made by this process's own child
                for bare, facts, ports in items:
                    if facts is not None:
                        # no facts at all: the one shared object, as a join in this process gives
                        self.facts[bare.name] = NO_FACTS if facts == NO_FACTS else facts
                    if ports is not None:
                        self.ports[bare.name] = ports
                yield items
            elif kind == DONE:
                self.done = Done(*pickle.loads(payload))  # noqa: S301 - as above
                return
            elif kind == BROKEN:
                raise StoreError(payload.decode("utf-8", "replace")[:300])
            else:
                await self.stop()
                raise WorkerGone("the decoding process sent a frame it should not have; it was stopped")

    async def _send(self, kind: bytes, *parts: bytes) -> None:
        stdin = self._stdin
        try:
            stdin.write(FRAME.pack(kind, sum(len(p) for p in parts)))
            for part in parts:
                stdin.write(part)
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise await self._gone() from None

    async def _receive(self, deadline: float) -> tuple[bytes, bytes]:
        stdout = self._stdout
        try:
            async with asyncio.timeout_at(deadline):
                kind, size = FRAME.unpack(await stdout.readexactly(FRAME.size))
                if size > MAX_FRAME_BYTES:
                    raise await self._gone()
                return kind, await stdout.readexactly(size)
        except asyncio.IncompleteReadError:
            raise await self._gone() from None
        except TimeoutError:
            await self.stop()
            raise WorkerGone(
                f"the decoding process gave no nodes within {FINISH_WITHIN_S:g}s; it was stopped"
            ) from None

    async def _gone(self) -> WorkerGone:
        await self.stop()
        code = self._process.returncode
        return WorkerGone(f"the process decoding the store's answers stopped (exit status {code})")

    async def stop(self) -> None:
        """The worker ended: asked (its stdin closed), then killed if it does not within a second."""
        process = self._process
        if not self._stdin.is_closing():
            self._stdin.close()
        if process.returncode is None:
            try:
                await asyncio.wait_for(process.wait(), 1.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()


if __name__ == "__main__":
    main()  # (what it pickles is only the core's types and builtins: none are this module's __main__)
