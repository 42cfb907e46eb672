"""Shipped base models: the default recipes load from the package without a build, the checksum is
checked, other recipes use the cache, and a build gives the same bytes twice on one machine."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from rollcli.backends.tiny import base as base_module
from rollcli.backends.tiny import shipped
from rollcli.backends.tiny.backend import config_from_mapping
from rollcli.backends.tiny.config import TinyConfig
from rollcli.spec.load import load_spec

from .conftest import micro_config

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("spec", ["quickstart.yaml", "tiny-paper.yaml"])
def test_the_default_specs_recipes_ship_at_every_shipped_seed(spec: str) -> None:
    backend = load_spec(REPO / "experiments" / spec).to_dict()["backend"]
    for seed in shipped.SHIPPED_BASE_SEEDS:
        config = config_from_mapping({**backend, "base_seed": seed})
        entry = shipped.find_shipped(config)
        assert entry is not None, f"{spec} base_seed {seed} is not shipped"
        assert entry["recipe"] == config.base_recipe()
        assert (shipped.shipped_dir() / entry["file"]).stat().st_size == entry["bytes"]


def test_a_shipped_recipe_loads_without_a_build_or_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_build(*args, **kwargs):
        raise AssertionError("a shipped recipe must not be built")

    monkeypatch.setattr(base_module, "train_base", no_build)
    config = TinyConfig(base_seed=1, cache_dir=str(tmp_path / "cache"))
    weights = base_module.load_or_build_base(config, progress=False)
    assert not (tmp_path / "cache").exists()  # the cache was not even created
    model = base_module.create_model(config)
    model.load_state_dict(weights)  # every parameter, the right shapes
    info = base_module.read_base_info(config)
    assert info["shipped"] and 0.3 < info["probe"]["accuracy"] < 0.9
    # different base seeds are different models
    other = base_module.load_or_build_base(TinyConfig(base_seed=2), progress=False)
    assert any((other[k] != weights[k]).any() for k in weights)


def test_other_recipes_are_not_shipped(tmp_path: Path) -> None:
    assert shipped.find_shipped(config_from_mapping(micro_config(tmp_path))) is None
    assert shipped.find_shipped(TinyConfig(base_seed=99)) is None
    assert shipped.find_shipped(TinyConfig(base_noise=0.2)) is None
    # RL knobs are not part of the recipe: still shipped
    assert shipped.find_shipped(TinyConfig(lr=1e-4, num_train_prompts=8192)) is not None


def test_a_checksum_mismatch_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "tiny_base"
    shutil.copytree(shipped.shipped_dir(), copy)
    entry = shipped.find_shipped(TinyConfig())
    data = bytearray((copy / entry["file"]).read_bytes())
    data[-1] ^= 0x01  # one bit of one weight
    (copy / entry["file"]).write_bytes(bytes(data))
    monkeypatch.setattr(shipped, "shipped_dir", lambda: copy)
    with pytest.raises(shipped.ShippedModelError, match="sha256 .* does not match") as info:
        base_module.load_or_build_base(TinyConfig(cache_dir=str(tmp_path)), progress=False)
    assert str(copy / entry["file"]) in str(info.value)
    assert "reinstall rollcli" in str(info.value)


def test_two_builds_give_identical_bytes(tmp_path: Path) -> None:
    config = config_from_mapping(micro_config(tmp_path, base_steps=20))
    first, _ = shipped.build_bytes(config)
    second, _ = shipped.build_bytes(config)
    assert first == second
    # the settings of the process are restored after a build
    assert torch.get_num_threads() >= 1 and not torch.are_deterministic_algorithms_enabled()


def test_build_shipped_writes_files_a_manifest_that_loads(tmp_path: Path) -> None:
    configs = [
        config_from_mapping(micro_config(tmp_path, base_steps=3, base_seed=s)) for s in (0, 1)
    ]
    entries = shipped.build_shipped(tmp_path / "out", configs, progress=False)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert sorted(manifest["models"]) == sorted(e["recipe_hash"] for e in entries)
    for config in configs:
        entry = shipped.find_shipped(config, tmp_path / "out")
        weights = shipped.load_shipped(entry, tmp_path / "out")
        base_module.create_model(config).load_state_dict(weights)
    again = shipped.build_shipped(tmp_path / "again", configs, progress=False)
    assert [e["sha256"] for e in again] == [e["sha256"] for e in entries]
