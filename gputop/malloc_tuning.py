"""The C allocator's threshold for giving large blocks their own mapping, fixed at its default.

glibc serves a block of 128 KiB or more from a mapping of its own, returned to the system when freed, but
it raises that threshold (up to 32 MiB) each time such a block is freed. gputop frees large blocks every
tick (arrays of every GPU's values, a dict or list per node), so after the first ticks they come from the
heap instead, where the blocks freed between them cannot go back. At 10,000 nodes of 8 GPUs that heap held
some 70 MB more than the process uses (the demo's RSS, 517 MB against 446 MB with the threshold fixed,
bench/bench_store_dashboard.py beside it). Fixing the threshold keeps large blocks in their own
mappings. Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import sys
from typing import Final

M_MMAP_THRESHOLD: Final = -3  # mallopt's parameter (malloc.h)
MMAP_THRESHOLD_BYTES: Final = 128 * 1024  # glibc's default, now kept


def keep_large_blocks_mapped() -> bool:
    """Sets the threshold; whether the C library took it (False off glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    return False
