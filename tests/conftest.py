"""Shared test helpers: the sample factories of `tests/factories.py`, as fixtures for tests that prefer
them to an import."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gputop.core.models import GpuSample, NodeSample
from tests.factories import gpu_sample, node_sample


@pytest.fixture
def make_gpu() -> Callable[..., GpuSample]:
    return gpu_sample


@pytest.fixture
def make_node() -> Callable[..., NodeSample]:
    def make(name: str, gpus: Any = 8, **overrides: Any) -> NodeSample:
        return node_sample(name, gpus, **overrides)

    return make
