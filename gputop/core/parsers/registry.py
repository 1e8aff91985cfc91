"""Every parser by kind, for `gputop parse` and for the sources' command table.

The parsers of a tool's own layout (nvidia-smi's tables and CSV, ibstat, the MIG listings) are given the
output with its terminal escape sequences taken out (gputop.core.parsers.escapes): drivers 590 and later
underline the header of ``topo -m`` even into a pipe. The others read text that cluster users write
(process names, kernel log lines quoting them, Slurm's job names and reasons): an escape there is kept, to
be shown as the evidence it is.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from gputop.core.parsers.common import ParserInfo
from gputop.core.parsers.escapes import strip_terminal_escapes

# Modules that define PARSERS: dict[str, ParserInfo].
PARSER_MODULES = (
    "gputop.core.parsers.query_gpu",
    "gputop.core.parsers.compute_apps",
    "gputop.core.parsers.gpu_list",
    "gputop.core.parsers.xid",
    "gputop.core.parsers.topo",
    "gputop.core.parsers.nvlink",
    "gputop.core.parsers.nvlink_errors",
    "gputop.core.parsers.smi_counters",
    "gputop.core.parsers.ib",
    "gputop.core.parsers.mig",
    "gputop.core.parsers.slurm",
)
# Those whose outputs are a tool's own layout, read without terminal escapes.
LAYOUT_MODULES = frozenset(
    {
        "gputop.core.parsers.query_gpu",
        "gputop.core.parsers.gpu_list",
        "gputop.core.parsers.topo",
        "gputop.core.parsers.nvlink",
        "gputop.core.parsers.nvlink_errors",
        "gputop.core.parsers.smi_counters",
        "gputop.core.parsers.ib",
        "gputop.core.parsers.mig",
    }
)


def _without_escapes(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    @functools.wraps(parse)
    def parse_plain(text: str) -> Any:
        return parse(strip_terminal_escapes(text))

    return parse_plain


@functools.cache  # the modules are fixed: gathered once, not at every slow-fact run
def registry() -> Mapping[str, ParserInfo]:
    found: dict[str, ParserInfo] = {}
    for name in PARSER_MODULES:
        parsers: Mapping[str, ParserInfo] = importlib.import_module(name).PARSERS
        if name in LAYOUT_MODULES:
            parsers = {
                kind: dataclasses.replace(info, parse=_without_escapes(info.parse))
                for kind, info in parsers.items()
            }
        found.update(parsers)
    return MappingProxyType(found)
