"""One parse per distinct output, shared; bounded per kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputop.core.parsers.common import ParseFailure
from gputop.sources.parse_cache import ParseCache

TOPO = sorted((Path(__file__).parent / "fixtures" / "nvidia-smi-topo").glob("*.txt"))


def test_the_same_output_is_one_shared_value() -> None:
    cache = ParseCache()
    text = TOPO[0].read_text()
    first = cache.parse("topo", text)
    assert not isinstance(first, ParseFailure)
    assert cache.parse("topo", str(text)) is first
    assert (cache.hits, cache.misses) == (1, 1)
    other = cache.parse("topo", TOPO[1].read_text())
    assert other is not first and other != first


def test_each_kind_is_bounded_on_its_own() -> None:
    cache = ParseCache(max_entries_per_kind=2)
    topo = cache.parse("topo", TOPO[0].read_text())
    for pid in range(10):  # a process list that differs every time
        cache.parse("compute-apps", f"GPU-0, {pid}, python, 100\n")
    assert cache.parse("topo", TOPO[0].read_text()) is topo, "churn in one kind must not evict another"
    assert not isinstance(cache.parse("compute-apps", "GPU-0, 9, python, 100\n"), ParseFailure)
    assert cache.misses == 11  # the newest is kept
    cache.parse("compute-apps", "GPU-0, 1, python, 100\n")
    assert cache.misses == 12  # an early one was evicted: parsed again


def test_failures_and_unknown_kinds() -> None:
    cache = ParseCache()
    failure = cache.parse("topo", "garbage\n")
    assert isinstance(failure, ParseFailure)
    assert cache.parse("topo", "garbage\n") is not failure  # not kept: asked again, parsed again
    with pytest.raises(KeyError):
        cache.parse("no-such-kind", "")
