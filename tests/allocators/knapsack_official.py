"""TRANSCRIPTION FOR TESTING ONLY of Knapsack RL's allocation, kept as close to the source as runs.

Source: liziniu/KnapsackRL at ca5d5f5b7e933378d916d05d1aeb4ae9de929ee5,
``verl/trainer/ppo/exploration_utils.py`` (``sampling_budget_by_knapsack``, ``solve_by_dp``,
``dp_core_numba``). Prints, timing and the table printer are dropped. Two changes make it
compute here what it computes in the environment the repo pins (numpy<2, numba optional):

* the numpy loop takes ``success_rate`` as a Python float: under numpy<2 a float32 scalar
  raised to a Python int was computed in float64 (numpy 2 keeps float32);
* the numba kernel runs as plain Python, with ``p ** N`` done the way numba lowers a float32
  raised to an int64 (float32 squaring, low bit first) and the rest in float64.

Both were checked against the original file run under numpy 1.26.4 and numba 0.60.0 (the
cases in ``tests/fixtures/knapsack_official.json``). It is slow (pure Python loops): small
cases only.
"""

import numpy as np

NUMBA_AVAILABLE = True


def _numba_int_power(x, n, dtype):
    r = dtype(1)
    a = dtype(x)
    while n:
        if n & 1:
            r = dtype(r * a)
        n >>= 1
        a = dtype(a * a)
    return r


def _numba_gain(success_rate, k, min_n):
    # numba: float32 ** int64 -> float32; int - float32 -> float64; float64 ** int64 -> float64
    p_pow = float(_numba_int_power(success_rate, k + min_n, np.float32))
    q = 1 - float(success_rate)
    q_pow = float(_numba_int_power(q, k + min_n, np.float64))
    return (1 - p_pow - q_pow) * float(success_rate) * float(_numba_int_power(q, 2, np.float64))


def sampling_budget_by_knapsack(
    reward_states,
    n,
    min_n=2,
    max_n=None,
    alpha=0.9,
    solver="dp",
    allow_fallback=True,
    negative_n=None,
    positive_n=None,
    total_budget=None,
    cost_estimation="probability",
):
    batch_size = len(reward_states)
    if total_budget is None:
        total_budget = batch_size * n
    if negative_n is None:
        negative_n = min_n
    if positive_n is None:
        positive_n = min_n

    sampling_budget = np.zeros(batch_size, dtype=np.int32)
    costs = np.zeros(batch_size, dtype=np.float32)
    values = np.zeros(batch_size, dtype=np.float32)
    success_rates = np.zeros(batch_size, dtype=np.float32)
    counts = np.zeros(batch_size, dtype=np.int32)
    effective_indices = []

    for i in range(batch_size):
        if reward_states[i][0] == 1:
            success_rate = reward_states[i][1]
            reward_states[i][2]
            if 0 < success_rate < 1:
                if cost_estimation == "probability":
                    cost = np.log(1 - alpha) / np.log(max(success_rate, 1 - success_rate))
                elif cost_estimation == "expectation":
                    cost = 1 / (success_rate * (1 - success_rate)) - 1
                else:
                    raise ValueError(f"Unknown cost estimation method: {cost_estimation}")
                sampling_budget[i] += min_n
                effective_indices.append(i)
            elif success_rate == 0:
                cost = float("inf")
                sampling_budget[i] += int(negative_n)
            else:  # success_rate == 1
                cost = 0
                sampling_budget[i] += int(positive_n)
            costs[i] = cost
            values[i] = (1 - success_rate) * success_rate * ((1 - success_rate) ** 2)
            success_rates[i] = success_rate
        else:
            sampling_budget[i] += n
        counts[i] = reward_states[i][2]

    total_budget_backup = total_budget
    total_budget -= sum(sampling_budget)

    fallback = False
    if total_budget > 0 and len(effective_indices) == 0:
        zero_success_indices = np.where(success_rates == 0)[0]
        if len(zero_success_indices) > 0:
            budget_per_state = total_budget // len(zero_success_indices)
            remainder = total_budget % len(zero_success_indices)
            for idx, i in enumerate(zero_success_indices):
                extra_budget = budget_per_state + (1 if idx < remainder else 0)
                sampling_budget[i] += extra_budget
                total_budget -= extra_budget
        else:
            sampling_budget = np.zeros(batch_size, dtype=np.int32)
            sampling_budget[:] = n
    else:
        estimated_cost = 0
        for idx in effective_indices:
            estimated_cost += int(min(max_n, costs[idx]))
        if estimated_cost < total_budget and allow_fallback:
            fallback = True
            zero_success_indices = np.where(success_rates == 0)[0]
            abundant_budget = total_budget - estimated_cost
            if len(zero_success_indices) > 0:
                candidate_indices = zero_success_indices
            else:
                candidate_indices = [i for i in range(batch_size) if i not in effective_indices]
            budget_per_candidate = abundant_budget // len(candidate_indices)  # ZeroDivisionError
            remainder = abundant_budget % len(candidate_indices)
            for idx, i in enumerate(candidate_indices):
                extra_budget = budget_per_candidate + (1 if idx < remainder else 0)
                sampling_budget[i] += extra_budget
            total_budget = total_budget - abundant_budget

        main_sampling_budget = solve_by_dp(
            success_rates, effective_indices, min_n, max_n - min_n, total_budget, solver=solver
        )
        sampling_budget = sampling_budget + main_sampling_budget

    assert np.sum(sampling_budget) == total_budget_backup
    return sampling_budget, {"fallback": fallback}


def dp_core_numba(success_rates, n_items, total_budget, max_n, min_n, solver):
    dp = np.full((n_items + 1, total_budget + 1), -np.inf)
    dp[0, 0] = 0.0
    choice = np.full((n_items + 1, total_budget + 1, 2), -1, dtype=np.int32)
    for i in range(1, n_items + 1):
        success_rate = success_rates[i - 1]
        for w in range(total_budget + 1):
            if dp[i - 1, w] > dp[i, w]:
                dp[i, w] = dp[i - 1, w]
                choice[i, w, 0] = 0
                choice[i, w, 1] = 0
            for k in range(1, min(max_n + 1, w + 1)):
                if dp[i - 1, w - k] == -np.inf:
                    continue
                if success_rate == 0 or success_rate == 1:
                    value_gain = 0
                else:
                    value_gain = _numba_gain(success_rate, k, min_n)
                new_value = dp[i - 1, w - k] + value_gain
                if new_value > dp[i, w]:
                    dp[i, w] = new_value
                    choice[i, w, 0] = i - 1
                    choice[i, w, 1] = k
    return dp, choice


def solve_by_dp(success_rates, effective_indices, min_n, max_n, total_budget, solver="dp"):
    batch_size = len(success_rates)
    sampling_budget = np.zeros(batch_size, dtype=np.int32)
    if total_budget <= 0:
        return sampling_budget
    if len(effective_indices) == 0:
        base_allocation = total_budget // batch_size
        remainder = total_budget % batch_size
        for i in range(batch_size):
            sampling_budget[i] += base_allocation
        for i in range(remainder):
            sampling_budget[i] += 1
        return sampling_budget

    n_items = len(effective_indices)
    use_numba = NUMBA_AVAILABLE and (n_items * total_budget * max_n > 50000)
    if use_numba:
        effective_success_rates = np.array([success_rates[i] for i in effective_indices])
        dp, choice = dp_core_numba(
            effective_success_rates, n_items, total_budget, max_n, min_n, solver
        )
        if dp[n_items, total_budget] == -np.inf:
            max_usable_budget = total_budget
            while max_usable_budget > 0 and dp[n_items, max_usable_budget] == -np.inf:
                max_usable_budget -= 1
            if max_usable_budget > 0:
                w = max_usable_budget
                for i in range(n_items, 0, -1):
                    item_idx, allocation = choice[i, w, 0], choice[i, w, 1]
                    if allocation > 0:
                        sampling_budget[effective_indices[item_idx]] += allocation
                        w -= allocation
                remaining_budget = total_budget - max_usable_budget
            else:
                remaining_budget = total_budget
        else:
            w = total_budget
            for i in range(n_items, 0, -1):
                item_idx, allocation = choice[i, w, 0], choice[i, w, 1]
                if allocation > 0:
                    sampling_budget[effective_indices[item_idx]] += allocation
                    w -= allocation
            remaining_budget = 0
    else:
        dp = np.full((n_items + 1, total_budget + 1), -np.inf)
        dp[0][0] = 0.0
        choice = np.full((n_items + 1, total_budget + 1, 2), -1, dtype=int)
        for i in range(1, n_items + 1):
            actual_idx = effective_indices[i - 1]
            success_rate = float(success_rates[actual_idx])  # numpy<2: float64 arithmetic
            for w in range(total_budget + 1):
                if dp[i - 1][w] > dp[i][w]:
                    dp[i][w] = dp[i - 1][w]
                    choice[i][w] = [0, 0]
                for k in range(1, min(max_n + 1, w + 1)):
                    if dp[i - 1][w - k] == -np.inf:
                        continue
                    if success_rate == 0 or success_rate == 1:
                        value_gain = 0
                    else:
                        value_gain = (
                            (
                                1
                                - (success_rate ** (k + min_n))
                                - ((1 - success_rate) ** (k + min_n))
                            )
                            * success_rate
                            * ((1 - success_rate) ** 2)
                        )
                    new_value = dp[i - 1][w - k] + value_gain
                    if new_value > dp[i][w]:
                        dp[i][w] = new_value
                        choice[i][w] = [i - 1, k]
        max_usable_budget = total_budget
        while max_usable_budget > 0 and dp[n_items][max_usable_budget] == -np.inf:
            max_usable_budget -= 1
        if max_usable_budget > 0:
            w = max_usable_budget
            for i in range(n_items, 0, -1):
                item_idx, allocation = choice[i][w]
                if allocation > 0:
                    sampling_budget[effective_indices[item_idx]] += allocation
                    w -= allocation
            remaining_budget = total_budget - max_usable_budget
        else:
            remaining_budget = total_budget

    if remaining_budget > 0 and effective_indices:
        base_allocation = remaining_budget // len(effective_indices)
        remainder = remaining_budget % len(effective_indices)
        for idx in effective_indices:
            sampling_budget[idx] += base_allocation
        for i in range(remainder):
            sampling_budget[effective_indices[i]] += 1
    return sampling_budget
