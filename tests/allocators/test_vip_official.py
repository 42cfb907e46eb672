"""VIP's `paper` preset against the official release's allocator (a transcription of HieuNT91/VIP at
bcc8a258, tests/allocators/vip_official.py): the same counts for the same predictions, and the
preset's whole step (GP prediction, clamp, clip, counts, prompts left out) reproduces it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from rollcli.allocators import create_allocator
from rollcli.allocators.vip import release_counts
from rollcli.testing.allocator_contract import make_pool
from rollcli.testing.fakes import FakeBackend, drive_step
from tests.allocators import vip_official as official


def _official(p: np.ndarray, lower: int = 4, upper: int = 16, per: int = 8) -> list[int]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its inf/nan gains when a count was zeroed
        return official.Allocator("vip", lower, upper, per).allocate(list(p))


def _clean(p: np.ndarray) -> np.ndarray:
    """The release's clean_accuracy: >= 0.8 counts as 1, then the clip."""
    return np.clip(np.where(p >= 0.8, 1.0, p), 1e-6, 1 - 1e-6)


def test_the_helpers_cases_reproduce() -> None:
    """Three vectors worked by hand through the transcription (the first also matches a
    third-party run of the official class at f7bd1891)."""
    p = np.array([0.01, 0.1, 0.2, 0.4, 0.5, 0.8, 0.95, 0.99])
    assert release_counts(_clean(p), 8, n_min=4, n_max=12).tolist() == [5, 11, 12, 12, 12, 4, 4, 4]
    assert release_counts(_clean(p), 8, n_min=4, n_max=16).tolist() == [4, 9, 11, 14, 14, 4, 4, 4]
    tied = np.array([0.05, 0.3, 0.5, 0.7, 0.79, 0.0, 0.5, 0.5])
    assert release_counts(_clean(tied), 8, n_min=4, n_max=16).tolist() == [5, 9, 9, 9, 8, 4, 10, 10]


@pytest.mark.parametrize("size", [8, 32, 128])
def test_release_counts_match_the_official_allocator(size: int) -> None:
    """Random predictions (success shares on a 1/8 grid, as a step of 8 rollouts reports, and
    continuous ones): rollcli's counts equal the transcription's on every case."""
    rng = np.random.default_rng(size)
    cases = 40 if size <= 32 else 6
    mismatches = 0
    for case in range(cases):
        p = rng.integers(0, 9, size) / 8.0 if case % 2 else rng.beta(0.5, 0.5, size)
        ours = release_counts(_clean(p), 8, n_min=4, n_max=16).tolist()
        mismatches += ours != _official(p)
        assert sum(ours) == 8 * size
    assert mismatches == 0


def test_the_paper_preset_step_is_the_official_allocation() -> None:
    """`preset: paper`, two steps on a fake backend: the first (equal predictions) is the uniform
    split; in the second the GP's predictions of the batch go through the release's allocator
    unchanged (the same counts, prompt by prompt; a zeroed prompt is not asked)."""
    alloc = create_allocator({"kind": "vip", "preset": "paper"}, num_prompts=256,
                             rollouts_per_step=256, seed=0)  # fmt: skip
    cfg = alloc.config
    assert (cfg.estimator, cfg.solver, cfg.n_min, cfg.n_max, cfg.prior_mean, cfg.high_clamp) == (
        "inverse_n",
        "slsqp",
        4,
        16,
        -5.0,
        0.8,
    )
    backend = FakeBackend(make_pool(256), seed=0)
    taken: list[np.ndarray] = []
    take = alloc.source.take
    alloc.source.take = lambda k: taken.append(np.asarray(take(k))) or taken[-1]
    first = drive_step(alloc, backend, 0)
    assert sorted(len(g.refs) for g in first) == [8] * 32
    # the next batch is fresh prompts (prior only) unless the pool wraps: train a few epochs
    for step in range(1, 9):
        drive_step(alloc, backend, step)
    before = (alloc.offset.copy(), alloc.shared)
    groups = drive_step(alloc, backend, 9)
    batch = taken[-1]
    alloc_now = (alloc.offset, alloc.shared)
    alloc.offset, alloc.shared = before
    p = alloc.predicted_p(batch)
    alloc.offset, alloc.shared = alloc_now
    want = _official(p)
    got = {g.prompt_id: len(g.refs) for g in groups}
    assert [got.get(int(q), 0) for q in batch] == want
    assert len(set(want)) > 1  # the predictions differ: not the uniform split
