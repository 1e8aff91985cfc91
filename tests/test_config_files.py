"""The config's file side (lookup, permissions, the reference example config.example.yaml), the MIG
section and site overrides of the command table."""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml

from gputop.config_file import find_config_path, load_config
from gputop.core.config import (
    Config,
    ConfigError,
    DemoConfig,
    MigConfig,
    PollConfig,
    Thresholds,
    UiConfig,
    parse_config,
    schema_key_paths,
)
from tests.test_config import (  # the helpers both files use
    EXAMPLE,
    MINIMAL,
    only_error,
    parse,
)

# --- the file side ------------------------------------------------------------------------------------


def test_load_config_uses_the_path_in_messages(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("ui:\n  metric: heat\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.messages == [f"{path}:2: ui.metric: 'heat' is not one of util, mem, temp, power"]


def test_load_config_reads_a_valid_file(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text(MINIMAL)
    config = load_config(path)
    assert config.source_name == str(path)
    assert config.clusters[0].name == "hopper"


def test_load_config_yaml_syntax_error_has_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("clusters:\n  - name: a\n    nodes: 'gpu1\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    (message,) = info.value.messages
    assert re.match(
        rf"{re.escape(str(path))}:4:1: invalid YAML: .*quoted scalar that starts on line 3", message
    )


def test_load_config_tab_indentation_hint(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("poll:\n\tinterval_s: 2\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.messages[0].startswith(f"{path}:2:1: invalid YAML: ")
    assert "not tabs" in info.value.messages[0]


def test_load_config_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_bytes(b"clusters:\n  - name: caf\xe9\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.messages == [f"{path}:2:14: not valid UTF-8 (byte 0xe9); save the file as UTF-8"]


def test_load_config_accepts_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + MINIMAL.encode())
    assert load_config(path).clusters[0].name == "hopper"


def test_load_config_missing_or_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="it is a directory"):
        load_config(tmp_path)


def test_find_config_precedence(tmp_path: Path) -> None:
    cli = tmp_path / "cli.yaml"
    env = tmp_path / "env.yaml"
    xdg = tmp_path / "xdg" / "gputop" / "config.yaml"
    for path in (cli, env, xdg):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(MINIMAL)
    environ = {"GPUTOP_CONFIG": str(env), "XDG_CONFIG_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path)}
    assert find_config_path(str(cli), environ) == cli
    assert find_config_path(None, environ) == env
    assert find_config_path(None, {**environ, "GPUTOP_CONFIG": ""}) == xdg
    del environ["GPUTOP_CONFIG"]
    assert find_config_path(None, environ) == xdg


def test_find_config_xdg_default_is_home_dot_config(tmp_path: Path) -> None:
    assert find_config_path(None, {"HOME": str(tmp_path)}) is None
    path = tmp_path / ".config" / "gputop" / "config.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(MINIMAL)
    assert find_config_path(None, {"HOME": str(tmp_path)}) == path
    # A relative XDG_CONFIG_HOME is invalid by the XDG spec and ignored.
    assert find_config_path(None, {"HOME": str(tmp_path), "XDG_CONFIG_HOME": "rel"}) == path


def test_find_config_missing_xdg_file_is_not_an_error(tmp_path: Path) -> None:
    assert find_config_path(None, {"XDG_CONFIG_HOME": str(tmp_path), "HOME": str(tmp_path)}) is None


def test_find_config_missing_cli_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        find_config_path(str(missing), {"HOME": str(tmp_path)})
    assert info.value.messages == [f"config file not found: {missing} (from --config)"]


def test_find_config_missing_env_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        find_config_path(None, {"GPUTOP_CONFIG": str(missing), "HOME": str(tmp_path)})
    assert info.value.messages == [f"config file not found: {missing} (from $GPUTOP_CONFIG)"]


def test_find_config_expands_home(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(MINIMAL)
    assert find_config_path("~/mine.yaml", {"HOME": str(tmp_path)}) == path
    with pytest.raises(ConfigError, match="the path is empty"):
        find_config_path("", {"HOME": str(tmp_path)})


# --- the reference example -------------------------------------------------------------------------------


def _walk_schema(cls: type, prefix: str = "") -> dict[str, dataclasses.Field[Any]]:
    """Key path -> field, straight from the dataclasses and their type hints."""
    out: dict[str, dataclasses.Field[Any]] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.metadata.get("in_yaml", True):
            continue
        path = f"{prefix}.{f.metadata.get('key') or f.name}" if prefix else f.metadata.get("key") or f.name
        out[path] = f
        tp = hints[f.name]
        if typing.get_origin(tp) is tuple and dataclasses.is_dataclass(typing.get_args(tp)[0]):
            out.update(_walk_schema(typing.get_args(tp)[0], path + "[]"))
        elif dataclasses.is_dataclass(tp):
            out.update(_walk_schema(tp, path))
    return out


SCHEMA = _walk_schema(Config)


def _example_keys() -> dict[str, int]:
    """Key path (lists as []) -> line of its first occurrence in the example."""
    found: dict[str, int] = {}

    def walk(node: yaml.Node, path: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                child = f"{path}.{key.value}" if path else key.value
                found.setdefault(child, key.start_mark.line)
                walk(value, child)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                walk(item, path + "[]")

    walk(yaml.compose(EXAMPLE.read_text(), Loader=yaml.SafeLoader), "")
    return found


def test_example_parses_without_errors() -> None:
    config = load_config(EXAMPLE)
    assert [c.name for c in config.clusters] == [
        "hopper",
        "ampere",
        "workstation",
        "grace",
        "mimir-fleet",
        "lab-prom",
        "vm-single",
    ]
    assert config.clusters[0].ssh.jump_host
    assert config.clusters[0].slurm.run_on != "local"
    assert config.clusters[1].nodes_from_slurm
    assert config.default_cluster == "hopper"


def test_schema_key_paths_matches_the_dataclasses() -> None:
    assert list(schema_key_paths()) == list(SCHEMA)


def test_example_has_every_key() -> None:
    missing = set(SCHEMA) - set(_example_keys())
    assert not missing, f"config.example.yaml lacks {sorted(missing)}"


def _comment_for(lines: list[str], index: int) -> str:
    """The comment block right above line ``index`` plus any comment at its end, as one string."""
    block: list[str] = []
    i = index - 1
    while i >= 0 and lines[i].strip().startswith("#"):
        block.insert(0, lines[i].strip().lstrip("#").strip())
        i -= 1
    _, _, trailing = lines[index].partition(" #")
    return " ".join([*block, trailing.strip()]).strip()


def test_example_documents_every_key_and_its_true_default() -> None:
    lines = EXAMPLE.read_text().splitlines()
    hints: dict[str, Any] = {}
    for path, line in _example_keys().items():
        if path not in SCHEMA:
            continue
        comment = _comment_for(lines, line)
        assert comment, f"{path} (line {line + 1}) has no comment"
        f = SCHEMA[path]
        hints[path] = f
        is_section = f.default is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING
        if is_section or "Required" in comment:
            continue
        match = re.search(r"Default: (.+?)\.?$", comment)
        assert match, f"{path} (line {line + 1}): comment gives no 'Default: ...': {comment!r}"
        text = match.group(1)
        documented = None if text.startswith("none") else yaml.safe_load(text)
        if isinstance(documented, list):
            documented = tuple(documented)
        assert documented == f.default, f"{path}: example says default {text!r}, code has {f.default!r}"
    assert set(hints) == set(SCHEMA)


def test_example_sections_show_the_defaults() -> None:
    config = load_config(EXAMPLE)
    assert (config.poll, config.thresholds, config.ui, config.demo, config.mig) == (
        PollConfig(),
        Thresholds(),
        UiConfig(),
        DemoConfig(),
        MigConfig(),
    )
    from gputop.actions.audit import audit_log_path

    assert config.read_only == Config().read_only
    # the example writes out where the default lands when XDG_STATE_HOME is not set
    assert audit_log_path(config.audit_log, {}) == audit_log_path(Config().audit_log, {})


# --- MIG ---------------------------------------------------------------------------------------------------


def test_mig_section_is_read() -> None:
    config = parse(
        """\
        mig:
          presets: ["2x3g.40gb", "1g.10gb+me, 6x1g.10gb"]
          command_prefix: []
          step_timeout_s: 90
        """
    )
    assert config.mig == MigConfig(("2x3g.40gb", "1g.10gb+me, 6x1g.10gb"), (), 90.0)


def test_mig_defaults_run_nvidia_smi_under_sudo_without_a_password_prompt() -> None:
    assert (Config().mig.command_prefix, Config().mig.step_timeout_s) == (("sudo", "-n"), 30.0)


def test_a_mig_preset_that_does_not_parse_is_an_error_on_its_line() -> None:
    message = only_error(
        """\
        mig:
          presets:
            - 7x1g.10gb
            - 3 x 2g
        """
    )
    assert message.startswith("cfg.yaml:4: mig.presets[1]: bad item '3 x 2g'"), message


def test_a_mig_preset_written_twice_another_way_is_an_error() -> None:
    message = only_error("mig:\n  presets:\n    - 1x7g.80gb\n    - 7G.80GB\n")
    assert message == "cfg.yaml:4: mig.presets[1]: '7G.80GB' is the same layout as presets[0]"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("mig:\n  step_timeout_s: 0\n", "mig.step_timeout_s: 0 is out of range"),
        (
            "mig:\n  command_prefix: sudo\n",
            "mig.command_prefix: expected a list, got 'sudo' (str); write [sudo]",
        ),
        ("mig:\n  command_prefix: ['']\n", "mig.command_prefix[0]: must not be empty"),
        ("mig:\n  preset: []\n", "mig.preset: unknown key; did you mean 'presets'?"),
    ],
)
def test_mig_keys_are_checked(text: str, why: str) -> None:
    assert why in only_error(text)


# --- site overrides of the command table ---------------------------------------------------------------

COMMANDS_HEAD = "clusters:\n  - name: c\n    nodes: gpu[1-2]\n    commands:\n"


def test_command_overrides_are_read() -> None:
    config = parse(
        COMMANDS_HEAD
        + "      - name: xid\n"
        + "        argv: [sudo, -n, journalctl, -k, --no-pager, -g, 'NVRM: Xid']\n"
        + "        interval_s: 120\n"
        + "      - name: ibstat\n"
        + "        enabled: false\n"
    )
    xid, ibstat = config.clusters[0].commands
    assert xid.name == "xid"
    assert xid.argv == ("sudo", "-n", "journalctl", "-k", "--no-pager", "-g", "NVRM: Xid")
    assert xid.interval_s == 120.0 and xid.timeout_s is None and xid.enabled
    assert ibstat.name == "ibstat" and not ibstat.enabled and ibstat.argv is None


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        ("      - name: ibstats\n", "'ibstats' is not one of metrics, processes"),
        ("      - name: metrics\n        enabled: false\n", "the metrics stream cannot be switched off"),
        ("      - name: metrics\n        interval_s: 2\n", "set that instead"),
        ("      - name: metrics\n        argv: [nvidia-smi, -L]\n", "must ask nvidia-smi for --query-gpu"),
        ("      - name: xid\n        argv: []\n", "commands[0].argv: must not be empty"),
        ("      - name: xid\n        argv: dmesg\n", "write [dmesg] for a single entry"),
        ("      - name: xid\n        timeout_s: 0\n", "commands[0].timeout_s: 0 is out of range"),
        ("      - name: xid\n      - name: xid\n        enabled: false\n", "already changed by commands[0]"),
        ("      - argv: [ibstat]\n", "missing required key 'name'"),
    ],
)
def test_bad_command_overrides_are_refused(entries: str, expected: str) -> None:
    assert expected in only_error(COMMANDS_HEAD + entries)


def test_overrides_change_only_what_they_name() -> None:
    from gputop.sources.commands import apply_overrides, default_commands

    config = parse(
        COMMANDS_HEAD
        + "      - name: processes\n        argv: [/opt/nvidia/bin/nvidia-smi, --query-compute-apps=pid]\n"
        + "        timeout_s: 3\n"
        + "      - name: mig_ci\n        enabled: false\n"
    )
    defaults = default_commands(1.0, 60.0)
    table = apply_overrides(defaults, config.clusters[0].commands)
    assert "mig_ci" not in table and "mig_ci" in defaults
    processes = table["processes"]
    assert processes.argv == ("/opt/nvidia/bin/nvidia-smi", "--query-compute-apps=pid")
    assert processes.timeout_s == 3.0 and processes.interval_s == defaults["processes"].interval_s
    assert processes.parser == "compute-apps"
    assert {k: v for k, v in table.items() if k not in ("processes",)} == {
        k: v for k, v in defaults.items() if k not in ("processes", "mig_ci")
    }


def test_slurm_env_takes_name_value_pairs_and_refuses_anything_else() -> None:
    base = "clusters:\n  - name: c\n    nodes: gpu[1-2]\n    slurm:\n      env: "
    config = parse_config(base + '["SLURM_CONF=/etc/slurm-b/slurm.conf", "A_1=x=y"]\n')
    assert config.clusters[0].slurm.env_vars == {"SLURM_CONF": "/etc/slurm-b/slurm.conf", "A_1": "x=y"}
    with pytest.raises(ConfigError) as err:
        parse_config(base + '["SLURM_CONF", "1BAD=x", "A B=c"]\n')
    text = str(err.value)
    for i, item in enumerate(("'SLURM_CONF'", "'1BAD=x'", "'A B=c'")):
        assert f"clusters[0].slurm.env[{i}]: {item} is not NAME=value" in text, text


def test_a_prometheus_store_needs_no_node_list_and_its_credentials_must_agree() -> None:
    ok = parse_config("clusters:\n  - name: c\n    prometheus:\n      url: https://vm.example:8428\n")
    assert ok.clusters[0].prometheus.enabled and ok.clusters[0].node_names == ()
    bad = (
        "clusters:\n  - name: c\n    prometheus:\n      url: ftp://x\n      flavor: victoriametrics-cluster\n"
        "      bearer_token_file: /a\n      bearer_token_env: B\n      key_file: /k\n"
        "      basic_auth_password_env: P\n"
        "  - name: d\n    local: true\n    nodes: ws1\n    prometheus:\n      url: http://p:9090\n"
    )
    with pytest.raises(ConfigError) as err:
        parse_config(bad)
    text = str(err.value)
    for expected in (
        "clusters[0].prometheus.url: ",
        "clusters[0].prometheus.bearer_token_env: give bearer_token_file or bearer_token_env, not both",
        "clusters[0].prometheus.key_file: a client key needs its cert_file",
        "clusters[0].prometheus.tenant: VictoriaMetrics cluster needs the tenant",
        "clusters[0].prometheus.basic_auth_user: basic auth needs a user and a password",
        "clusters[1].prometheus.url: local: true reads this machine over NVML",
    ):
        assert expected in text, text


def test_rack_pattern_is_checked_as_a_regular_expression() -> None:
    assert parse("ui:\n  rack_pattern: '^(r\\d+)-'\n").ui.rack_pattern == "^(r\\d+)-"
    with pytest.raises(ConfigError, match=r"ui.rack_pattern: not a regular expression"):
        parse("ui:\n  rack_pattern: '^(r\\d+-'\n")
    with pytest.raises(ConfigError, match=r"ui.rack_pattern: 201 characters; at most 200"):
        parse(f"ui:\n  rack_pattern: '{'a' * 201}'\n")
