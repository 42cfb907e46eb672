"""TRANSCRIPTION FOR TESTING ONLY of VIP's released allocator, kept as close to the source as runs.

Source: HieuNT91/VIP at bcc8a2585202a0a59eac7b6a33392b119379f008 (the ICLR 2026 release; the
repository's current snapshot holds a README only), ``src/vip/allocation/bernoulli_allocation.py``,
``Allocator`` with ``allocation_rule="vip"`` (the release's ``run_vip.sh``: budget 8 a prompt,
``lower`` 4, ``upper`` 16). The other rules, the prints, ``verbose``, the counters and the
``__main__`` plot are dropped; ``.get(rule, None)`` is ``.get(rule)`` (ruff); nothing else
is changed.
"""

from functools import partial

import numpy as np
from scipy.optimize import minimize

ALLOCATION_MAP = {
    "vip": lambda acc_vec, allocation_vec, difficult_bias: np.sum(
        acc_vec * (1 - acc_vec) / allocation_vec
    ),
}


class Allocator:
    def __init__(self, allocation_rule="vip", lower=6, upper=12, budget_per_question=8,
                 difficult_bias=0.00003):  # fmt: skip
        self.allocation_rule = allocation_rule
        self.lower = lower
        self.upper = upper
        self.budget_per_question = budget_per_question
        self.objective_func = ALLOCATION_MAP.get(allocation_rule)
        self.difficult_bias = difficult_bias

    def compute_continuous_allocation(self, question_accs):
        constraints = [
            {"type": "eq", "fun": lambda n: np.sum(n) - self.total_budget},
        ]
        bounds = [(self.lower, self.upper) for _ in range(len(question_accs))]
        n0 = np.ones(len(question_accs)) * (self.total_budget / len(question_accs))
        V_func = partial(self.objective_func, question_accs, difficult_bias=self.difficult_bias)
        res = minimize(V_func, n0, method="SLSQP", bounds=bounds, constraints=constraints)
        return res.x

    def round_allocation(self, continuous_allocation, question_accs):
        rounded_allocation = np.array([int(np.floor(n)) for n in continuous_allocation])
        rounded_allocation[rounded_allocation < 4] = 0
        current_sum = rounded_allocation.sum()
        remain_budget = self.total_budget - current_sum
        if remain_budget == 0:
            return rounded_allocation.tolist()
        elif remain_budget > 0:
            while remain_budget > 0:
                increments = []
                for i in range(len(rounded_allocation)):
                    mask = np.zeros(len(rounded_allocation))
                    mask[i] = 1
                    gain = self.objective_func(
                        question_accs, rounded_allocation, self.difficult_bias
                    ) - self.objective_func(
                        question_accs, rounded_allocation + mask, self.difficult_bias
                    )
                    increments.append(gain)
                sorted_indices = np.argsort(increments)[::-1]
                for idx in sorted_indices:
                    if rounded_allocation[idx] < self.upper:
                        rounded_allocation[idx] += 1
                        break
                remain_budget -= 1
            assert sum(rounded_allocation) == self.total_budget
            return rounded_allocation.tolist()
        else:
            raise ValueError(f"Current sum exceeds budget {self.total_budget}")

    def fail_safe_allocate(self, question_accs):
        alloc = np.full(len(question_accs), self.budget_per_question, dtype=int)
        return alloc.tolist()

    def clean_accuracy(self, question_accs):
        question_accs = [1 if x >= 0.8 else x for x in question_accs]
        accs = np.clip(question_accs, 1e-6, 1 - 1e-6)
        return accs

    def allocate(self, question_accs):
        self.total_budget = self.budget_per_question * len(question_accs)
        question_accs = self.clean_accuracy(question_accs)
        if question_accs.sum() <= 1e-6:
            return self.fail_safe_allocate(question_accs)
        continuous_allocation = self.compute_continuous_allocation(question_accs)
        return self.round_allocation(continuous_allocation, question_accs)
