"""Regression from a user review: a model that fails to load must leave no settings behind, or the
corrected command with the same --out is refused as "an evaluation with different settings"."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollcli.errors import RollcliError
from rollcli.eval.engines import Sample
from rollcli.eval.engines.base import BaseEngine
from rollcli.eval.runner import SETTINGS_FILE, EvalSettings, evaluate


class GoldEngine(BaseEngine):
    """Always answers the gold answer."""

    name = "gold"
    preferred_batch_prompts = 4

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    def generate(self, prompts, *, n, temperature, top_p, max_tokens, seed):
        golds = [next(a for q, a in self.answers.items() if q in p) for p in prompts]
        return [[Sample(f"\\boxed{{{gold}}}", 3)] * n for gold in golds]


def test_failed_model_load_leaves_no_settings(tmp_path: Path):
    from rollcli.eval.benchmarks import load_benchmark

    answers = {p.question: p.answer for p in load_benchmark("amc23", limit=2)}
    out = tmp_path / "eval"

    def typo_in_model_path():
        raise RollcliError("cannot load model 'modles/ckpt'")

    wrong = EvalSettings(suite=("amc23",), limit=2, model="modles/ckpt", engine="hf")
    with pytest.raises(RollcliError, match="cannot load model"):
        evaluate(typo_in_model_path, wrong, out, show_progress=False)
    assert not (out / SETTINGS_FILE).exists()

    fixed = EvalSettings(suite=("amc23",), limit=2, model="models/ckpt", engine="hf")
    summary = evaluate(lambda: GoldEngine(answers), fixed, out, show_progress=False)
    assert summary["benchmarks"]["amc23"]["accuracy"] == 1.0
    assert (out / SETTINGS_FILE).exists()
    # the stored settings still guard the folder
    with pytest.raises(RollcliError, match="different settings"):
        evaluate(lambda: GoldEngine(answers), wrong, out, show_progress=False)
