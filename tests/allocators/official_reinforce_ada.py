"""TRANSCRIPTION FOR TESTING ONLY: Reinforce-Ada's official step and advantage, line by line.

Source: RLHFlow/Reinforce-Ada, commit 05be6058dc04adc89d31a51f9903177a0c180f15:
``verl/trainer/ppo/ray_trainer.py::RayPPOTrainer._generate_multi_round_adaptive_downsampling``
(rounds, caches, finishing, fallback, the pos/neg counts) and
``verl/trainer/ppo/core_algos.py::compute_grpo_outcome_advantage`` (its global-statistics
branch). tests/allocators/test_reinforce_ada.py checks rollcli's allocator and every backend's
advantage against it. Not used by rollcli.

What had to change to run without verl's trainer: a ``DataProto`` row is a ``(uid, j)`` pair
(the j-th rollout drawn for that uid), ``generate(active_uids, round_repeat)`` stands for the
generation call and the reward function (rewards in the order of ``repeat(interleave=True)``:
each active uid's ``round_repeat`` rollouts together, uids in batch order), the dp padding (its
extra rows are dropped right after generation) and all logging are left out. Everything else
keeps the original's names and control flow, including its quirks (the balanced fallback uses
the ``target_pos``/``target_neg`` the loop left bound).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence

import torch


def official_step(
    uid_arr: Sequence[str],
    generate: Callable[[list[str], int], dict[str, list[float]]],
    *,
    reinforce_ada_choice: str = "balanced",
    positive_threshold: float = 0.7,
    max_rounds: int = 4,
    round_repeat: int = 8,
    final_keep_per_prompt: int = 4,
):
    """Returns (selected rows per uid as [(uid, j, reward)], pos counts, neg counts, rounds run)."""
    uid_arr = list(uid_arr)
    state = {uid: {"finished": False, "seen": 0, "pos": 0, "neg": 0} for uid in uid_arr}
    pos_cache = defaultdict(list)
    neg_cache = defaultdict(list)
    selected_pool_batches: list[list[tuple[str, int, float]]] = []
    uid_full_stats = {uid: {"total_pos": 0, "total_neg": 0} for uid in uid_arr}
    drawn = defaultdict(int)
    rounds_run = 0

    active_uids = set(uid_arr)
    for _r in range(max_rounds):
        if not active_uids:
            break
        active = [uid for uid in uid_arr if uid in active_uids]
        rewards = generate(active, round_repeat)
        rounds_run += 1
        # rows of the round: uid-major (repeat(interleave=True)), rewards in that order
        uids_round, seq_reward_np, rows = [], [], []
        for uid in active:
            for x in rewards[uid]:
                rows.append((uid, drawn[uid], float(x)))
                drawn[uid] += 1
                uids_round.append(uid)
                seq_reward_np.append(float(x))
        mini_with_out = rows

        per_uid_local_idx = defaultdict(list)
        for j, uid in enumerate(uids_round):
            per_uid_local_idx[uid].append(j)

        for uid in list(active_uids):
            locs = per_uid_local_idx.get(uid, [])
            if not locs:
                continue
            st = state[uid]

            for j in locs:
                if st["finished"]:
                    break
                st["seen"] += 1
                is_positive = seq_reward_np[j] > positive_threshold
                if is_positive:
                    st["pos"] += 1
                    pos_cache[uid].append(mini_with_out[j])
                    uid_full_stats[uid]["total_pos"] += 1
                else:
                    st["neg"] += 1
                    neg_cache[uid].append(mini_with_out[j])
                    uid_full_stats[uid]["total_neg"] += 1

            def downsample_cache(pos_cache, neg_cache, uid, target_total):
                target_pos = min(target_total // 2, len(pos_cache[uid]))
                target_neg = min(target_total - target_pos, len(neg_cache[uid]))
                if target_pos + target_neg < target_total:
                    if len(pos_cache[uid]) > target_pos:
                        additional_pos = min(
                            len(pos_cache[uid]) - target_pos,
                            target_total - (target_pos + target_neg),
                        )
                        target_pos += additional_pos
                    elif len(neg_cache[uid]) > target_neg:
                        additional_neg = min(
                            len(neg_cache[uid]) - target_neg,
                            target_total - (target_pos + target_neg),
                        )
                        target_neg += additional_neg
                pos_frags = pos_cache[uid][:target_pos]
                neg_frags = neg_cache[uid][:target_neg]
                return pos_frags + neg_frags

            if not st["finished"]:
                if reinforce_ada_choice == "balanced":
                    target_pos = final_keep_per_prompt // 2
                    target_neg = final_keep_per_prompt - target_pos
                    if len(pos_cache[uid]) >= target_pos and len(neg_cache[uid]) >= target_neg:
                        merged = downsample_cache(pos_cache, neg_cache, uid, final_keep_per_prompt)
                        selected_pool_batches.append(merged)
                        st["finished"] = True
                else:
                    assert reinforce_ada_choice == "positive_focused"
                    target_pos = 1
                    if len(pos_cache[uid]) >= target_pos:
                        merged = downsample_cache(pos_cache, neg_cache, uid, final_keep_per_prompt)
                        selected_pool_batches.append(merged)
                        st["finished"] = True

        active_uids = {u for u in active_uids if not state[u]["finished"]}
        if not active_uids:
            break

    uids_that_need_fallback = {uid for uid in uid_arr if not state[uid]["finished"]}
    for uid in sorted(uids_that_need_fallback, key=uid_arr.index):
        if uid in pos_cache or uid in neg_cache:
            pos_num = len(pos_cache[uid])
            neg_num = len(neg_cache[uid])
            n_rows = pos_num + neg_num
            take = min(final_keep_per_prompt, n_rows)

            if reinforce_ada_choice == "positive_focused":
                ratio = (pos_num / n_rows) if n_rows > 0 else 0.0
                target_pos = math.ceil(ratio * final_keep_per_prompt)
                target_pos = max(min(target_pos, take - 1), 1)
                target_neg = take - target_pos

            actual_pos = min(pos_num, target_pos)  # noqa: F821 - bound by the loop, as upstream
            actual_neg = min(neg_num, target_neg)  # noqa: F821

            if actual_pos + actual_neg < take:
                if pos_num > actual_pos:
                    additional_pos = min(pos_num - actual_pos, take - actual_pos - actual_neg)
                    actual_pos += additional_pos
                elif neg_num > actual_neg:
                    additional_neg = min(neg_num - actual_neg, take - actual_pos - actual_neg)
                    actual_neg += additional_neg

            keep_pos = actual_pos
            keep_neg = actual_neg
            pos_frags = pos_cache[uid][:keep_pos] if keep_pos > 0 else []
            neg_frags = neg_cache[uid][:keep_neg] if keep_neg > 0 else []
            frags_to_merge = pos_frags + neg_frags
            if frags_to_merge:
                selected_pool_batches.append(frags_to_merge)

    uid_to_pos_count = {uid: stats["total_pos"] for uid, stats in uid_full_stats.items()}
    uid_to_neg_count = {uid: stats["total_neg"] for uid, stats in uid_full_stats.items()}
    return selected_pool_batches, uid_to_pos_count, uid_to_neg_count, rounds_run


def official_grpo_advantage(
    scores: torch.Tensor,
    index: Sequence[str],
    grpo_uid_to_pos_count: dict[str, int],
    grpo_uid_to_neg_count: dict[str, int],
    *,
    norm_adv_by_std_in_grpo: bool = False,
    epsilon: float = 1e-6,
) -> torch.Tensor:
    """``compute_grpo_outcome_advantage`` with ``global_stat_est`` on: one advantage per row
    (``scores`` = the rows' summed token-level rewards; the original then multiplies by the
    response mask)."""
    scores = scores.clone()
    id2mean, id2std = {}, {}
    bsz = scores.shape[0]
    processed_uids = set()
    for i in range(bsz):
        uid = index[i]
        if uid in processed_uids:
            continue
        pos_count = grpo_uid_to_pos_count.get(uid, 0)
        neg_count = grpo_uid_to_neg_count.get(uid, 0)
        total_count = pos_count + neg_count
        if total_count <= 1:
            id2mean[uid] = torch.tensor(0.0)
            id2std[uid] = torch.tensor(1.0)
        else:
            all_samples = torch.cat([torch.ones(pos_count), torch.zeros(neg_count)])
            id2mean[uid] = torch.mean(all_samples)
            id2std[uid] = torch.clamp(torch.std(all_samples), min=epsilon)
        processed_uids.add(uid)
    for i in range(bsz):
        if norm_adv_by_std_in_grpo:
            scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
        else:
            scores[i] = scores[i] - id2mean[index[i]]
    return scores
