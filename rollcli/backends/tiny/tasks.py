"""Verifiable character tasks of graded difficulty: addition and string reversal.

Both tasks share one 16-symbol vocabulary. ``add`` at level ``k``: two ``k``-digit operands,
zero-padded to ``max_level`` digits (``00037+00485=``); the answer is the sum written
least-significant digit first, without leading zeros (``225`` for 522), then end-of-sequence.
(Writing the sum reversed lets a two-layer model propagate carries left to right, as in most
small-transformer arithmetic studies.) ``reverse`` at level ``k``: ``R``, a string of ``2k``
digits left-filled with ``_`` to ``2 * max_level`` characters, ``=``; the answer is the string
reversed (``_`` not included), then end-of-sequence. A rollout earns
reward 1 only if every answer token and the end token are right.

Sets are drawn deterministically from a seed with numpy only (no torch here): a training pool
whose task shares follow the config's ``task_mix`` with levels equally frequent, and a
held-out set with the same number of prompts for every (task, level) cell. Held-out prompts
avoid training prompts wherever the level has room (level 1 has only 100 distinct prompts per
task, so there they may repeat). :func:`noisy_answer` injects the base model's errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "VOCAB",
    "PAD",
    "EOS",
    "VOCAB_SIZE",
    "TaskSet",
    "encode",
    "decode",
    "make_problem",
    "make_train_pool",
    "make_eval_set",
    "noisy_answer",
    "grade",
    "max_answer_len",
    "max_prompt_len",
]

VOCAB = "0123456789+=R_.~"  # '_' fills short strings, '.' ends an answer, '~' pads storage
STOI = {c: i for i, c in enumerate(VOCAB)}
EOS = STOI["."]
PAD = STOI["~"]
VOCAB_SIZE = len(VOCAB)


def encode(text: str) -> list[int]:
    return [STOI[c] for c in text]


def decode(tokens: Sequence[int]) -> str:
    return "".join(VOCAB[int(t)] for t in tokens)


@dataclass(frozen=True)
class TaskSet:
    """Prompts with their correct answers (token lists; answers end with EOS), levels and tasks."""

    prompts: tuple[tuple[int, ...], ...]
    answers: tuple[tuple[int, ...], ...]
    levels: np.ndarray  # int, 1..max_level
    tasks: tuple[str, ...]  # task kind of each prompt

    def __len__(self) -> int:
        return len(self.prompts)


def max_prompt_len(max_level: int) -> int:
    return 2 * max_level + 2  # every prompt of both tasks has this length


def max_answer_len(max_level: int) -> int:
    """Answer tokens including EOS: reverse at the top level (2W + 1) bounds add's W + 2."""
    return 2 * max_level + 1


def _operand(rng: np.random.Generator, digits: int) -> int:
    low = 0 if digits == 1 else 10 ** (digits - 1)
    return int(rng.integers(low, 10**digits))


def make_problem(
    task: str, level: int, max_level: int, rng: np.random.Generator
) -> tuple[str, list[int]]:
    """One random problem: its prompt text and its *digits* (the raw material of the answer).

    For ``add`` the digits are the two operands' digits least-significant first, paired;
    callers turn them into an answer with :func:`noisy_answer` (noise 0 = the right answer).
    """
    if task == "add":
        a, b = _operand(rng, level), _operand(rng, level)
        return f"{a:0{max_level}d}+{b:0{max_level}d}=", [a, b]
    if task == "reverse":
        s = "".join(str(int(d)) for d in rng.integers(0, 10, size=2 * level))
        return f"R{s:_>{2 * max_level}}=", [int(c) for c in s]
    raise ValueError(f"unknown task '{task}'")


def noisy_answer(
    task: str, payload: Sequence[int], noise: float, rng: np.random.Generator | None
) -> str:
    """The answer text (without EOS); each error site goes wrong with probability ``noise``.

    ``add``: each carry is dropped with probability ``noise``. ``reverse``: walking the reversed
    string, each adjacent pair of different characters is swapped with probability ``noise``.
    More carries or a longer string means more chances to fail, which is what spreads the base
    model's success rates from 0 to 1 across prompts.
    """
    if task == "add":
        a, b = int(payload[0]), int(payload[1])
        digits: list[int] = []
        carry = 0
        while a or b or carry:
            total = a % 10 + b % 10 + carry
            digits.append(total % 10)
            carry = total // 10
            if carry and noise > 0 and rng is not None and rng.random() < noise:
                carry = 0
            a //= 10
            b //= 10
        return "".join(str(d) for d in digits) or "0"
    if task == "reverse":
        chars = [str(c) for c in reversed(payload)]
        i = 0
        while i < len(chars) - 1:
            if chars[i] != chars[i + 1] and noise > 0 and rng is not None and rng.random() < noise:
                chars[i], chars[i + 1] = chars[i + 1], chars[i]
                i += 2
            else:
                i += 1
        return "".join(chars)
    raise ValueError(f"unknown task '{task}'")


def _split(total: int, shares: Sequence[float]) -> list[int]:
    """Split ``total`` into integer parts proportional to ``shares`` (largest remainder)."""
    weights = np.asarray(shares, float) / float(np.sum(shares))
    raw = weights * total
    counts = np.floor(raw).astype(int)
    for i in np.argsort(-(raw - counts), kind="stable")[: total - int(counts.sum())]:
        counts[i] += 1
    return [int(c) for c in counts]


def _build(
    cells: list[tuple[str, int]], max_level: int, seed: Sequence[int], avoid: set[str]
) -> TaskSet:
    rng = np.random.default_rng(list(seed))
    prompts, answers, levels, tasks = [], [], [], []
    for task, level in cells:
        prompt, payload = make_problem(task, level, max_level, rng)
        # Draw again (a bounded number of times) when the prompt is to be avoided and the level
        # has room for it: 100 distinct level-1 prompts per task cannot all be avoided.
        tries = 0
        while prompt in avoid and level >= 2 and tries < 100:
            prompt, payload = make_problem(task, level, max_level, rng)
            tries += 1
        prompts.append(tuple(encode(prompt)))
        answers.append(tuple(encode(noisy_answer(task, payload, 0.0, None) + ".")))
        levels.append(level)
        tasks.append(task)
    return TaskSet(tuple(prompts), tuple(answers), np.asarray(levels, dtype=np.int64), tuple(tasks))


def make_train_pool(
    task_mix: dict[str, float],
    max_level: int,
    num_prompts: int,
    seed: int,
    task_order: Sequence[str],
) -> TaskSet:
    """The finite RL training pool: task shares from ``task_mix``, levels equally frequent."""
    cells: list[tuple[str, int]] = []
    counts = _split(num_prompts, [task_mix[t] for t in task_order])
    for task, count in zip(task_order, counts, strict=True):
        cells.extend((task, 1 + i % max_level) for i in range(count))
    order = np.random.default_rng([seed, 1]).permutation(len(cells))
    return _build([cells[i] for i in order], max_level, (seed, 2), set())


def make_eval_set(
    task_order: Sequence[str], max_level: int, per_level: int, seed: int, train: TaskSet
) -> TaskSet:
    """The held-out set: ``per_level`` prompts for every (task, level), ordered by task then level."""
    cells = [
        (t, lv) for t in task_order for lv in range(1, max_level + 1) for _ in range(per_level)
    ]
    avoid = {decode(p) for p in train.prompts}
    return _build(cells, max_level, (seed, 3), avoid)


def grade(response: Sequence[int], answer: Sequence[int]) -> float:
    """1.0 if the response (cut after its first EOS) equals the answer including EOS, else 0.0."""
    out = list(response)
    if EOS in out:
        out = out[: out.index(EOS) + 1]
    return 1.0 if tuple(out) == tuple(answer) else 0.0
