"""The configuration schema and its strict parser: valid configurations, and invalid ones one kind
at a time. The file side and the reference example are tested in test_config_files.py."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from gputop.core.config import (
    ClusterConfig,
    Config,
    ConfigError,
    DemoConfig,
    PollConfig,
    SlurmConfig,
    SshConfig,
    Thresholds,
    UiConfig,
    parse_config,
)

EXAMPLE = Path(__file__).resolve().parent.parent / "config.example.yaml"

MINIMAL = """\
clusters:
  - name: hopper
    nodes: gpu[001-128]
"""


def parse(text: str) -> Config:
    return parse_config(textwrap.dedent(text), "cfg.yaml")


def errors(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse(text)
    assert info.value.messages, "a ConfigError must carry at least one message"
    return info.value.messages


def only_error(text: str) -> str:
    messages = errors(text)
    assert len(messages) == 1, messages
    return messages[0]


# --- valid configurations ---------------------------------------------------------------------------


def test_minimal_three_line_config() -> None:
    config = parse_config(MINIMAL, "cfg.yaml")
    assert config.source_name == "cfg.yaml"
    (cluster,) = config.clusters
    assert cluster.name == "hopper"
    assert cluster.nodeset == "gpu[001-128]"
    assert len(cluster.node_names) == 128
    assert cluster.node_names[:2] == ("gpu001", "gpu002")
    assert cluster.nodes_from_slurm is None
    assert cluster.ssh == SshConfig()
    assert cluster.slurm == SlurmConfig()
    assert dataclasses.replace(config, clusters=(), source_name=Config().source_name) == Config.default()


def test_defaults() -> None:
    config = Config.default()
    assert config.clusters == ()
    assert config.default_cluster is None
    assert config.read_only is False
    assert config.audit_log is None  # the XDG state directory, resolved where actions are taken
    assert config.poll == PollConfig(1.0, 5.0, 10.0, 60.0, 60.0, 1.0, 60.0)
    assert config.thresholds == Thresholds(85, 90, 95, 100, 5, 10)
    assert config.ui == UiConfig("gputop-dark", "util", 5)
    assert config.demo == DemoConfig(32, 8, "H100", 42)
    ssh = SshConfig()
    assert (ssh.user, ssh.port, ssh.jump_host, ssh.identity_files) == (None, None, None, ())
    assert (ssh.config_file, ssh.known_hosts) == ("~/.ssh/config", None)  # None: as ssh reads them
    assert (ssh.verify_host_keys, ssh.connect_timeout_s, ssh.max_concurrent_handshakes) == (True, 10, 64)
    assert SlurmConfig() == SlurmConfig(True, "local", 10, 10)


def test_empty_mapping_means_all_defaults() -> None:
    assert dataclasses.replace(parse("{}"), source_name="<defaults>") == Config.default()


def test_empty_sections_mean_their_defaults() -> None:
    config = parse("poll:\nui:\nclusters:\n  # - name: a\n")
    assert config.poll == PollConfig()
    assert config.ui == UiConfig()
    assert config.clusters == ()


FULL = """\
clusters:
  - name: hopper
    nodes:
      - gpu[001-004]
      - dgx-a[01-02]
    gpus_per_node: 8
    local: false
    ssh:
      user: svc
      port: 2222
      config_file: /etc/gputop/ssh_config
      known_hosts: /etc/gputop/known_hosts
      verify_host_keys: false
      identity_files: [~/.ssh/a, ~/.ssh/b]
      jump_host: alice@bastion:2200
      connect_timeout_s: 2.5
      max_concurrent_handshakes: 128
    slurm:
      enabled: true
      run_on: login01
      poll_interval_s: 30
      command_timeout_s: 20
  - name: ampere
    nodes_from_slurm: all
  - name: ws
    nodes: ws07
    local: true
    slurm: {enabled: false}
default_cluster: ampere
read_only: true
audit_log: /var/log/gputop/audit.jsonl
poll:
  interval_s: 0.5
  node_deadline_s: 3
  stale_after_s: 5
  down_after_s: 30
  slow_facts_interval_s: 120
  backoff_initial_s: 2
  backoff_max_s: 2
thresholds:
  temp_warn_c: 80
  temp_crit_c: 88.5
  mem_warn_pct: 90
  power_warn_pct: 110
  idle_util_pct: 1
  idle_minutes: 30
ui:
  theme: gputop-light
  metric: power
  refresh_age_warn_s: 3
demo:
  nodes: 5000
  gpus_per_node: 4
  gpu_model: A100-80GB
  seed: -1
"""


def test_full_config() -> None:
    config = parse(FULL)
    hopper, ampere, ws = config.clusters
    assert hopper == ClusterConfig(
        name="hopper",
        nodeset="dgx-a[01-02],gpu[001-004]",
        node_names=("dgx-a01", "dgx-a02", "gpu001", "gpu002", "gpu003", "gpu004"),
        nodes_from_slurm=None,
        gpus_per_node=8,
        local=False,
        ssh=SshConfig(
            user="svc",
            port=2222,
            config_file="/etc/gputop/ssh_config",
            known_hosts="/etc/gputop/known_hosts",
            verify_host_keys=False,
            identity_files=("~/.ssh/a", "~/.ssh/b"),
            jump_host="alice@bastion:2200",
            connect_timeout_s=2.5,
            max_concurrent_handshakes=128,
        ),
        slurm=SlurmConfig(enabled=True, run_on="login01", poll_interval_s=30, command_timeout_s=20),
    )
    assert ampere.nodes_from_slurm == "all"
    assert ampere.node_names == ()
    assert ampere.nodeset == ""
    assert ws.local is True
    assert ws.node_names == ("ws07",)
    assert config.default_cluster == "ampere"
    assert config.read_only is True
    assert config.audit_log == "/var/log/gputop/audit.jsonl"
    assert config.poll == PollConfig(0.5, 3, 5, 30, 120, 2, 2)
    assert config.thresholds == Thresholds(80, 88.5, 90, 110, 1, 30)
    assert config.ui == UiConfig("gputop-light", "power", 3)
    assert config.demo == DemoConfig(5000, 4, "A100-80GB", -1)
    assert config.cluster("ampere") is ampere
    assert config.cluster("nope") is None
    assert config.cluster_names == ("hopper", "ampere", "ws")


def test_ints_become_floats_and_yaml_number_syntax_works() -> None:
    config = parse("poll: {interval_s: 2, down_after_s: 1_000, stale_after_s: 1.5e+1}\ndemo: {seed: 0x2A}\n")
    assert config.poll.interval_s == 2.0
    assert type(config.poll.interval_s) is float
    assert config.poll.down_after_s == 1000.0
    assert config.poll.stale_after_s == 15.0
    assert config.demo.seed == 42


def test_bounds_are_inclusive_where_documented() -> None:
    config = parse("poll: {interval_s: 0.1}\nthresholds: {mem_warn_pct: 100, power_warn_pct: 0}")
    assert config.poll.interval_s == 0.1
    assert parse("poll: {interval_s: 3600}").poll.interval_s == 3600


def test_config_is_frozen() -> None:
    config = parse(MINIMAL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.read_only = True  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.clusters[0].ssh.port = 1  # type: ignore[misc]


# --- invalid configurations: one kind each -----------------------------------------------------------


def test_unknown_top_level_key_with_hint() -> None:
    message = only_error("pol:\n  interval_s: 2\n")
    assert message == (
        "cfg.yaml:1: pol: unknown key; did you mean 'poll'? "
        "(allowed: alerts, audit_log, clusters, default_cluster, demo, history, mig, policy, poll, "
        "read_only, thresholds, ui)"
    )


def test_unknown_nested_key_with_hint() -> None:
    message = only_error(
        """\
        clusters:
          - name: hopper
            nodes: gpu[001-004]
            ssh:
              user: svc

              prot: 22
        """
    )
    assert message.startswith(
        "cfg.yaml:7: clusters[0].ssh.prot: unknown key; did you mean 'port'? (allowed: config_file, "
        "connect_timeout_s, identity_files,"
    )


def test_unknown_key_without_close_match_lists_allowed_keys() -> None:
    message = only_error("ui: {colour_blind: true}")
    allowed = "metric, rack_pattern, refresh_age_warn_s, theme"
    assert message == f"cfg.yaml:1: ui.colour_blind: unknown key (allowed: {allowed})"


def test_key_one_level_too_high_points_to_its_section() -> None:
    assert "did you mean 'ssh.user'?" in only_error("clusters:\n  - name: a\n    nodes: n1\n    user: svc\n")
    assert "did you mean 'poll.interval_s'?" in only_error("interval_s: 2\n")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "thresholds:\n  temp_warn_c: hot\n",
            "cfg.yaml:2: thresholds.temp_warn_c: expected a number, got 'hot' (str)",
        ),
        ("read_only: 1\n", "cfg.yaml:1: read_only: expected true or false, got 1 (int)"),
        ("read_only: 'true'\n", "cfg.yaml:1: read_only: expected true or false, got 'true' (str)"),
        ("demo:\n  nodes: true\n", "cfg.yaml:2: demo.nodes: expected an integer, got true (bool)"),
        ("demo:\n  nodes: 8.0\n", "cfg.yaml:2: demo.nodes: expected an integer, got 8.0 (float)"),
        ("poll:\n  interval_s: false\n", "cfg.yaml:2: poll.interval_s: expected a number, got false (bool)"),
        ("ui:\n  theme: 42\n", "cfg.yaml:2: ui.theme: expected text, got 42 (int); put it in quotes"),
        ("ui:\n  theme: [a]\n", "cfg.yaml:2: ui.theme: expected text, got a list"),
        ("poll: 5\n", "cfg.yaml:1: poll: expected a mapping of keys, got 5 (int)"),
        ("clusters: {a: 1}\n", "cfg.yaml:1: clusters: expected a list, got a mapping"),
        (
            "poll:\n  interval_s: .nan\n",
            "cfg.yaml:2: poll.interval_s: expected a finite number, got nan (float)",
        ),
    ],
)
def test_wrong_type(text: str, expected: str) -> None:
    assert only_error(text) == expected


def test_strings_are_not_coerced_to_numbers() -> None:
    message = only_error("poll:\n  interval_s: '2'\n")
    assert message.startswith("cfg.yaml:2: poll.interval_s: expected a number, got '2' (str)")
    assert "without quotes" in message
    # YAML 1.1 reads 1e3 as text; the hint says how to write it.
    assert "1.0e+3" in only_error("poll:\n  down_after_s: 1e3\n")


def test_single_string_where_a_list_is_expected() -> None:
    message = only_error("clusters:\n- name: a\n  nodes: n1\n  ssh:\n    identity_files: ~/.ssh/id\n")
    assert message == (
        "cfg.yaml:5: clusters[0].ssh.identity_files: expected a list, got '~/.ssh/id' (str); "
        "write [~/.ssh/id] for a single entry"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "poll:\n  interval_s: 0\n",
            "cfg.yaml:2: poll.interval_s: 0 is out of range; it must be between 0.1 and 3600 (seconds)",
        ),
        (
            "clusters:\n- name: a\n  nodes: n1\n  ssh: {port: 70000}\n",
            "cfg.yaml:4: clusters[0].ssh.port: 70000 is out of range; it must be between 1 and 65535",
        ),
        (
            "clusters:\n- name: a\n  nodes: n1\n  ssh: {connect_timeout_s: 0}\n",
            "cfg.yaml:4: clusters[0].ssh.connect_timeout_s: 0 is out of range; "
            "it must be greater than 0 and at most 300 (seconds)",
        ),
        (
            "poll: {node_deadline_s: -1.5}\n",
            "cfg.yaml:1: poll.node_deadline_s: -1.5 is out of range; it must be greater than 0 (seconds)",
        ),
        (
            "thresholds: {mem_warn_pct: 101}\n",
            "cfg.yaml:1: thresholds.mem_warn_pct: 101 is out of range; "
            "it must be between 0 and 100 (percent)",
        ),
        (
            "demo: {gpus_per_node: 17}\n",
            "cfg.yaml:1: demo.gpus_per_node: 17 is out of range; it must be between 1 and 16 (GPUs)",
        ),
        (
            "clusters:\n- name: a\n  nodes: n1\n  gpus_per_node: 0\n",
            "cfg.yaml:4: clusters[0].gpus_per_node: 0 is out of range; it must be between 1 and 64 (GPUs)",
        ),
    ],
)
def test_out_of_range(text: str, expected: str) -> None:
    assert only_error(text) == expected


def test_bad_enum_lists_the_allowed_values() -> None:
    assert only_error("ui:\n  metric: heat\n") == (
        "cfg.yaml:2: ui.metric: 'heat' is not one of util, mem, temp, power"
    )
    assert only_error("demo: {gpu_model: h100}") == (
        "cfg.yaml:1: demo.gpu_model: 'h100' is not one of H100, H200, A100-80GB, A100-40GB, B200; "
        "did you mean 'H100'?"
    )
    assert "5 (int) is not one of util" in only_error("ui: {metric: 5}")


def test_bad_nodeset_syntax_names_the_value() -> None:
    message = only_error("clusters:\n  - name: a\n    nodes: gpu[001-\n")
    assert message.startswith("cfg.yaml:3: clusters[0].nodes: 'gpu[001-' is not a valid nodeset")
    message = only_error("clusters:\n  - name: a\n    nodes:\n      - gpu[001-004]\n      - dgx[3-1]\n")
    assert message.startswith("cfg.yaml:5: clusters[0].nodes[1]: 'dgx[3-1]' is not a valid nodeset")


@pytest.mark.parametrize(
    ("nodes", "fragment"),
    [
        ("''", "clusters[0].nodes: empty nodeset"),
        ("[]", "clusters[0].nodes: the list of nodes is empty"),
        ("'@gpus'", "node groups (@name) are not supported"),
        ("5", "clusters[0].nodes: expected a nodeset such as gpu[001-128], or a list of them, got 5 (int)"),
        ("[gpu1, 5]", "clusters[0].nodes[1]: expected a nodeset"),
        ("[gpu1, gpu2, gpu1]", "clusters[0].nodes[2]: gpu1 already listed in clusters[0].nodes[0]"),
    ],
)
def test_bad_nodes(nodes: str, fragment: str) -> None:
    assert fragment in only_error(f"clusters:\n  - name: a\n    nodes: {nodes}\n")


def test_unquoted_nodeset_in_flow_list_gets_a_hint() -> None:
    message = only_error("clusters:\n  - name: a\n    nodes: [gpu[1-2], dgx1]\n")
    assert message.startswith("cfg.yaml:3:")
    assert "invalid YAML" in message
    assert "quote nodesets" in message


def test_duplicate_cluster_names() -> None:
    message = only_error(
        "clusters:\n- name: a\n  nodes: n1\n- name: b\n  nodes: n2\n- name: a\n  nodes: n3\n"
    )
    assert message == "cfg.yaml:6: clusters[2].name: 'a' is already the name of clusters[0]"


def test_default_cluster_must_name_a_cluster() -> None:
    text = "clusters:\n- name: hopper\n  nodes: n1\n- name: ampere\n  nodes: n2\ndefault_cluster: hoper\n"
    assert only_error(text) == (
        "cfg.yaml:6: default_cluster: 'hoper' is not one of the clusters: hopper, ampere; "
        "did you mean 'hopper'?"
    )
    assert only_error("default_cluster: x\n") == (
        "cfg.yaml:1: default_cluster: 'x' names a cluster, but no clusters are configured"
    )


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        (
            "'my cluster'",
            "clusters[0].name: 'my cluster' is not allowed; use letters, digits, '.', '_' and '-'",
        ),
        ("''", "clusters[0].name: must not be empty"),
        ("2024", "clusters[0].name: expected text, got 2024 (int); put it in quotes"),
    ],
)
def test_bad_cluster_name(name: str, fragment: str) -> None:
    assert fragment in only_error(f"clusters:\n- name: {name}\n  nodes: n1\n")


def test_cluster_needs_a_name() -> None:
    assert only_error("clusters:\n- nodes: n1\n") == "cfg.yaml:2: clusters[0]: missing required key 'name'"


def test_exactly_one_of_nodes_and_nodes_from_slurm() -> None:
    assert only_error("clusters:\n- name: a\n  nodes: n1\n  nodes_from_slurm: gpu\n") == (
        "cfg.yaml:4: clusters[0].nodes_from_slurm: give either nodes or nodes_from_slurm, not both"
    )
    assert only_error("clusters:\n- name: a\n  gpus_per_node: 8\n").startswith(
        "cfg.yaml:2: clusters[0]: needs nodes (a nodeset such as gpu[001-128]) or nodes_from_slurm"
    )


def test_nodes_from_slurm_needs_slurm() -> None:
    message = only_error("clusters:\n- name: a\n  nodes_from_slurm: gpu\n  slurm: {enabled: false}\n")
    assert message.startswith("cfg.yaml:3: clusters[0].nodes_from_slurm: needs slurm.enabled: true")


def test_local_cluster_is_one_host() -> None:
    assert "nodes names 2 hosts" in only_error("clusters:\n- name: a\n  local: true\n  nodes: n[1-2]\n")
    assert "clusters[0].local: local: true reads only this machine" in only_error(
        "clusters:\n- name: a\n  local: true\n  nodes_from_slurm: all\n"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "poll:\n  stale_after_s: 90\n",
            "cfg.yaml:2: poll.stale_after_s: 90 must be less than down_after_s (60 by default)",
        ),
        (
            "poll:\n  stale_after_s: 20\n  down_after_s: 20\n",
            "cfg.yaml:3: poll.down_after_s: 20 must be greater than stale_after_s (20)",
        ),
        (
            "poll:\n  backoff_max_s: 0.5\n",
            "cfg.yaml:2: poll.backoff_max_s: 0.5 must be at least backoff_initial_s (1 by default)",
        ),
        (
            "thresholds:\n  temp_crit_c: 80\n",
            "cfg.yaml:2: thresholds.temp_crit_c: 80 must be greater than temp_warn_c (85 by default)",
        ),
    ],
)
def test_cross_field_rules(text: str, expected: str) -> None:
    assert only_error(text) == expected


def test_duplicate_yaml_key() -> None:
    assert only_error("read_only: true\nui: {}\nread_only: false\n") == (
        "cfg.yaml:3: read_only: duplicate key; it is already given on line 1"
    )


def test_empty_file() -> None:
    for text in ("", "\n\n", "# everything commented out\n"):
        assert only_error(text) == (
            "cfg.yaml: the configuration is empty; "
            "it needs at least a 'clusters:' list (see config.example.yaml)"
        )


def test_list_instead_of_mapping() -> None:
    assert only_error("- name: a\n  nodes: n1\n") == (
        "cfg.yaml:1: top level: expected a mapping of keys, got a list"
    )
    assert (
        only_error("just text\n")
        == "cfg.yaml:1: top level: expected a mapping of keys, got 'just text' (str)"
    )


def test_yaml_syntax_error_in_text_has_line_and_column() -> None:
    message = only_error("poll:\n  interval_s: 1\n bad: 2\n")
    assert message.startswith("cfg.yaml:3:2: invalid YAML: ")


def test_unsafe_yaml_tags_are_refused() -> None:
    message = only_error("poll: !!python/object/apply:os.system ['true']\n")
    assert message.startswith("cfg.yaml:1:7: invalid YAML: could not determine a constructor")


def test_all_errors_reported_at_once_in_line_order() -> None:
    messages = errors(
        """\
        ui:
          metric: heat
        poll:
          interval_s: 0
        clusters:
          - name: a
            nodes: gpu[1-
            ssh: {prot: 1, port: x}
        thresholds:
          temp_warn_c: hot
        """
    )
    lines = [int(m.split(":")[1]) for m in messages]
    assert lines == [2, 4, 7, 8, 8, 10]
    assert lines == sorted(lines)


def test_yaml_anchors_and_merge_keys_work_and_errors_point_at_the_use() -> None:
    text = """\
    clusters:
      - name: a
        nodes: n1
        ssh: &site
          user: svc
          port: 2222
      - name: b
        nodes: n2
        ssh:
          <<: *site
          port: 22
    """
    config = parse(text)
    assert config.clusters[1].ssh.user == "svc"
    assert config.clusters[1].ssh.port == 22
    messages = errors(text.replace("user: svc", "user: ''").replace("<<: *site\n          port: 22", "x: 1"))
    assert messages == [
        "cfg.yaml:5: clusters[0].ssh.user: must not be empty",
        "cfg.yaml:10: clusters[1].ssh.x: unknown key (allowed: config_file, connect_timeout_s, "
        "identity_files, jump_host, known_hosts, max_concurrent_handshakes, port, user, verify_host_keys)",
    ]


@pytest.mark.parametrize(
    "text",
    [
        "x: &a [*a, *a]\n",
        "a: &a [&b [&c [1, 2], *c], *b]\nb: [*a, *a, *a, *a]\n",
        "[" * 5000 + "]" * 5000,
        "a: \x00\n",
        "? [1, 2]\n: 3\n",
        "1: 2\n",
        "--- 1\n--- 2\n",
        "clusters: [1, null, {}, [], 'x', {name: null}, {name: [1]}]\n",
        "clusters:\n- name: a\n  nodes: {x: 1}\n  ssh: [1]\n  slurm: 3\n",
        "poll: {interval_s: 1e400, down_after_s: 100000000000000000000000000000000000000}\n",
        "demo: {seed: 99999999999999999999999999999999}\n",
        "ui: {metric: null, theme: null}\n",
        "clusters: !!set {a, b}\n",
        "read_only: 2001-12-14\n",
        "\ufeffread_only: true\n",
        "\t",
        "%YAML 9.9\n---\na: 1\n",
    ],
)
def test_odd_input_never_escapes_as_anything_but_config_error(text: str) -> None:
    try:
        parse_config(text, "cfg.yaml")
    except ConfigError as err:
        assert err.messages
        assert all(m.startswith("cfg.yaml") for m in err.messages)


def test_config_error_str_joins_messages() -> None:
    err = ConfigError(["a", "b"])
    assert str(err) == "a\nb"
    assert err.messages == ["a", "b"]
    assert ConfigError("one").messages == ["one"]
