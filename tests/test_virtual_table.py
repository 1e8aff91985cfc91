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


def test_rows_that_change_a_tick_at_a_time_stay_in_the_order_a_full_sort_gives() -> None:
    async def run() -> None:
        app = TableApp()
        async with app.run_test(size=(40, 20)):
            table = app.query_one(Table)
            chance = random.Random(7)
            rows = {f"n{i:03d}": Row(f"n{i:03d}", chance.randrange(5)) for i in range(200)}
            table.set_rows(dict(rows))
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
