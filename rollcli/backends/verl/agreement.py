"""The weight sync, checked every step: the rollout engine's log-probs against the actor's.

The engine (vLLM, or the ``hf`` server) returns the log-prob of every token it sampled
(``rollout_log_probs``); before the update the actor recomputes them (``old_log_probs``) with
the weights it last pushed to the engine. Rows generated with those weights must agree up to
numerics (Pearson correlation of the token probabilities ~0.999 or more in fp32); rows
generated with older weights (Pilot-Commit commits a pilot a step later) are left out. A sync
that silently fails leaves the engine on old weights and the agreement collapses. The numbers
are verl's own debug metrics (``verl.utils.debug.metrics``), over the rows that count.
Runs in verl's driver; imports verl.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["VERSION_KEY", "rollout_agreement"]

# non-tensor column: the policy version whose weights generated the row
VERSION_KEY = "rollcli_policy_version"


def rollout_agreement(batch: Any, policy_version: int) -> dict[str, float]:
    """``rollout_actor_probs_corr``, ``rollout_probs_diff_max``/``_mean`` and
    ``rollout_agreement_rows`` over the rows of ``batch`` generated at ``policy_version``
    (empty when the engine returned no log-probs or no row qualifies)."""
    from verl.utils.debug.metrics import calculate_debug_metrics

    if "rollout_log_probs" not in batch.batch.keys() or VERSION_KEY not in batch.non_tensor_batch:  # noqa: SIM118 - TensorDict
        return {}
    versions = np.asarray(batch.non_tensor_batch[VERSION_KEY], dtype=np.int64)
    rows = np.flatnonzero(
        (versions == policy_version) & (batch.batch["response_mask"].sum(-1).numpy() > 0)
    )
    if rows.size == 0:
        return {}
    metrics = calculate_debug_metrics(batch.select_idxs(rows))
    return {
        "rollout_actor_probs_corr": float(metrics["training/rollout_actor_probs_pearson_corr"]),
        "rollout_probs_diff_max": float(metrics["training/rollout_probs_diff_max"]),
        "rollout_probs_diff_mean": float(metrics["training/rollout_probs_diff_mean"]),
        "rollout_agreement_rows": float(rows.size),
    }
