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


def test_a_job_on_one_of_several_base_models_is_found_by_base_and_seed():
    jobs = [
        {
            "id": f"c{b}{s}00000000"[:10],
            "type": "train",
            "allocator": "pc",
            "seed": s,
            "base_seed": b,
        }
        for b in (0, 1)
        for s in (0, 1)
    ]
    manifest = {"plan": {"jobs": jobs}}
    assert find_job(manifest, "pc/b1/s0") == "c100000000"
    with pytest.raises(StoreError, match="no job 'pc/b2/s0'.*pc/b1/s0"):
        find_job(manifest, "pc/b2/s0")
