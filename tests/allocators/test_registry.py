"""Creating allocators by name: unknown kinds, knobs and presets fail with the valid names;
every preset builds; the package imports nothing heavy."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from rollcli.allocators import (
    ALLOCATORS,
    PRESETS,
    UnknownAllocatorError,
    allocator_kinds,
    create_allocator,
    create_config,
)


def test_kinds() -> None:
    assert allocator_kinds() == [
        "ar3po",
        "bayes_budget",
        "bots",
        "cures",
        "dps",
        "dynamic",
        "gdro",
        "greso",
        "hora",
        "knapsack",
        "mopps",
        "oracle",
        "oracle_select",
        "pilot_commit",
        "pods",
        "reinforce_ada",
        "speed",
        "spo",
        "uniform",
        "vcrl",
        "vigor",
        "vip",
        "xrpo",
    ]
    assert sorted(PRESETS) == allocator_kinds()


def test_unknown_kind_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownAllocatorError, match="Did you mean 'pilot_commit'") as err:
        create_config({"kind": "pilot_comit"})
    for kind in allocator_kinds():
        assert kind in str(err.value)


def test_unknown_knob_lists_the_valid_ones() -> None:
    with pytest.raises(
        UnknownAllocatorError, match="no knob 'n_pilots'. Did you mean 'n_pilot'"
    ) as err:
        create_config({"kind": "pilot_commit", "n_pilots": 8})
    assert "evict_consecutive" in str(err.value) and "replay" in str(err.value)
    with pytest.raises(UnknownAllocatorError, match="Valid: all_zero, alpha, gamma, kind, m0"):
        create_config({"kind": "vigor", "beta": 1})


def test_unknown_preset_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownAllocatorError, match="paper-1.5b, paper-4b"):
        create_config({"kind": "pilot_commit", "preset": "paper-7b"})


def test_preset_values_and_overrides() -> None:
    c = create_config({"kind": "pilot_commit", "preset": "paper-4b"})
    assert (c.n_pilot, c.n_commit, c.p_lower, c.p_upper, c.evict_at) == (16, 48, 0.125, 0.75, 1.0)
    assert (c.replay.order, c.replay.max_age, c.pilot_batch_factor, c.max_rounds) == (
        "random",
        5,  # the official flush reaches a survivor 5 steps after its pilot
        3,
        10,
    )
    c = create_config({"kind": "pilot_commit", "preset": "paper-1.5b", "p_upper": 0.8})
    assert (c.n_pilot, c.n_commit, c.p_upper, c.replay.order) == (32, 96, 0.8, "max_variance")
    # the defaults are paper-1.5b except the two fidelity mends, kept off so old results stand
    assert create_config(
        {"kind": "pilot_commit", "replay": {"max_age": 5}, "epoch_resets_rounds": True}
    ) == create_config({"kind": "pilot_commit", "preset": "paper-1.5b"})
    d = create_config({"kind": "dynamic", "preset": "paper-dapo"})
    assert (d.n, d.gen_batch_factor, d.max_gen_batches) == (16, 3, 10)


@pytest.mark.parametrize(("kind", "preset"), [(k, p) for k in sorted(PRESETS) for p in PRESETS[k]])
def test_every_preset_builds_at_its_published_scale(kind: str, preset: str) -> None:
    config = create_config({"kind": kind, "preset": preset})
    per_prompt = {
        "pilot_commit": lambda c: c.n_pilot + c.n_commit,
        "vigor": lambda c: c.rounds * c.m0,
        "oracle": lambda c: 8,  # the budget-aware oracle sizes its own groups
        "bayes_budget": lambda c: 8,  # and so does bayes_budget
        "pods": lambda c: c.m,
        "reinforce_ada": lambda c: c.num_keep,
        "speed": lambda c: c.n_screen + c.n_continue,
        "cures": lambda c: c.n_mean,
        "gdro": lambda c: c.n_mean,
        "hora": lambda c: c.n_mean,
        "vip": lambda c: c.n_mean,
        "ar3po": lambda c: c.round_size * c.max_rounds,
    }
    budget = 128 * per_prompt.get(kind, lambda c: c.n)(config)  # 128 prompts per train batch
    allocator = create_allocator(
        config,
        num_prompts=1000,
        rollouts_per_step=budget,
        seed=0,
        oracle=lambda ids: ids * 0.0 + 0.5,
    )
    assert allocator.kind == kind
    # the resolved config is plain data (it goes to the job's config.yaml)
    json.dumps(dataclasses.asdict(config))


def test_configs_follow_the_contract() -> None:
    for kind, (config_cls, allocator_cls) in ALLOCATORS.items():
        assert config_cls.__pydantic_config__ == {"extra": "forbid"}
        assert config_cls().kind == kind == allocator_cls.kind
        assert dataclasses.is_dataclass(config_cls) and config_cls.__dataclass_params__.frozen
        assert config_cls.__doc__ and allocator_cls.__doc__


def test_import_direction() -> None:
    code = (
        "import sys, rollcli.allocators, rollcli.testing.fakes\n"
        "heavy = ['torch', 'verl', 'submitit', 'typer', 'pydantic', 'wandb', 'matplotlib', 'transformers']\n"
        "print([m for m in heavy if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
