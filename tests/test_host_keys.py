"""Host keys as OpenSSH users expect: the ssh_config's known_hosts files, and accept-new (trust on first use,
recorded safely, a changed key refused), against a real OpenSSH sshd on loopback."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import asyncssh
import pytest

from gputop.config_file import load_config
from gputop.core.config import ConfigError, parse_config
from gputop.core.models import Reachability
from gputop.sources.known_hosts import FirstUse, HostKeys, SharedKnownHosts, append_line
from tests.infra.sshd import RealSshd, real_sshd  # noqa: F401 - the fixture, registered by importing it
from tests.test_openssh_interop import source_for, wait_for, write_config


def _config(tmp_path: Path, sshd: RealSshd, known_hosts: Path | None, verify: str) -> Path:
    path = write_config(tmp_path, sshd, known_hosts or Path("unused"))
    text = path.read_text(encoding="utf-8").replace("verify_host_keys: true", f"verify_host_keys: {verify}")
    if known_hosts is None:
        text = "".join(line for line in text.splitlines(keepends=True) if "known_hosts:" not in line)
    path.write_text(text, encoding="utf-8")
    return path


async def test_the_ssh_configs_known_hosts_file_is_used_when_gputops_config_names_none(
    real_sshd: RealSshd,  # noqa: F811
    tmp_path: Path,
) -> None:
    """ssh reaches these nodes with the ssh_config's UserKnownHostsFile: so does gputop, verified."""
    config_path = _config(tmp_path, real_sshd, None, "true")
    assert load_config(config_path).clusters[0].ssh.known_hosts is None
    source = source_for(config_path)
    await source.start()
    try:
        nodes = await wait_for(source, lambda ns: all(ns[n].gpus for n in real_sshd.nodes), 20)
        assert all(nodes[n].reachability is Reachability.OK for n in real_sshd.nodes)
    finally:
        await source.close()


async def test_accept_new_records_each_new_key_once_and_refuses_a_changed_one(
    real_sshd: RealSshd,  # noqa: F811
    tmp_path: Path,
) -> None:
    recorded = tmp_path / "fresh" / "known_hosts"
    await _all_answer(_config(tmp_path, real_sshd, recorded, "accept-new"), real_sshd)
    assert stat.S_IMODE(recorded.stat().st_mode) == 0o600
    assert stat.S_IMODE(recorded.parent.stat().st_mode) == 0o700
    lines = recorded.read_text(encoding="ascii").splitlines()
    assert sorted(lines) == sorted(real_sshd.known_hosts_line(n).strip() for n in real_sshd.nodes)

    # A second run trusts what the first recorded and writes nothing more.
    await _all_answer(_config(tmp_path, real_sshd, recorded, "accept-new"), real_sshd)
    assert recorded.read_text(encoding="ascii").splitlines() == lines

    # The key on record for one node is another: that node is refused, with the reason; the others run.
    changed, *others = real_sshd.nodes
    other_key = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    kept = "".join(real_sshd.known_hosts_line(n) for n in others)
    recorded.write_text(kept + real_sshd.known_hosts_line(changed, other_key), encoding="ascii")
    source = source_for(_config(tmp_path, real_sshd, recorded, "accept-new"))
    await source.start()
    try:
        nodes = await wait_for(
            source,
            lambda ns: "refused" in (ns[changed].error or "") and all(ns[n].gpus for n in others),
            20,
        )
        assert nodes[changed].reachability is Reachability.DOWN
        assert f"it differs from the key in {recorded}" in (nodes[changed].error or ""), nodes[changed].error
    finally:
        await source.close()
    assert len(recorded.read_text(encoding="ascii").splitlines()) == len(real_sshd.nodes)  # nothing added


async def _all_answer(config_path: Path, sshd: RealSshd) -> None:
    source = source_for(config_path)
    await source.start()
    try:
        await wait_for(source, lambda ns: all(ns[n].gpus for n in sshd.nodes), 20)
    finally:
        await source.close()


def _judge(keys: HostKeys, record_to: Path, host: str, key: asyncssh.SSHKey, port: int = 22) -> bool:
    shared = SharedKnownHosts(str(record_to))
    known = shared.option(empty_ok=True)
    return keys.judge_new_key(FirstUse(shared, str(record_to), known, host), host, "127.0.0.1", port, key)


def test_accept_new_never_records_a_name_that_would_match_other_hosts(tmp_path: Path) -> None:
    record_to = tmp_path / "known_hosts"
    key = asyncssh.generate_private_key("ssh-ed25519")
    for hostile in ("*", "gpu*,login", "a b", "x\ny ssh-ed25519 AAAA", "!gpu01"):
        keys = HostKeys("accept-new", str(record_to))
        assert not _judge(keys, record_to, hostile, key)
        assert "not a plain host name" in (keys.refusal(hostile) or "")
    assert not record_to.exists()


def test_accept_new_in_one_run_holds_the_first_key(tmp_path: Path) -> None:
    record_to = tmp_path / "known_hosts"
    keys = HostKeys("accept-new", str(record_to))
    first, second = asyncssh.generate_private_key("ssh-ed25519"), asyncssh.generate_private_key("ssh-ed25519")
    assert _judge(keys, record_to, "gpu001", first, port=2222)
    assert _judge(keys, record_to, "gpu001", first, port=2222)  # the same key again: no second line
    assert not _judge(keys, record_to, "gpu001", second, port=2222)
    assert "not the key it showed at first use" in (keys.refusal("gpu001") or "")
    assert record_to.read_text(encoding="ascii").splitlines() == [
        "[gpu001]:2222 ssh-ed25519 " + first.export_public_key().decode().split()[1]
    ]


def test_a_recorded_line_never_joins_a_last_line_without_its_newline(tmp_path: Path) -> None:
    path = tmp_path / "known_hosts"
    path.write_text("old ssh-ed25519 AAAA", encoding="ascii")
    append_line(str(path), "new ssh-ed25519 BBBB\n")
    assert path.read_text(encoding="ascii") == "old ssh-ed25519 AAAA\nnew ssh-ed25519 BBBB\n"


def test_an_unwritable_record_refuses_the_node(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        record_to = Path("/proc/gputop-no-such/known_hosts")  # not writable even by root
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        record_to = locked / "known_hosts"
    keys = HostKeys("accept-new", str(record_to))
    assert not _judge(keys, record_to, "gpu001", asyncssh.generate_private_key("ssh-ed25519"))
    assert "could not be recorded" in (keys.refusal("gpu001") or "")


def test_ssh_config_none_leaves_nothing_to_verify_with(tmp_path: Path) -> None:
    from gputop.sources.known_hosts import KnownHostsMissing

    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  UserKnownHostsFile none\n  GlobalKnownHostsFile none\n", encoding="ascii")
    for policy in ("yes", "accept-new"):
        with pytest.raises(KnownHostsMissing, match="UserKnownHostsFile none"):
            HostKeys(policy, None).connect_options("gpu001", [str(config)])  # type: ignore[arg-type]
    assert HostKeys("no", None).connect_options("gpu001", [str(config)]) == {"known_hosts": None}


def test_files_follow_the_ssh_config_per_host_with_openssh_defaults(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(
        "Host gpu*\n  UserKnownHostsFile /site/kh\nHost login\n  GlobalKnownHostsFile /etc/site_kh\n",
        encoding="ascii",
    )
    keys = HostKeys("yes", None)
    home = os.path.expanduser("~")
    assert keys.files_for("gpu001", [str(config)]) == (
        ("/site/kh",),
        ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"),
    )
    assert keys.files_for("login", [str(config)]) == (
        (f"{home}/.ssh/known_hosts", f"{home}/.ssh/known_hosts2"),
        ("/etc/site_kh",),
    )
    assert HostKeys("yes", "/mine").files_for("gpu001", [str(config)]) == (("/mine",), ())


def test_verify_host_keys_takes_true_false_or_accept_new() -> None:
    def ssh_with(value: str) -> str:
        return f"clusters:\n  - name: c\n    nodes: a\n    ssh:\n      verify_host_keys: {value}\n"

    assert parse_config(ssh_with("accept-new")).clusters[0].ssh.verify_host_keys == "accept-new"
    assert parse_config(ssh_with("false")).clusters[0].ssh.verify_host_keys is False
    with pytest.raises(ConfigError, match="'maybe' is not one of true, false, accept-new"):
        parse_config(ssh_with("maybe"))


def test_a_host_named_by_a_line_asyncssh_skipped_or_hashed_is_not_new(tmp_path: Path) -> None:
    import base64
    import hashlib
    import hmac

    record_to = tmp_path / "known_hosts"
    key = asyncssh.generate_private_key("ssh-ed25519")
    blob = key.export_public_key().decode().split()[1]
    # a key that does not decode: asyncssh skips the line, but the host is on record
    record_to.write_text(f"gpu001 ssh-ed25519 {blob[:-8]}\n", encoding="ascii")
    keys = HostKeys("accept-new", str(record_to))
    assert not _judge(keys, record_to, "gpu001", key)
    assert "it differs from the key in" in (keys.refusal("gpu001") or "")
    # a hashed entry (ssh-keygen -H) for the host with another key
    salt = b"0123456789abcdef0123"
    digest = hmac.new(salt, b"[gpu002]:2222", hashlib.sha1).digest()
    hashed = f"|1|{base64.b64encode(salt).decode()}|{base64.b64encode(digest).decode()}"
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().split()[1]
    record_to.write_text(f"{hashed} ssh-ed25519 {other}\n", encoding="ascii")
    keys = HostKeys("accept-new", str(record_to))
    shared = SharedKnownHosts(str(record_to))
    known = asyncssh.import_known_hosts("")  # parsed before the line was written by someone else
    where = FirstUse(shared, str(record_to), known, "gpu002")
    assert not keys.judge_new_key(where, "gpu002", "::1", 2222, key)
    # the same key written meanwhile by another writer: trusted, and not written twice
    record_to.write_text(f"gpu003 ssh-ed25519 {blob}\n", encoding="ascii")
    keys = HostKeys("accept-new", str(record_to))
    assert keys.judge_new_key(FirstUse(shared, str(record_to), known, "gpu003"), "gpu003", "::1", 22, key)
    assert record_to.read_text(encoding="ascii") == f"gpu003 ssh-ed25519 {blob}\n"
