"""The fleet's state directory: its keys, and the files a client needs to reach and trust it.

Keys are made once per directory and reused, so a client's known_hosts stays valid across restarts. The
client-side files (known_hosts, ssh_config, gputop.yaml) name the port, so they are rewritten each start.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import asyncssh

from gputop.core.nodeset import fold_nodes
from gputop.sim.fake_fleet.slurm_login import LOGIN_USER

CLUSTER_NAME = "fake-fleet"
LOGIN_HOST = "fake-fleet-login"  # the ssh_config alias of the fleet's Slurm login node


@dataclass(frozen=True, slots=True)
class StateFiles:
    state_dir: Path

    @property
    def host_key(self) -> Path:
        return self.state_dir / "ssh_host_ed25519_key"

    @property
    def client_key(self) -> Path:
        return self.state_dir / "id_ed25519"

    @property
    def client_public_key(self) -> Path:
        return self.state_dir / "id_ed25519.pub"

    @property
    def authorized_keys(self) -> Path:
        return self.state_dir / "authorized_keys"

    @property
    def known_hosts(self) -> Path:
        return self.state_dir / "known_hosts"

    @property
    def ssh_config(self) -> Path:
        return self.state_dir / "ssh_config"

    @property
    def gputop_config(self) -> Path:
        return self.state_dir / "gputop.yaml"


def _write_private(path: Path, data: bytes) -> None:
    # OpenSSH refuses a private key that others can read, so it is created 0600 rather than chmod-ed later.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)  # a client reading while the fleet restarts sees the old file or the new one


def _key(path: Path) -> asyncssh.SSHKey:
    if path.exists():
        return asyncssh.read_private_key(path)
    key = asyncssh.generate_private_key("ssh-ed25519", comment=f"gputop fake fleet {path.name}")
    _write_private(path, key.export_private_key())
    return key


def load_or_create_keys(files: StateFiles) -> tuple[asyncssh.SSHKey, asyncssh.SSHKey]:
    """(server host key, client key), each made on first use of the directory."""
    files.state_dir.mkdir(parents=True, exist_ok=True)
    host = _key(files.host_key)
    client = _key(files.client_key)
    _write(files.client_public_key, client.export_public_key().decode())
    return host, client


def write_authorized_keys(files: StateFiles, client: asyncssh.SSHKey, extra: Sequence[str]) -> str:
    """The keys the fleet accepts (its own client key and any given ones), written out for reference;
    returns the text the server loads."""
    lines = [client.export_public_key().decode().strip(), *(line.strip() for line in extra if line.strip())]
    text = "\n".join(lines) + "\n"
    _write(files.authorized_keys, text)
    return text


def _host_pattern(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def _ssh_arg(value: str) -> str:
    return f'"{value}"' if any(c.isspace() for c in value) else value


def write_client_files(
    files: StateFiles,
    *,
    host: str,
    port: int,
    host_key: asyncssh.SSHKey,
    node_names: Sequence[str],
    gpus_per_node: int,
) -> None:
    """known_hosts, ssh_config (a Host block per node) and gputop.yaml for a fleet listening on
    ``host:port``. A client resolves a node alias to ``host`` and checks the server key under
    ``[host]:port``, as OpenSSH and asyncssh both do."""
    public = host_key.export_public_key().decode().strip()
    _write(files.known_hosts, f"{_host_pattern(host, port)} {public}\n")

    key = _ssh_arg(str(files.client_key))
    known = _ssh_arg(str(files.known_hosts))
    blocks = [
        f"# Nodes of the gputop fake fleet on {host}:{port}. Rewritten at each start.\n",
        *(
            f"Host {name}\n"
            f"    HostName {host}\n"
            f"    Port {port}\n"
            f"    User {name}\n"
            f"    IdentityFile {key}\n"
            "    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {known}\n"
            "    StrictHostKeyChecking yes\n"
            for name in node_names
        ),
        # Slurm's commands run on a login node (slurm.run_on), as on many clusters
        f"Host {LOGIN_HOST}\n"
        f"    HostName {host}\n"
        f"    Port {port}\n"
        f"    User {LOGIN_USER}\n"
        f"    IdentityFile {key}\n"
        "    IdentitiesOnly yes\n"
        f"    UserKnownHostsFile {known}\n"
        "    StrictHostKeyChecking yes\n",
    ]
    _write(files.ssh_config, "\n".join(blocks))

    def q(path: Path) -> str:
        return json.dumps(str(path))  # a JSON string is a valid double-quoted YAML scalar

    _write(
        files.gputop_config,
        f"# gputop config for the fake fleet on {host}:{port}. Rewritten at each start.\n"
        f"default_cluster: {CLUSTER_NAME}\n"
        "clusters:\n"
        f"  - name: {CLUSTER_NAME}\n"
        f"    nodes: {json.dumps(fold_nodes(node_names))}\n"
        f"    gpus_per_node: {gpus_per_node}\n"
        "    ssh:\n"
        f"      config_file: {q(files.ssh_config)}\n"
        f"      known_hosts: {q(files.known_hosts)}\n"
        "      identity_files:\n"
        f"        - {q(files.client_key)}\n"
        "    slurm:\n"
        "      enabled: true\n"
        f"      run_on: {LOGIN_HOST}\n",
    )
