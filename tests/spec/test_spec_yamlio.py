"""Source marks of YAML values and keys, and duplicate-key detection."""

from __future__ import annotations

import pytest

from rollcli.errors import SpecError
from rollcli.spec.yamlio import load_yaml


def test_marks_of_values_keys_and_items(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("a:\n  b: 1\n  c: [x, {d: 2}]\n")
    data, marks = load_yaml(path)
    assert data == {"a": {"b": 1, "c": ["x", {"d": 2}]}}
    assert str(marks.find(("a", "b"))) == f"{path}:2:6"
    assert str(marks.find(("a", "b"), key=True)) == f"{path}:2:3"
    assert str(marks.find(("a", "c", 1, "d"))) == f"{path}:3:14"
    # a path that does not exist points at its nearest ancestor
    assert str(marks.find(("a", "zzz"))) == f"{path}:2:3"


def test_duplicate_key_is_an_error(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("a:\n  b: 1\n  b: 2\n")
    with pytest.raises(
        SpecError, match=r"s.yaml:3:3: a.b: duplicate key 'b' \(first defined at line 2\)"
    ):
        load_yaml(path)


def test_missing_file(tmp_path):
    with pytest.raises(SpecError, match="spec file not found"):
        load_yaml(tmp_path / "nope.yaml")
