"""Files and outputs gputop reads that are hostile or broken: YAML alias bombs and oversized files for the
config and the themes, a Slurm client that prints without end. Each is bounded, and refused or cut with a
clear message; nothing ends gputop."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.config_file import CONFIG_MAX_BYTES, load_config
from gputop.core.config import ConfigError
from gputop.sources import slurm_runner
from gputop.sources.slurm_runner import LocalRunner, RunFailed
from gputop.tui.themes import THEME_MAX_BYTES, load_themes


def alias_bomb(levels: int = 12) -> str:
    """Ten values per level, each level all aliases of the one before: 10**levels values when expanded."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        refs = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "\n".join(lines) + "\n"


THEME_HEAD = 'name: bomb\nprimary: "#112233"\n'


def test_a_theme_file_that_is_an_alias_bomb_is_skipped_with_a_warning(tmp_path: Path) -> None:
    (tmp_path / "bomb.yaml").write_text(THEME_HEAD + alias_bomb())
    (tmp_path / "self.yaml").write_text("name: &n [*n]\n")
    (tmp_path / "huge.yaml").write_text(THEME_HEAD + "# " + "x" * THEME_MAX_BYTES + "\n")
    loaded, warnings = load_themes([tmp_path])
    assert [t.name for t in loaded if t.name in ("bomb", "self", "huge")] == []
    said = "\n".join(warnings)
    assert "bomb.yaml" in said and "expands to more than 100,000 values" in said, said
    assert "self.yaml" in said and ("refers to itself" in said or "nested too deeply" in said), said
    assert "huge.yaml" in said and "larger than 256 KiB" in said, said


def test_a_config_that_is_an_alias_bomb_or_too_large_is_refused_with_the_reason(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(alias_bomb())
    with pytest.raises(ConfigError, match="expands to more than 100,000 values"):
        load_config(bomb)
    itself = tmp_path / "self.yaml"
    itself.write_text("clusters: &c [*c]\n")
    with pytest.raises(ConfigError, match=r"refers to itself|nested too deeply"):
        load_config(itself)
    huge = tmp_path / "huge.yaml"
    huge.write_bytes(b"# " + b"x" * CONFIG_MAX_BYTES + b"\n")
    with pytest.raises(ConfigError, match="larger than 4 MiB"):
        load_config(huge)


def test_gputop_with_a_bomb_for_a_theme_starts_in_bounded_memory(tmp_path: Path) -> None:
    """The reported crash: a theme file that expands to 10**12 values ended gputop with MemoryError."""
    themes = tmp_path / "xdg" / "gputop" / "themes"
    themes.mkdir(parents=True)
    (themes / "bomb.yaml").write_text(THEME_HEAD + alias_bomb())
    probe = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))\n"
        "from gputop.tui.themes import load_themes, theme_dirs\n"
        "loaded, warnings = load_themes(theme_dirs())\n"
        "print(len(loaded), '|'.join(warnings))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env={"XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "bomb.yaml" in done.stdout and "expands to more than" in done.stdout


async def test_a_slurm_client_that_prints_without_end_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slurm_runner, "RUN_OUTPUT_MAX_BYTES", 1024 * 1024)
    monkeypatch.setattr(slurm_runner, "RUN_OUTPUT_MAX_MIB", 1)
    started = asyncio.get_running_loop().time()
    with pytest.raises(RunFailed, match="printed more than 1 MiB") as failed:
        await LocalRunner().run(["yes", "JobId=1 JobName=flood"], {}, 30)
    assert failed.value.started
    assert asyncio.get_running_loop().time() - started < 10
