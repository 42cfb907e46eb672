"""verl's periodic validation, rollcli's way: the spec's eval suite, avg@k, rollcli's graders.

The validation parquet (see :func:`rollcli.backends.verl.data.prepare_eval_suite`) holds every
benchmark of the suite; each row's ``extra_info.k`` is that benchmark's number of samples. One
verl generation call produces all of them (validation sampling: ``val_kwargs`` temperature and
top-p); the driver grades each answer by its row's task (:func:`grade_answers`): math rows with
:func:`rollcli.backends.verl.rewards.math_scores` (a killable worker), code rows (LiveCodeBench,
HumanEval, a code ``val_data``: the ground truth is a task's tests) with
:func:`rollcli.backends.verl.rewards.code_scores` (the sandbox pool), both with the backend's
``reward_deadline_s`` per answer — whatever the training reward is. verl's reward loop has
already scored every generated row with the training reward function; rows of the task that
function grades the same way (code rows under ``reward: code``, math rows under ``reward: math``)
keep that score, so a LiveCodeBench validation runs in the reward workers' sandbox pools once,
not again on the driver's one sandbox worker.
``eval/<benchmark>`` is avg@k (mean pass@1 over the k samples of every problem) and
``eval/accuracy`` the unweighted mean over the suite's benchmarks. Runs in verl's driver.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from rollcli.backends.verl.data import is_code_gold
from rollcli.backends.verl.rewards import TIMEOUT_KEY, code_scores, math_scores

__all__ = ["evaluate_suite", "grade_answers", "summarise"]


def grade_answers(
    texts: list[str],
    golds: list[str],
    deadline_s: float,
    *,
    reward_mode: str | None = None,
    reward_results: list[tuple[float, bool]] | None = None,
) -> list[tuple[float, bool]]:
    """``(score, timed_out)`` per answer, in order: code rows (a task's JSON as gold) in the
    sandbox, the others by the math grader. ``reward_results``: what the reward function
    (``reward_mode``, the backend's ``reward``) already gave each row; rows it grades with the
    same grader (code rows for ``code``, math rows for ``math``) keep it instead of a second
    grading."""
    is_code = [is_code_gold(gold) for gold in golds]
    out: list[tuple[float, bool]] = [(0.0, False)] * len(golds)
    reused = set()
    if reward_results is not None and reward_mode in ("code", "math"):
        reused = {i for i, flag in enumerate(is_code) if flag == (reward_mode == "code")}
        for i in reused:
            out[i] = (float(reward_results[i][0]), bool(reward_results[i][1]))
    code = [i for i, flag in enumerate(is_code) if flag and i not in reused]
    maths = [i for i, flag in enumerate(is_code) if not flag and i not in reused]
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
    # graded by each row's task, with the backend's per-answer deadline (past it: wrong); rows
    # the reward loop already graded with the same grader keep its score
    scores = out.batch["rm_scores"].sum(-1).float().numpy().astype(float)
    flags = out.non_tensor_batch.get(TIMEOUT_KEY)
    flags = np.zeros(len(scores)) if flags is None else np.asarray(flags, dtype=float)
    backend = trainer.backend_config
    graded = grade_answers(
        texts,
        golds,
        backend.reward_deadline_s,
        reward_mode=backend.reward,
        reward_results=[(s, bool(f)) for s, f in zip(scores, flags, strict=True)],
    )
    metrics = summarise(sources, [score for score, _ in graded])
    metrics["eval/grading_timeouts"] = float(sum(timed_out for _, timed_out in graded))
    return metrics
