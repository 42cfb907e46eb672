"""``rollcli data build-base-models``: writes the shipped files and manifest, and ``--check``
says whether a rebuild gives the shipped bytes (here on micro recipes: a full build takes minutes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rollcli.backends.tiny import shipped
from rollcli.backends.tiny.backend import config_from_mapping
from tests.backends.tiny.conftest import micro_config


@pytest.fixture
def micro_recipes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list:
    configs = [
        config_from_mapping(micro_config(tmp_path, base_steps=2, base_seed=s)) for s in (0, 1)
    ]
    monkeypatch.setattr(shipped, "shipped_recipes", lambda: configs)
    return configs


def test_build_base_models_writes_then_check_agrees(cli, tmp_path, micro_recipes, monkeypatch):
    out = tmp_path / "tiny_base"
    result = cli(["data", "build-base-models", "--out", out])
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(manifest["models"]) == sorted(c.base_recipe_hash() for c in micro_recipes)
    assert result.output.count("wrote ") == 2
    monkeypatch.setattr(shipped, "shipped_dir", lambda: out)
    result = cli(["data", "build-base-models", "--check"])
    assert result.exit_code == 0, result.output
    assert result.output.count("identical") == 2


def test_check_fails_when_a_rebuild_differs(cli, micro_recipes):
    # the micro recipes are not shipped: nothing to match
    result = cli(["data", "build-base-models", "--check"])
    assert result.exit_code != 0
    assert "2 rebuilt base model(s) differ from the shipped ones" in result.output
