"""append_jsonl / read_jsonl: whole lines only; a torn last line is cut before the next append."""

from __future__ import annotations

from pathlib import Path

from rollcli.store.atomic import append_jsonl, read_jsonl


def test_a_torn_last_line_is_cut_before_appending(tmp_path: Path):
    path = tmp_path / "metrics.jsonl"
    append_jsonl(path, [{"step": 0}, {"step": 1}])
    with open(path, "ab") as f:
        f.write(b'{"step": 2, "cum_ro')  # a crash mid-append
    assert read_jsonl(path) == [{"step": 0}, {"step": 1}]
    append_jsonl(path, [{"step": 2}])
    assert path.read_bytes() == b'{"step": 0}\n{"step": 1}\n{"step": 2}\n'


def test_a_torn_line_longer_than_the_backward_read_chunk(tmp_path: Path):
    path = tmp_path / "metrics.jsonl"
    append_jsonl(path, [{"step": 0}])
    with open(path, "ab") as f:
        f.write(b'{"blob": "' + b"x" * 200_000)  # spans several 64 KiB chunks
    append_jsonl(path, [{"step": 1}])
    assert read_jsonl(path) == [{"step": 0}, {"step": 1}]


def test_a_file_that_is_only_a_torn_line(tmp_path: Path):
    path = tmp_path / "metrics.jsonl"
    path.write_bytes(b'{"step"')
    append_jsonl(path, [{"step": 0}])
    assert path.read_bytes() == b'{"step": 0}\n'
