"""Regression from a user review: `rollcli logs runs/<sweep> pc/0` in a sweep folder matches one job
per point; the error must ask for an id, not for "more characters" of an allocator/seed."""

from __future__ import annotations

import pytest

from rollcli.errors import StoreError
from rollcli.store.layout import find_job

MANIFEST = {
    "plan": {
        "jobs": [
            {"id": "aa11111111", "type": "train", "allocator": "grpo", "seed": 0},
            {"id": "bb22222222", "type": "train", "allocator": "pc", "seed": 0},
            {"id": "bb33333333", "type": "train", "allocator": "pc", "seed": 0},  # another point
        ]
    }
}


def test_ambiguous_allocator_seed_asks_for_an_id():
    with pytest.raises(StoreError) as caught:
        find_job(MANIFEST, "pc/0")
    message = str(caught.value)
    assert "bb22222222, bb33333333; give one of these ids" in message
    assert "more characters" not in message
    assert find_job(MANIFEST, "bb3") == "bb33333333"


def test_ambiguous_id_prefix_asks_for_more_characters():
    with pytest.raises(StoreError, match="'bb' is ambiguous: .*; give more characters$"):
        find_job(MANIFEST, "bb")
