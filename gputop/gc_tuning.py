"""The garbage collector once gputop has started: what start-up built is frozen, and the thresholds suit
a tick's objects. The app calls this after its first view; the collection benchmark calls it too, so its
collections cost what the app's do.

Everything built at start-up lives for the whole session: gc.freeze() takes it out of the collector's
sight. A tick leaves no cyclic garbage (strips do not cache themselves, gputop.tui.strips), only objects
that live about one interval: on 1,000 nodes some 13,000 tracked containers (GPU samples are tuples of a
subclass, which the collector never untracks). Young collections stay small (under 2 ms); every tenth
also walks what survived them, the live tick, in 10 to 16 ms on 1,000 nodes over SSH.

Measured on that benchmark and left as they are: a middle threshold of 100 instead of 10 saved 0.7 % of a
core but its collections took 23 ms (they walk every long-lived object made since the last one); a young
threshold of 15,000 made collections rare only while a tick's churn stayed under it, and then one walked
every live object at once (33 ms).
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 700  # allocations of tracked objects between young collections (CPython's default)
MIDDLE_THRESHOLD = 10  # young collections between collections of the middle generation
OLD_THRESHOLD = 1_000  # middle collections between full ones: every full one walks the whole session


def freeze_after_start() -> None:
    """Collects once, freezes what survived, and sets the thresholds above."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
