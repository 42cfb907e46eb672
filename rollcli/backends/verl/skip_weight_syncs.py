"""A negative control for the weight-sync check (tests only): the syncs from step 2's on are skipped.

Loaded by verl in every process when a test names it in ``VERL_USE_EXTERNAL_MODULES``
(``runner.init_cpu_ray(extra_modules=[...])``); never by a spec. verl's
``CheckpointEngineManager.update_weights(global_steps)`` pushes the actor's weights to the
rollout engine at the trainer's start (``global_steps`` 0) and after each step's update (the
step); with this module the pushes of :data:`FIRST_SKIPPED_SYNC` and later do nothing. So steps 1
and 2 are generated with the weights the actor had (the initial sync, then the one after an
update) and must pass the agreement of :mod:`rollcli.backends.verl.agreement`, while from step 3
on the engine samples with step 1's weights as the actor trains on: the agreement must fail.
One job thus checks a working sync, including one after an update, and its negative control.
"""

from __future__ import annotations

from typing import Any

__all__ = ["FIRST_SKIPPED_SYNC", "install"]

# the ``global_steps`` of the first sync not made: the one after step 2's update
FIRST_SKIPPED_SYNC = 2


def install() -> None:
    """Replace ``CheckpointEngineManager.update_weights`` by one that skips the syncs of
    ``global_steps >= FIRST_SKIPPED_SYNC``."""
    from verl.checkpoint_engine.base import CheckpointEngineManager

    original = CheckpointEngineManager.update_weights
    if getattr(original, "_rollcli_skips", False):
        return

    def update_weights(self: Any, global_steps: int | None = None) -> Any:
        if global_steps is not None and global_steps >= FIRST_SKIPPED_SYNC:
            print(f"rollcli negative control: weight sync of step {global_steps} skipped")
            return {}
        return original(self, global_steps)

    update_weights._rollcli_skips = True  # type: ignore[attr-defined]
    CheckpointEngineManager.update_weights = update_weights


install()
