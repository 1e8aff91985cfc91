"""The C allocator keeps large blocks in mappings of their own after gputop fixes its threshold: a block
freed every tick then goes back to the system instead of staying in the heap."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

PROBE = """
import ctypes, sys
from gputop.malloc_tuning import keep_large_blocks_mapped
if sys.argv[1] == "fixed":
    assert keep_large_blocks_mapped()
big = bytearray(8 << 20)  # freed: glibc would raise its threshold to 8 MiB
del big
block = bytearray(1 << 20)
address = ctypes.addressof((ctypes.c_char * len(block)).from_buffer(block))
for line in open("/proc/self/maps"):
    if line.rstrip().endswith("[heap]"):
        low, high = (int(part, 16) for part in line.split()[0].split("-"))
        print("heap" if low <= address < high else "mapped")
        break
else:
    print("mapped")
"""


def where_a_block_goes(mode: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True, timeout=60
    ).stdout.strip()


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="needs Linux with glibc"
)
def test_a_large_block_keeps_a_mapping_of_its_own_after_a_larger_one_was_freed() -> None:
    assert where_a_block_goes("default") == "heap"  # glibc's own way, which the fix changes
    assert where_a_block_goes("fixed") == "mapped"
