"""Finding and reading the configuration file; the parsing and every rule live in ``gputop.core.config``.

Search order: ``--config PATH``, then ``$GPUTOP_CONFIG``, then ``$XDG_CONFIG_HOME/gputop/config.yaml``
(``~/.config/gputop/config.yaml`` when XDG_CONFIG_HOME is unset). A path the user named explicitly must
exist; the XDG file is only a convention, so its absence just means "no config file".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gputop.core.config import Config, ConfigError, parse_config

ENV_VAR = "GPUTOP_CONFIG"

CONFIG_MAX_BYTES = 4 * 1024 * 1024


def find_config_path(cli_path: str | None, environ: Mapping[str, str]) -> Path | None:
    """The config file to load, or None when none was named and the XDG default does not exist."""
    if cli_path is not None:
        return _named(cli_path, "--config", environ)
    # An empty variable counts as unset, as shells make it easy to export one by accident.
    if environ.get(ENV_VAR):
        return _named(environ[ENV_VAR], f"${ENV_VAR}", environ)
    path = default_config_path(environ)
    # exists(), not is_file(): a directory or unreadable file there is reported by load_config.
    return path if path.exists() else None


def default_config_path(environ: Mapping[str, str]) -> Path:
    """Where gputop looks when no file is named: $XDG_CONFIG_HOME/gputop/config.yaml."""
    xdg = environ.get("XDG_CONFIG_HOME", "")
    # The XDG spec says relative values are invalid and must be ignored.
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else _expand_user("~/.config", environ)
    return base / "gputop" / "config.yaml"


def load_config(path: Path) -> Config:
    """Read and parse ``path``; ``ConfigError`` for an unreadable file, bad encoding, YAML or values."""
    try:
        with path.open("rb") as file:
            raw = file.read(CONFIG_MAX_BYTES + 1)
    except IsADirectoryError:
        raise ConfigError(f"{path}: cannot read config file: it is a directory") from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot read config file: {err.strerror or err}") from None
    if len(raw) > CONFIG_MAX_BYTES:
        raise ConfigError(
            f"{path}: refused: larger than {CONFIG_MAX_BYTES // (1024 * 1024)} MiB (a config is a few KiB): "
            "is this the right file?"
        )
    try:
        # utf-8-sig: editors on Windows prepend a byte order mark; it is not part of the YAML.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise ConfigError(
            f"{path}:{line}:{column}: not valid UTF-8 (byte 0x{raw[err.start]:02x}); save the file as UTF-8"
        ) from None
    return parse_config(text, source_name=str(path))


def _named(text: str, origin: str, environ: Mapping[str, str]) -> Path:
    if not text.strip():
        raise ConfigError(f"config file not found: the path is empty (from {origin})")
    path = _expand_user(text, environ)
    if not path.exists():
        raise ConfigError(f"config file not found: {path} (from {origin})")
    return path


def _expand_user(text: str, environ: Mapping[str, str]) -> Path:
    # HOME from the given environment rather than the process's, so the lookup is testable.
    home = environ.get("HOME")
    if home and (text == "~" or text.startswith("~/")):
        return Path(home + text[1:])
    try:
        return Path(text).expanduser()
    except RuntimeError:  # ~name of an unknown user: keep it literal, so "not found" names it as given
        return Path(text)
