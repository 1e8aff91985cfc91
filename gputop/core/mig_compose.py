"""Helping a person write a MIG layout for one GPU: which configured presets fit it, how many more of each
of its profiles would still fit next to what is written so far, and adding one profile to the text.

Pure, and built on the planner's own fit (``gputop.core.mig_layout.fit_layout``), so what it offers is what
the plan will accept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gputop.core.mig_layout import (
    LayoutItem,
    MigGpu,
    MigLayout,
    Refusal,
    fit_layout,
    parse_layout,
    short_name,
)


@dataclass(frozen=True, slots=True)
class Room:
    profile: str  # "1g.10gb"
    more: int  # instances of it that would still fit next to the layout


def fitting_presets(presets: Sequence[str], gpu: MigGpu) -> tuple[str, ...]:
    """The presets that parse and fit ``gpu``, in the configured order."""
    return tuple(text for text in presets if not isinstance(_fit(text, gpu), Refusal))


def room_next_to(layout: MigLayout, gpu: MigGpu) -> tuple[Room, ...]:
    """Per profile ``gpu`` offers: how many more instances fit beside ``layout`` (which replaces what the
    GPU holds now). Empty when ``layout`` itself does not fit."""
    if layout.items and isinstance(fit_layout(layout, gpu), Refusal):
        return ()
    rooms = []
    for profile in gpu.profiles:
        name = short_name(profile.name).lower()
        more = 0
        while (profile.instances_total is None or more < profile.instances_total) and not isinstance(
            fit_layout(_plus(layout, name, more + 1), gpu), Refusal
        ):
            more += 1
        rooms.append(Room(short_name(profile.name), more))
    return tuple(rooms)


def add_profile(text: str, profile: str) -> str:
    """``text`` with one more ``profile``, counts merged (``2x1g.10gb`` + ``1g.10gb`` -> ``3x1g.10gb``);
    text that does not parse gets the profile appended, so nothing typed is lost."""
    layout = parse_layout(text) if text.strip() else MigLayout(())
    if isinstance(layout, Refusal):
        return f"{text.rstrip()}, {profile}"
    return str(_plus(layout, profile.lower(), 1))


def _plus(layout: MigLayout, profile: str, count: int) -> MigLayout:
    items = list(layout.items)
    at = next((i for i, item in enumerate(items) if item.profile == profile), None)
    if at is None:
        items.append(LayoutItem(count, profile))
    else:
        items[at] = LayoutItem(items[at].count + count, profile)
    return MigLayout(tuple(items))


def _fit(text: str, gpu: MigGpu) -> object:
    layout = parse_layout(text)
    return layout if isinstance(layout, Refusal) else fit_layout(layout, gpu)
