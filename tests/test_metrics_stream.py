"""The stream assembler: whole GPU sets only, and broken output said in words."""

from __future__ import annotations

from gputop.core.parsers.query_gpu import QUERY_GPU_FIELDS
from gputop.sources.metrics_stream import GARBAGE_LIMIT, MetricsAssembler
from tests.test_parsers_metrics import stream_line


def line(index: int, util: str = "50", mig: str = "Disabled") -> bytes:
    cells = stream_line(
        index=str(index),
        uuid=f"GPU-{index:08x}-0000-0000-0000-000000000000",
        pci__bus_id=f"00000000:{0x18 + index:02X}:00.0",
        utilization__gpu=util,
        mig__mode__current=mig,
    )
    return (cells + "\n").encode()


def test_a_set_is_published_when_all_expected_gpus_arrived() -> None:
    assembler = MetricsAssembler(QUERY_GPU_FIELDS, expected_gpus=4)
    assert [assembler.feed(line(i)) for i in range(4)] == [False, False, False, True]
    assert assembler.complete is not None
    assert [g.index for g in assembler.complete] == [0, 1, 2, 3]


def test_without_an_expected_count_the_next_interval_closes_the_set() -> None:
    assembler = MetricsAssembler(QUERY_GPU_FIELDS)
    for i in (0, 1, 2):
        assert not assembler.feed(line(i))
    assert assembler.feed(line(0)), "index 0 again: the previous interval is complete"
    assert assembler.complete is not None and len(assembler.complete) == 3
    assert assembler.flush()
    assert len(assembler.complete) == 1


def test_missing_gpu_still_publishes_a_set_of_seven() -> None:
    assembler = MetricsAssembler(QUERY_GPU_FIELDS, expected_gpus=8)
    for i in (0, 1, 2, 3, 4, 6, 7):
        assembler.feed(line(i))
    assert assembler.feed(line(0))
    assert assembler.complete is not None and [g.index for g in assembler.complete] == [0, 1, 2, 3, 4, 6, 7]


def test_mig_gpu_utilization_is_none_not_zero() -> None:
    assembler = MetricsAssembler(QUERY_GPU_FIELDS, expected_gpus=1)
    assert assembler.feed(line(0, util="[N/A]", mig="Enabled"))
    assert assembler.complete is not None
    gpu = assembler.complete[0]
    assert gpu.util_pct is None and gpu.mig_enabled is True


def test_garbage_and_non_utf8_become_a_reason_not_an_exception() -> None:
    assembler = MetricsAssembler(QUERY_GPU_FIELDS, expected_gpus=2)
    for _ in range(GARBAGE_LIMIT):
        assert not assembler.feed(b"\xff\xfe\x00garbage, , ,\x9f\n")
    assert assembler.error is not None and "unreadable output" in assembler.error
    assert assembler.bad_lines == GARBAGE_LIMIT
    # good lines clear it
    assembler.feed(line(0))
    assert assembler.feed(line(1))
    assert assembler.error is None


def test_rows_of_numbers_with_the_right_width_are_garbage_not_gpus() -> None:
    """A broken stream's rows of numbers, as many as the query's columns, must not pass for GPUs with
    absurd readings (a GPU 15830 at 41990 % and 79 kW)."""
    width = len(QUERY_GPU_FIELDS)
    numbers = ", ".join(str(41990 + i) for i in range(width))
    assembler = MetricsAssembler(QUERY_GPU_FIELDS, expected_gpus=1)
    for _ in range(GARBAGE_LIMIT):
        assert not assembler.feed(f"{numbers}\n".encode())
    assert assembler.complete is None
    assert assembler.error is not None and "unreadable output" in assembler.error
    # an index out of any node's range, with a real UUID, is not a GPU either
    out_of_range = line(0).replace(b"0, GPU-", b"5000, GPU-", 1)
    assert not MetricsAssembler(QUERY_GPU_FIELDS, expected_gpus=1).feed(out_of_range)


def test_a_fake_node_printing_garbage_never_shows_a_gpu() -> None:
    from gputop.sim.fake_fleet.faults import Faults
    from gputop.sim.fake_fleet.responder import Responder
    from gputop.sim.simulator import SimulatedCluster

    cluster = SimulatedCluster(nodes=1, gpus_per_node=8, seed=42, start_time_s=1_800_000_000.0)
    responder = Responder(cluster, Faults({}))
    assembler = MetricsAssembler(QUERY_GPU_FIELDS, expected_gpus=8)
    for _ in range(200):  # 1,600 lines: some are rows of numbers exactly as wide as the query
        assembler.feed_lines(responder.garbage(8).split(b"\n"))
        assembler.flush()
    assert assembler.complete is None, assembler.complete


def test_driver_error_text_is_named() -> None:
    assembler = MetricsAssembler(QUERY_GPU_FIELDS, expected_gpus=8)
    assembler.feed(b"Unable to determine the device handle for GPU0000:18:00.0: Unknown Error\n")
    assert assembler.error is not None and "lost" in assembler.error
    assert assembler.complete is None


def test_a_burst_as_large_as_the_last_set_is_whole() -> None:
    assembler = MetricsAssembler(QUERY_GPU_FIELDS)
    for i in range(3):
        assembler.feed(line(i))
    assert not assembler.burst_complete(), "no earlier set: the size is not known yet"
    assembler.flush()
    assembler.feed(line(0))
    assembler.feed(line(1))
    assert not assembler.burst_complete(), "two of three: wait for the rest"
    assembler.feed(line(2))
    assert assembler.burst_complete()


def test_an_expected_count_decides_a_burst() -> None:
    assembler = MetricsAssembler(QUERY_GPU_FIELDS, expected_gpus=2)
    assert not assembler.burst_complete()
    assembler.feed(line(0))
    assert not assembler.burst_complete()


def test_each_sample_is_read_with_the_processes_of_its_uuid() -> None:
    from gputop.core.models import GpuProcess

    trainer = (GpuProcess(4242, "python", 30000.0, "alice"),)
    uuid = "GPU-00000001-0000-0000-0000-000000000000"
    processes = {uuid: trainer}
    assembler = MetricsAssembler(QUERY_GPU_FIELDS, expected_gpus=2, processes=processes)
    assembler.feed(line(0))
    assert assembler.feed(line(1, util="[N/A]"))  # the careful reader joins them too
    assert assembler.complete is not None
    assert [g.processes for g in assembler.complete] == [(), trainer]
    assert assembler.complete_processes is processes


def test_a_set_whose_processes_changed_while_it_came_in_says_so() -> None:
    assembler = MetricsAssembler(QUERY_GPU_FIELDS, expected_gpus=2)
    assembler.feed(line(0))
    assembler.processes = {}  # a new processes fact landed between two lines of one interval
    assert assembler.feed(line(1))
    assert assembler.complete_processes is None
    assembler.feed(line(0))
    assert assembler.feed(line(1))
    assert assembler.complete_processes is assembler.processes


def test_a_refused_field_is_named_and_not_counted_as_garbage() -> None:
    assembler = MetricsAssembler(QUERY_GPU_FIELDS, expected_gpus=2)
    refusal = b'Field "remapped_rows.pending" is not a valid field to query.\n'
    assert not assembler.feed_lines([refusal] * GARBAGE_LIMIT)
    assert assembler.rejected_field == "remapped_rows.pending"
    assert assembler.bad_lines == 0 and assembler.error is None


def test_a_chunk_of_lines_publishes_each_set_it_completes() -> None:
    assembler = MetricsAssembler(QUERY_GPU_FIELDS, expected_gpus=2)
    assert assembler.feed_lines([line(0), line(1), b"", line(0)])
    assert assembler.complete is not None and [g.index for g in assembler.complete] == [0, 1]
    assert assembler.feed_lines([line(1)])
    assert not assembler.feed_lines([b"   ", line(0)])
