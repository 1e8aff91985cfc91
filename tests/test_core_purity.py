"""The core stays pure and the layers keep their order, proved over every module rather than a kept list.

- Importing each module under ``gputop.core`` (found by walking the package) does no I/O and loads no UI,
  SSH, NVML or HTTP library.
- No module of the package, its tests, benchmarks or scripts is over 700 lines.
- The import arrows of every module of the package (read from its source, so an import inside a
  function or under TYPE_CHECKING counts too) follow the layer rules below.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "gputop"

FORBIDDEN_AT_IMPORT = (
    "textual",
    "rich",
    "asyncssh",
    "pynvml",
    "httpx",
    "aiohttp",
    "gputop.tui",
    "gputop.sources",
    "gputop.poller",
)

PROBE = """
import builtins, importlib, io, os, pkgutil, socket, sys
import gputop.core
names = sorted(m.name for m in pkgutil.walk_packages(gputop.core.__path__, "gputop.core."))
def refuse(*args, **kwargs):
    raise AssertionError(f"I/O at import: {args[:1]}")
builtins.open = refuse
io.open = refuse
os.listdir = refuse
os.scandir = refuse
socket.socket = refuse
for name in names:
    importlib.import_module(name)
print("\\n".join(names))
print("--")
print("\\n".join(sorted(sys.modules)))
"""

# (a layer, the layers it must never import): a module of the first may not import any of the second.
LAYER_RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gputop.core", ("gputop.",)),  # the core imports only itself (checked below with that exception)
    # the real I/O never imports the simulation that plays it (a helper both need lives with the command
    # table, gputop.sources.commands)
    (
        "gputop.sources",
        ("gputop.sim", "gputop.tui", "gputop.cli", "gputop.poller", "gputop.actions", "gputop.headless"),
    ),
    ("gputop.sim", ("gputop.tui", "gputop.cli", "gputop.poller", "gputop.actions", "gputop.headless")),
    ("gputop.poller", ("gputop.sim", "gputop.tui", "gputop.cli", "gputop.actions", "gputop.headless")),
    ("gputop.actions", ("gputop.tui", "gputop.cli", "gputop.headless")),
    ("gputop.headless", ("gputop.tui",)),
)


def test_every_core_module_imports_no_ui_ssh_or_nvml_and_does_no_io() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    walked, _, loaded_text = done.stdout.partition("--\n")
    modules = walked.split()
    on_disk = {
        ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        for path in (PACKAGE / "core").rglob("*.py")
    } - {"gputop.core"}
    assert set(modules) == on_disk, "every core module is imported by the probe"
    loaded = set(loaded_text.split())
    leaked = sorted(m for m in loaded for f in FORBIDDEN_AT_IMPORT if m == f or m.startswith(f + "."))
    assert leaked == [], f"gputop.core pulled in {leaked}"


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: Path, module: str) -> set[str]:
    """Every gputop module ``path`` imports, wherever in the file the import is."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {name for name in found if name == "gputop" or name.startswith("gputop.")}


def _in(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def test_the_layers_import_only_downwards() -> None:
    broken: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        for target in sorted(_imports(path, module)):
            for layer, never in LAYER_RULES:
                if not _in(module, layer):
                    continue
                if layer == "gputop.core":
                    if not _in(target, "gputop.core") and target != "gputop":
                        broken.append(f"{module} imports {target} (the core imports only gputop.core)")
                elif any(_in(target, forbidden) for forbidden in never):
                    broken.append(f"{module} imports {target} ({layer} never imports it)")
    assert broken == [], "\n".join(broken)


MAX_MODULE_LINES = 700  # a module past this has more than one job; split it by concern
REPO = PACKAGE.parent


def test_no_module_of_the_package_its_tests_benchmarks_or_scripts_is_over_700_lines() -> None:
    too_long = []
    for folder in ("gputop", "tests", "bench", "scripts"):
        for path in sorted((REPO / folder).rglob("*.py")):
            lines = path.read_text(encoding="utf-8").count("\n")
            if lines > MAX_MODULE_LINES:
                too_long.append(f"{path.relative_to(REPO)}: {lines} lines")
    assert too_long == [], "\n".join(too_long)
