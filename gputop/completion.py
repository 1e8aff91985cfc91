"""`gputop completion bash|zsh`: a completion script for the commands, their options and the values those
take, made from the same argparse parsers the commands use, so it cannot drift from them.

    source <(gputop completion bash)          # or put it in ~/.local/share/bash-completion/completions/gputop
    source <(gputop completion zsh)           # zsh, through its bashcompinit

Values completed: files for options whose value is a file or directory, the choices of options that have
them (--metric, --demo-gpu, --gpu-model), the themes gputop finds, and `gputop parse`'s kinds.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

SHELLS = ("bash", "zsh")
HELP = f"""\
usage: gputop completion {{{",".join(SHELLS)}}}

Print a completion script for gputop's commands and options:
  source <(gputop completion bash)      in ~/.bashrc (or save it as
                                        ~/.local/share/bash-completion/completions/gputop)
  source <(gputop completion zsh)       in ~/.zshrc"""
_FILE_METAVARS = frozenset({"FILE", "DIR", "PATH"})


@dataclass(frozen=True, slots=True)
class Command:
    """What one command takes: its options, which of them take a file, and the words some values are."""

    name: str  # "" for the dashboard itself
    options: tuple[str, ...]
    file_options: tuple[str, ...]
    choices: tuple[tuple[str, tuple[str, ...]], ...]  # (option, its words)
    positional: tuple[str, ...] = ()  # words for the first positional argument
    file_after: bool = False  # a file follows the positional word (gputop parse KIND FILE)


def _theme_names() -> tuple[str, ...]:
    try:
        from gputop.tui.themes import discover_themes

        themes, _warnings = discover_themes()
        return tuple(sorted(theme.name for theme in themes))
    except Exception:  # completion still works without theme names
        return ("gputop-dark", "gputop-light", "gputop-high-contrast")


def _command(name: str, parser: argparse.ArgumentParser, extra: dict[str, tuple[str, ...]]) -> Command:
    options: list[str] = []
    files: list[str] = []
    choices: list[tuple[str, tuple[str, ...]]] = []
    for action in parser._actions:  # argparse keeps no public list of them
        if not action.option_strings:
            continue
        options.extend(action.option_strings)
        words = extra.get(action.option_strings[-1]) or tuple(str(c) for c in action.choices or ())
        if words:
            choices.extend((option, words) for option in action.option_strings)
        elif action.nargs != 0 and str(action.metavar or "") in _FILE_METAVARS:
            files.extend(action.option_strings)
    return Command(name, tuple(options), tuple(files), tuple(choices))


def commands() -> list[Command]:
    from gputop.cli import build_parser
    from gputop.core.parsers.registry import registry
    from gputop.headless.command import build_parser as headless_parser
    from gputop.headless.export import build_parser as export_parser
    from gputop.headless.record import build_parser as record_parser
    from gputop.headless.watch import build_parser as watch_parser
    from gputop.sim.fake_fleet.cli import build_parser as fleet_parser
    from gputop.sim.gpu_models import GPU_MODELS

    extra = {"--theme": _theme_names(), "--demo-gpu": tuple(GPU_MODELS)}
    builders: list[tuple[str, Callable[[], argparse.ArgumentParser]]] = [
        ("", build_parser),
        ("check", lambda: headless_parser("check")),
        ("snapshot", lambda: headless_parser("snapshot")),
        ("watch", watch_parser),
        ("record", record_parser),
        ("export", export_parser),
        ("fake-fleet", fleet_parser),
    ]
    found = [_command(name, build(), extra) for name, build in builders]
    found.append(Command("parse", ("--list", "-h", "--help"), (), (), tuple(sorted(registry())), True))
    found.append(Command("replay", ("--config", "--theme", "-h", "--help"), ("--config",), ()))
    found.append(Command("config-example", ("-h", "--help"), (), ()))
    found.append(Command("completion", ("-h", "--help"), (), (), SHELLS))
    return found


def _words(words: Sequence[str]) -> str:
    return f'COMPREPLY=($(compgen -W {shlex.quote(" ".join(words))} -- "$cur")); return'


def _case_of(cmd: Command, names: Sequence[str]) -> list[str]:
    label = cmd.name or '""'
    lines = [f"    {label})"]
    if cmd.file_options:
        lines.append(f'        case "$prev" in {"|".join(cmd.file_options)})')
        lines.append('            COMPREPLY=($(compgen -f -- "$cur")); return;;')
        lines.append("        esac")
    for option, words in cmd.choices:
        lines.append(f"        [[ $prev == {option} ]] && {{ {_words(words)}; }}")
    if cmd.positional:
        lines.append(f"        [[ $cur != -* ]] && (( COMP_CWORD == 2 )) && {{ {_words(cmd.positional)}; }}")
    if cmd.file_after:
        files = 'COMPREPLY=($(compgen -f -- "$cur")); return'
        lines.append(f"        [[ $cur != -* ]] && (( COMP_CWORD == 3 )) && {{ {files}; }}")
    if not cmd.name:
        lines.append(f"        [[ $cur != -* ]] && (( COMP_CWORD == 1 )) && {{ {_words(names)}; }}")
    lines.append(f"        {_words(cmd.options)};;")
    return lines


def bash_script() -> str:
    cmds = commands()
    names = [c.name for c in cmds if c.name]
    lines = [
        "# gputop completion for bash (gputop completion bash)",
        "_gputop() {",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}" cmd=""',
        "    # a command is gputop's first word; anything else is the dashboard's options",
        "    if (( COMP_CWORD > 1 )); then",
        f'        case "${{COMP_WORDS[1]}}" in {"|".join(names)}) cmd="${{COMP_WORDS[1]}}";; esac',
        "    fi",
        '    case "$cmd" in',
    ]
    for cmd in cmds:
        lines.extend(_case_of(cmd, names))
    lines += ["    esac", "}", "complete -o default -F _gputop gputop", ""]
    return "\n".join(lines)


def zsh_script() -> str:
    return (
        "# gputop completion for zsh (gputop completion zsh), through zsh's bash completion support\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + bash_script()
    )


def main(argv: Sequence[str]) -> int:
    if list(argv) in (["-h"], ["--help"]):
        print(HELP)
        return 0
    if len(argv) != 1 or argv[0] not in SHELLS:
        print(f"gputop completion: which shell? one of {', '.join(SHELLS)}\n{HELP}", file=sys.stderr)
        return 2
    sys.stdout.write(bash_script() if argv[0] == "bash" else zsh_script())
    return 0
