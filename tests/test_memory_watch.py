import math

from gputop.sources.commands import MEM_MOVE_MIB
from gputop.sources.memory_watch import MemoryWatches, memory_moved


def test_memory_moves_when_a_gpu_comes_or_goes_or_moves_by_the_threshold() -> None:
    then = {0: 1000.0, 1: 2000.0}
    assert not memory_moved(then, {0: 1000.0 + MEM_MOVE_MIB - 1, 1: 2000.0})
    assert memory_moved(then, {0: 1000.0 - MEM_MOVE_MIB, 1: 2000.0})
    assert memory_moved(then, {0: 1000.0})  # GPU 1 went
    assert memory_moved(then, {**then, 2: 0.0})  # GPU 2 came


def test_the_next_look_is_the_earliest_of_the_watches_and_only_due_ones_are_looked_at() -> None:
    watches = MemoryWatches()
    assert watches.next_look_s == math.inf
    memory = {0: 1000.0}
    watches.watch("processes", memory, 100.0, 10.0)
    watches.watch("other", memory, 100.0, 30.0)
    assert watches.next_look_s == 110.0
    looked = []

    def memory_now() -> dict[int, float]:
        looked.append(1)
        return {0: 5000.0}

    assert watches.look(110.0, memory_now)  # only "processes" is due, and its memory moved
    assert watches.moved == {"processes"} and len(looked) == 1
    assert watches.next_look_s == 130.0  # "other" is left, and not looked at before its time
    assert watches.take_moved() == {"processes"} and not watches.moved
    watches.clear()
    assert watches.next_look_s == math.inf and not watches.watches
