"""The `/` filter language for node rows.

Terms are separated by spaces and must all match:
  temp>85  util<5  mem>=90  power>600  gpus<8   numeric comparisons (>, >=, <, <=, =, !=)
  state=down  slurm=drain  sev=crit               text fields (prefix match, case-insensitive)
  kind=interconnect  kind=xid                     nodes with a problem of that kind (prefix match)
  gpu[001-016]                                    a node set
  idle  idle>=4                                   GPUs held idle by a running job (Slurm's idle: slurm=idle)
  xid  drain  gpu04                               plain text: part of the name, states or problems
  !term                                           negation
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputop.core.nodeset import expand_nodeset

if TYPE_CHECKING:  # summary imports the job rows, whose filter uses this module: types only here
    from gputop.core.summary import NodeRow

Predicate = Callable[["NodeRow"], bool]

COMPARISON = re.compile(r"^(?P<field>[a-z_]+)\s*(?P<op>>=|<=|!=|=|>|<)\s*(?P<value>.+)$")
DANGLING = re.compile(r"^(?P<field>[a-z_]+)\s*(?P<op>>=|<=|!=|=|>|<)\s*$")
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
    "=": operator.eq,
    "!=": operator.ne,
}


def _mem(row: NodeRow) -> float | None:
    return row.mem_pct


NUMERIC_FIELDS: dict[str, Callable[[NodeRow], float | None]] = {
    "temp": lambda r: r.temp_max_c,
    "util": lambda r: r.util_mean_pct,
    "maxutil": lambda r: r.util_max_pct,
    "mem": _mem,
    "power": lambda r: r.power_w,
    "gpus": lambda r: float(r.gpu_count),
    "problems": lambda r: float(len(r.problems)),
    "idle": lambda r: float(r.idle_gpu_count),
}
TEXT_FIELDS: dict[str, Callable[[NodeRow], str]] = {
    "name": lambda r: r.name,
    "state": lambda r: r.reachability.value,
    "slurm": lambda r: r.slurm_state or "",
    "sev": lambda r: r.severity.value,
}


class FilterError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class NodeFilter:
    text: str
    predicates: tuple[Predicate, ...]

    def __call__(self, row: NodeRow) -> bool:
        return all(predicate(row) for predicate in self.predicates)


def parse_filter(text: str) -> NodeFilter:
    """Compile a filter; raises FilterError with a message naming the bad term."""
    predicates = tuple(_term(term) for term in text.split())
    return NodeFilter(text=text.strip(), predicates=predicates)


def _term(term: str) -> Predicate:
    if term.startswith("!") and len(term) > 1:
        inner = _term(term[1:])
        return lambda row: not inner(row)
    if term.lower() == "idle":
        return lambda row: row.idle_gpu_count > 0
    match = COMPARISON.match(term.lower())
    dangling = DANGLING.match(term.lower())
    if dangling and dangling["field"] in (*NUMERIC_FIELDS, *TEXT_FIELDS, "kind"):
        # 'temp>' half typed: a name search for 'temp>' would empty the table
        raise FilterError(f"'{term}': a value must follow {dangling['op']}")
    if match:
        return _comparison(term, match["field"], match["op"], match["value"])
    if "[" in term:
        try:
            members = frozenset(expand_nodeset(term))
        except ValueError as err:
            raise FilterError(f"'{term}' is not a node set: {err}") from None
        return lambda row: row.name in members
    needle = term.lower()
    return lambda row: needle in _haystack(row)


def _comparison(term: str, field: str, op: str, value: str) -> Predicate:
    if field in NUMERIC_FIELDS:
        try:
            threshold = float(value)
        except ValueError:
            raise FilterError(f"'{term}': {field} compares with a number, not '{value}'") from None
        getter = NUMERIC_FIELDS[field]
        compare = OPERATORS[op]

        def numeric(row: NodeRow) -> bool:
            actual = getter(row)
            return actual is not None and compare(actual, threshold)

        return numeric
    if field == "kind":
        if op not in ("=", "!="):
            raise FilterError(f"'{term}': kind takes = or !=, not {op}")
        kind = value.lower()
        negate_kind = op == "!="
        return lambda row: any(p.kind.startswith(kind) for p in row.problems) != negate_kind
    if field in TEXT_FIELDS:
        if op not in ("=", "!="):
            raise FilterError(f"'{term}': {field} takes = or !=, not {op}")
        text_getter = TEXT_FIELDS[field]
        wanted = value.lower()
        negate = op == "!="
        return lambda row: text_getter(row).lower().startswith(wanted) != negate
    known = ", ".join([*NUMERIC_FIELDS, *TEXT_FIELDS, "kind"])
    raise FilterError(f"'{term}': unknown field '{field}' (known: {known})")


def _haystack(row: NodeRow) -> str:
    parts = [row.name, row.reachability.value, row.slurm_state or "", row.severity.value]
    parts.extend(problem.message for problem in row.problems)
    return " ".join(parts).lower()
