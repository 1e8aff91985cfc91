"""One parsed known_hosts for the whole fleet, and host key checking that cannot be switched off behind
gputop's back.

Given a path, asyncssh reads and parses known_hosts again for every connection: a thousand nodes with a
thousand-line file is a million entries parsed at start and each parse's objects held per connection.
Parsed once and shared, it costs one read; it is read again when the file changes, so a key fixed with
ssh-keygen -R is seen at the next reconnect.

Verification on means a key is checked against a file that exists. asyncssh takes ``known_hosts=()`` as
"whatever the ssh_config says", and an ssh_config line ``UserKnownHostsFile none`` then turns checking
off: so a missing file is never passed on as (); the node is refused, with the reason.
"""

from __future__ import annotations

import os
from typing import Any


class KnownHostsMissing(Exception):
    """Host keys are to be verified but the known_hosts file does not exist: refuse, and say so."""


def missing_reason(path: str) -> str:
    return (
        f"host keys cannot be verified: {path} does not exist. Add the nodes' keys "
        "(ssh-keyscan, or ssh once by hand), or point ssh.known_hosts at the file that has them"
    )


class SharedKnownHosts:
    def __init__(self, path: str) -> None:
        self.path = path
        self._mtime_ns: int | None = None
        self._parsed: Any = None

    def option(self) -> Any:
        """What to pass asyncssh as ``known_hosts``: the parsed file; a file asyncssh cannot read is passed
        as its path, so the error is asyncssh's own. Raises `KnownHostsMissing` when there is no file."""
        import asyncssh

        try:
            mtime_ns = os.stat(self.path).st_mtime_ns
        except OSError:
            raise KnownHostsMissing(missing_reason(self.path)) from None
        if mtime_ns != self._mtime_ns:
            try:
                self._parsed = asyncssh.read_known_hosts(self.path)
            except (OSError, ValueError, asyncssh.Error):
                return self.path
            self._mtime_ns = mtime_ns
        return self._parsed
