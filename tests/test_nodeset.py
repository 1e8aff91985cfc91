"""Nodeset expansion, folding and natural order."""

from __future__ import annotations

import random

import pytest

from gputop.core.nodeset import MAX_NODES, expand_and_fold, expand_nodeset, fold_nodes, natural_key


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu001", ("gpu001",)),
        ("gpu[001-003]", ("gpu001", "gpu002", "gpu003")),
        ("gpu[1-2,10]", ("gpu1", "gpu2", "gpu10")),
        ("gpu[001-002],dgx-a[01-02]", ("dgx-a01", "dgx-a02", "gpu001", "gpu002")),
        ("r[1-2]n[1-2]", ("r1n1", "r1n2", "r2n1", "r2n2")),
        (" gpu1 ", ("gpu1",)),
        ("gpu[1-4]!gpu2", ("gpu1", "gpu3", "gpu4")),
        ("node-1.ib.example", ("node-1.ib.example",)),
        ("gpu[8-10]", ("gpu8", "gpu9", "gpu10")),  # natural order, not "gpu10" first
    ],
)
def test_expand(text: str, expected: tuple[str, ...]) -> None:
    assert expand_nodeset(text) == expected


def test_expand_large_range_is_quick_and_complete() -> None:
    names = expand_nodeset("gpu[0001-4096]")
    assert len(names) == 4096
    assert names[0] == "gpu0001"
    assert names[-1] == "gpu4096"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("gpu[001-", "'gpu[001-' is not a valid nodeset"),
        ("gpu[3-1]", "'gpu[3-1]' is not a valid nodeset"),
        ("gpu[a-b]", "'gpu[a-b]' is not a valid nodeset"),
        ("gpu[01-3]", "'gpu[01-3]' is not a valid nodeset"),
        ("gpu[1-2][3]", "'gpu[1-2][3]' is not a valid nodeset"),
        ("x,,y", "'x,,y' is not a valid nodeset"),
        ("gpu]", "'gpu]' is not a valid nodeset"),
        ("", "empty nodeset"),
        ("   ", "empty nodeset"),
        ("@gpus", "node groups (@name) are not supported"),
        ("gpu[1-3],@gpus", "node groups (@name) are not supported"),
        ("gpu 1", "'gpu 1' is not a valid host name"),
        ("gpu[1-2]!gpu[1-2]", "names no nodes"),
        ("gpu[1-10000000]", "larger than 100,000 nodes"),
        ("r[1-1000]n[1-1000]", "more than the 100,000"),
    ],
)
def test_expand_errors_are_value_errors_naming_the_text(text: str, fragment: str) -> None:
    with pytest.raises(ValueError) as info:
        expand_nodeset(text)
    assert fragment in str(info.value)


def test_max_nodes_is_allowed() -> None:
    assert len(expand_nodeset(f"n[1-{MAX_NODES}]")) == MAX_NODES


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["gpu001", "gpu002", "gpu004"], "gpu[001-002,004]"),
        (["gpu004", "gpu001", "gpu002"], "gpu[001-002,004]"),
        (["gpu1", "gpu2", "gpu10"], "gpu[1-2,10]"),
        (["gpu1", "gpu1"], "gpu1"),
        (["dgx-a01", "gpu001", "dgx-a02"], "dgx-a[01-02],gpu001"),
        (["login"], "login"),
        ([], ""),
    ],
)
def test_fold(names: list[str], expected: str) -> None:
    assert fold_nodes(names) == expected


def test_fold_accepts_any_iterable() -> None:
    assert fold_nodes(f"n{i}" for i in range(1, 4)) == "n[1-3]"


@pytest.mark.parametrize("bad", ["gpu[1-2]", "a,b", "@grp", "", "a b"])
def test_fold_rejects_what_is_not_a_host_name(bad: str) -> None:
    with pytest.raises(ValueError, match="not a valid host name"):
        fold_nodes(["gpu1", bad])


@pytest.mark.parametrize(
    "text", ["gpu[001-128]", "gpu[001-064],dgx-a[01-04]", "gpu[1-3,7,9-12]", "r[1-3]n[01-02]", "login01"]
)
def test_expand_fold_round_trip(text: str) -> None:
    names = expand_nodeset(text)
    folded = fold_nodes(names)
    assert expand_nodeset(folded) == names
    assert fold_nodes(expand_nodeset(folded)) == folded


def test_expand_and_fold_agrees_with_the_separate_functions() -> None:
    names, folded = expand_and_fold("gpu[004,001-002],dgx[1-2]")
    assert names == expand_nodeset("gpu[004,001-002],dgx[1-2]")
    assert folded == fold_nodes(names) == "dgx[1-2],gpu[001-002,004]"


def test_fold_then_expand_random_sets() -> None:
    rng = random.Random(7)
    for _ in range(20):
        names = {f"gpu{rng.randint(1, 300):03d}" for _ in range(rng.randint(1, 60))}
        assert set(expand_nodeset(fold_nodes(names))) == names


def test_natural_key_orders_numbers_by_value() -> None:
    assert natural_key("gpu2") < natural_key("gpu10")
    assert natural_key("rack2-node9") < natural_key("rack10-node1")
    assert natural_key("gpu9") < natural_key("gpu10a")
    assert sorted(["gpu10", "gpu2", "gpu1", "dgx3", "gpu02"], key=natural_key) == [
        "dgx3",
        "gpu1",
        "gpu02",
        "gpu2",
        "gpu10",
    ]


def test_natural_key_is_total_for_mixed_shapes() -> None:
    # Names that start with digits, have none, or differ only in padding or case must still compare.
    names = ["10", "2", "a", "A", "a1", "1a", "gpu01", "gpu1", "", "gpu-1", "gpu_1"]
    ordered = sorted(names, key=natural_key)
    assert sorted(reversed(names), key=natural_key) == ordered
    assert ordered.index("2") < ordered.index("10")


def test_natural_key_distinguishes_padding() -> None:
    assert natural_key("gpu01") != natural_key("gpu1")
