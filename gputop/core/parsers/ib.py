"""InfiniBand/RoCE adapters and ports from `ibstat`, `ibstatus` and `ibv_devinfo`, in one shape.

The three tools spell the same facts differently ("Active", "4: ACTIVE", "PORT_ACTIVE (4)"); states are
normalised to ibstat's words so the UI and health rules compare one vocabulary. Copies of these outputs
often have tabs expanded to spaces, so lines are read by their keys, never by indentation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gputop.core.models import IbFailure, IbPort
from gputop.core.parsers.common import ParseFailure, ParserInfo

PORT_STATES = {1: "Down", 2: "Init", 3: "Armed", 4: "Active", 5: "ActiveDefer"}
PHYSICAL_STATES = {
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "PhyTest",
}
# Names as each tool prints them, lowercased with "PORT_", "_" and spaces removed.
_STATE_BY_NAME = {name.lower(): name for name in PORT_STATES.values()} | {"initializing": "Init"}
_PHYSICAL_BY_NAME = {name.lower(): name for name in PHYSICAL_STATES.values()}


@dataclass(frozen=True, slots=True)
class IbPortInfo:
    number: int
    state: str | None  # Down, Init, Armed, Active, ActiveDefer
    physical_state: str | None  # LinkUp, Disabled, Polling, Sleep, PortConfigurationTraining, ...
    rate_gbps: float | None  # link rate in Gb/s (bits), all lanes: 400 for 4X NDR
    base_lid: int | None
    sm_lid: int | None
    link_layer: str | None  # InfiniBand or Ethernet (RoCE)
    port_guid: str | None
    lmc: int | None = None
    capability_mask: str | None = None
    rate_detail: str | None = None  # width and speed where printed: "4X HDR", "4X 2.5 Gbps"
    default_gid: str | None = None


@dataclass(frozen=True, slots=True)
class IbAdapter:
    name: str  # mlx5_0
    ca_type: str | None  # MT4129
    num_ports: int | None
    firmware: str | None
    hw_version: str | None
    node_guid: str | None
    ports: tuple[IbPortInfo, ...] = ()
    system_image_guid: str | None = None


@dataclass(frozen=True, slots=True)
class IbStat:
    adapters: tuple[IbAdapter, ...] = ()
    notes: tuple[str, ...] = ()
    failed: tuple[IbFailure, ...] = ()

    def to_ports(self) -> tuple[IbPort, ...]:
        return tuple(
            IbPort(
                ca_name=adapter.name,
                port=port.number,
                state=port.state or "Unknown",
                physical_state=port.physical_state or "Unknown",
                rate_gbps=port.rate_gbps,
                # ibstat printed no link layer before RoCE existed: those ports are InfiniBand
                link_layer=port.link_layer or "InfiniBand",
            )
            for adapter in self.adapters
            for port in adapter.ports
        )


# Raw "key: value" text gathered per adapter and port, keyed by canonical names, before conversion.
@dataclass(slots=True)
class _RawPort:
    number: int
    fields: dict[str, str]


@dataclass(slots=True)
class _RawAdapter:
    name: str
    fields: dict[str, str]
    ports: list[_RawPort]

    def port(self, number: int) -> _RawPort:
        for port in self.ports:
            if port.number == number:
                return port
        self.ports.append(_RawPort(number, {}))
        return self.ports[-1]


_KEY_VALUE = re.compile(r"^\s*([^:]+?)\s*:\s*(.*?)\s*$")


def _key_value(line: str) -> tuple[str, str] | None:
    match = _KEY_VALUE.match(line)
    return (match.group(1), match.group(2)) if match else None


def _normalised(raw: str, by_code: dict[int, str], by_name: dict[str, str]) -> str | None:
    """'Active', '4: ACTIVE', 'PORT_ACTIVE (4)', 'LINK_UP (5)' -> the ibstat word; None if unknown."""
    code = re.search(r"^(\d+):|\((\d+)\)$", raw)
    name = re.sub(r"^\d+:\s*|\s*\(\d+\)$", "", raw).strip().lower()
    name = name.removeprefix("port_").replace("_", "").replace(" ", "")
    if name in by_name:
        return by_name[name]
    if code:
        return by_code.get(int(code.group(1) or code.group(2)))
    return None


def _int(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        return int(raw, 16) if raw.lower().startswith("0x") else int(raw)
    except ValueError:
        return None


def _text(raw: str | None) -> str | None:
    return raw if raw and raw.lower() not in ("unknown", "n/a") else None


def _rate(fields: dict[str, str]) -> tuple[float | None, str | None, bool]:
    """Rate in Gb/s, its detail, and whether a printed rate could not be read."""
    if "rate" in fields:
        # ibstat: "400"; ibstatus: "200 Gb/sec (4X HDR)"
        match = re.match(r"^([\d.]+)\s*(?:Gb/sec)?\s*(?:\((.*)\))?$", fields["rate"])
        if not match:
            return None, None, True
        try:
            return float(match.group(1)), match.group(2), False
        except ValueError:
            return None, None, True
    if "active_width" in fields and "active_speed" in fields:
        # ibv_devinfo -v: width "4X (2)" times per-lane speed "2.5 Gbps (1)"
        width = re.match(r"^(\d+)X", fields["active_width"])
        speed = re.match(r"^([\d.]+)\s*Gbps", fields["active_speed"])
        if not (width and speed):
            return None, None, True
        try:
            lane_gbps = float(speed.group(1))
        except ValueError:
            return None, None, True
        return int(width.group(1)) * lane_gbps, f"{width.group(1)}X {speed.group(1)} Gbps", False
    return None, None, False


def _port(adapter: str, raw: _RawPort, notes: list[str]) -> IbPortInfo:
    label = f"{adapter} port {raw.number}"
    fields = raw.fields
    state = _normalised(fields["state"], PORT_STATES, _STATE_BY_NAME) if "state" in fields else None
    if state is None:
        notes.append(f"{label}: state {fields.get('state', 'missing')!r} unreadable")
    physical = None
    if "physical_state" in fields:
        physical = _normalised(fields["physical_state"], PHYSICAL_STATES, _PHYSICAL_BY_NAME)
        if physical is None:
            notes.append(f"{label}: physical state {fields['physical_state']!r} unreadable")
    rate_gbps, rate_detail, rate_unreadable = _rate(fields)
    if rate_unreadable:
        notes.append(f"{label}: rate unreadable")
    numbers = {key: _int(fields.get(key)) for key in ("base_lid", "sm_lid", "lmc")}
    for key, value in numbers.items():
        if value is None and fields.get(key):
            notes.append(f"{label}: {key} {fields[key]!r} unreadable")
    return IbPortInfo(
        number=raw.number,
        state=state,
        physical_state=physical,
        rate_gbps=rate_gbps,
        base_lid=numbers["base_lid"],
        sm_lid=numbers["sm_lid"],
        link_layer=_text(fields.get("link_layer")),
        port_guid=_text(fields.get("port_guid")),
        lmc=numbers["lmc"],
        capability_mask=_text(fields.get("capability_mask")),
        rate_detail=rate_detail,
        default_gid=_text(fields.get("default_gid")),
    )


def _build(raw_adapters: list[_RawAdapter], notes: list[str]) -> IbStat:
    adapters = []
    for raw in raw_adapters:
        fields = raw.fields
        num_ports = _int(fields.get("num_ports"))
        ports = tuple(_port(raw.name, port, notes) for port in raw.ports)
        if not ports:
            notes.append(f"{raw.name}: no ports listed (output cut short?)")
        elif num_ports is not None and num_ports != len(ports):
            listed = f"{len(ports)} of {num_ports} ports listed"
            notes.append(f"{raw.name}: {listed} (one port asked for, or output cut short)")
        adapters.append(
            IbAdapter(
                name=raw.name,
                ca_type=_text(fields.get("ca_type")),
                num_ports=num_ports,
                firmware=_text(fields.get("firmware")),
                hw_version=_text(fields.get("hw_version")),
                node_guid=_text(fields.get("node_guid")),
                ports=ports,
                system_image_guid=_text(fields.get("system_image_guid")),
            )
        )
    return IbStat(tuple(adapters), tuple(notes))


def _empty_or_failure(kind: str, text: str) -> IbStat | ParseFailure:
    if not text.strip():
        return IbStat(notes=("no adapters listed",))
    return ParseFailure(kind, "no adapter found", text.strip()[:200])


_IBSTAT_ADAPTER = {
    "CA type": "ca_type",
    "Number of ports": "num_ports",
    "Firmware version": "firmware",
    "Hardware version": "hw_version",
    "Node GUID": "node_guid",
    "System image GUID": "system_image_guid",
}
_IBSTAT_PORT = {
    "State": "state",
    "Physical state": "physical_state",
    "Rate": "rate",
    "Base lid": "base_lid",
    "LMC": "lmc",
    "SM lid": "sm_lid",
    "Capability mask": "capability_mask",
    "Port GUID": "port_guid",
    "Link layer": "link_layer",
}


def parse_ibstat(text: str) -> IbStat | ParseFailure:
    adapters: list[_RawAdapter] = []
    port: _RawPort | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if ca := re.match(r"^CA\s+'([^']+)'$", stripped):
            adapters.append(_RawAdapter(ca.group(1), {}, []))
            port = None
        elif adapters and (number := re.match(r"^Port\s+(\d+):$", stripped)):
            port = adapters[-1].port(int(number.group(1)))
        elif adapters and (pair := _key_value(line)):
            key, value = pair
            if port is not None and key in _IBSTAT_PORT:
                port.fields[_IBSTAT_PORT[key]] = value
            elif key in _IBSTAT_ADAPTER:
                adapters[-1].fields[_IBSTAT_ADAPTER[key]] = value
    if not adapters:
        return _empty_or_failure("ibstat", text)
    return _build(adapters, [])


# infiniband-diags' IBPANIC: "ibpanic: [2137592] main: stat of IB device 'mthca0' failed: No such file or
# directory", then exit(-1); the adapters listed before it were printed to stdout.
_PANIC = re.compile(r"^(?:ibpanic:\s*(?:\[\d+\]\s*)?(?:\w+:\s*)?)?(?P<said>.*)$")
_STAT_FAILED = re.compile(r"stat of IB device '(?P<name>[^']{1,64})' failed(?::\s*(?P<why>.*))?")
_MAX_FAILURES = 64


def ibstat_failures(stderr: str, exit_status: int | None) -> tuple[IbFailure, ...]:
    """What ibstat's stderr and exit status say it could not read: each adapter it names, or (a failure
    naming none) its first line. Nothing when it exited 0."""
    if not exit_status:
        return ()
    failures: list[IbFailure] = []
    first = ""
    for line in stderr.splitlines():
        panic = _PANIC.match(line.strip())
        said = panic.group("said").strip() if panic else line.strip()
        first = first or said
        stat = _STAT_FAILED.search(said)
        if stat is not None and len(failures) < _MAX_FAILURES:
            failures.append(IbFailure(stat.group("name"), said))
    if not failures:
        failures.append(IbFailure(None, first or f"exit status {exit_status}, and nothing said"))
    return tuple(failures)


def with_failures(
    listing: IbStat | ParseFailure, stderr: str, exit_status: int | None
) -> IbStat | ParseFailure:
    """ibstat's listing with the adapters it could not read; a listing of none (the first adapter failed)
    is then no failure of the parse but of the adapter."""
    failures = ibstat_failures(stderr, exit_status)
    if not failures:
        return listing
    if any(f.adapter is not None for f in failures):
        adapters = listing.adapters if isinstance(listing, IbStat) else ()
        notes = listing.notes if isinstance(listing, IbStat) else ()
        return IbStat(adapters, notes, failures)
    if isinstance(listing, ParseFailure) or not listing.adapters:
        # nothing listed and no adapter named ("can't init UMAD library" where no IB driver is loaded):
        # ibstat failed as a command, which the node screen says; no adapter is known to be broken
        return ParseFailure("ibstat", failures[0].reason)
    return IbStat(listing.adapters, listing.notes, failures)


_IBSTATUS_PORT = {
    "default gid": "default_gid",
    "base lid": "base_lid",
    "sm lid": "sm_lid",
    "state": "state",
    "phys state": "physical_state",
    "rate": "rate",
    "link_layer": "link_layer",
}


def parse_ibstatus(text: str) -> IbStat | ParseFailure:
    """ibstatus prints one block per port and nothing about the adapter but its name."""
    adapters: dict[str, _RawAdapter] = {}
    port: _RawPort | None = None
    for line in text.splitlines():
        header = re.match(r"^\s*Infiniband device '([^']+)' port (\d+) status:\s*$", line)
        if header:
            name = header.group(1)
            adapter = adapters.setdefault(name, _RawAdapter(name, {}, []))
            port = adapter.port(int(header.group(2)))
        elif port is not None and (pair := _key_value(line)) and pair[0] in _IBSTATUS_PORT:
            port.fields[_IBSTATUS_PORT[pair[0]]] = pair[1]
    if not adapters:
        return _empty_or_failure("ibstatus", text)
    return _build(list(adapters.values()), [])


_DEVINFO_ADAPTER = {
    "fw_ver": "firmware",
    "hw_ver": "hw_version",
    "node_guid": "node_guid",
    "sys_image_guid": "system_image_guid",
    "phys_port_cnt": "num_ports",
}
_DEVINFO_PORT = {
    "state": "state",
    "phys_state": "physical_state",
    "sm_lid": "sm_lid",
    "port_lid": "base_lid",
    "port_lmc": "lmc",
    "link_layer": "link_layer",
    "active_width": "active_width",
    "active_speed": "active_speed",
}


def parse_ibv_devinfo(text: str) -> IbStat | ParseFailure:
    """`ibv_devinfo` (with or without -v); it prints a rate only with -v (width x lane speed)."""
    adapters: list[_RawAdapter] = []
    port: _RawPort | None = None
    for line in text.splitlines():
        pair = _key_value(line)
        if pair is None:
            continue  # -v capability flag lists and prose lines
        key, value = pair
        if key == "hca_id":
            adapters.append(_RawAdapter(value, {}, []))
            port = None
        elif adapters and key == "port" and (number := _int(value)) is not None:
            port = adapters[-1].port(number)
        elif port is not None and key in _DEVINFO_PORT:
            port.fields[_DEVINFO_PORT[key]] = value
        elif adapters and port is None and key in _DEVINFO_ADAPTER:
            adapters[-1].fields[_DEVINFO_ADAPTER[key]] = value
    if not adapters:
        return _empty_or_failure("ibv_devinfo", text)
    return _build(adapters, [])


PARSERS: dict[str, ParserInfo] = {
    "ibstat": ParserInfo("ibstat", "ibstat", parse_ibstat),
    "ibstatus": ParserInfo("ibstatus", "ibstatus", parse_ibstatus),
    "ibv_devinfo": ParserInfo("ibv_devinfo", "ibv_devinfo [-v]", parse_ibv_devinfo),
}
