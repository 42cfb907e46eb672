"""verl's worker calls as a backend, so verl's trainer runs rollcli's one step routine.

:class:`VerlStepBackend` adapts a :class:`~rollcli.backends.verl.trainer.RollcliPPOTrainer` to
the calls :class:`rollcli.train.loop.TrainLoop` makes: ``generate`` is one verl generation call
per ask, ``update`` the GRPO actor update on the groups (rollout servers asleep during it, then
given the new weights), ``retain`` frees the trainer's stored rollouts, ``evaluate`` is the
spec's suite through verl's validation generation. The trainer's ``fit()`` drives a
``TrainLoop`` over this adapter with :func:`rollcli.train.drive.drive_loop`, so verl's metrics
rows come from the same code as sim's and tiny's. With ``trace_groups`` each step's asks, groups
and trained rows go to ``<job>/verl/trace.jsonl`` (the tests check them against each other).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from rollcli.allocators.api import Ask, Group, Outcome
from rollcli.backends.api import BaseBackend
from rollcli.store.atomic import append_jsonl
from rollcli.store.folders import JobFolder

__all__ = ["VerlStepBackend"]


class VerlStepBackend(BaseBackend):
    """The trainer's generation, update and validation calls behind the backend protocol."""

    kind = "verl"

    def __init__(self, trainer: Any, *, trace: bool = False) -> None:
        self.trainer = trainer
        self.trace = trace
        self._rounds: list[dict[str, Any]] = []

    @property
    def num_prompts(self) -> int:
        return len(self.trainer.train_dataset)

    @property
    def policy_version(self) -> int:
        return int(self.trainer.policy_version)

    def start_step(self, step: int) -> None:
        self.trainer.global_steps = step  # verl names batches, checkpoints and logs by it
        self.trainer.reward_timeouts = 0
        self._rounds = []

    def generate(self, ask: Ask) -> list[Outcome]:
        outcomes = self.trainer.generate_outcomes(ask, self.trainer.global_steps)
        if self.trace:
            self._rounds.append(
                {
                    "items": [
                        [o.prompt_id, o.num_rollouts, o.phase, list(o.refs)] for o in outcomes
                    ],
                    "rewards": [o.rewards.tolist() for o in outcomes],
                }
            )
        return outcomes

    def update(self, groups: list[Group]) -> dict[str, float]:
        trainer, step = self.trainer, self.trainer.global_steps
        trainer.checkpoint_manager.sleep_replicas()
        metrics, trained = trainer.train_on(groups, step)
        trainer.checkpoint_manager.update_weights(step)
        if self.trace:
            row = {"step": step, "rounds": self._rounds, "groups": _groups_json(groups)}
            append_jsonl(
                JobFolder(trainer.job_dir).verl / "trace.jsonl", [{**row, "trained": trained}]
            )
        return metrics

    def retain(self, refs: Iterable[Any]) -> None:
        self.trainer.store.retain(refs)

    def evaluate(self) -> dict[str, float]:
        from rollcli.backends.verl.evaluation import evaluate_suite

        metrics = evaluate_suite(self.trainer, self.trainer.global_steps)
        return {key.removeprefix("eval/"): value for key, value in metrics.items()}

    def state_dict(self) -> dict[str, Any]:
        """The counters; the rollouts and the weights are saved by the trainer's checkpoint."""
        return {"policy_version": self.policy_version}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.trainer.policy_version = int(state["policy_version"])


def _groups_json(groups: list[Group]) -> list[dict[str, Any]]:
    return [
        {
            "prompt_id": g.prompt_id,
            "refs": [int(r) for r in g.refs],
            "rewards": g.rewards.tolist(),
            "baseline": g.baseline,
        }
        for g in groups
    ]
