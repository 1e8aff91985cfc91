"""`gputop config-example`: the annotated example config, every key with its default, to start from.

    gputop config-example > ~/.config/gputop/config.yaml

The wheel carries the file inside the package (``gputop/_config.example.yaml``); a checkout reads the one at
the top of the repository, so there is one text and the tests check it against the schema.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from gputop.packaged import shipped

HELP = """\
usage: gputop config-example

Print the annotated example config (every key, what it does, its default) on stdout, to copy and edit:
  gputop config-example > ~/.config/gputop/config.yaml"""


def example_path() -> Path | None:
    return shipped("_config.example.yaml", "config.example.yaml")


def main(argv: Sequence[str]) -> int:
    if list(argv) in (["-h"], ["--help"]):
        print(HELP)
        return 0
    if argv:
        print(f"gputop config-example: takes no arguments (got {' '.join(argv)})\n{HELP}", file=sys.stderr)
        return 2
    path = example_path()
    if path is None:
        print("gputop config-example: the example config is missing from this installation", file=sys.stderr)
        return 1
    sys.stdout.write(path.read_text(encoding="utf-8"))
    return 0
