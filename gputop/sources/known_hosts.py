"""One parsed known_hosts for the whole fleet.

Given a path, asyncssh reads and parses known_hosts again for every connection: a thousand nodes with a
thousand-line file is a million entries parsed at start and each parse's objects held per connection.
Parsed once and shared, it costs one read; it is read again when the file changes, so a key fixed with
ssh-keygen -R is seen at the next reconnect.
"""

from __future__ import annotations

import os
from typing import Any


class SharedKnownHosts:
    def __init__(self, path: str) -> None:
        self.path = path
        self._mtime_ns: int | None = None
        self._parsed: Any = None

    def option(self) -> Any:
        """What to pass asyncssh as ``known_hosts``: the parsed file, or () (trust nothing) when it is
        missing; a file asyncssh cannot read is passed as its path, so the error is asyncssh's own."""
        import asyncssh

        try:
            mtime_ns = os.stat(self.path).st_mtime_ns
        except OSError:
            return ()  # a missing known_hosts trusts nothing: every host key is "not verifiable"
        if mtime_ns != self._mtime_ns:
            try:
                self._parsed = asyncssh.read_known_hosts(self.path)
            except (OSError, ValueError, asyncssh.Error):
                return self.path
            self._mtime_ns = mtime_ns
        return self._parsed
