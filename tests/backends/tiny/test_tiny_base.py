"""The base model cache: built once, reused, rebuilt when its recipe changes, located by env/config."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollcli.backends.tiny import base as base_module
from rollcli.backends.tiny.backend import config_from_mapping

from .conftest import micro_config


def test_cache_hit_and_miss_on_recipe_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = config_from_mapping(micro_config(tmp_path, base_steps=5))
    path = base_module.base_cache_path(config)
    assert not path.exists()
    built = base_module.load_or_build_base(config, progress=False)
    assert path.exists() and (path.parent / "recipe.json").exists()
    info = base_module.read_base_info(config)
    assert info["recipe"]["base_steps"] == 5 and 0.0 <= info["probe"]["zero_var_frac"] <= 1.0

    calls = []
    real = base_module.train_base

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(base_module, "train_base", counting)
    again = base_module.load_or_build_base(config, progress=False)
    assert calls == []  # a hit: nothing trained
    assert all((again[k] == built[k]).all() for k in built)

    # an RL knob is not part of the recipe; a base knob is
    same = config_from_mapping(micro_config(tmp_path, base_steps=5, lr=0.5))
    assert base_module.base_cache_path(same) == path
    other = config_from_mapping(micro_config(tmp_path, base_steps=5, base_noise=0.3))
    assert base_module.base_cache_path(other) != path
    rebuilt = base_module.load_or_build_base(other, progress=False)
    assert calls == [1]
    assert any((rebuilt[k] != built[k]).any() for k in built)


def test_build_is_deterministic(tmp_path: Path) -> None:
    config = config_from_mapping(micro_config(tmp_path, base_steps=5))
    a, _ = base_module.train_base(config, progress=False)
    b, _ = base_module.train_base(config, progress=False)
    assert all((a[k] == b[k]).all() for k in a)


def test_cache_root_from_config_env_and_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = micro_config(tmp_path)
    del values["cache_dir"]
    config = config_from_mapping(values)
    monkeypatch.setenv("ROLLCLI_CACHE", str(tmp_path / "env"))
    assert base_module.base_cache_path(config).is_relative_to(tmp_path / "env" / "tiny")
    monkeypatch.delenv("ROLLCLI_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert base_module.base_cache_path(config).is_relative_to(
        tmp_path / "home" / ".cache" / "rollcli" / "tiny"
    )
    explicit = config_from_mapping({**values, "cache_dir": str(tmp_path / "mine")})
    assert base_module.base_cache_path(explicit).parent.parent == tmp_path / "mine"


def test_corrupt_cache_file_says_how_to_recover(tmp_path: Path) -> None:
    config = config_from_mapping(micro_config(tmp_path, base_steps=1))
    path = base_module.base_cache_path(config)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(RuntimeError, match="delete that folder"):
        base_module.load_or_build_base(config, progress=False)
