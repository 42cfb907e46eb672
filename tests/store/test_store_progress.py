"""Incremental metrics reading for the live view and status."""

from __future__ import annotations

from rollcli.store.atomic import append_jsonl, rewrite_jsonl
from rollcli.store.progress import MetricsTail, fmt_eta


def test_tail_reads_only_new_complete_rows(tmp_path):
    path = tmp_path / "metrics.jsonl"
    tail = MetricsTail(path)
    assert tail.read().step is None
    append_jsonl(path, [{"step": 0, "cum_rollouts": 0, "eval/accuracy": 0.1}])
    append_jsonl(path, [{"step": 1, "cum_rollouts": 64}])
    progress = tail.read()
    assert (progress.step, progress.cum_rollouts, progress.accuracy, progress.rows) == (
        1,
        64,
        0.1,
        2,
    )
    with open(path, "a") as f:
        f.write('{"step": 2, "cum_rol')  # torn: not read yet
    assert tail.read().step == 1
    with open(path, "a") as f:
        f.write('louts": 128}\n')
    assert tail.read().cum_rollouts == 128
    rewrite_jsonl(path, [{"step": 0, "cum_rollouts": 0}])  # resume dropped rows: reread
    progress = tail.read()
    assert (progress.step, progress.rows) == (0, 1)


def test_fmt_eta():
    assert fmt_eta(None) == "-"
    assert fmt_eta(42) == "42s"
    assert fmt_eta(125) == "2m05s"
    assert fmt_eta(3725) == "1h02m"
