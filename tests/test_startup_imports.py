"""What the first frame waits for: the screens a key opens are not imported before it."""

from __future__ import annotations

import subprocess
import sys

LATER = ("alerts", "help", "node", "node_action", "queue", "mig_dialog")


def test_the_app_module_leaves_the_screens_a_key_opens_for_later() -> None:
    probe = (
        "import sys, gputop.cli, gputop.tui.app\n"
        f"print(' '.join(m for m in {LATER!r} if 'gputop.tui.screens.' + m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "", f"imported before the first frame: {done.stdout.strip()}"
