"""IdentityMemo: one computation per object, none shared between equal objects, bounded."""

from __future__ import annotations

from gputop.core.identity_memo import IdentityMemo


def test_the_same_object_is_computed_once_and_an_equal_copy_again() -> None:
    made: list[tuple[int, ...]] = []

    def total(values: tuple[int, ...]) -> int:
        made.append(values)
        return sum(values)

    memo = IdentityMemo(total)
    ports = (1, 2, 3)
    assert [memo(ports), memo(ports)] == [6, 6]
    assert len(made) == 1
    copy = tuple(list(ports))  # equal, not the same object: its answer is not assumed
    assert copy is not ports and memo(copy) == 6
    assert len(made) == 2


def test_it_forgets_everything_when_full_and_keeps_answering() -> None:
    memo = IdentityMemo(len, max_entries=3)
    keys = [[0] * n for n in range(10)]  # kept alive: ids stay distinct
    assert [memo(key) for key in keys] == list(range(10))
    assert len(memo._entries) <= 3
