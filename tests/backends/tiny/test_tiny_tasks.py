"""Tasks: deterministic sets, right answers, grading, noise injection, held-out separation."""

from __future__ import annotations

import numpy as np
import pytest

from rollcli.backends.tiny.tasks import (
    EOS,
    decode,
    encode,
    grade,
    make_eval_set,
    make_train_pool,
    noisy_answer,
)

MIX = {"add": 0.75, "reverse": 0.25}
ORDER = ("add", "reverse")


def _check_answer(prompt: str, answer: str) -> None:
    assert answer.endswith(".")
    body = answer[:-1]
    if prompt.startswith("R"):
        assert body == prompt[1:-1].lstrip("_")[::-1]
    else:
        a, b = prompt[:-1].split("+")
        assert body == str(int(a) + int(b))[::-1]


def test_pool_is_deterministic_and_seed_dependent() -> None:
    a = make_train_pool(MIX, 5, 200, seed=0, task_order=ORDER)
    b = make_train_pool(MIX, 5, 200, seed=0, task_order=ORDER)
    c = make_train_pool(MIX, 5, 200, seed=1, task_order=ORDER)
    assert a.prompts == b.prompts and a.answers == b.answers
    assert a.prompts != c.prompts


def test_pool_shares_levels_and_answers() -> None:
    pool = make_train_pool(MIX, 5, 400, seed=3, task_order=ORDER)
    tasks = np.asarray(pool.tasks)
    assert (tasks == "add").sum() == 300 and (tasks == "reverse").sum() == 100
    for task in ORDER:
        counts = np.bincount(pool.levels[tasks == task], minlength=6)[1:]
        assert counts.max() - counts.min() <= 1
    for prompt, answer, level, task in zip(
        pool.prompts, pool.answers, pool.levels, pool.tasks, strict=True
    ):
        text = decode(prompt)
        assert len(prompt) == 12  # every prompt has the same length at max_level 5
        _check_answer(text, decode(answer))
        if task == "add":
            a, b = text[:-1].split("+")
            assert len(str(int(a))) == len(str(int(b))) == level
        else:
            assert len(text[1:-1].lstrip("_")) == 2 * level


def test_eval_set_cells_and_separation() -> None:
    pool = make_train_pool(MIX, 5, 300, seed=0, task_order=ORDER)
    ev = make_eval_set(ORDER, 5, 20, seed=0, train=pool)
    assert len(ev) == 2 * 5 * 20
    train = {decode(p) for p in pool.prompts}
    for prompt, level in zip(ev.prompts, ev.levels, strict=True):
        if level >= 2:
            assert decode(prompt) not in train
    again = make_eval_set(ORDER, 5, 20, seed=0, train=pool)
    assert again.prompts == ev.prompts


@pytest.mark.parametrize(
    ("response", "expected"),
    [("7.", 1.0), ("7.99", 1.0), ("7", 0.0), ("8.", 0.0), ("70.", 0.0), (".", 0.0)],
)
def test_grade_exact_match_up_to_eos(response: str, expected: float) -> None:
    assert grade(encode(response), encode("7.")) == expected


def test_noise_only_hits_error_sites() -> None:
    rng = np.random.default_rng(0)
    # no carries and a constant string: nothing can go wrong, whatever the noise
    assert noisy_answer("add", [12, 34], 0.99, rng) == "64"
    assert noisy_answer("reverse", [5, 5, 5, 5], 0.99, rng) == "5555"
    # carries: 95 + 17 = 112 -> "211"; dropping carries gives a wrong answer most of the time
    wrong = sum(noisy_answer("add", [95, 17], 0.5, rng) != "211" for _ in range(400))
    assert 200 < wrong < 400  # P(no drop) = 0.25 over two carries
    assert noisy_answer("add", [95, 17], 0.0, rng) == "211"
    assert noisy_answer("reverse", [1, 2, 3], 0.0, rng) == "321"
    assert encode(".")[0] == EOS
