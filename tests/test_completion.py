"""`gputop completion bash`: the script bash really runs, asked what it would offer."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gputop.completion import bash_script, zsh_script

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def offered(line: str, tmp_path: Path) -> list[str]:
    """What bash's completion offers for ``line`` (the cursor at its end)."""
    script = tmp_path / "gputop-completion.bash"
    script.write_text(bash_script(), encoding="utf-8")
    words = line.split(" ")
    program = (
        f"source {script}\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        "_gputop\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, cwd=tmp_path, check=True)
    return [word for word in done.stdout.splitlines() if word]


def test_commands_options_and_values_are_offered(tmp_path: Path) -> None:
    assert offered("gputop ", tmp_path) == [
        "check", "snapshot", "watch", "record", "export", "fake-fleet", "parse", "replay", "config-example",
        "completion"
    ]  # fmt: skip
    assert offered("gputop export --for", tmp_path) == ["--format"]
    assert offered("gputop watch --re", tmp_path) == ["--reset-breaker"]
    assert offered("gputop c", tmp_path) == ["check", "config-example", "completion"]
    assert "--read-only" in offered("gputop --", tmp_path)
    assert offered("gputop --metric t", tmp_path) == ["temp"]
    assert "gputop-high-contrast" in offered("gputop --theme gputop-h", tmp_path)
    assert offered("gputop check --ti", tmp_path) == ["--timeout"]
    assert offered("gputop snapshot --j", tmp_path) == ["--json"]
    assert offered("gputop fake-fleet --gpu-model H2", tmp_path) == ["H200"]
    assert offered("gputop parse sq", tmp_path) == ["squeue", "squeue-json"]
    assert offered("gputop completion ", tmp_path) == ["bash", "zsh"]
    assert "check" not in offered("gputop --demo ", tmp_path)  # a command is only ever the first word


def test_files_where_a_file_is_asked_for(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text("", encoding="utf-8")
    assert offered("gputop --config clu", tmp_path) == ["cluster.yaml"]
    assert offered("gputop check --config clu", tmp_path) == ["cluster.yaml"]
    assert offered("gputop parse squeue clu", tmp_path) == ["cluster.yaml"]


def test_the_command_prints_each_script_and_refuses_an_unknown_shell() -> None:
    run = [sys.executable, "-m", "gputop", "completion"]
    bash = subprocess.run([*run, "bash"], capture_output=True, text=True, check=True)
    assert bash.stdout == bash_script()
    assert subprocess.run(["bash", "-n"], input=bash.stdout, text=True, check=False).returncode == 0
    zsh = subprocess.run([*run, "zsh"], capture_output=True, text=True, check=True)
    assert zsh.stdout == zsh_script() and "bashcompinit" in zsh.stdout
    refused = subprocess.run([*run, "tcsh"], capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and "one of bash, zsh" in refused.stderr
