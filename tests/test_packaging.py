"""What a user installs: the wheel's name, files and declared dependencies."""

from __future__ import annotations

import ast
import email
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = set()
    for requirement in project["dependencies"]:
        name = requirement.split(";")[0]
        for mark in "<>=!~[ ":
            name = name.split(mark)[0]
        names.add(name.lower().replace("_", "-"))
    return names


def _imported_top_level_modules() -> set[str]:
    found = set()
    for path in (ROOT / "gputop").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - {"gputop", "__future__"}


def test_every_third_party_module_gputop_imports_is_a_declared_dependency() -> None:
    distributions = packages_distributions()
    declared = _declared()
    undeclared = {}
    for module in sorted(_imported_top_level_modules()):
        names = {d.lower().replace("_", "-") for d in distributions.get(module, [module])}
        if not names & declared:
            undeclared[module] = sorted(names)
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
    assert "rich" in declared


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-w", str(out), "-q"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if built.returncode != 0:
        pytest.skip(f"cannot build a wheel here (pip and hatchling needed): {built.stderr[-500:]}")
    (path,) = out.glob("*.whl")
    return path


def test_the_wheel_is_gputop_cluster_and_carries_the_example_config_themes_and_license(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = email.message_from_bytes(
            archive.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
        )
        example = archive.read("gputop/_config.example.yaml")
    assert metadata["Name"] == "gputop-cluster"
    assert metadata["License-Expression"] == "MIT"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "Topic :: System :: Monitoring" in metadata.get_all("Classifier", [])
    assert any(r.startswith("rich") for r in metadata.get_all("Requires-Dist", []))
    assert example == (ROOT / "config.example.yaml").read_bytes()
    assert {"gputop/_themes/gputop-dark.yaml", "gputop/_themes/gputop-light.yaml"} <= names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    with zipfile.ZipFile(wheel) as archive:
        assert "gputop = gputop.cli:main" in archive.read(entry_points).decode()


def test_config_example_prints_the_file_the_schema_is_checked_against() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gputop", "config-example"], capture_output=True, text=True, check=True
    )
    assert done.stdout == (ROOT / "config.example.yaml").read_text(encoding="utf-8")
