"""The table keeps rows in place between ticks without sorting them all, and its order is always the one
a full sort gives."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import ClassVar

from textual.app import App, ComposeResult

from gputop.tui.widgets.virtual_table import Column, VirtualTable


@dataclass(frozen=True)
class Row:
    name: str
    value: int


class Table(VirtualTable):
    COLUMNS: ClassVar = (
        Column("name", "Name", 10, False, lambda r: r.name, lambda r, c: (r.name, None)),
        Column("value", "Value", 6, True, lambda r: r.value, lambda r, c: (str(r.value), None)),
    )


class TableApp(App[None]):
    def compose(self) -> ComposeResult:
        yield Table(sort_column="value")


def random_rows(table: Table, seed: int, count: int) -> tuple[random.Random, dict[str, Row]]:
    """``count`` rows of random values, shown in ``table``; the random stream for the ticks after."""
    chance = random.Random(seed)
    rows = {f"n{i:03d}": Row(f"n{i:03d}", chance.randrange(5)) for i in range(count)}
    table.set_rows(dict(rows))
    return chance, rows


def test_rows_that_change_a_tick_at_a_time_stay_in_the_order_a_full_sort_gives() -> None:
    async def run() -> None:
        app = TableApp()
        async with app.run_test(size=(40, 20)):
            table = app.query_one(Table)
            chance, rows = random_rows(table, 7, 200)
            keyed_ticks = 0
            for _tick in range(120):
                for key in chance.sample(sorted(rows), 60):  # new row objects, most with the same value
                    moved = chance.random() < 0.02
                    rows[key] = Row(key, chance.randrange(5) if moved else rows[key].value)
                sorts = table.full_sorts
                table.set_rows(dict(rows))
                keyed_ticks += table.full_sorts == sorts
                assert table.order == sorted(rows, key=lambda k: rows[k].value)
            assert keyed_ticks > 10  # most ticks kept the rows in place without a full sort

    asyncio.run(run())


class Context:
    """What a cell reads beside its row (the node table's trends), changing from tick to tick."""

    def __init__(self) -> None:
        self.marks: dict[str, str] = {}


class TrendTable(VirtualTable):
    COLUMNS: ClassVar = (
        Column("name", "Name", 10, False, lambda r: r.name, lambda r, c: (r.name, None)),
        Column("value", "Value", 6, True, lambda r: r.value, lambda r, c: (str(r.value), None)),
        Column("trend", "Trend", 6, False, None, lambda r, c: (c.marks.get(r.name, ""), None)),
    )


class TrendApp(App[None]):
    def compose(self) -> ComposeResult:
        yield TrendTable(sort_column="name", cell_context=Context())


def test_a_tick_repaints_only_the_lines_whose_cells_changed() -> None:
    # between a store's refreshes every row is the very same object: a tick repaints no line but those
    # whose cells read something else (a trend), and every line shows what its cells say
    async def run() -> None:
        app = TrendApp()
        async with app.run_test(size=(40, 12)) as pilot:
            table = app.query_one(TrendTable)
            rows = {f"n{i:03d}": Row(f"n{i:03d}", i) for i in range(50)}
            table.set_rows(dict(rows))
            await pilot.pause()
            built: list[int] = []
            original = table._build_row

            def counting(index: int) -> object:
                built.append(index)
                return original(index)

            table._build_row = counting  # type: ignore[method-assign]
            table.set_rows(dict(rows))  # the same rows again
            await pilot.pause()
            assert built == []
            context = table.cell_context
            context.marks["n003"] = "up"  # a trend moves, its row the same object
            rows["n005"] = Row("n005", 5)  # a new object, the same cells
            rows["n007"] = Row("n007", 7000)  # a new value, in the same place (sorted by name)
            table.set_rows(dict(rows))
            await pilot.pause()
            assert sorted(built) == [3, 7]
            lines = [table.render_line(y).text for y in range(1, 11)]
            assert "up" in lines[3] and "7000" in lines[7] and "up" not in lines[2]
            # out of sight, a line is drawn anew when it comes into sight
            context.marks["n040"] = "late"
            table.set_rows(dict(rows))
            table.action_jump(-1)
            await pilot.pause()
            assert any("late" in table.render_line(y).text for y in range(1, 11))

    asyncio.run(run())


def test_rows_all_new_each_tick_keep_the_order_a_full_sort_gives_and_sort_only_when_one_moved() -> None:
    """A store's refresh: every row a new object, most in the same place."""

    async def run() -> None:
        app = TableApp()
        async with app.run_test(size=(40, 20)):
            table = app.query_one(Table)
            chance, rows = random_rows(table, 11, 300)
            moved_ticks = 0
            for tick in range(60):
                moves = tick % 3 == 0
                mover = chance.choice(sorted(rows)) if moves else None
                rows = {
                    key: Row(key, (row.value + 1) % 5 if key == mover else row.value)
                    for key, row in rows.items()
                }
                sorts = table.full_sorts
                table.set_rows(dict(rows))
                assert table.order == sorted(rows, key=lambda k: rows[k].value)
                assert (table.full_sorts > sorts) == moves, tick  # sorted again only when one moved
                moved_ticks += moves
            assert moved_ticks == 20

    asyncio.run(run())
