"""Handing a key that reached the wrong widget to the input it was meant for, at once.

Posting the key to the input instead queues it behind the input's own bindings: a burst such as
``/temp>85`` + Enter had Enter submit the empty filter before the characters arrived."""

from __future__ import annotations

from textual.widgets import Input


def type_into(field: Input, character: str) -> None:
    """What the input does with a printable key, done now: replace the selection or insert at the cursor."""
    selection = field.selection
    if selection.is_empty:
        field.insert_text_at_cursor(character)
    else:
        field.replace(character, *selection)
