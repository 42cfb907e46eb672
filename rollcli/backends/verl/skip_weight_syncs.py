"""A negative control for the weight-sync check (tests only): every sync after the first is skipped.

Loaded by verl in every process when a test names it in ``VERL_USE_EXTERNAL_MODULES``
(``runner.init_cpu_ray(extra_modules=[...])``); never by a spec. verl's
``CheckpointEngineManager.update_weights`` then pushes the actor's weights to the rollout
engine once (the trainer's start) and does nothing afterwards, so from step 2 on the engine
samples with the initial weights while the actor trains: the agreement of
:mod:`rollcli.backends.verl.agreement` must fail.
"""

from __future__ import annotations

from typing import Any

__all__ = ["install"]


def install() -> None:
    """Replace ``CheckpointEngineManager.update_weights`` by one that syncs only once."""
    from verl.checkpoint_engine.base import CheckpointEngineManager

    original = CheckpointEngineManager.update_weights
    if getattr(original, "_rollcli_skips", False):
        return
    synced: list[int | None] = []

    def update_weights(self: Any, global_steps: int | None = None) -> Any:
        if synced:
            print(f"rollcli negative control: weight sync of step {global_steps} skipped")
            return {}
        synced.append(global_steps)
        return original(self, global_steps)

    update_weights._rollcli_skips = True  # type: ignore[attr-defined]
    CheckpointEngineManager.update_weights = update_weights


install()
