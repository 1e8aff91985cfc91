"""The `gputop` command as a user runs it: exit codes, config discovery and messages without tracebacks."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputop import __version__
from gputop.config_file import find_config_path
from gputop.core.config import ConfigError

GOOD_CONFIG = "clusters:\n  - name: hopper\n    nodes: gpu[001-004]\n"
UNKNOWN_KEY_CONFIG = "clusters:\n  - name: hopper\n    nodes: gpu[001-004]\n    ssh:\n      usr: ops\n"
SYNTAX_ERROR_CONFIG = "clusters:\n  - name: hopper\n    nodes: [gpu1\n  bad: :\n"


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUTOP_", "XDG_"))}
    env["HOME"] = str(tmp_path / "home")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    env.update(extra)
    return env


def gputop(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gputop", *args],
        cwd=tmp_path,
        env=env if env is not None else clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def xdg_file(tmp_path: Path) -> Path:
    return tmp_path / "xdg" / "gputop" / "config.yaml"


def assert_clean_failure(result: subprocess.CompletedProcess[str]) -> list[str]:
    """Non-zero, nothing on stdout, a message on stderr, and no traceback; returns the stderr lines."""
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines, "a failure must say why"
    assert lines[0].startswith(("gputop:", "usage: gputop"))
    return lines


# --- version and help -----------------------------------------------------------------------------------


def test_version(tmp_path: Path) -> None:
    result = gputop(tmp_path, "--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"gputop {__version__}"


def test_help_mentions_demo_and_config(tmp_path: Path) -> None:
    result = gputop(tmp_path, "--help")
    assert result.returncode == 0
    assert "--demo" in result.stdout
    assert "--config" in result.stdout
    assert "Traceback" not in result.stderr


# --- no config ------------------------------------------------------------------------------------------


def test_no_config_anywhere_suggests_demo_and_xdg_path(tmp_path: Path) -> None:
    result = gputop(tmp_path)
    lines = assert_clean_failure(result)
    assert len(lines) == 4
    assert "gputop --demo" in result.stderr
    assert str(xdg_file(tmp_path)) in result.stderr
    # the command it suggests works as written, and writes a config gputop reads
    (suggested,) = [line.strip() for line in lines if "gputop config-example" in line]
    python = shlex.quote(sys.executable)
    command = suggested.replace("gputop config-example", f"{python} -m gputop config-example")
    subprocess.run(["sh", "-c", command], check=True, cwd=tmp_path)
    from gputop.config_file import load_config

    assert load_config(xdg_file(tmp_path)).clusters


def test_no_config_message_names_the_file_that_would_be_read_when_xdg_is_relative(tmp_path: Path) -> None:
    env = clean_env(tmp_path, XDG_CONFIG_HOME="relative-xdg")
    result = gputop(tmp_path, env=env)
    assert_clean_failure(result)
    assert "relative-xdg" not in result.stderr
    assert os.path.join(".config", "gputop", "config.yaml") in result.stderr


# --- bad config files -----------------------------------------------------------------------------------


def test_missing_config_flag_file(tmp_path: Path) -> None:
    result = gputop(tmp_path, "--config", "missing.yaml")
    lines = assert_clean_failure(result)
    assert "missing.yaml" in result.stderr
    assert "not found" in result.stderr
    assert "--config" in result.stderr
    assert len(lines) <= 3


def test_missing_env_config_file(tmp_path: Path) -> None:
    env = clean_env(tmp_path, GPUTOP_CONFIG=str(tmp_path / "nope.yaml"))
    result = gputop(tmp_path, env=env)
    assert_clean_failure(result)
    assert str(tmp_path / "nope.yaml") in result.stderr
    assert "$GPUTOP_CONFIG" in result.stderr


def test_env_config_with_unknown_key(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", UNKNOWN_KEY_CONFIG)
    result = gputop(tmp_path, env=clean_env(tmp_path, GPUTOP_CONFIG=str(path)))
    assert_clean_failure(result)
    assert f"{path}:5: clusters[0].ssh.usr: unknown key" in result.stderr
    assert "did you mean 'user'?" in result.stderr


def test_config_flag_with_unknown_key(tmp_path: Path) -> None:
    write(tmp_path / "bad.yaml", UNKNOWN_KEY_CONFIG)
    result = gputop(tmp_path, "--config", "bad.yaml")
    assert_clean_failure(result)
    assert "bad.yaml:5: clusters[0].ssh.usr: unknown key; did you mean 'user'?" in result.stderr


def test_yaml_syntax_error_shows_the_line(tmp_path: Path) -> None:
    write(tmp_path / "syntax.yaml", SYNTAX_ERROR_CONFIG)
    result = gputop(tmp_path, "--config", "syntax.yaml")
    assert_clean_failure(result)
    assert "syntax.yaml:4:" in result.stderr
    assert "invalid YAML" in result.stderr


def test_config_that_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "confdir").mkdir()
    result = gputop(tmp_path, "--config", "confdir")
    assert_clean_failure(result)
    assert "confdir" in result.stderr
    assert "directory" in result.stderr


def test_config_that_is_not_utf8(tmp_path: Path) -> None:
    (tmp_path / "latin1.yaml").write_bytes(b"clusters:\n  - name: caf\xe9\n")
    result = gputop(tmp_path, "--config", "latin1.yaml")
    assert_clean_failure(result)
    assert "latin1.yaml:2:" in result.stderr
    assert "UTF-8" in result.stderr


def test_bad_xdg_config_is_reported_with_its_path(tmp_path: Path) -> None:
    write(xdg_file(tmp_path), UNKNOWN_KEY_CONFIG)
    result = gputop(tmp_path)
    assert_clean_failure(result)
    assert f"{xdg_file(tmp_path)}:5:" in result.stderr


# --- precedence -----------------------------------------------------------------------------------------


def test_find_config_path_precedence(tmp_path: Path) -> None:
    flag = write(tmp_path / "flag.yaml", GOOD_CONFIG)
    env_file = write(tmp_path / "env.yaml", GOOD_CONFIG)
    xdg = write(xdg_file(tmp_path), GOOD_CONFIG)
    environ = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}

    assert find_config_path(str(flag), {**environ, "GPUTOP_CONFIG": str(env_file)}) == flag
    assert find_config_path(None, {**environ, "GPUTOP_CONFIG": str(env_file)}) == env_file
    assert find_config_path(None, environ) == xdg
    # An empty variable counts as unset.
    assert find_config_path(None, {**environ, "GPUTOP_CONFIG": ""}) == xdg


def test_find_config_path_without_any_file(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    assert find_config_path(None, environ) is None


def test_find_config_path_falls_back_to_home_dot_config(tmp_path: Path) -> None:
    home_file = write(tmp_path / "home" / ".config" / "gputop" / "config.yaml", GOOD_CONFIG)
    assert find_config_path(None, {"HOME": str(tmp_path / "home")}) == home_file
    # A relative XDG_CONFIG_HOME is invalid per the spec and ignored.
    assert find_config_path(None, {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": "rel"}) == home_file


def test_find_config_path_expands_tilde_with_given_home(tmp_path: Path) -> None:
    target = write(tmp_path / "home" / "conf.yaml", GOOD_CONFIG)
    assert find_config_path("~/conf.yaml", {"HOME": str(tmp_path / "home")}) == target


def test_find_config_path_named_file_must_exist(tmp_path: Path) -> None:
    write(xdg_file(tmp_path), GOOD_CONFIG)
    environ = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    with pytest.raises(ConfigError, match=r"not found: .*gone\.yaml \(from --config\)"):
        find_config_path(str(tmp_path / "gone.yaml"), environ)
    with pytest.raises(ConfigError, match=r"\(from \$GPUTOP_CONFIG\)"):
        find_config_path(None, {**environ, "GPUTOP_CONFIG": str(tmp_path / "gone.yaml")})
    with pytest.raises(ConfigError, match="path is empty"):
        find_config_path("  ", environ)


def test_config_flag_beats_env_and_xdg(tmp_path: Path) -> None:
    write(xdg_file(tmp_path), UNKNOWN_KEY_CONFIG)
    bad_env = write(tmp_path / "env.yaml", UNKNOWN_KEY_CONFIG)
    write(tmp_path / "good.yaml", GOOD_CONFIG)
    env = clean_env(tmp_path, GPUTOP_CONFIG=str(bad_env))
    result = gputop(tmp_path, "--config", "good.yaml", "--cluster", "nope", env=env)
    # The good file loads, so the run stops at the unknown cluster it names, not at a bad config.
    lines = assert_clean_failure(result)
    assert "bad config" not in result.stderr
    assert "unknown key" not in result.stderr
    assert lines == ["gputop: no cluster named 'nope' in good.yaml (clusters: hopper)"]


def test_env_beats_xdg(tmp_path: Path) -> None:
    write(xdg_file(tmp_path), UNKNOWN_KEY_CONFIG)
    good = write(tmp_path / "good.yaml", GOOD_CONFIG)
    result = gputop(tmp_path, "--cluster", "nope", env=clean_env(tmp_path, GPUTOP_CONFIG=str(good)))
    lines = assert_clean_failure(result)
    assert "bad config" not in result.stderr
    assert str(xdg_file(tmp_path)) not in result.stderr
    assert lines == [f"gputop: no cluster named 'nope' in {good} (clusters: hopper)"]


def test_env_file_is_read_when_no_flag(tmp_path: Path) -> None:
    write(xdg_file(tmp_path), GOOD_CONFIG)
    bad_env = write(tmp_path / "env.yaml", UNKNOWN_KEY_CONFIG)
    result = gputop(tmp_path, env=clean_env(tmp_path, GPUTOP_CONFIG=str(bad_env)))
    assert_clean_failure(result)
    assert f"{bad_env}:5:" in result.stderr


# --- demo arguments -------------------------------------------------------------------------------------


def test_demo_nodes_zero(tmp_path: Path) -> None:
    result = gputop(tmp_path, "--demo", "--demo-nodes", "0")
    lines = assert_clean_failure(result)
    assert lines == ["gputop: --demo-nodes 0: must be between 1 and 10000"]


def test_demo_unknown_gpu(tmp_path: Path) -> None:
    result = gputop(tmp_path, "--demo", "--demo-gpu", "Z80")
    lines = assert_clean_failure(result)
    assert len(lines) == 1
    assert "Z80" in lines[0]
    assert "H100" in lines[0]


def test_demo_nodes_not_a_number(tmp_path: Path) -> None:
    result = gputop(tmp_path, "--demo", "--demo-nodes", "many")
    assert_clean_failure(result)
    assert "--demo-nodes" in result.stderr


# --- a real cluster config ------------------------------------------------------------------------------


def test_nodes_from_slurm_without_slurm_is_one_readable_line(tmp_path: Path) -> None:
    write(tmp_path / "slurm.yaml", "clusters:\n  - name: ampere\n    nodes_from_slurm: gpu\n")
    result = gputop(tmp_path, "--config", "slurm.yaml")
    lines = assert_clean_failure(result)
    assert len(lines) == 1
    assert lines[0].startswith("gputop: cluster 'ampere': ")
    assert "nodes:" in lines[0]


def test_config_without_clusters_and_without_demo(tmp_path: Path) -> None:
    write(tmp_path / "empty-clusters.yaml", "clusters: []\n")
    result = gputop(tmp_path, "--config", "empty-clusters.yaml")
    lines = assert_clean_failure(result)
    assert len(lines) == 1
    assert "empty-clusters.yaml lists no clusters" in lines[0]


def test_without_a_terminal_the_dashboard_says_what_to_run_instead_and_exits(tmp_path: Path) -> None:
    """Started from cron, nohup or a pipe, the dashboard drew into a file at full speed without end."""
    started = time.monotonic()
    result = gputop(tmp_path, "--demo")  # stdin, stdout and stderr are pipes here
    assert time.monotonic() - started < 20
    assert result.returncode == 2
    assert result.stderr.startswith("gputop: <stdin> is not a terminal: the dashboard needs a terminal")
    assert "gputop check" in result.stderr and "gputop snapshot --json" in result.stderr
    assert "\x1b[" not in result.stdout + result.stderr


def test_term_dumb_is_refused_with_what_to_set() -> None:
    from gputop.cli import terminal_problem

    class Tty:
        name = "<tty>"

        def isatty(self) -> bool:
            return True

    assert terminal_problem({"TERM": "xterm-256color"}, [Tty()]) is None
    assert terminal_problem({"TERM": "dumb"}, [Tty()]) == (
        "TERM=dumb cannot draw a full-screen program (set TERM, e.g. xterm-256color)"
    )
    assert "TERM=(unset)" in (terminal_problem({}, [Tty()]) or "")


def test_under_textual_serve_the_web_driver_needs_no_terminal(tmp_path: Path) -> None:
    """`textual serve "gputop --demo"` runs gputop over pipes with Textual's web driver: it must draw."""
    import os
    import select
    import subprocess

    env = {**os.environ, "TEXTUAL_DRIVER": "textual.drivers.web_driver:WebDriver", "COLUMNS": "120"}
    process = subprocess.Popen(
        [sys.executable, "-m", "gputop", "--demo"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    assert process.stdout is not None and process.stderr is not None
    drawn = b""
    deadline = time.monotonic() + 30
    try:
        while b"demo" not in drawn and time.monotonic() < deadline and process.poll() is None:
            if select.select([process.stdout], [], [], 0.5)[0]:
                drawn += os.read(process.stdout.fileno(), 65536)
    finally:
        process.kill()
        process.wait(10)
    assert drawn.startswith(b"__GANGLION__"), drawn[:200]  # the web driver's protocol, not a refusal
    assert b"demo" in drawn
    assert b"not a terminal" not in process.stderr.read()
