"""BOTS: the update and the selection against a transcription of Trinity-RFT's BOTS selector
(modelscope/Trinity-RFT: ``diff_estimator.py`` at 607f1db, ``selector.py`` at 3e9eb60), and
hand-computed steps."""

from __future__ import annotations

import numpy as np
import pytest

from rollcli.allocators import create_allocator
from rollcli.allocators.bots import BotsConfig, bots_select, bots_update
from rollcli.testing.allocator_contract import make_pool
from rollcli.testing.fakes import FakeBackend

# -- transcription of the official estimator and selector (read, then written out) --------------


class OfficialBeta:
    """``BaseBetaPREstimator`` with ``InterpolationBetaPREstimator.update``'s explicit part
    (``rho = 0``: the interpolated ``p_tilde`` has weight 0)."""

    def __init__(self, n, m, lamb, rho=0.0):
        self.n, self.m, self.lamb, self.rho = n, m, lamb, rho
        self.alphas = np.ones(n, dtype=float)
        self.betas = np.ones(n, dtype=float)

    def _update(self, s_bar, f_bar, p_tilde):
        self.alphas = (
            (1 - self.lamb) * self.alphas
            + self.lamb
            + (1 - self.rho) * s_bar
            + self.rho * p_tilde * self.m
        )
        self.betas = (
            (1 - self.lamb) * self.betas
            + self.lamb
            + (1 - self.rho) * f_bar
            + self.rho * (1 - p_tilde) * self.m
        )

    def update(self, ref_indices, ref_pass_rates):
        s_bar = np.zeros(self.n, dtype=float)
        s_bar[ref_indices] = np.array(ref_pass_rates) * self.m
        f_bar = np.zeros(self.n, dtype=float)
        f_bar[ref_indices] = (1 - np.array(ref_pass_rates)) * self.m
        p_tilde = np.zeros(self.n)  # weight rho = 0
        p_tilde[ref_indices] = np.array(ref_pass_rates)
        self._update(s_bar, f_bar, p_tilde)

    def predict_pr(self, rng, do_sample):
        indices = np.arange(self.n)
        if not do_sample:
            return self.alphas[indices] / (self.alphas[indices] + self.betas[indices])
        return rng.beta(self.alphas[indices], self.betas[indices])

    def get_indices(self, batch_size, rng, target, do_sample):
        """``DiffBasedSelector.get_indices`` with ``tau = 0`` (torch.topk: largest first)."""
        scores = -np.abs(target - self.predict_pr(rng, do_sample))
        return np.argsort(-scores, kind="stable")[:batch_size]


@pytest.mark.parametrize(
    ("knobs", "seed"), [({}, 0), ({"lamb": 0.3}, 1), ({"do_sample": False, "lamb": 0.05}, 2)]
)
def test_selection_and_update_match_the_official_selector(knobs: dict, seed: int) -> None:
    """40 steps of 8 prompts x 4 from 300: the same Beta draws (one shared stream) give the
    same batch, and every posterior agrees."""
    num, n, batch = 300, 4, 8
    alloc = create_allocator(
        {"kind": "bots", "n": n, **knobs}, num_prompts=num, rollouts_per_step=batch * n, seed=seed
    )
    cfg = alloc.config
    official = OfficialBeta(num, n, cfg.lamb)
    stream = np.random.default_rng()
    backend = FakeBackend(make_pool(num, seed=seed), seed=seed)
    for step in range(40):
        stream.bit_generator.state = alloc.rng.bit_generator.state
        expected = official.get_indices(batch, stream, cfg.target_reward, cfg.do_sample)
        alloc.start_step(step)
        ask = alloc.ask()
        assert ask.prompt_ids == expected.tolist(), f"step {step}"
        outcomes = backend.generate(ask)
        alloc.tell(outcomes)
        backend.update(alloc.train_groups())
        official.update(expected.tolist(), [float(np.mean(o.rewards)) for o in outcomes])
        np.testing.assert_allclose(alloc.alpha, official.alphas, rtol=1e-13)
        np.testing.assert_allclose(alloc.beta, official.betas, rtol=1e-13)


# -- hand-computed behaviour --------------------------------------------------------------------


def test_update_by_hand() -> None:
    a, b = bots_update(np.array([1.0, 3.0]), np.array([1.0, 5.0]), np.array([0]), np.array([0.25]),
                       m=8, lamb=0.5)  # fmt: skip
    # prompt 0: 0.5 + 0.5 + 2 successes, 0.5 + 0.5 + 6 failures; prompt 1 only forgets
    np.testing.assert_allclose(a, [3.0, 2.0])
    np.testing.assert_allclose(b, [7.0, 3.0])


def test_selection_prefers_rates_near_the_target() -> None:
    p = np.array([0.1, 0.45, 0.9, 0.55, 0.5])
    rng = np.random.default_rng(0)
    assert bots_select(p, 3, target=0.5, tau=0.0, rng=rng).tolist() == [4, 1, 3]
    # a tiny temperature samples the same top prompts
    assert sorted(bots_select(p, 3, target=0.5, tau=1e-4, rng=rng).tolist()) == [1, 3, 4]


def test_config_errors_name_the_knob() -> None:
    with pytest.raises(ValueError, match="lamb"):
        BotsConfig(lamb=1.5)
    with pytest.raises(ValueError, match="tau"):
        BotsConfig(tau=-1.0)
    with pytest.raises(ValueError, match="target_reward"):
        BotsConfig(target_reward=2.0)
