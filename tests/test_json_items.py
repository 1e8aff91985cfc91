"""A JSON document decoded list element by list element gives what json.loads gives, and says where it
breaks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gputop.core.parsers.json_items import Counted, JsonError, decode_object
from gputop.core.parsers.slurm_json import jobs_from_json, parse_squeue_json

SQUEUE_JSON = Path(__file__).parent / "fixtures" / "slurm-22.05-hostile" / "squeue.json"


def test_each_element_goes_to_its_callback_and_the_rest_is_decoded_whole() -> None:
    text = SQUEUE_JSON.read_text(encoding="utf-8")
    whole = json.loads(text)
    seen: list[object] = []
    doc = decode_object(text, 0, {"jobs": seen.append})
    assert seen == whole["jobs"] and doc["jobs"] == Counted(len(whole["jobs"]))
    assert {k: v for k, v in doc.items() if k != "jobs"} == {k: v for k, v in whole.items() if k != "jobs"}


def test_the_streamed_squeue_json_reads_as_the_decoded_document_does() -> None:
    text = SQUEUE_JSON.read_text(encoding="utf-8")
    streamed = parse_squeue_json(text)
    decoded = jobs_from_json(json.loads(text))
    assert streamed == decoded and len(streamed.jobs) == 6


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"jobs": [{"a": 1}, {"b": ', "line 1 column"),
        ('{"jobs": [1 2]}', "expected ',' or ']'"),
        ('{"jobs" [1]}', "expected ':'"),
        ("[1, 2]", "expected a JSON object"),
        ('{"a": 1} trailing', ""),
        ('{"a": 1 "b": 2}', "expected ',' or '}'"),
        ("{1: 2}", "expected a key"),
    ],
)
def test_broken_documents_say_where(text: str, where: str) -> None:
    if text.endswith("trailing"):
        assert decode_object(text, 0, {}) == {"a": 1}  # what follows the object is not read
        return
    with pytest.raises(JsonError, match=where):
        decode_object(text, 0, {"jobs": lambda _item: None})


def test_a_list_under_another_key_and_an_empty_list_are_fine() -> None:
    seen: list[object] = []
    doc = decode_object(' {"other": [1, 2], "jobs": [ ], "x": {"jobs": [3]}} ', 0, {"jobs": seen.append})
    assert doc == {"other": [1, 2], "jobs": Counted(0), "x": {"jobs": [3]}} and seen == []
