"""verl's periodic validation, rollcli's way: the spec's eval suite, avg@k, rollcli's graders.

The validation parquet (see :func:`rollcli.backends.verl.data.prepare_eval_suite`) holds every
benchmark of the suite; each row's ``extra_info.k`` is that benchmark's number of samples. One
verl generation call produces all of them (validation sampling: ``val_kwargs`` temperature and
top-p); the driver grades each answer by its row's task (:func:`grade_answers`): math rows with
:func:`rollcli.backends.verl.rewards.math_scores` (a killable worker), code rows (LiveCodeBench,
HumanEval, a code ``val_data``: the ground truth is a task's tests) with
:func:`rollcli.backends.verl.rewards.code_scores` (the sandbox pool), both with the backend's
``reward_deadline_s`` per answer — whatever the training reward is.
``eval/<benchmark>`` is avg@k (mean pass@1 over the k samples of every problem) and
``eval/accuracy`` the unweighted mean over the suite's benchmarks. Runs in verl's driver.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from rollcli.backends.verl.data import is_code_gold
from rollcli.backends.verl.rewards import code_scores, math_scores

__all__ = ["evaluate_suite", "grade_answers", "summarise"]


def grade_answers(
    texts: list[str], golds: list[str], deadline_s: float
) -> list[tuple[float, bool]]:
    """``(score, timed_out)`` per answer, in order: code rows (a task's JSON as gold) in the
    sandbox, the others by the math grader."""
    is_code = [is_code_gold(gold) for gold in golds]
    code = [i for i, flag in enumerate(is_code) if flag]
    maths = [i for i, flag in enumerate(is_code) if not flag]
    out: list[tuple[float, bool]] = [(0.0, False)] * len(golds)
    for rows, grade in ((maths, math_scores), (code, code_scores)):
        if rows:
            graded = grade([(texts[i], golds[i]) for i in rows], deadline_s)
            for i, result in zip(rows, graded, strict=True):
                out[i] = result
    return out


def summarise(sources: list[str], scores: list[float]) -> dict[str, float]:
    """``eval/<benchmark>`` means and their unweighted mean ``eval/accuracy``."""
    by_source: dict[str, list[float]] = defaultdict(list)
    for source, score in zip(sources, scores, strict=True):
        by_source[source].append(float(score))
    metrics = {f"eval/{name}": float(np.mean(v)) for name, v in sorted(by_source.items())}
    metrics["eval/accuracy"] = float(np.mean([np.mean(v) for v in by_source.values()]))
    metrics["eval/num_samples"] = float(len(scores))
    return metrics


def evaluate_suite(trainer: Any, step: int) -> dict[str, float]:
    """Generate the whole validation set (k samples per row) and grade it."""
    from verl import DataProto

    dataset = trainer.val_dataset
    rows = [dataset[i] for i in range(len(dataset))]
    batch = DataProto.from_single_dict(trainer._collate(rows))
    ks = [int((info or {}).get("k", 1)) for info in batch.non_tensor_batch["extra_info"]]
    batch.non_tensor_batch["uid"] = np.array([f"v{i}" for i in range(len(rows))], dtype=object)
    batch.non_tensor_batch["rollcli_prompt"] = np.arange(len(rows), dtype=np.int64)
    do_sample = bool(trainer.config.actor_rollout_ref.rollout.val_kwargs.do_sample)
    out = trainer.generate_rows(
        batch, ks, {"global_steps": step, "validate": True, "do_sample": do_sample}
    )
    # decode only the generated tokens: verl pads responses with an id that may be a real token
    mask = out.batch["response_mask"].bool()
    ids = [row[keep].tolist() for row, keep in zip(out.batch["responses"], mask, strict=True)]
    texts = trainer.tokenizer.batch_decode(ids, skip_special_tokens=True)
    golds = [str(rm["ground_truth"]) for rm in out.non_tensor_batch["reward_model"]]
    sources = [str(s) for s in out.non_tensor_batch["data_source"]]
    # graded by each row's task, with the backend's per-answer deadline (past it: wrong)
    graded = grade_answers(texts, golds, trainer.backend_config.reward_deadline_s)
    metrics = summarise(sources, [score for score, _ in graded])
    metrics["eval/grading_timeouts"] = float(sum(timed_out for _, timed_out in graded))
    return metrics
