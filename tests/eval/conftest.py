"""Shared fixtures for the evaluation tests: the LCB fixture folder, a tiny model built in code
(:func:`rollcli.testing.hf_model.build_tiny_hf_model`)."""

from __future__ import annotations

from pathlib import Path

import pytest

LCB_DIR = Path(__file__).resolve().parents[1] / "fixtures" / "lcb"


@pytest.fixture(scope="session")
def lcb_dir() -> Path:
    return LCB_DIR


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from rollcli.testing.hf_model import build_tiny_hf_model

    return build_tiny_hf_model(tmp_path_factory.mktemp("tiny-model"))
