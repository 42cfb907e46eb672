"""The sim backend passes the backend contract suite (default, multi-skill, mini-batch configs)."""

from __future__ import annotations

from rollcli.backends.api import BaseBackend
from rollcli.backends.sim import create_sim_backend
from rollcli.testing.backend_contract import BackendContract


class TestSimBackendContract(BackendContract):
    num_rollouts = 6

    def make_backend(self, seed: int) -> BaseBackend:
        return create_sim_backend(
            {"kind": "sim", "num_train_prompts": 64, "num_eval_prompts": 32}, seed=seed
        )


class TestSimMultiSkillSampledEvalContract(BackendContract):
    def make_backend(self, seed: int) -> BaseBackend:
        config = {
            "kind": "sim",
            "num_train_prompts": 40,
            "num_eval_prompts": 16,
            "num_skills": 3,
            "optimizer": "sgd",
            "eval_samples": 4,
            "difficulty_dist": "beta",
        }
        return create_sim_backend(config, seed=seed)


class TestSimMinibatchPerPromptContract(BackendContract):
    """Mini-batches (shuffled with the backend's generator) and per-prompt offsets resume exactly."""

    num_rollouts = 5

    def make_backend(self, seed: int) -> BaseBackend:
        config = {
            "kind": "sim",
            "num_train_prompts": 48,
            "num_eval_prompts": 16,
            "num_minibatches": 2,
            "prompt_lr": 0.3,
            "prompt_noise": 1.0,
        }
        return create_sim_backend(config, seed=seed)
