"""The compiled row reader: memoised columns and the looked-up position."""

from __future__ import annotations

from typing import NamedTuple

import pytest

from gputop.core.parsers import row_reader
from gputop.core.parsers.row_reader import Memo, compile_reader


class Row(NamedTuple):
    key: str
    count: int
    extra: tuple[str, ...]


def test_a_memoised_column_converts_each_distinct_cell_once() -> None:
    calls: list[str] = []

    def upper(cell: str) -> str:
        calls.append(cell)
        return cell.strip().upper()

    read = compile_reader(Row, ("", 0, ()), [(0, 0, upper), (1, 1, int)], memoized=frozenset({0}))
    rows = [read(cells, {}) for cells in (["a", "1"], ["a", "2"], [" b", "3"], ["a", "4"])]
    assert rows == [Row("A", 1, ()), Row("A", 2, ()), Row("B", 3, ()), Row("A", 4, ())]
    assert calls == ["a", " b"]


def test_a_memo_keeps_nothing_for_a_cell_its_converter_refused_and_starts_over_when_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memo = Memo(int)
    with pytest.raises(ValueError):
        memo["x"]
    assert "x" not in memo
    monkeypatch.setattr(row_reader, "MEMO_MAX_CELLS", 3)
    for cell in ("1", "2", "3"):
        assert memo[cell] == int(cell)
    assert memo["4"] == 4
    assert list(memo) == ["4"], "full: it starts over instead of growing"


def test_the_looked_up_position_takes_the_mapping_value_of_the_key_or_its_template() -> None:
    read = compile_reader(Row, ("", 0, ()), [(1, 0, str.strip), (0, 1, int)], lookup=(0, 2))
    extras = {"gpu-a": ("x", "y")}
    assert read(["1", " gpu-a "], extras) == Row("gpu-a", 1, ("x", "y"))
    assert read(["2", "gpu-b"], extras) == Row("gpu-b", 2, ())


def test_a_lookup_before_its_key_is_refused() -> None:
    with pytest.raises(ValueError, match="after its key"):
        compile_reader(Row, ("", 0, ()), [(0, 2, str)], lookup=(2, 0))
