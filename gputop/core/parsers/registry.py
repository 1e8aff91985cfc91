"""Every parser by kind, for `gputop parse` and for the sources' command table."""

from __future__ import annotations

import importlib

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


def registry() -> dict[str, ParserInfo]:
    found: dict[str, ParserInfo] = {}
    for name in PARSER_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue  # a parser family not built yet
        found.update(module.PARSERS)
    return found
