"""Shared test helpers: the sample factories of `tests/factories.py`, as fixtures for tests that prefer
them to an import; and a state directory of each test's own, so that what gputop keeps there (the event
history, the policy's state, a default audit log) never lands in the home directory of whoever runs
the tests, nor carries from one test to the next."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gputop.core.models import GpuSample, NodeSample
from tests.factories import gpu_sample, node_sample


@pytest.fixture(autouse=True)
def own_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


@pytest.fixture
def make_gpu() -> Callable[..., GpuSample]:
    return gpu_sample


@pytest.fixture
def make_node() -> Callable[..., NodeSample]:
    def make(name: str, gpus: Any = 8, **overrides: Any) -> NodeSample:
        return node_sample(name, gpus, **overrides)

    return make
