"""The strict reader of gputop's configuration: YAML text in, the schema's frozen dataclasses
(gputop.core.config) out, or one ``ConfigError`` listing every problem, each as
``file:line: key.path: why``. One generic walker validates every section from the fields' metadata.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, fields, is_dataclass
from typing import Any, Final, Literal, NamedTuple, Union, get_args, get_origin, get_type_hints

import yaml

from gputop.core.config import (
    ClusterConfig,
    CommandOverride,
    Config,
    ConfigError,
    MigConfig,
    PollConfig,
    PrometheusConfig,
    SlurmConfig,
    Thresholds,
    UiConfig,
)
from gputop.core.config_wording import (
    describe,
    did_you_mean,
    looks_numeric,
    number_text,
    range_text,
    yaml_message,
)
from gputop.core.mig_layout import Refusal, parse_layout
from gputop.core.nodeset import expand_and_fold, fold_nodes, natural_key
from gputop.core.yaml_limits import TooLarge, check_expansion


def read_config(text: str, source_name: str = "<config>") -> Config:
    """The configuration in ``text``; ``ConfigError`` listing every problem if there is any."""
    data, lines, key_lines, problems = _load_yaml(text, source_name)
    if data is None:
        raise ConfigError(
            f"{source_name}: the configuration is empty; it needs at least a 'clusters:' list "
            "(see config.example.yaml)"
        )
    walker = _Walker(lines, key_lines)
    walker.problems.extend(problems)
    built = walker.build(Config, data, "")
    if walker.problems or not isinstance(built, Config):
        raise ConfigError(walker.messages(source_name))
    return dataclasses.replace(built, source_name=source_name)


# --- the walker ---------------------------------------------------------------------------------------


class _Spec(NamedTuple):
    name: str  # the dataclass field
    key: str  # the YAML key
    tp: Any
    meta: Mapping[str, Any]
    required: bool


@functools.cache
def _schema(cls: type) -> tuple[_Spec, ...]:
    hints = get_type_hints(cls)
    specs = []
    for f in fields(cls):
        meta = f.metadata
        if not meta.get("in_yaml", True):
            continue
        required = f.default is MISSING and f.default_factory is MISSING
        specs.append(_Spec(f.name, meta.get("key") or f.name, hints[f.name], meta, required))
    return tuple(specs)


def key_paths(cls: type, prefix: str) -> Iterable[str]:
    for spec in _schema(cls):
        path = f"{prefix}.{spec.key}" if prefix else spec.key
        yield path
        inner = _dataclass_in(spec.tp)
        if inner is not None:
            yield from key_paths(inner, path + ("[]" if get_origin(spec.tp) is tuple else ""))


def _dataclass_in(tp: Any) -> type | None:
    """The dataclass a field holds directly or as ``tuple[X, ...]``, if any."""
    if get_origin(tp) is tuple:
        tp = get_args(tp)[0]
    return tp if isinstance(tp, type) and is_dataclass(tp) else None


class _Walker:
    """Builds dataclasses from YAML data, recording every problem with the line it came from."""

    def __init__(self, lines: Mapping[str, int], key_lines: Mapping[str, int]) -> None:
        self.lines = lines
        self.key_lines = key_lines
        self.problems: list[tuple[int | None, str, str]] = []

    def report(self, path: str, why: str, *, at_key: bool = False) -> None:
        self.problems.append((self._line_of(path, at_key), path, why))

    def _line_of(self, path: str, at_key: bool) -> int | None:
        # A value's own line, else its key's (aliases and merged keys have no node of their own there),
        # else the nearest enclosing section's.
        while True:
            if at_key and path in self.key_lines:
                return self.key_lines[path]
            if path in self.lines:
                return self.lines[path]
            if path in self.key_lines:
                return self.key_lines[path]
            if not path:
                return None
            path = _parent(path)

    def messages(self, source_name: str) -> list[str]:
        ordered = sorted(enumerate(self.problems), key=lambda p: (p[1][0] or 0, p[0]))
        out: list[str] = []
        for _, (line, path, why) in ordered:
            where = f"{source_name}:{line}" if line is not None else source_name
            text = f"{where}: {path or 'top level'}: {why}"
            if text not in out:
                out.append(text)
        return out

    def build(self, cls: type, value: Any, path: str) -> Any:
        specs = _schema(cls)
        if value is None and not any(s.required for s in specs):
            return cls()  # a section left empty (all its keys commented out) means its defaults
        if not isinstance(value, dict):
            self.report(path, f"expected a mapping of keys, got {describe(value)}")
            return _INVALID
        by_key = {s.key: s for s in specs}
        for key in value:
            if not isinstance(key, str):
                self.report(path, f"key {describe(key)} is not text")
            elif key not in by_key:
                self.report(_join(path, key), _unknown_key(key, specs), at_key=True)
        values: dict[str, Any] = {}
        invalid: set[str] = set()
        for spec in specs:
            child = _join(path, spec.key)
            if spec.key not in value:
                if spec.required:
                    self.report(path, f"missing required key '{spec.key}'")
                    invalid.add(spec.name)
                continue
            parser = spec.meta.get("parse")
            if parser is not None:
                parsed = PARSERS[parser](self, value[spec.key], child)
                if parsed is None:
                    invalid.add(spec.name)
                else:
                    values.update(parsed)
                continue
            converted = self.convert(spec.tp, value[spec.key], child, spec.meta)
            if converted is _INVALID:
                invalid.add(spec.name)
            else:
                values[spec.name] = converted
        check = _CHECKS.get(cls)
        if check is not None:
            check(_Section(self, cls, path, value, values, invalid))
        if invalid:
            return _INVALID
        return cls(**values)

    def convert(self, tp: Any, value: Any, path: str, meta: Mapping[str, Any]) -> Any:
        origin = get_origin(tp)
        if origin in (Union, types.UnionType):
            members = [a for a in get_args(tp) if a is not type(None)]
            if value is None and len(members) < len(get_args(tp)):
                return None
            if bool in members and len(members) == 2:  # true, false or a word: verify_host_keys
                if isinstance(value, bool):
                    return value
                (words,) = (a for a in members if a is not bool)
                allowed = ("true", "false", *get_args(words))
                return self._choice(allowed, value, path, accepted=get_args(words))
            (inner,) = members
            return self.convert(inner, value, path, meta)
        if isinstance(tp, type) and is_dataclass(tp):
            return self.build(tp, value, path)
        if origin is Literal:
            return self._choice(get_args(tp), value, path)
        if origin is tuple:
            return self._list(get_args(tp)[0], value, path, meta)
        if tp is bool:
            if isinstance(value, bool):
                return value
            return self._wrong(path, "true or false", value)
        if tp is int:
            if isinstance(value, int) and not isinstance(value, bool):
                return self._in_range(value, path, meta)
            return self._wrong(path, "an integer", value)
        if tp is float:
            return self._number(value, path, meta)
        if tp is str:
            return self._text(value, path, meta)
        raise TypeError(f"config schema: no rule for {tp!r} at {path}")  # a bug in the schema, not input

    def _wrong(self, path: str, expected: str, value: Any, hint: str = "") -> Any:
        self.report(path, f"expected {expected}, got {describe(value)}{hint}")
        return _INVALID

    def _number(self, value: Any, path: str, meta: Mapping[str, Any]) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            hint = ""
            if isinstance(value, str) and looks_numeric(value):
                # YAML 1.1 reads 1e3 (no dot, no sign) and anything quoted as text.
                hint = "; write it as a plain number without quotes"
                if "e" in value.lower():
                    hint += " (exponents need a dot and a sign: 1.0e+3)"
            return self._wrong(path, "a number", value, hint)
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            return self._wrong(path, "a finite number", value)
        return self._in_range(number, path, meta, shown=value)

    def _in_range(self, number: float, path: str, meta: Mapping[str, Any], shown: Any = None) -> Any:
        lo, hi, lo_open = meta.get("lo"), meta.get("hi"), meta.get("lo_open", False)
        below = lo is not None and (number <= lo if lo_open else number < lo)
        above = hi is not None and number > hi
        if not (below or above):
            return number
        unit = meta.get("unit", "")
        shown_text = repr(number if shown is None else shown)
        self.report(
            path,
            f"{shown_text} is out of range; it must be {range_text(lo, hi, lo_open)}"
            + (f" ({unit})" if unit else ""),
        )
        return _INVALID

    def _text(self, value: Any, path: str, meta: Mapping[str, Any]) -> Any:
        if not isinstance(value, str):
            hint = "; put it in quotes" if not isinstance(value, dict | list) and value is not None else ""
            return self._wrong(path, "text", value, hint)
        if meta.get("nonempty") and not value.strip():
            self.report(path, "must not be empty")
            return _INVALID
        pattern = meta.get("pattern")
        if pattern is not None and not pattern.fullmatch(value):
            self.report(path, f"{value!r} is not allowed; {meta.get('pattern_hint') or 'invalid characters'}")
            return _INVALID
        return value

    def _choice(
        self, allowed: tuple[Any, ...], value: Any, path: str, accepted: tuple[Any, ...] | None = None
    ) -> Any:
        if isinstance(value, str) and value in (allowed if accepted is None else accepted):
            return value
        shown = repr(value) if isinstance(value, str) else describe(value)
        self.report(path, f"{shown} is not one of {', '.join(allowed)}{did_you_mean(value, allowed)}")
        return _INVALID

    def _list(self, item_type: Any, value: Any, path: str, meta: Mapping[str, Any]) -> Any:
        if value is None:
            return ()  # a list whose entries are all commented out, like an empty section
        if not isinstance(value, list):
            hint = f"; write [{value}] for a single entry" if isinstance(value, str) else ""
            return self._wrong(path, "a list", value, hint)
        items = [self.convert(item_type, item, f"{path}[{i}]", meta) for i, item in enumerate(value)]
        if any(item is _INVALID for item in items):
            return _INVALID
        return tuple(items)


class _Invalid:
    """Marks a value that failed validation (already reported); None is a valid value, so not None."""


_INVALID: Final = _Invalid()


# --- cross-field checks ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Section:
    """One mapping under validation: what the YAML gave and what passed, for checks across its keys."""

    walker: _Walker
    cls: type
    path: str
    raw: Mapping[Any, Any]
    values: dict[str, Any]  # field name -> validated value; missing keys are absent
    invalid: set[str]  # field names that failed on their own (their problem is already reported)

    def given(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def get(self, name: str) -> Any:
        """The validated value, the default when not given, or _INVALID."""
        if name in self.invalid:
            return _INVALID
        if name in self.values:
            return self.values[name]
        f = next(f for f in fields(self.cls) if f.name == name)
        return f.default_factory() if f.default is MISSING and f.default_factory is not MISSING else f.default

    def report(self, key: str, why: str) -> None:
        self.walker.report(_join(self.path, key), why)

    def shown(self, name: str) -> str:
        text = number_text(self.get(name))
        return text if self.given(name) else f"{text} by default"

    def ordered(self, low: str, high: str, *, strictly: bool) -> None:
        """Reports unless high > low (or >= when not strictly), on whichever of the two the YAML gave."""
        lo, hi = self.get(low), self.get(high)
        if lo is _INVALID or hi is _INVALID or hi > lo or (hi == lo and not strictly):
            return
        if self.given(high) or not self.given(low):
            relation = "greater than" if strictly else "at least"
            self.report(high, f"{self.shown(high)} must be {relation} {low} ({self.shown(low)})")
        else:
            relation = "less than" if strictly else "at most"
            self.report(low, f"{self.shown(low)} must be {relation} {high} ({self.shown(high)})")


def _check_config(s: _Section) -> None:
    names: dict[str, int] = {}
    clusters = s.raw.get("clusters")
    # Names come from the raw list so duplicates are found even in clusters that failed otherwise.
    if isinstance(clusters, list):
        for i, cluster in enumerate(clusters):
            name = cluster.get("name") if isinstance(cluster, dict) else None
            if not isinstance(name, str):
                continue
            if name in names:
                s.report(f"clusters[{i}].name", f"{name!r} is already the name of clusters[{names[name]}]")
            else:
                names[name] = i
    default = s.get("default_cluster")
    if isinstance(default, str) and default not in names:
        if names:
            why = f"{default!r} is not one of the clusters: {', '.join(names)}{did_you_mean(default, names)}"
        else:
            why = f"{default!r} names a cluster, but no clusters are configured"
        s.report("default_cluster", why)


def _check_cluster(s: _Section) -> None:
    _check_commands_unique(s)
    has_nodes, from_slurm = s.given("nodes"), s.given("nodes_from_slurm")
    prometheus = s.get("prometheus")
    from_store = isinstance(prometheus, PrometheusConfig) and prometheus.enabled
    if from_store and s.get("local") is True:
        s.report("prometheus.url", "local: true reads this machine over NVML; leave out one or the other")
    if "nodeset" not in s.invalid and "nodes_from_slurm" not in s.invalid:
        if has_nodes and from_slurm:
            s.report("nodes_from_slurm", "give either nodes or nodes_from_slurm, not both")
        elif not has_nodes and not from_slurm and not from_store:
            s.report(
                "",
                "needs nodes (a nodeset such as gpu[001-128]) "
                "or nodes_from_slurm (a Slurm partition, or all)",
            )
    slurm = s.get("slurm")
    if from_slurm and isinstance(slurm, SlurmConfig) and not slurm.enabled:
        s.report("nodes_from_slurm", "needs slurm.enabled: true, since the node list comes from sinfo")
    if s.get("local") is True:
        # NVML sees only the GPUs of the machine gputop runs on, so a local cluster is that one host.
        names = s.get("node_names")
        if from_slurm:
            s.report("local", "local: true reads only this machine; name it with nodes, not nodes_from_slurm")
        elif isinstance(names, tuple) and len(names) > 1:
            s.report(
                "nodes",
                f"local: true reads only this machine, but nodes names {len(names)} hosts; "
                "give its host name",
            )


def _check_command(s: _Section) -> None:
    if s.get("name") == "metrics" and s.get("enabled") is False:
        s.report("enabled", "the metrics stream cannot be switched off: every GPU figure comes from it")
    if s.get("name") == "metrics" and s.given("interval_s"):
        s.report("interval_s", "the metrics stream runs every poll.interval_s; set that instead")
    argv = s.get("argv")
    if argv == ():
        s.report("argv", "must not be empty; leave argv out to keep gputop's command")
    if s.get("name") == "metrics" and isinstance(argv, tuple) and not any("--query-gpu=" in a for a in argv):
        s.report("argv", "the metrics stream must ask nvidia-smi for --query-gpu=<fields>")


def _check_commands_unique(s: _Section) -> None:
    commands = s.raw.get("commands")
    if not isinstance(commands, list):
        return
    seen: dict[str, int] = {}
    for i, entry in enumerate(commands):
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name in seen:
            s.report(f"commands[{i}].name", f"{name!r} is already changed by commands[{seen[name]}]")
        elif isinstance(name, str):
            seen[name] = i


_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_slurm(s: _Section) -> None:
    env = s.get("env")
    if not isinstance(env, tuple):
        return
    for i, item in enumerate(env):
        name, equals, _value = item.partition("=")
        if not equals or not _ENV_NAME.fullmatch(name):
            s.report(
                f"env[{i}]", f"{item!r} is not NAME=value (for example SLURM_CONF=/etc/slurm-b/slurm.conf)"
            )


def _check_prometheus(s: _Section) -> None:
    for one, other in (
        ("bearer_token_file", "bearer_token_env"),
        ("basic_auth_password_file", "basic_auth_password_env"),
    ):
        if s.given(one) and s.given(other):
            s.report(other, f"give {one} or {other}, not both")
    has_password = s.given("basic_auth_password_file") or s.given("basic_auth_password_env")
    if s.given("basic_auth_user") != has_password:
        s.report(
            "basic_auth_user", "basic auth needs a user and a password (basic_auth_password_file or _env)"
        )
    if s.given("basic_auth_user") and (s.given("bearer_token_file") or s.given("bearer_token_env")):
        s.report("basic_auth_user", "give a bearer token or basic auth, not both")
    if s.given("key_file") and not s.given("cert_file"):
        s.report("key_file", "a client key needs its cert_file")
    if s.get("flavor") == "victoriametrics-cluster" and not s.given("tenant"):
        s.report("tenant", "VictoriaMetrics cluster needs the tenant (accountID, or accountID:projectID)")


def _check_poll(s: _Section) -> None:
    s.ordered("stale_after_s", "down_after_s", strictly=True)
    s.ordered("backoff_initial_s", "backoff_max_s", strictly=False)


def _check_thresholds(s: _Section) -> None:
    s.ordered("temp_warn_c", "temp_crit_c", strictly=True)


def _check_mig(s: _Section) -> None:
    presets = s.get("presets")
    if not isinstance(presets, tuple):
        return
    seen: dict[str, int] = {}
    for i, text in enumerate(presets):
        layout = parse_layout(text)
        if isinstance(layout, Refusal):
            s.report(f"presets[{i}]", layout.message)
            continue
        # The same layout written another way (1x7g.80gb, 7g.80gb) would be offered twice.
        if str(layout) in seen:
            s.report(f"presets[{i}]", f"{text!r} is the same layout as presets[{seen[str(layout)]}]")
        else:
            seen[str(layout)] = i


def _check_ui(s: _Section) -> None:
    pattern = s.get("rack_pattern")
    if not isinstance(pattern, str):
        return
    if len(pattern) > 200:
        s.report("rack_pattern", f"{len(pattern)} characters; at most 200")
        return
    try:
        re.compile(pattern)
    except re.error as error:
        s.report("rack_pattern", f"not a regular expression: {error}")


_CHECKS: Final[Mapping[type, Callable[[_Section], None]]] = {
    Config: _check_config,
    MigConfig: _check_mig,
    ClusterConfig: _check_cluster,
    CommandOverride: _check_command,
    PollConfig: _check_poll,
    PrometheusConfig: _check_prometheus,
    SlurmConfig: _check_slurm,
    Thresholds: _check_thresholds,
    UiConfig: _check_ui,
}


# --- YAML with line numbers -----------------------------------------------------------------------------


def _load_yaml(
    text: str, source_name: str
) -> tuple[Any, dict[str, int], dict[str, int], list[tuple[int | None, str, str]]]:
    """The data, the line of each value and key by path, and duplicate-key problems, from one parse."""
    loader: yaml.SafeLoader | None = None
    try:
        loader = yaml.SafeLoader(text)  # checks for unprintable characters at once
        node = loader.get_single_node()
        if node is None:
            return None, {}, {}, []
        lines: dict[str, int] = {}
        key_lines: dict[str, int] = {}
        problems: list[tuple[int | None, str, str]] = []
        check_expansion(node)
        # Indexed before construction, which flattens merge keys ("<<") into the mapping in place.
        _index(node, "", lines, key_lines, problems, set())
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as err:
        raise ConfigError(yaml_message(err, source_name)) from None
    except yaml.reader.ReaderError as err:
        line = text.count("\n", 0, err.position) + 1
        code = err.character if isinstance(err.character, int) else ord(err.character[:1] or "\0")
        why = f"unacceptable character #x{code:04x}: {err.reason}"
        raise ConfigError(f"{source_name}:{line}: invalid YAML: {why}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{source_name}: invalid YAML: {err}") from None
    except RecursionError:
        raise ConfigError(f"{source_name}: invalid YAML: nested too deeply") from None
    except TooLarge as err:
        raise ConfigError(f"{source_name}: refused: {err}") from None
    finally:
        if loader is not None:
            loader.dispose()
    return data, lines, key_lines, problems


def _index(
    node: yaml.Node,
    path: str,
    lines: dict[str, int],
    key_lines: dict[str, int],
    problems: list[tuple[int | None, str, str]],
    seen: set[int],
) -> None:
    # An alias is the same node object again: index it once, so a YAML alias bomb cannot blow up here.
    if id(node) in seen:
        return
    seen.add(id(node))
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue
            child = _join(path, str(key_node.value))
            line = key_node.start_mark.line + 1
            if key_node.value in first_line:
                problems.append(
                    (line, child, f"duplicate key; it is already given on line {first_line[key_node.value]}")
                )
                continue
            first_line[key_node.value] = line
            key_lines.setdefault(child, line)
            _index(value_node, child, lines, key_lines, problems, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _index(item, f"{path}[{i}]", lines, key_lines, problems, seen)


# --- small helpers ----------------------------------------------------------------------------------------


def _join(path: str, key: str) -> str:
    if not key:
        return path
    return f"{path}.{key}" if path else key


def _parent(path: str) -> str:
    if path.endswith("]"):
        i = path.rfind("[")
        if i > 0:
            return path[:i]
    i = path.rfind(".")
    return path[:i] if i > 0 else ""


def _unknown_key(key: str, specs: tuple[_Spec, ...]) -> str:
    allowed = sorted(s.key for s in specs)
    hint = did_you_mean(key, allowed)
    if not hint:
        # A key written one level too high, e.g. "user:" directly under a cluster instead of under ssh.
        for spec in specs:
            inner = _dataclass_in(spec.tp)
            if inner is not None and any(s.key == key for s in _schema(inner)):
                if get_origin(spec.tp) is tuple:
                    hint = f"; did you mean '{key}' inside each entry of {spec.key}?"
                else:
                    hint = f"; did you mean '{spec.key}.{key}'?"
                break
    return f"unknown key{hint} (allowed: {', '.join(allowed)})"


def parse_nodes(walker: _Walker, value: Any, path: str) -> dict[str, Any] | None:
    """``nodes:`` is nodeset text or a list of them; it fills both ``nodeset`` and ``node_names``."""
    wanted = "a nodeset such as gpu[001-128], or a list of them"
    if isinstance(value, str):
        items = [(path, value)]
    elif isinstance(value, list):
        if not value:
            walker.report(path, "the list of nodes is empty")
            return None
        items = [(f"{path}[{i}]", item) for i, item in enumerate(value)]
    else:
        walker.report(path, f"expected {wanted}, got {describe(value)}")
        return None
    names: list[str] = []
    listed_in: dict[str, str] = {}
    folded = ""
    ok = True
    for item_path, text in items:
        if not isinstance(text, str):
            walker.report(item_path, f"expected {wanted}, got {describe(text)}")
            ok = False
            continue
        try:
            expanded, folded = expand_and_fold(text)
        except ValueError as err:
            walker.report(item_path, str(err))
            ok = False
            continue
        # A node listed twice is almost always a typo in one of the ranges.
        again = [name for name in expanded if name in listed_in]
        if again:
            walker.report(item_path, f"{fold_nodes(again)} already listed in {listed_in[again[0]]}")
            ok = False
        for name in expanded:
            listed_in.setdefault(name, item_path)
        names.extend(expanded)
    if not ok:
        return None
    if len(items) > 1:
        folded = fold_nodes(names)
    return {"nodeset": folded, "node_names": tuple(sorted(names, key=natural_key))}


PARSERS: Final[Mapping[str, Callable[[_Walker, Any, str], dict[str, Any] | None]]] = {"nodes": parse_nodes}
