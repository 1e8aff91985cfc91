"""Two commits, one benchmark, run in turn: figures that mean something beside each other.

    python bench/pair.py [--rounds 3] A B -- python bench/bench_dashboard.py --quick

Each commit is checked out once into a worktree under a temporary directory; the command then runs
A, B, B, A, A, B, ... (the order flips each round, so neither side always runs on a warmer machine), in
that worktree, with it first on PYTHONPATH and with the Python that runs this script. Every benchmark here
prints its figures as one table (bench_report.print_table); the tables are read back and printed side by
side: each figure's values per run, the medians and the ratio of B's median to A's.

A or B may be any commit name git knows; "." is the working tree as it is, uncommitted changes included.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GIT = shutil.which("git") or "git"
_NUMBER = re.compile(r"^(-?[0-9.]+(?:e-?\d+)?)\s*(.*)$")


def read_table(output: str) -> dict[str, tuple[float, str]]:
    """(value, unit) by figure name, from the table print_table printed (its header starts "figure")."""
    lines = output.splitlines()
    figures: dict[str, tuple[float, str]] = {}
    for at, header in enumerate(lines):
        if not (header.startswith("figure") and " value" in header and at + 1 < len(lines)):
            continue
        if not lines[at + 1].startswith("---"):
            continue
        value_end = header.index(" target") if " target" in header else None
        name_end = header.index(" value")
        for row in lines[at + 2 :]:
            if not row.strip():
                break
            # the value column is right-aligned under "value": the name ends two spaces before it starts
            head = row[:value_end] if value_end is not None else row
            name, value_text = head[: name_end + 1].rstrip(), head[name_end + 1 :].strip()
            match = _NUMBER.match(value_text)
            if name and match:
                seen, unique = 1, name
                while unique in figures:  # a label a benchmark prints in two tables keeps both
                    seen += 1
                    unique = f"{name} #{seen}"
                figures[unique] = (float(match.group(1)), match.group(2))
    return figures


def worktree(commit: str, root: Path, label: str) -> Path:
    """A checkout of ``commit`` ("." : this working tree as it is)."""
    if commit == ".":
        return REPO
    where = root / label
    subprocess.run(
        [GIT, "-C", str(REPO), "worktree", "add", "--detach", "--force", str(where), commit],
        check=True,
        capture_output=True,
    )
    return where


def run_once(tree: Path, command: list[str]) -> tuple[dict[str, tuple[float, str]], str]:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(tree), os.environ.get("PYTHONPATH"))))
    )
    argv = [sys.executable if word == "python" else word for word in command]
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(
            f"{' '.join(command)} failed in {tree} (exit {done.returncode}):\n{done.stderr[-2000:]}"
        )
    return read_table(done.stdout), done.stdout


def side_by_side(labels: tuple[str, str], runs: dict[str, list[dict[str, tuple[float, str]]]]) -> list[str]:
    a, b = labels
    names = list(dict.fromkeys(name for table in runs[a] + runs[b] for name in table))
    out = []
    for name in names:
        values = {side: [t[name][0] for t in runs[side] if name in t] for side in labels}
        unit = next((t[name][1] for side in labels for t in runs[side] if name in t), "")
        if not values[a] or not values[b]:
            continue
        med_a, med_b = statistics.median(values[a]), statistics.median(values[b])
        ratio = f"{med_b / med_a:.2f}" if med_a else "n/a"
        out.append(
            f"{name[:44]:44}  {unit[:5]:5}  A {' / '.join(f'{v:g}' for v in values[a]):28}"
            f"  B {' / '.join(f'{v:g}' for v in values[b]):28}  median {med_a:g} -> {med_b:g}  B/A {ratio}"
        )
    return out


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        raise SystemExit("usage: pair.py [--rounds N] A B -- COMMAND...")
    split = args.index("--")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="the commit before (any name git knows; '.' is the working tree)")
    parser.add_argument("b", help="the commit after")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each commit (default 3)")
    parser.add_argument("--keep", action="store_true", help="print every run's own output too")
    options = parser.parse_args(args[:split])
    command = args[split + 1 :]
    root = Path(tempfile.mkdtemp(prefix="gputop-pair-"))
    try:
        trees = {"A": worktree(options.a, root, "a"), "B": worktree(options.b, root, "b")}
        runs: dict[str, list[dict[str, tuple[float, str]]]] = {"A": [], "B": []}
        for round_number in range(options.rounds):
            order = ("A", "B") if round_number % 2 == 0 else ("B", "A")
            for side in order:
                table, output = run_once(trees[side], command)
                runs[side].append(table)
                print(f"round {round_number + 1}: {side} done ({len(table)} figures)", file=sys.stderr)
                if options.keep:
                    print(
                        f"--- {side} ({getattr(options, side.lower())}), round {round_number + 1}\n{output}"
                    )
        print(
            f"A = {options.a}, B = {options.b}, {options.rounds} runs each, alternating: {' '.join(command)}"
        )
        for line in side_by_side(("A", "B"), runs):
            print(line)
    finally:
        for side in ("a", "b"):
            if (root / side).exists():
                subprocess.run(
                    [GIT, "-C", str(REPO), "worktree", "remove", "--force", str(root / side)],
                    check=False,
                    capture_output=True,
                )
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
