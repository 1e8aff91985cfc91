"""An ssh_config read once for a whole fleet, handed to asyncssh as a small per-host copy.

asyncssh reads and tokenises the whole ssh_config on every connection. Sites often generate one ``Host``
block per node, so with 1,000 nodes each connect parses thousands of lines and the connects alone take
minutes of CPU (measured: 451 of 999 nodes connected after 61 s at 100% of a core). This index reads the
file once, splits it into blocks, and for each host writes a copy that keeps only what can apply to it:
the lines before the first block, every ``Match`` block, the ``Host`` blocks whose patterns match the host,
and the ``Host`` blocks of every ProxyJump target (asyncssh connects to a jump host with the same files).
asyncssh still evaluates every kept line itself, so the result is what it would make of the full file.

Where the reduction could change the meaning, the index steps aside and hands out the original file:
a small file (nothing to gain), ``CanonicalizeHostname`` (Host patterns are matched again against the
canonical name), or a line asyncssh's tokeniser would reject (asyncssh must report it itself).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # asyncssh is imported when a file is first indexed, not when gputop starts
    from asyncssh.pattern import WildcardPatternList

SMALL_FILE_LINES = 200  # below this, parsing per connection costs less than writing copies


@dataclass(frozen=True, slots=True)
class _Block:
    keyword: str  # "host", "match", or "" for the lines before the first block
    patterns: str  # a Host block's patterns, comma-joined as asyncssh joins them
    text: str  # the block's lines, verbatim

    @property
    def literal_names(self) -> frozenset[str] | None:
        """The host names a Host block matches when its patterns are plain names, else None.
        (asyncssh matches with fnmatch, which on POSIX compares a plain name exactly.)"""
        names = self.patterns.split(",")
        if any(not n or n[0] == "!" or any(c in n for c in "*?[]") for n in names):
            return None
        return frozenset(names)


def _keyword_and_args(line: str) -> tuple[str, list[str]] | None:
    """A config line's keyword (lower case) and arguments, as asyncssh splits them; None for blanks."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    words = shlex.split(stripped)  # ValueError on an unbalanced quote, as asyncssh would raise
    if not words:
        return None
    first, rest = words[0], words[1:]
    if "=" in first:  # "Host=gpu*" or "Host= gpu*"
        first, _, value = first.partition("=")
        rest = ([value] if value else []) + rest
    elif rest and rest[0].startswith("="):  # "Host =gpu*" or "Host = gpu*"
        value = rest[0][1:]
        rest = ([value] if value else []) + rest[1:]
    return first.lower(), rest


def _first_word(line: str) -> str:
    words = line.strip().replace("=", " ").split(None, 1)
    return words[0].lower() if words else ""


def _jump_targets(value: str) -> list[str]:
    """Host names in a ProxyJump value: [user@]host[:port] entries, comma-separated."""
    hosts = []
    for hop in value.split(","):
        hop = hop.strip()
        if not hop or hop.lower() == "none":
            continue
        if "://" in hop:  # ssh://[user@]host[:port]
            hop = hop.split("://", 1)[1]
        hop = hop.rsplit("@", 1)[-1]
        if hop.startswith("["):  # [ipv6]:port
            hop = hop[1:].split("]", 1)[0]
        elif hop.count(":") == 1:
            hop = hop.split(":", 1)[0]
        hosts.append(hop)
    return hosts


class SshConfigIndex:
    """Hands out, per host, an ssh_config path that asyncssh can parse quickly."""

    def __init__(self, path: str, extra_jump_hosts: tuple[str, ...] = ()) -> None:
        self.path = path
        # gputop's own jump_host setting, as [user@]host[:port]
        self._extra_jump_hosts = [h for value in extra_jump_hosts for h in _jump_targets(value)]
        self._mtime_ns: int | None = None
        self._blocks: list[_Block] | None = None  # None: hand out the original file
        self._always: set[int] = set()  # blocks every host keeps: preamble, Match, jump hosts' blocks
        self._by_name: dict[str, set[int]] = {}  # Host blocks of plain names, by name
        self._wildcards: list[tuple[int, WildcardPatternList]] = []  # the other Host blocks
        self._dir: str | None = None
        self._written: dict[str, str] = {}  # digest of a reduced text -> its file
        self.sets_ciphers = False  # whether the file chooses ciphers (then gputop leaves them alone)
        self._keywords: frozenset[str] | None = None  # every keyword the file uses; None: not read

    def path_for(self, host: str) -> str:
        """The file to pass asyncssh for ``host``: a reduced copy, or the original."""
        self._load_if_changed()
        if self._blocks is None:
            return self.path
        # Most blocks of a generated file name one host: those are found by name, not tried one by one.
        wanted = self._always | self._by_name.get(host, set())
        wanted.update(i for i, patterns in self._wildcards if self._matches(patterns, host))
        return self._write("".join(self._blocks[i].text for i in sorted(wanted)))

    def may_set(self, *keywords: str) -> bool:
        """Whether some line of the file may set one of ``keywords`` (lower case) for some host: False
        only when the file was read and neither they nor an Include appear in it."""
        self._load_if_changed()
        if self._keywords is None:
            return True
        return not self._keywords.isdisjoint((*keywords, "include"))

    def close(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = None
        self._written.clear()

    # -- reading ------------------------------------------------------------------------------------------
    def _load_if_changed(self) -> None:
        try:
            mtime_ns = os.stat(self.path).st_mtime_ns
        except OSError:
            self._blocks, self._mtime_ns = None, None  # asyncssh will say what is wrong with the path
            self._keywords = None
            return
        if mtime_ns == self._mtime_ns:
            return
        self._mtime_ns = mtime_ns
        self._written.clear()
        try:
            with open(self.path, encoding="utf-8") as f:
                lines = f.readlines()
        except (OSError, UnicodeDecodeError):
            self._blocks, self._keywords = None, None
            return
        self._keywords = frozenset(_first_word(line) for line in lines)
        self.sets_ciphers = "ciphers" in self._keywords
        self._blocks = self._split(lines) if len(lines) >= SMALL_FILE_LINES else None

    def _split(self, lines: list[str]) -> list[_Block] | None:
        blocks: list[_Block] = []
        keyword, patterns, text = "", "", []
        jump_hosts = list(self._extra_jump_hosts)
        for line in lines:
            try:
                parsed = _keyword_and_args(line)
            except ValueError:
                return None
            if parsed is None:
                text.append(line)
                continue
            word, args = parsed
            if word == "canonicalizehostname":
                return None
            if word == "proxyjump" and args:
                jump_hosts.extend(_jump_targets(args[0]))
            if word in ("host", "match"):
                blocks.append(_Block(keyword, patterns, "".join(text)))
                keyword, patterns, text = word, ",".join(args), []
            text.append(line if line.endswith("\n") else line + "\n")
        blocks.append(_Block(keyword, patterns, "".join(text)))
        self._index(blocks, jump_hosts)
        return blocks

    def _index(self, blocks: list[_Block], jump_hosts: list[str]) -> None:
        from asyncssh.pattern import WildcardPatternList

        self._always, self._by_name, self._wildcards = set(), {}, []
        for i, block in enumerate(blocks):
            if block.keyword != "host":
                self._always.add(i)
                continue
            names = block.literal_names
            if names is not None:
                if names.intersection(jump_hosts):
                    self._always.add(i)
                for name in names:
                    self._by_name.setdefault(name, set()).add(i)
                continue
            patterns = WildcardPatternList(block.patterns)
            if any(self._matches(patterns, jump) for jump in jump_hosts):
                self._always.add(i)
            else:
                self._wildcards.append((i, patterns))

    @staticmethod
    def _matches(patterns: WildcardPatternList, host: str) -> bool:
        return bool(patterns.matches(host))

    # -- writing ------------------------------------------------------------------------------------------
    def _write(self, text: str) -> str:
        digest = hashlib.sha256(text.encode()).hexdigest()[:32]
        path = self._written.get(digest)
        if path is not None:
            return path
        if self._dir is None:
            self._dir = tempfile.mkdtemp(prefix="gputop-ssh-config-")  # 0700: the copies name hosts and keys
        path = os.path.join(self._dir, digest)
        # Relative Include paths resolve against ~/.ssh, not the file's own directory, so a copy
        # elsewhere includes the same files.
        with contextlib.suppress(FileExistsError), open(path, "x", encoding="utf-8") as f:
            f.write(text)
        self._written[digest] = path
        return path
