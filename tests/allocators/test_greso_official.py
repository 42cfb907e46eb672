"""GRESO against a direct transcription of the official code: same rewards in, same decisions out.

TRANSCRIPTION FOR TESTING ONLY. The ``_official_*`` code below is transcribed from
Infini-AI-Lab/GRESO at commit b27784315479921ea1977178d7e6c4858b2ae5a1:

* ``verl/trainer/ttis/presampling_selector.py``: ``DataProfiler.add_reward``,
  ``easy_probabilistic_skip``, ``hard_probabilistic_skip`` (the random draw
  ``torch.rand(1).item() < skip_probability`` is replaced by returning ``skip_probability``);
* ``verl/trainer/ppo/metric_utils.py``: ``compute_reward_metrics`` (the three ratios GRESO reads);
* ``verl/trainer/ppo/ray_trainer.py`` (``RayPPOTrainer.fit``): the trace update after each
  generation, the ``dynamic_sampling`` block (zero-variance filter, next sampling batch size,
  last round, slice to the train batch) and the once-per-step ``p_easy`` / ``p_hard`` update.

GRESO's reward gives 1 to a correct answer and 0.1 to a formatted wrong one, and its hard share
counts groups that are all 0.1; rollcli's rewards are 1 / 0 and its hard share counts all-0
groups. The transcription is therefore fed ``0.1`` where rollcli's reward is 0 (every answer
formatted): the trace thresholds (0.98, 0.11) and the zero-variance test read both alike.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rollcli.allocators import create_allocator  # noqa: E402
from rollcli.allocators.greso import next_round_size, share32  # noqa: E402
from rollcli.testing import FakeBackend  # noqa: E402
from rollcli.testing.allocator_contract import make_pool  # noqa: E402


# -- transcription (official code, lightly reshaped into functions; names kept) ---------------
class _OfficialProfiler:
    def __init__(self) -> None:
        self.data: dict[str, list[tuple[int, float]]] = {}

    def add_reward(self, epoch: int, data_id: str, reward: float) -> None:
        if data_id not in self.data:
            self.data[data_id] = []
        self.data[data_id].append((epoch, reward))

    def easy_probabilistic_skip(self, current_epoch, data_id, p=0.75):
        if data_id not in self.data:
            return 0.0  # official: return False
        reward_trace = self.data[data_id]
        if len(reward_trace) == 0:
            return 0.0
        count = 0
        for i in range(len(reward_trace) - 1, -1, -1):
            if reward_trace[i][1] < 0.98:  # contain at least one 1 wrong response
                break
            count += 1
        skip_probability = 1 - max(p**count, 0.01)
        return skip_probability  # official: torch.rand(1).item() < skip_probability

    def hard_probabilistic_skip(self, current_epoch, data_id, p=0.5):
        if data_id not in self.data:
            return 0.0
        reward_trace = self.data[data_id]
        if len(reward_trace) == 0:
            return 0.0
        if reward_trace[-1][1] > 0.11:  # solvable example
            return 0.0
        count = 0
        for i in range(len(reward_trace) - 1, -1, -1):
            if reward_trace[i][1] > 0.11:
                break
            count += 1
        skip_probability = 1 - max(p**count, 0.01)
        return skip_probability


def _official_reward_metrics(reward_tensor):
    reward_metrics = {}
    prompt_num = reward_tensor.view(-1, 8).size(0)
    non_diverse_examples = (
        reward_tensor.view(-1, 8).max(-1)[0] == reward_tensor.view(-1, 8).min(-1)[0]
    ).sum()
    non_diverse_examples_ratio = non_diverse_examples / prompt_num
    reward_metrics["examples/non_diverse_examples_ratio"] = (
        non_diverse_examples_ratio.detach().item()
    )
    format_example = torch.logical_and(
        reward_tensor.view(-1, 8).max(-1)[0] == 0.1, reward_tensor.view(-1, 8).min(-1)[0] == 0.1
    ).sum()
    format_example = format_example / prompt_num
    all_correct_example = torch.logical_and(
        reward_tensor.view(-1, 8).max(-1)[0] == 1, reward_tensor.view(-1, 8).min(-1)[0] == 1
    ).sum()
    all_correct_example = all_correct_example / prompt_num
    reward_metrics["examples/format_example_ratio"] = format_example.detach().item()
    reward_metrics["examples/all_correct_example_ratio"] = all_correct_example.detach().item()
    return reward_metrics


class _OfficialTrainer:
    """The state ``fit()`` keeps across rounds and steps (GRESO's published flags)."""

    n = 8

    def __init__(self, real_train_batch_size: int, sampling_batch_size: int) -> None:
        self.data_profiler = _OfficialProfiler()
        self.real_train_batch_size = real_train_batch_size * self.n  # in rollouts
        self.default_sampling_batch_size = sampling_batch_size
        self.adaptive_sampling_bs = sampling_batch_size
        self.last_sampling = False
        self.dynamic_sampling_batch: list[tuple[int, list[float]]] | None = None
        self.p_easy = self.p_hard = 0.5
        self.targeted_easy = 0.25 / 3
        self.targeted_hard = 0.25 * 2 / 3
        self.easy_data_num = self.hard_data_num = 0.0
        self.total_num = 0

    def after_generation(self, epoch: int, prompt_ids: list[int], rewards: np.ndarray) -> bool:
        """One generation round; True when the step trains (the ``else`` branch of the block)."""
        reward = torch.tensor(rewards.reshape(-1), dtype=torch.float32)
        reward_metrics = _official_reward_metrics(reward)
        batch_num = len(reward)
        self.easy_data_num += reward_metrics["examples/all_correct_example_ratio"] * batch_num
        self.hard_data_num += reward_metrics["examples/format_example_ratio"] * batch_num
        self.total_num += batch_num
        log_avg_reward = reward.view(-1, self.n).mean(dim=1).tolist()
        for data_id, avg in zip(prompt_ids, log_avg_reward, strict=True):
            self.data_profiler.add_reward(epoch, str(data_id), avg)
        # filter_zero_advantage
        rows = reward.view(-1, self.n)
        flat = rows.max(dim=1)[0] == rows.min(dim=1)[0]
        kept = [(p, rows[i].tolist()) for i, p in enumerate(prompt_ids) if not flat[i]]
        if self.dynamic_sampling_batch is None:
            self.dynamic_sampling_batch = kept
        else:
            self.dynamic_sampling_batch = self.dynamic_sampling_batch + kept
        size = len(self.dynamic_sampling_batch) * self.n
        if (size < self.real_train_batch_size) and (not self.last_sampling):
            zero_variance_ratio = reward_metrics["examples/non_diverse_examples_ratio"]
            reminder = self.real_train_batch_size - size
            estimated_sampling_batch_size = int(
                reminder / (1 - zero_variance_ratio) / self.n * 1.25
            )
            if estimated_sampling_batch_size <= self.default_sampling_batch_size:
                self.last_sampling = True
            adaptive_sampling_bs = min(
                estimated_sampling_batch_size, self.default_sampling_batch_size
            )
            self.adaptive_sampling_bs = max(adaptive_sampling_bs, 64)
            return False
        return True

    def train_batch(self) -> list[int]:
        """The slice that trains; resets the round state as the official block does."""
        batch = self.dynamic_sampling_batch or []
        if len(batch) * self.n > self.real_train_batch_size:
            batch = batch[: self.real_train_batch_size // self.n]
        self.dynamic_sampling_batch = None
        self.adaptive_sampling_bs = self.default_sampling_batch_size
        self.last_sampling = False
        return [p for p, _ in batch]

    def adjust(self, epoch: int) -> None:
        hard_data_ratio = self.hard_data_num / self.total_num
        easy_data_ratio = self.easy_data_num / self.total_num
        min_p, max_p = 0.05, 0.95
        if epoch > 0:
            if hard_data_ratio >= self.targeted_hard:
                self.p_hard = max(self.p_hard - 0.01, min_p)
            else:
                self.p_hard = min(self.p_hard + 0.01, max_p)
            if easy_data_ratio >= self.targeted_easy:
                self.p_easy = max(self.p_easy - 0.01, min_p)
            else:
                self.p_easy = min(self.p_easy + 0.01, max_p)
        self.easy_data_num = self.hard_data_num = 0.0
        self.total_num = 0

    def skip_probability(self, epoch: int, prompt_id: int) -> float:
        easy = self.data_profiler.easy_probabilistic_skip(epoch, str(prompt_id), p=self.p_easy)
        hard = self.data_profiler.hard_probabilistic_skip(epoch, str(prompt_id), p=self.p_hard)
        return max(easy, hard)  # the two cannot both apply: the last entry decides


# -- the tests ------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1])
def test_every_decision_matches_the_official_rules(seed: int) -> None:
    """The published setting (train 256, sampling 384, n 8) over 14 steps and several epochs:
    round sizes and the last round, the trained slice, p_easy / p_hard, and every prompt's skip
    probability after every step, all equal to the transcription's."""
    num_prompts = 1200
    backend = FakeBackend(make_pool(num_prompts, seed=seed), seed)
    a = create_allocator(
        {"kind": "greso", "preset": "paper-qwen-math"},
        num_prompts=num_prompts,
        rollouts_per_step=2048,
        seed=seed,
    )
    official = _OfficialTrainer(real_train_batch_size=256, sampling_batch_size=384)
    ids = np.arange(num_prompts)
    rounds_seen = set()
    for step in range(14):
        a.start_step(step)
        trains = False
        rounds = 0
        while (ask := a.ask()) is not None:
            assert not trains, "the allocator asked again after the official block trained"
            assert len(ask) == official.adaptive_sampling_bs
            outcomes = backend.generate(ask)
            a.tell(outcomes)
            rewards = np.stack([np.where(o.rewards >= 1, 1.0, 0.1) for o in outcomes])
            trains = official.after_generation(a.source.epoch, ask.prompt_ids, rewards)
            rounds += 1
        assert trains, "the allocator stopped before the official block trained"
        rounds_seen.add(rounds)
        groups = a.train_groups()
        assert [g.prompt_id for g in groups] == official.train_batch()
        official.adjust(a.source.epoch)
        assert (a.p_easy, a.p_hard) == (official.p_easy, official.p_hard)
        expected = [official.skip_probability(a.source.epoch, int(p)) for p in ids]
        assert a.skip_probabilities(ids).tolist() == expected
    assert a.source.epoch >= 3 and a.stats()["adaptations"] >= 8
    assert (official.p_easy, official.p_hard) != (0.5, 0.5)
    assert max(rounds_seen) >= 2  # refill rounds happened
    assert a.stats()["total_skipped_easy"] > 0 and a.stats()["total_skipped_hard"] > 0


def test_next_round_size_matches_the_official_block() -> None:
    """Random (kept groups, rolled-out groups, zero-variance groups) at B = 256, n = 8."""
    rng = np.random.default_rng(7)
    n, default = 8, 384
    for _ in range(4000):
        m = int(rng.integers(1, 420))
        zero = int(rng.integers(0, m))  # z < 1: the official code divides by 1 - z
        kept = int(rng.integers(0, 256))
        # official: ratio from compute_reward_metrics (a float32 tensor quotient), then the block
        ratio = (torch.tensor(zero) / m).item()
        reminder = 256 * n - kept * n
        estimated = int(reminder / (1 - ratio) / n * 1.25)
        last = estimated <= default
        size = max(min(estimated, default), 64)
        assert share32(zero, m) == ratio
        got = next_round_size(
            reminder, share32(zero, m), n=n, max_round=384, min_round=64, margin=1.25
        )
        assert got == (size, last), (m, zero, kept)
