"""The core must stay pure: no UI, SSH or NVML imports, and no I/O when it is imported."""

import subprocess
import sys

FORBIDDEN = (
    "textual",
    "rich",
    "asyncssh",
    "pynvml",
    "httpx",
    "gputop.tui",
    "gputop.sources",
    "gputop.poller",
)

PROBE = """
import builtins, io, os, socket, sys
def refuse(*args, **kwargs):
    raise AssertionError(f"I/O at import: {args[:1]}")
builtins.open = refuse
io.open = refuse
os.listdir = refuse
socket.socket = refuse
import gputop.core.models, gputop.core.config, gputop.core.health, gputop.core.summary
import gputop.core.filter, gputop.core.metrics, gputop.core.nodeset, gputop.core.heatmap
import gputop.core.idle, gputop.core.jobs, gputop.core.job_filter, gputop.core.topology_view
import gputop.core.interconnect, gputop.core.interconnect_deviations, gputop.core.source_problems
import gputop.core.mig_layout, gputop.core.mig_plan, gputop.core.mig_preconditions
import gputop.core
print("\\n".join(sorted(sys.modules)))
"""


def test_core_imports_no_ui_ssh_or_nvml_and_does_no_io() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert "gputop.core.models" in loaded
    leaked = sorted(m for m in loaded for f in FORBIDDEN if m == f or m.startswith(f + "."))
    assert leaked == [], f"gputop.core pulled in {leaked}"
