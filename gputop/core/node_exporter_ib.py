"""InfiniBand ports from node_exporter's infiniband collector, as a store holds them: each port's state,
physical state and rate, by host, in the form ibstat gives gputop (IbPort), so the IB rules (a port down,
a port slower than its peers, flapping) judge them the same way.

    node_infiniband_state_id{device="mlx5_0",port="1",instance="gpu001:9100"} 4
    node_infiniband_physical_state_id{...} 5
    node_infiniband_rate_bytes_per_second{...} 5e+10

Pure: (labels, value) pairs in, ports by host out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final

from gputop.core.dcgm_fields import HOST_LABELS
from gputop.core.dcgm_join import host_of
from gputop.core.models import IbPort
from gputop.core.parsers.ib import PHYSICAL_STATES, PORT_STATES

STATE: Final = "node_infiniband_state_id"
PHYSICAL_STATE: Final = "node_infiniband_physical_state_id"
RATE: Final = "node_infiniband_rate_bytes_per_second"
IB_METRICS: Final = (STATE, PHYSICAL_STATE, RATE)
PORT_LABELS: Final = (*HOST_LABELS, "device", "port")
# the collector's ids are the kernel's, the ones ibstat names (0 is node_exporter's "no change")
_DEVICE: Final = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
MAX_PORTS_PER_HOST: Final = 64


def ib_ports(
    answers: Mapping[str, Sequence[tuple[Mapping[str, str], float]]], host_label: str | None = None
) -> dict[str, tuple[IbPort, ...]]:
    found: dict[str, dict[tuple[str, int], dict[str, float]]] = {}
    for metric in IB_METRICS:
        for labels, value in answers.get(metric, ()):
            device, port = labels.get("device"), labels.get("port")
            host = host_of(labels, host_label)
            if host is None or type(device) is not str or type(port) is not str or not port.isdigit():
                continue
            if not _DEVICE.fullmatch(device):
                continue  # not an adapter's name: left out rather than shown
            ports = found.setdefault(host, {})
            key = (device, int(port[:4]))
            if key not in ports and len(ports) >= MAX_PORTS_PER_HOST:
                continue
            ports.setdefault(key, {})[metric] = value
    out = {}
    for host, ports in found.items():
        out[host] = tuple(
            IbPort(
                device,
                port,
                PORT_STATES.get(int(values.get(STATE, 0)), "Unknown"),
                PHYSICAL_STATES.get(int(values.get(PHYSICAL_STATE, 0)), "Unknown"),
                values[RATE] * 8 / 1e9 if RATE in values else None,
            )
            for (device, port), values in sorted(ports.items())
        )
    return out
