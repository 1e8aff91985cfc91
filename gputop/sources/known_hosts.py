"""Which host keys a node must present, read as OpenSSH reads them, parsed once for the whole fleet; and
trust on first use (``verify_host_keys: accept-new``) that records a new key safely and refuses a changed one.

Where the keys are: the file the gputop config names (``ssh.known_hosts``); else, as ``ssh`` does, the
ssh_config's ``UserKnownHostsFile`` and ``GlobalKnownHostsFile`` for that node, each defaulting to OpenSSH's
(``~/.ssh/known_hosts ~/.ssh/known_hosts2``, ``/etc/ssh/ssh_known_hosts /etc/ssh/ssh_known_hosts2``). So a
node that ``ssh`` reaches is verified by gputop with the same keys.

Given a path, asyncssh reads and parses known_hosts again for every connection: a thousand nodes with a
thousand-line file is a million entries parsed at start. Parsed once per set of files and shared, it costs
one read; it is read again when a file changes, so a key fixed with ssh-keygen -R is seen at the next
reconnect.

Verification on means a key is checked against a file that exists. asyncssh takes ``known_hosts=()`` as
"whatever the ssh_config says", and ``UserKnownHostsFile none`` there turns checking off: so gputop never
passes (); with no file to check against, the node is refused with the reason. ``StrictHostKeyChecking``
in an ssh_config is not read (asyncssh does not know it): ``verify_host_keys`` alone decides.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

HostKeyPolicy = Literal["yes", "accept-new", "no"]
Paths = tuple[str, ...]
KNOWN_HOSTS_MAX_BYTES = 64 * 1024 * 1024  # read for names: far past any real file, short of memory trouble

DEFAULT_USER_FILES = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
DEFAULT_GLOBAL_FILES = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
# A name written into known_hosts must be a plain host name or address: a pattern character ("*", "?",
# "!", ",") or a space would make the entry match other hosts, a line break would add an entry of its own.
_RECORDABLE_HOST = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,252}")


class KnownHostsMissing(Exception):
    """Host keys are to be verified but there is no known_hosts file to verify them with: refuse, say so."""


class HostKeyRefused(Exception):
    """accept-new refused a key: it differs from the one known for the host, or could not be recorded."""


def policy_of(verify_host_keys: bool | str) -> HostKeyPolicy:
    if verify_host_keys is True:
        return "yes"
    if verify_host_keys == "accept-new":
        return "accept-new"
    return "no"


def missing_reason(paths: Sequence[str], why: str = "") -> str:
    where = ", ".join(paths) if paths else "no file"
    return (
        f"host keys cannot be verified: {where} {'does' if len(paths) == 1 else 'do'} not exist{why}. "
        "Add the nodes' keys (ssh-keyscan, or ssh once by hand), point ssh.known_hosts at the file that "
        "has them, or set ssh.verify_host_keys: accept-new to trust each node's key on first use"
    )


class SharedKnownHosts:
    """The known_hosts files of one set, parsed once and read again when one of them changes."""

    def __init__(self, paths: str | Sequence[str]) -> None:
        self.paths = (paths,) if isinstance(paths, str) else tuple(paths)
        self._signature: tuple[tuple[str, int], ...] | None = None
        self._parsed: Any = None

    @property
    def path(self) -> str:
        return self.paths[0]

    def _existing(self) -> tuple[tuple[str, int], ...]:
        found = []
        for path in self.paths:
            try:
                found.append((path, os.stat(path).st_mtime_ns))
            except OSError:
                continue
        return tuple(found)

    def option(self, *, empty_ok: bool = False) -> Any:
        """What to pass asyncssh as ``known_hosts``: the parsed files; a file asyncssh cannot read is passed
        as its path, so the error is asyncssh's own. Raises `KnownHostsMissing` when no file exists, unless
        ``empty_ok`` (then: no key is known yet)."""
        import asyncssh

        existing = self._existing()
        if not existing:
            if not empty_ok:
                raise KnownHostsMissing(missing_reason(self.paths))
            return asyncssh.import_known_hosts("")
        if existing != self._signature:
            paths = [path for path, _ in existing]
            try:
                self._parsed = asyncssh.read_known_hosts(paths)
            except (OSError, ValueError, asyncssh.Error):
                return paths[0]
            self._signature = existing
        return self._parsed

    def note_own_write(self) -> None:
        """A line gputop appended itself (and also holds in memory): no need to read every file again."""
        if self._signature is not None:
            self._signature = self._existing()


class HostKeys:
    """A cluster's host key rules: the files per host, shared parsed copies, and accept-new's records."""

    def __init__(self, policy: HostKeyPolicy, explicit_path: str | None) -> None:
        self.policy = policy
        self.explicit_path = explicit_path
        self._files_by_host: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self._shared: dict[tuple[str, ...], SharedKnownHosts] = {}
        self._recorded: dict[tuple[str, int | None], bytes] = {}  # accept-new's keys of this run
        self._refusals: dict[str, str] = {}  # host -> why accept-new refused its key

    # -- which files --------------------------------------------------------------------------------------
    def files_for(self, host: str, config_paths: Sequence[str] | None) -> tuple[Paths, Paths]:
        """(user files, global files) for ``host``; the user files are where accept-new records."""
        if self.explicit_path is not None:
            return (os.path.expanduser(self.explicit_path),), ()
        cached = self._files_by_host.get(host)
        if cached is not None:
            return cached
        user: Sequence[str] | None = None
        global_: Sequence[str] | None = None
        if config_paths:
            from asyncssh.config import SSHClientConfig

            try:
                config = SSHClientConfig.load(None, list(config_paths), False, False, False, "", (), host, ())
                user = config.get("UserKnownHostsFile")  # type: ignore[assignment]
                global_ = config.get("GlobalKnownHostsFile")  # type: ignore[assignment]
            except Exception:  # asyncssh reports a config it cannot read when it connects
                user = global_ = None
        found = (
            tuple(os.path.expanduser(p) for p in (DEFAULT_USER_FILES if user is None else user)),
            tuple(os.path.expanduser(p) for p in (DEFAULT_GLOBAL_FILES if global_ is None else global_)),
        )
        self._files_by_host[host] = found
        return found

    def _shared_for(self, paths: tuple[str, ...]) -> SharedKnownHosts:
        shared = self._shared.get(paths)
        if shared is None:
            shared = self._shared[paths] = SharedKnownHosts(paths)
        return shared

    # -- what asyncssh gets -------------------------------------------------------------------------------
    def connect_options(self, host: str, config_paths: Sequence[str] | None) -> dict[str, Any]:
        """``known_hosts`` (and for accept-new a ``client_factory``) for asyncssh.connect to ``host``."""
        if self.policy == "no":
            return {"known_hosts": None}  # not verified: an explicit config choice the UI flags
        user, global_ = self.files_for(host, config_paths)
        if not user and not global_:
            raise KnownHostsMissing(missing_reason((), " (the ssh_config sets UserKnownHostsFile none)"))
        shared = self._shared_for(user + global_)
        if self.policy == "yes":
            return {"known_hosts": shared.option()}
        if not user:
            raise KnownHostsMissing(
                missing_reason(global_, "; accept-new has nowhere to record a key (UserKnownHostsFile none)")
            )
        self._refusals.pop(host, None)
        known = shared.option(empty_ok=True)
        return {
            "known_hosts": known,
            "client_factory": lambda: _first_use_client(self, FirstUse(shared, user[0], known, host)),
        }

    def refusal(self, host: str) -> str | None:
        """Why accept-new refused ``host``'s key in its last connect, if it did."""
        return self._refusals.get(host)

    # -- accept-new ---------------------------------------------------------------------------------------
    def judge_new_key(self, where: FirstUse, host: str, addr: str, port: int, key: Any) -> bool:
        """A key that is not among ``host``'s known keys: trusted and recorded when the host has none at all,
        refused when it has others (a changed key) or the key cannot be recorded."""
        wire_port = None if port in (0, 22) else port
        data = key.public_data
        earlier = self._recorded.get((host, wire_port))
        if earlier is not None:
            return self._verdict(where.alias, host, earlier == data, "not the key it showed at first use")
        known, shared = where.known, where.shared
        if not hasattr(known, "match"):  # the files could not be read as a whole: nothing to judge against
            return self._verdict(where.alias, host, False, f"{', '.join(shared.paths)} could not be read")
        listed = known.match(host, addr, wire_port)
        if any(listed[:3]):  # host keys, CA keys or revoked keys name this host
            why = f"it differs from the key in {', '.join(shared.paths)}"
            return self._verdict(where.alias, host, False, why)
        # Lines asyncssh skipped (a key it cannot decode) or wrote since (another gputop, ssh): a host named
        # anywhere is not new. Its key there is either this one (trusted, nothing to write) or not.
        blob = base64.b64encode(data).decode("ascii")
        named = named_keys(shared.paths, host, wire_port)
        if named:
            why = f"it differs from the key in {', '.join(shared.paths)}"
            return self._verdict(where.alias, host, blob in named, why)
        if not _RECORDABLE_HOST.fullmatch(host):
            return self._verdict(where.alias, host, False, f"{host!r} is not a plain host name to record")
        entry = host if wire_port is None else f"[{host}]:{wire_port}"
        algorithm = key.algorithm.decode("ascii", errors="replace")
        line = f"{entry} {algorithm} {blob}\n"
        try:
            append_line(where.record_to, line)
        except OSError as err:
            why = f"it could not be recorded in {where.record_to}: {err.strerror or err}"
            return self._verdict(where.alias, host, False, why)
        self._recorded[(host, wire_port)] = data
        shared.note_own_write()
        return True

    def _verdict(self, alias: str, host: str, trusted: bool, why: str) -> bool:
        if not trusted:
            who = alias if alias == host else f"{alias} ({host})"
            self._refusals[alias] = f"host key of {who} refused: {why} (a changed key, or a machine between)"
        return trusted


def named_keys(paths: Sequence[str], host: str, port: int | None) -> set[str]:
    """The key fields (base64) of every line in ``paths`` whose host list names ``host`` itself, plainly
    or hashed (``|1|salt|hash``), whether or not its key can be decoded."""
    entry = host if port is None else f"[{host}]:{port}"
    keys: set[str] = set()
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as file:
                text = file.read(KNOWN_HOSTS_MAX_BYTES)
        except OSError:
            continue
        for line in text.splitlines():
            fields = line.split()
            if fields and fields[0].startswith("@"):  # @cert-authority / @revoked: asyncssh matched those
                continue
            if len(fields) >= 2 and any(_names(name, entry) for name in fields[0].split(",")):
                keys.add(fields[2] if len(fields) >= 3 else "")
    return keys


def _names(name: str, entry: str) -> bool:
    if not name.startswith("|1|"):
        return name == entry
    try:
        _, _, salt, digest = name.split("|", 3)
        expected = hmac.new(base64.b64decode(salt), entry.encode(), hashlib.sha1).digest()
        return hmac.compare_digest(expected, base64.b64decode(digest))
    except (ValueError, TypeError):
        return False


def append_line(path: str, line: str) -> None:
    """Append one whole line: the directory made private if missing, the file 0600 if new, one write with
    O_APPEND (another ssh appending at once cannot interleave within it), on disk before the key is used."""
    os.makedirs(os.path.dirname(path) or ".", mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        data = line.encode("ascii")
        if os.fstat(fd).st_size > 0:
            with open(path, "rb") as existing:
                existing.seek(-1, os.SEEK_END)
                if existing.read(1) != b"\n":
                    data = b"\n" + data
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"only {written} of {len(data)} bytes written")
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class FirstUse:
    """One accept-new connection: the keys known to it, where a new key goes, the name gputop calls it."""

    shared: SharedKnownHosts
    record_to: str
    known: Any
    alias: str


_FIRST_USE_CLIENT: list[type] = []  # made once, when accept-new first connects (asyncssh loads late)


def _first_use_client(keys: HostKeys, where: FirstUse) -> Any:
    if not _FIRST_USE_CLIENT:
        import asyncssh

        class FirstUseClient(asyncssh.SSHClient):
            """asyncssh asks its client about a key that known_hosts does not list: accept-new judges it."""

            def __init__(self, judge: Any) -> None:
                self._judge = judge

            def validate_host_public_key(self, host: str, addr: str, port: int, key: Any) -> bool:
                return bool(self._judge(host, addr, port, key))

        _FIRST_USE_CLIENT.append(FirstUseClient)
    client: type = _FIRST_USE_CLIENT[0]
    return client(lambda host, addr, port, key: keys.judge_new_key(where, host, addr, port, key))
