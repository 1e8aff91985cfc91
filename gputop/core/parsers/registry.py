"""Every parser by kind, for `gputop parse` and for the sources' command table."""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from types import MappingProxyType

from gputop.core.parsers.common import ParserInfo

# Modules that define PARSERS: dict[str, ParserInfo].
PARSER_MODULES = (
    "gputop.core.parsers.query_gpu",
    "gputop.core.parsers.compute_apps",
    "gputop.core.parsers.gpu_list",
    "gputop.core.parsers.xid",
    "gputop.core.parsers.topo",
    "gputop.core.parsers.nvlink",
    "gputop.core.parsers.ib",
    "gputop.core.parsers.mig",
    "gputop.core.parsers.slurm",
)


@functools.cache  # the modules are fixed: gathered once, not at every slow-fact run
def registry() -> Mapping[str, ParserInfo]:
    found: dict[str, ParserInfo] = {}
    for name in PARSER_MODULES:
        found.update(importlib.import_module(name).PARSERS)
    return MappingProxyType(found)
