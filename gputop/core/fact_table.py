"""A node's typed facts from a source's tables by command name (gputop.sources.commands): the one place a
fact is looked up by its name. Apart from gputop.core.facts, whose record the parsers' own models hold."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from gputop.core.facts import UNREAD, NodeFacts, Reading
from gputop.core.parsers.compute_apps import ComputeAppsResult
from gputop.core.parsers.gpu_list import GpuList
from gputop.core.parsers.ib import IbStat
from gputop.core.parsers.mig import MigComputeInstances, MigGpuInstances, MigPlacements, MigProfiles
from gputop.core.parsers.nvlink import NvlinkStatus
from gputop.core.parsers.nvlink_errors import NvlinkErrors
from gputop.core.parsers.smi_counters import SmiCounters
from gputop.core.parsers.topo import Topology
from gputop.core.parsers.xid import XidLog

_V = TypeVar("_V")


def node_facts(
    values: Mapping[str, object], read_at_s: Mapping[str, float], errors: Mapping[str, str]
) -> NodeFacts:
    """The typed record of what a node's slow commands gave. A value of another type than its field's
    (a site's parser that is not the usual one) is an error, never a value of the wrong kind."""

    def reading(name: str, kind: type[_V]) -> Reading[_V]:
        value = values.get(name)
        error = errors.get(name)
        if value is not None and not isinstance(value, kind):
            value, error = None, error or f"{name}: parsed as {type(value).__name__}, not {kind.__name__}"
        if value is None and error is None:
            return UNREAD
        return Reading(value, read_at_s.get(name) if value is not None else None, error)

    return NodeFacts(
        gpu_list=reading("gpu_list", GpuList),
        topology=reading("topology", Topology),
        nvlink=reading("nvlink", NvlinkStatus),
        mig_gip=reading("mig_gip", MigProfiles),
        mig_gipp=reading("mig_gipp", MigPlacements),
        mig_gi=reading("mig_gi", MigGpuInstances),
        mig_ci=reading("mig_ci", MigComputeInstances),
        ibstat=reading("ibstat", IbStat),
        xid=reading("xid", XidLog),
        processes=reading("processes", ComputeAppsResult),
        counters=reading("counters", SmiCounters),
        nvlink_errors=reading("nvlink_errors", NvlinkErrors),
    )
